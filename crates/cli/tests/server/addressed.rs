//! Who a request says it is addressed to, and what the server makes of it. The public A2A card
//! is built from a loopback `Host`, the configured public URL, or — only when told to trust
//! them — the forwarded headers; its `Vary` names what it was built from, and only the public
//! URL's card is `public` to caches.

use serde_json::Value;

use crate::harness::{Server, options};
use crate::support;

const CARD: &str = "/a2a/approval_gate/.well-known/agent-card.json";

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
            "https://agents.example.com/a2a/approval_gate",
            "https://agents.example.com/a2a/approval_gate/rest"
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
    assert_eq!(urls[0], "https://duet.example.org/a2a/approval_gate");
    assert_eq!(cache, "public, max-age=300");
    assert_eq!(vary, "");
    server.stop().await;
}
