//! Who a request says it is addressed to, and what the server makes of it. The public A2A card
//! is built from a loopback `Host`, the configured public URL, or — only when told to trust
//! them — the forwarded headers; its `Vary` names what it was built from, and only the public
//! URL's card is `public` to caches. A server without keys (`--no-auth`) serves only loopback
//! hosts (or the public URL's), so a rebound name reaches nothing, and takes no state-changing
//! request a browser sent from another origin.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, options, send};
use crate::support;

const CARD: &str = "/a2a/question_gate/.well-known/agent-card.json";

/// The card as `headers` ask for it: its interface URLs, `Cache-Control` and `Vary`.
async fn card(server: &Server, headers: &[(&str, &str)]) -> (Vec<String>, String, String) {
    let mut req = reqwest::Client::new().get(format!("{}{CARD}", server.base));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("card");
    assert_eq!(resp.status(), 200);
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (cache, vary) = (header("cache-control"), header("vary"));
    let body: Value = resp.json().await.expect("json");
    let urls = body["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|i| i["url"].as_str().unwrap_or_default().to_owned())
        .collect();
    (urls, cache, vary)
}

#[tokio::test]
async fn the_agent_card_trusts_forwarded_headers_only_when_told_to() {
    let backend = support::backends().await.remove(0);
    let forged = [
        ("x-forwarded-host", "evil.example"),
        ("x-forwarded-proto", "https"),
    ];

    // Unconfigured: the loopback Host the client used; what it forwards is nobody's word.
    let server = Server::start(&backend).await;
    let (urls, cache, vary) = card(&server, &forged).await;
    assert!(
        urls.iter()
            .all(|u| u.starts_with(&format!("{}/a2a/", server.base))),
        "{urls:?}"
    );
    assert_eq!(cache, "private, max-age=300");
    assert_eq!(vary, "Host");
    // A Host that is not a loopback name is not reflected either.
    let evil = [("host", "evil.example")];
    let (urls, _, _) = card(&server, &evil).await;
    assert!(urls.iter().all(|u| !u.contains("evil")), "{urls:?}");
    server.stop().await;

    // Behind a proxy that says so.
    let trusting = duet_server::Options {
        trust_forwarded: true,
        ..options()
    };
    let server = Server::start_with(&backend, &support::repo(), trusting).await;
    let proxied = [
        ("x-forwarded-host", "agents.example.com"),
        ("x-forwarded-proto", "https"),
    ];
    let (urls, cache, vary) = card(&server, &proxied).await;
    assert_eq!(
        urls,
        [
            "https://agents.example.com/a2a/question_gate",
            "https://agents.example.com/a2a/question_gate/rest"
        ]
    );
    assert_eq!(cache, "private, max-age=300");
    assert_eq!(vary, "Host, X-Forwarded-Host, X-Forwarded-Proto");
    // A forwarded host that is more than a host is none.
    let (urls, _, _) = card(&server, &[("x-forwarded-host", "evil.example/x?")]).await;
    assert!(urls.iter().all(|u| !u.contains("evil")), "{urls:?}");
    server.stop().await;

    // A public URL: the same card for everyone, cacheable by anyone.
    let public = duet_server::Options {
        public_url: Some("https://duet.example.org".into()),
        ..options()
    };
    let server = Server::start_with(&backend, &support::repo(), public).await;
    let (urls, cache, vary) = card(&server, &forged).await;
    assert_eq!(urls[0], "https://duet.example.org/a2a/question_gate");
    assert_eq!(cache, "public, max-age=300");
    assert_eq!(vary, "");
    server.stop().await;
}

/// `method path` with `headers` on a server without keys: (status, body).
async fn ask(
    server: &Server,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", server.base));
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    send(req).await
}

#[tokio::test]
async fn without_keys_only_loopback_hosts_and_same_origin_writes_are_served() {
    for backend in support::backends().await {
        let keyless = duet_server::Options {
            auth: false,
            public_url: Some("http://duet.example.org".into()),
            ..options()
        };
        let server = Server::start_with(&backend, &support::repo(), keyless).await;
        let port = server.base.rsplit(':').next().expect("a port").to_owned();
        let new = |key: &str| json!({"agent": "question_gate", "key": key, "text": "Rotate?"});
        let host = |h: &str| ("host", h.to_owned());

        // A name rebound to 127.0.0.1 reaches nothing: not the API, the inbox or A2A.
        let rebound = host(&format!("rebind.evil.example:{port}"));
        for (method, path, body) in [
            (Method::POST, "/threads", Some(new("rebound"))),
            (Method::GET, "/threads", None),
            (Method::GET, "/inbox", None),
            (Method::GET, CARD, None),
            (Method::POST, "/a2a/question_gate", Some(json!({}))),
        ] {
            let (status, body) =
                ask(&server, method, path, std::slice::from_ref(&rebound), body).await;
            assert_eq!(
                (status, body["code"].clone()),
                (403, json!("forbidden_host")),
                "{path}: {body}"
            );
        }
        // The probes answer whoever asks.
        let (status, _) = ask(
            &server,
            Method::GET,
            "/healthz",
            std::slice::from_ref(&rebound),
            None,
        )
        .await;
        assert_eq!(status, 200);

        // Loopback hosts, in any spelling, and the public URL's host are served.
        for h in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("127.1:{port}"),
            "duet.example.org".to_owned(),
        ] {
            let (status, body) = ask(&server, Method::GET, "/threads", &[host(&h)], None).await;
            assert_eq!(status, 200, "{h}: {body}");
        }

        // A write a browser sent from another origin is refused; from this one it is taken.
        for refused in [
            vec![("origin", "http://evil.example".to_owned())],
            vec![(
                "origin",
                format!("http://localhost:{}", port.parse::<u16>().unwrap_or(0) + 1),
            )],
            vec![("origin", "null".to_owned())],
            vec![("sec-fetch-site", "cross-site".to_owned())],
            vec![("sec-fetch-site", "same-site".to_owned())],
        ] {
            let (status, body) = ask(
                &server,
                Method::POST,
                "/threads",
                &refused,
                Some(new("csrf")),
            )
            .await;
            assert_eq!(
                (status, body["code"].clone()),
                (403, json!("cross_origin")),
                "{refused:?}: {body}"
            );
        }
        let own = [
            ("origin", server.base.clone()),
            ("sec-fetch-site", "same-origin".into()),
        ];
        let (status, body) = ask(&server, Method::POST, "/threads", &own, Some(new("ours"))).await;
        assert_eq!(status, 202, "{body}");
        // A client that is not a browser says neither.
        let (status, body) = ask(&server, Method::POST, "/threads", &[], Some(new("curl"))).await;
        assert_eq!(status, 202, "{body}");

        let mut keys: Vec<String> = server
            .store
            .list_threads(&duet_runtime::ThreadQuery::default())
            .await
            .expect("list")
            .into_iter()
            .map(|t| t.key)
            .collect();
        keys.sort();
        assert_eq!(keys, ["curl", "ours"], "{}", backend.name());
        server.stop().await;
    }
}
