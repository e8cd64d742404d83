//! Code's `fetch` ([`CodeFetcher`]) against a tiny server on 127.0.0.1: an exact `IP:port`
//! grant reaches it (method, headers, body, `Idempotency-Key`); a host not on the list, a
//! name that resolves to loopback (`localhost`) and a listed private IP without a port are
//! refused before any connection; the guard's decisions for private and link-local addresses,
//! wildcards, ports and names that resolve privately, checked without sending anything; the
//! caps, the timeout, and redirects (followed, re-checked at every hop, credentials dropped
//! across origins, at most five).

use std::net::SocketAddr;
use std::time::Duration;

use duet_runtime::{FetchRequest, FetchResponse, Fetcher};
use duet_tools::{Allowlist, CodeFetcher, FetchPolicy};
use url::Url;

#[path = "fetch/responder.rs"]
mod responder;

use responder::{Received, Reply, Responder};

const KEY: &str = "thread-1:call_7";

fn fetcher(allow: &[String]) -> CodeFetcher {
    CodeFetcher::new(FetchPolicy {
        allow: allow.to_vec(),
        ..FetchPolicy::default()
    })
}

/// The grant for `server`'s exact address.
fn grant(server: &Responder) -> String {
    format!("127.0.0.1:{}", server.port)
}

fn request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> FetchRequest {
    FetchRequest {
        method: method.to_owned(),
        url: url.to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        body: body.map(|b| b.as_bytes().to_vec()),
        idempotency_key: KEY.to_owned(),
    }
}

async fn get(fetcher: &CodeFetcher, url: &str) -> Result<FetchResponse, String> {
    fetcher.fetch(request("GET", url, &[], None)).await
}

/// A server answering `/echo` with a header and the body it was sent, anything else with
/// `ok`.
async fn echo() -> Responder {
    Responder::start(|r: &Received| match r.path.as_str() {
        "/echo" => Reply::Send {
            status: 201,
            headers: vec![
                ("X-Reply".into(), "Yes".into()),
                ("Set-Cookie".into(), "a=1".into()),
                ("Set-Cookie".into(), "b=2".into()),
            ],
            body: r.body.clone(),
        },
        _ => Reply::ok("ok"),
    })
    .await
}

/// Shows that `server` was never connected to before now: one granted request, and the first
/// connection it accepted was that one.
async fn never_connected(server: &mut Responder) {
    let url = format!("{}/after", server.base);
    get(&fetcher(&[grant(server)]), &url)
        .await
        .expect("a granted request");
    assert_eq!(server.accepted(), 1, "the refused request never connected");
    assert_eq!(server.next().await.path, "/after");
}

#[tokio::test]
async fn an_exact_loopback_grant_is_reached_with_the_request_as_sent() {
    let mut server = echo().await;
    let f = fetcher(&[grant(&server)]);
    let url = format!("{}/echo", server.base);
    let r = f
        .fetch(request(
            "POST",
            &url,
            &[
                ("Content-Type", "application/json"),
                ("X-Tag", "a"),
                ("Host", "evil.example"),
            ],
            Some(r#"{"n":1}"#),
        ))
        .await
        .expect("an answer");
    assert_eq!(r.status, 201);
    assert_eq!(r.body, br#"{"n":1}"#);
    assert_eq!(r.url, url);
    let header = |name: &str| -> Vec<&str> {
        r.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(
        header("x-reply"),
        ["Yes"],
        "names lower case: {:?}",
        r.headers
    );
    assert_eq!(header("set-cookie"), ["a=1", "b=2"]);
    let sent = server.next().await;
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.body, br#"{"n":1}"#);
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("x-tag"), Some("a"));
    assert_eq!(sent.all("idempotency-key"), [KEY]);
    assert_eq!(
        sent.all("host"),
        [format!("127.0.0.1:{}", server.port)],
        "the code's Host is dropped"
    );

    get(&f, &url).await.expect("an answer");
    let sent = server.next().await;
    assert!(sent.header("idempotency-key").is_none());
    // What fetch sends when the code does not say, and the code's own when it does.
    assert!(sent.all("user-agent")[0].starts_with("duet/"), "{sent:?}");
    assert_eq!(sent.all("accept"), ["*/*"]);
    let own = [("User-Agent", "lookup/1.0"), ("Accept", "application/json")];
    f.fetch(request("GET", &url, &own, None))
        .await
        .expect("an answer");
    let sent = server.next().await;
    assert_eq!(sent.all("user-agent"), ["lookup/1.0"]);
    assert_eq!(sent.all("accept"), ["application/json"]);

    f.fetch(request(
        "DELETE",
        &url,
        &[("idempotency-key", "mine")],
        None,
    ))
    .await
    .expect("an answer");
    assert_eq!(server.next().await.all("idempotency-key"), ["mine"]);
}

#[tokio::test]
async fn a_host_not_on_the_list_is_refused_without_a_connection() {
    let err = get(
        &fetcher(&["api.example.com".into()]),
        "https://evil.example/x?k=1",
    )
    .await
    .expect_err("refused");
    assert_eq!(
        err,
        "fetch to `evil.example` is refused: the project allows only api.example.com \
         (agents/code.yaml `fetch.allow`)"
    );
    let err = get(&fetcher(&[]), "https://api.example.com/")
        .await
        .expect_err("refused");
    assert!(err.contains("the project allows no host"), "{err}");

    // A loopback address on another port than the one granted is not on the list.
    let mut server = echo().await;
    let other = format!("127.0.0.1:{}", server.port.wrapping_add(1).max(1));
    let err = get(
        &fetcher(&["api.example.com".into(), other.clone()]),
        &server.base,
    )
    .await
    .expect_err("refused");
    assert_eq!(
        err,
        format!(
            "fetch to `127.0.0.1:{}` is refused: the project allows only api.example.com, \
             {other} (agents/code.yaml `fetch.allow`)",
            server.port
        )
    );
    never_connected(&mut server).await;
}

#[tokio::test]
async fn a_listed_name_or_portless_address_that_is_private_is_refused() {
    let mut server = echo().await;
    let by_name = format!("http://localhost:{}/", server.port);
    for allow in [format!("localhost:{}", server.port), "localhost".into()] {
        let err = get(&fetcher(&[allow]), &by_name)
            .await
            .expect_err("refused");
        assert!(err.contains("`localhost` is not a public address"), "{err}");
        assert!(err.contains("RFC"), "names the block: {err}");
    }
    let err = get(&fetcher(&["127.0.0.1".into()]), &server.base)
        .await
        .expect_err("refused");
    assert!(err.contains("is not a public address"), "{err}");
    never_connected(&mut server).await;
}

fn decide(allow: &[&str], url: &str, resolved: &[&str]) -> Result<(), String> {
    let list = Allowlist::new(allow).expect("a list");
    let addrs: Vec<SocketAddr> = resolved
        .iter()
        .map(|a| a.parse().expect("an address"))
        .collect();
    list.decide(&Url::parse(url).expect("a URL"), &addrs)
}

#[test]
fn the_guard_refuses_private_and_link_local_addresses_even_when_listed() {
    let listed = ["10.0.0.1", "169.254.169.254", "[::1]", "api.example.com"];
    for (url, block) in [
        ("http://10.0.0.1/", "10.0.0.0/8"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
        ("http://[::1]:9000/", "::1/128"),
    ] {
        let err = decide(&listed, url, &[]).expect_err(url);
        assert!(err.contains("is not a public address"), "{url}: {err}");
        assert!(err.contains(block), "{url}: {err}");
    }
    // A name is judged by what it resolves to: any private address refuses it.
    let api = "https://api.example.com/v1";
    assert_eq!(decide(&listed, api, &["93.184.215.14:443"]), Ok(()));
    for resolved in [&["10.0.0.1:443"][..], &["93.184.215.14:443", "[::1]:443"]] {
        let err = decide(&listed, api, resolved).expect_err("refused");
        assert!(
            err.starts_with("fetch to `api.example.com` is refused"),
            "{err}"
        );
    }
    let err = decide(&listed, api, &[]).expect_err("nowhere to go");
    assert_eq!(
        err,
        "fetch to `api.example.com` failed: `api.example.com` resolves to nothing"
    );
}

#[test]
fn an_address_with_a_port_is_the_one_explicit_grant() {
    let grants = ["10.0.0.1:8080", "[::1]:9000", "169.254.169.254:80"];
    for url in [
        "http://10.0.0.1:8080/x",
        "http://[::1]:9000/",
        "http://[0:0::1]:9000/",
        "http://169.254.169.254/",
        "http://0xa.0.0.1:8080/",
    ] {
        assert_eq!(decide(&grants, url, &[]), Ok(()), "{url}");
    }
    for (url, says) in [
        ("http://10.0.0.1:8081/", "the project allows only"),
        ("http://[::ffff:10.0.0.1]:8080/", "the project allows only"),
        ("https://[::1]:9001/", "the project allows only"),
    ] {
        let err = decide(&grants, url, &[]).expect_err(url);
        assert!(err.contains(says), "{url}: {err}");
    }
    // A name is never a grant, whatever it resolves to.
    let err = decide(
        &["localhost:8080"],
        "http://localhost:8080/",
        &["127.0.0.1:8080"],
    )
    .expect_err("refused");
    assert!(err.contains("not a public address"), "{err}");
}

#[test]
fn entries_match_names_wildcards_and_ports() {
    let public = ["93.184.215.14:443"];
    let list = ["*.example.net", "API.Example.COM", "files.example.org:8443"];
    for url in [
        "https://a.example.net/",
        "https://b.a.example.net/",
        "https://api.example.com./",
        "http://api.example.com:8080/",
        "https://files.example.org:8443/",
    ] {
        assert_eq!(decide(&list, url, &public), Ok(()), "{url}");
    }
    for url in [
        "https://example.net/",
        "https://badexample.net/",
        "https://api.example.com.evil.example/",
        "https://files.example.org/",
    ] {
        let err = decide(&list, url, &public).expect_err(url);
        assert!(err.contains("the project allows only"), "{url}: {err}");
    }
    for (url, says) in [
        ("ftp://api.example.com/", "only http:// and https://"),
        ("https://u:p@api.example.com/", "a URL with credentials"),
    ] {
        let err = decide(&list, url, &public).expect_err(url);
        assert!(err.contains(says), "{url}: {err}");
    }
}

#[tokio::test]
async fn an_entry_that_is_not_a_host_refuses_every_request() {
    for entry in [
        "https://api.example.com",
        "*",
        "api.example.com:0",
        "api.example.com:99999",
        "*.10.0.0.1",
        "user@api.example.com",
        "api.example.com/v1",
        "::1",
        "",
    ] {
        let policy = FetchPolicy {
            allow: vec!["api.example.com".into(), entry.into()],
            ..FetchPolicy::default()
        };
        let why = policy.validate().expect_err(entry);
        assert!(why.contains(&format!("entry `{entry}`")), "{why}");
        let err = get(&CodeFetcher::new(policy), "https://api.example.com/")
            .await
            .expect_err(entry);
        assert_eq!(err, format!("fetch is refused: {why}"));
    }
}

#[tokio::test]
async fn bodies_over_the_caps_are_refused() {
    let big = "x".repeat(2000);
    let body = big.clone();
    let mut server = Responder::start(move |r: &Received| match r.path.as_str() {
        "/stream" => Reply::Stream(body.clone().into_bytes()),
        _ => Reply::ok(&body),
    })
    .await;
    let granted = grant(&server);
    let capped = |bytes: u64| {
        CodeFetcher::new(FetchPolicy {
            allow: vec![granted.clone()],
            max_response_bytes: bytes,
            max_request_bytes: bytes,
            ..FetchPolicy::default()
        })
    };
    // Too large a request body is refused before anything is sent.
    let url = format!("{}/in", server.base);
    let err = capped(1024)
        .fetch(request("POST", &url, &[], Some(&big)))
        .await
        .expect_err("refused");
    assert!(err.contains("its body is larger than 1 KiB"), "{err}");
    never_connected(&mut server).await;
    // An answer announced too large, or streamed past the cap.
    for path in ["/announced", "/stream"] {
        let url = format!("{}{path}", server.base);
        let err = get(&capped(1000), &url).await.expect_err(path);
        assert_eq!(
            err,
            format!("the response of `{url}` is larger than 1000 bytes")
        );
        let r = get(&capped(2000), &url).await.expect(path);
        assert_eq!(r.body.len(), 2000);
    }
    assert_eq!(FetchPolicy::default().max_response_bytes, 5 << 20);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = Responder::start(|_: &Received| Reply::Never).await;
    let f = CodeFetcher::new(FetchPolicy {
        allow: vec![grant(&server)],
        timeout: Duration::from_millis(200),
        ..FetchPolicy::default()
    });
    let url = format!("{}/slow?token=secret", server.base);
    let err = get(&f, &url).await.expect_err("a timeout");
    assert_eq!(
        err,
        format!(
            "fetch to `{}/slow?…` got no answer within 200 ms (the project's fetch timeout)",
            server.base
        )
    );
}

#[tokio::test]
async fn a_port_nothing_listens_on_fails_to_connect() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let err = get(&fetcher(&[addr.to_string()]), &format!("http://{addr}/"))
        .await
        .expect_err("no server");
    assert!(
        err.starts_with(&format!("fetch to `http://{addr}/` failed: ")),
        "{err}"
    );
}

/// A server that redirects `/to?<url>` to that URL, `/loop` to itself, `/see-other` with 303
/// to `/landing`, and answers anything else with what it was sent.
async fn redirector() -> Responder {
    Responder::start(|r: &Received| {
        let (path, query) = r.path.split_once('?').unwrap_or((&r.path, ""));
        match path {
            "/to" => Reply::redirect(302, query),
            "/to-307" => Reply::redirect(307, query),
            "/see-other" => Reply::redirect(303, "/landing"),
            "/loop" => Reply::redirect(301, "/loop"),
            _ => Reply::ok(&format!("{} {}", r.method, r.path)),
        }
    })
    .await
}

#[tokio::test]
async fn redirects_are_followed_as_fetch_does() {
    let mut server = redirector().await;
    let f = fetcher(&[grant(&server)]);
    let landing = format!("{}/landing", server.base);
    let r = get(&f, &format!("{}/to?/landing", server.base))
        .await
        .expect("followed");
    assert_eq!(
        (r.status, r.url.as_str(), &r.body[..]),
        (200, landing.as_str(), &b"GET /landing"[..])
    );
    assert_eq!(server.next().await.path, "/to?/landing");
    assert_eq!(server.next().await.path, "/landing");

    // 303 after a POST is a GET without body or key; 307 sends the same POST again.
    let base = server.base.clone();
    let post = |path: &str| request("POST", &format!("{base}{path}"), &[], Some("{}"));
    let r = f.fetch(post("/see-other")).await.expect("followed");
    assert_eq!(r.body, b"GET /landing");
    server.next().await;
    let again = server.next().await;
    assert!(again.body.is_empty() && again.header("idempotency-key").is_none());
    let r = f
        .fetch(post(&format!("/to-307?{landing}")))
        .await
        .expect("followed");
    assert_eq!(r.body, b"POST /landing");
    assert_eq!(server.next().await.header("idempotency-key"), Some(KEY));
    let again = server.next().await;
    assert_eq!(
        (again.body.as_slice(), again.header("idempotency-key")),
        (&b"{}"[..], Some(KEY))
    );

    // At most five.
    let err = get(&f, &format!("{}/loop", server.base))
        .await
        .expect_err("a loop");
    assert_eq!(
        err,
        format!(
            "fetch to `{}/loop` was redirected more than 5 times",
            server.base
        )
    );
}

#[tokio::test]
async fn every_hop_is_checked_and_credentials_stay_with_their_origin() {
    let server = redirector().await;
    let mut elsewhere = echo().await;
    let to_elsewhere = format!("{}/to?{}/echo", server.base, elsewhere.base);
    let sent = request(
        "GET",
        &to_elsewhere,
        &[
            ("Authorization", "Bearer t"),
            ("Cookie", "s=1"),
            ("X-Api", "k"),
        ],
        None,
    );
    // Not on the list: refused, and never connected to.
    let err = fetcher(&[grant(&server)])
        .fetch(sent.clone())
        .await
        .expect_err("refused");
    assert!(
        err.contains(&format!(
            "fetch to `127.0.0.1:{}` is refused",
            elsewhere.port
        )),
        "{err}"
    );
    assert!(
        err.ends_with(&format!("(redirected from `{}/to?…`)", server.base)),
        "{err}"
    );
    never_connected(&mut elsewhere).await;
    // A name on the list that resolves to loopback: refused by the guard.
    let by_name = format!(
        "{}/to?http://localhost:{}/echo",
        server.base, elsewhere.port
    );
    let err = get(
        &fetcher(&[grant(&server), format!("localhost:{}", elsewhere.port)]),
        &by_name,
    )
    .await
    .expect_err("refused");
    assert!(err.contains("`localhost` is not a public address"), "{err}");
    // On the list: followed, without the credentials.
    let both = fetcher(&[grant(&server), grant(&elsewhere)]);
    let r = both.fetch(sent).await.expect("followed");
    assert_eq!(r.url, format!("{}/echo", elsewhere.base));
    let landed = elsewhere.next().await;
    assert_eq!(landed.header("x-api"), Some("k"));
    assert!(landed.header("authorization").is_none() && landed.header("cookie").is_none());
}
