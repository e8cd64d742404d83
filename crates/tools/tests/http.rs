//! `http` tools against a local server: a JSON answer, templates (URL encoding, headers, a JSON
//! body), a non-2xx answer, a timeout, an oversize body (announced and streamed), a connection
//! refused, and env secrets redacted from results and errors. Then what an argument must not
//! do: change the path with `.` or `..`, add form fields, or choose a private host; and a
//! redirect is not followed (so no header goes to where it points). Every server here is on
//! 127.0.0.1.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::extract::{Form, Path, Query, RawQuery};
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::{any, get, post};
use duet_runtime::{HttpTools, ThreadId, ToolContext, ToolResult};
use duet_spec::{HttpCall, HttpMethod};
use duet_tools::HttpClient;
use serde_json::{Value, json};

const SECRET: &str = "sk-live-0123456789";

async fn server() -> String {
    let app = Router::new()
        .route(
            "/echo",
            post(
                |headers: HeaderMap, RawQuery(q): RawQuery, body: String| async move {
                    let header = |k: &str| {
                        headers
                            .get(k)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned()
                    };
                    axum::Json(json!({
                        "body": serde_json::from_str::<Value>(&body).unwrap_or(Value::String(body)),
                        "authorization": header("authorization"),
                        "contentType": header("content-type"),
                        "idempotencyKey": header("idempotency-key"),
                        "query": q,
                    }))
                },
            ),
        )
        .route(
            "/items/{id}",
            get(
                |Path(id): Path<String>, Query(q): Query<BTreeMap<String, String>>| async move {
                    axum::Json(json!({"id": id, "query": q}))
                },
            ),
        )
        .route(
            "/missing",
            get(|headers: HeaderMap| async move {
                let token = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                (
                    StatusCode::NOT_FOUND,
                    format!("no such item\n(you sent {token})"),
                )
            }),
        )
        .route("/text", get(|| async { "plain words" }))
        .route("/empty", post(|| async { StatusCode::NO_CONTENT }))
        // Never answers: the receiving end of a channel whose sender waits with it.
        .route(
            "/never",
            get(|| async {
                let (_tx, rx) = tokio::sync::oneshot::channel::<()>();
                let _ = rx.await;
                "unreachable"
            }),
        )
        .route("/big", get(|| async { "x".repeat(5000) }))
        .route(
            "/form",
            post(|Form(fields): Form<BTreeMap<String, String>>| async move {
                axum::Json(json!(fields))
            }),
        )
        .route(
            "/moved",
            get(|Query(q): Query<BTreeMap<String, String>>| async move {
                let to = q.get("to").cloned().unwrap_or_default();
                (StatusCode::FOUND, [(LOCATION, to)], "moved")
            }),
        )
        // Any other path: the path as the server received it, still encoded.
        .fallback(|uri: Uri| async move { axum::Json(json!({"path": uri.path()})) })
        .route(
            "/big-stream",
            get(|| async {
                let chunks = (0..10).map(|_| Ok::<_, std::io::Error>("y".repeat(500)));
                Body::from_stream(futures::stream::iter(chunks))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn call(method: HttpMethod, url: &str) -> HttpCall {
    HttpCall {
        method,
        url: url.to_owned(),
        headers: BTreeMap::new(),
        body: None,
        timeout_ms: HttpCall::DEFAULT_TIMEOUT_MS,
        max_response_bytes: HttpCall::DEFAULT_MAX_RESPONSE_BYTES,
    }
}

async fn run(base: &str, call: &HttpCall, args: Value) -> ToolResult {
    let ctx = ToolContext {
        thread: ThreadId::nil(),
        idempotency_key: "thread:call_1".to_owned(),
    };
    let base = base.to_owned();
    let env = move |k: &str| match k {
        "BASE" => Some(base.clone()),
        "TOKEN" => Some(SECRET.to_owned()),
        _ => None,
    };
    HttpClient::new()
        .call(ctx, "probe", call, &args, &env)
        .await
}

fn json_of(r: &ToolResult) -> Value {
    assert!(r.is_ok(), "{r:?}");
    serde_json::from_str(&r.content).expect("a JSON result")
}

#[tokio::test]
async fn a_post_sends_the_arguments_and_its_json_answer_is_the_result() {
    let base = server().await;
    let mut c = call(HttpMethod::Post, "{{env.BASE}}/echo?tag={{tag}}");
    c.headers
        .insert("Authorization".into(), "Bearer {{env.TOKEN}}".into());
    let r = run(&base, &c, json!({"tag": "a b&c", "n": 2})).await;
    let answer = json_of(&r);
    assert_eq!(answer["body"], json!({"tag": "a b&c", "n": 2}));
    assert_eq!(answer["query"], "tag=a%20b%26c");
    assert_eq!(answer["contentType"], "application/json");
    assert_eq!(answer["idempotencyKey"], "thread:call_1");
    // The server echoed the secret header: the model never sees it.
    assert_eq!(answer["authorization"], "Bearer [redacted]");
    assert!(!r.content.contains(SECRET));
}

#[tokio::test]
async fn a_body_template_stays_json_whatever_the_arguments_hold() {
    let base = server().await;
    let mut c = call(HttpMethod::Post, "{{env.BASE}}/echo");
    c.body = Some(r#"{"note": "{{note}}", "count": {{count}}}"#.into());
    let r = run(&base, &c, json!({"note": "say \"hi\"\n", "count": 3})).await;
    assert_eq!(
        json_of(&r)["body"],
        json!({"note": "say \"hi\"\n", "count": 3})
    );
}

#[tokio::test]
async fn a_get_encodes_path_values_and_sends_no_body() {
    let base = server().await;
    let c = call(HttpMethod::Get, "{{env.BASE}}/items/{{id}}?q={{q}}");
    let r = run(&base, &c, json!({"id": "a/b c", "q": "x=1&y"})).await;
    assert_eq!(json_of(&r), json!({"id": "a/b c", "query": {"q": "x=1&y"}}));
    let text = run(
        &base,
        &call(HttpMethod::Get, "{{env.BASE}}/text"),
        json!({}),
    )
    .await;
    assert_eq!(text, ToolResult::ok("plain words"));
    let empty = run(
        &base,
        &call(HttpMethod::Post, "{{env.BASE}}/empty"),
        json!({}),
    )
    .await;
    assert_eq!(empty, ToolResult::ok("HTTP 204 No Content, no body."));
}

#[tokio::test]
async fn a_non_2xx_answer_is_an_error_naming_the_status_without_the_secret() {
    let base = server().await;
    let mut c = call(HttpMethod::Get, "{{env.BASE}}/missing?key={{env.TOKEN}}");
    c.headers
        .insert("Authorization".into(), "Bearer {{env.TOKEN}}".into());
    let r = run(&base, &c, json!({})).await;
    assert!(!r.is_ok());
    assert!(r.content.contains("HTTP 404 Not Found"), "{}", r.content);
    assert!(
        r.content
            .contains("no such item (you sent Bearer [redacted])"),
        "{}",
        r.content
    );
    assert!(!r.content.contains(SECRET));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let base = server().await;
    let mut c = call(HttpMethod::Get, "{{env.BASE}}/never");
    c.timeout_ms = 200;
    let r = run(&base, &c, json!({})).await;
    assert!(!r.is_ok());
    assert!(
        r.content.contains("no answer within 200 ms"),
        "{}",
        r.content
    );
}

#[tokio::test]
async fn an_oversize_answer_is_an_error_announced_or_streamed() {
    let base = server().await;
    for path in ["/big", "/big-stream"] {
        let mut c = call(HttpMethod::Get, &format!("{{{{env.BASE}}}}{path}"));
        c.max_response_bytes = 1000;
        let r = run(&base, &c, json!({})).await;
        assert!(!r.is_ok(), "{path}");
        assert!(
            r.content.contains("larger than 1000 bytes"),
            "{path}: {}",
            r.content
        );
        c.max_response_bytes = 5000;
        assert!(run(&base, &c, json!({})).await.is_ok(), "{path}");
    }
}

#[tokio::test]
async fn failures_before_an_answer_are_errors_with_the_secret_redacted() {
    // A port nothing listens on: bound, then released.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let c = call(
        HttpMethod::Get,
        &format!("http://{addr}/x?token={{{{env.TOKEN}}}}"),
    );
    let r = run("", &c, json!({})).await;
    assert!(!r.is_ok());
    assert!(r.content.contains("could not connect"), "{}", r.content);
    assert!(!r.content.contains(SECRET));
    let bad = run("", &call(HttpMethod::Get, "{{env.TOKEN}}/x"), json!({})).await;
    assert!(!bad.is_ok());
    assert!(bad.content.contains("[redacted]/x"), "{}", bad.content);
    // TLS starts (rustls), and a handshake with a plain-HTTP server fails as a result.
    let base = server().await;
    let tls = call(HttpMethod::Get, &base.replace("http://", "https://"));
    let r = run("", &tls, json!({})).await;
    assert!(!r.is_ok());
    assert!(r.content.contains("Tool `probe` failed: "), "{}", r.content);
    let mut header = call(HttpMethod::Get, "http://127.0.0.1:1/");
    header.headers.insert("X-Bad".into(), "a\nb".into());
    let r = run("", &header, json!({})).await;
    assert!(
        r.content.contains("not a valid header value"),
        "{}",
        r.content
    );
}

#[tokio::test]
async fn a_path_argument_cannot_change_the_path() {
    let base = server().await;
    let c = call(HttpMethod::Get, "{{env.BASE}}/users/{{id}}/profile");
    // A value that holds a `/`, `?`, `#` or `%` stays inside its segment.
    let r = run(&base, &c, json!({"id": "a/../b?c#d%"})).await;
    assert_eq!(
        json_of(&r)["path"],
        "/users/a%2F..%2Fb%3Fc%23d%25/profile",
        "what the server received"
    );
    // A whole segment of dots would be resolved away by the URL parser (and by many servers):
    // the call is refused and nothing is sent.
    for id in ["..", "."] {
        let r = run(&base, &c, json!({"id": id})).await;
        assert!(!r.is_ok(), "{id}: {r:?}");
        assert!(r.content.contains("path segment"), "{id}: {}", r.content);
    }
    let dotted = call(HttpMethod::Get, "{{env.BASE}}/files/.{{ext}}");
    assert!(!run(&base, &dotted, json!({"ext": "."})).await.is_ok());
    // Anything else arrives as it was given.
    for (id, received) in [
        ("...", "/users/.../profile"),
        ("%2e%2E", "/users/%252e%252E/profile"),
        ("..a", "/users/..a/profile"),
    ] {
        let r = run(&base, &c, json!({"id": id})).await;
        assert_eq!(json_of(&r)["path"], received, "{id}");
    }
}

#[tokio::test]
async fn a_form_body_encodes_its_values() {
    let base = server().await;
    let mut c = call(HttpMethod::Post, "{{env.BASE}}/form");
    c.headers.insert(
        "Content-Type".into(),
        "application/x-www-form-urlencoded".into(),
    );
    c.body = Some("a={{x}}&b=2".into());
    let r = run(&base, &c, json!({"x": "1&admin=true"})).await;
    assert_eq!(json_of(&r), json!({"a": "1&admin=true", "b": "2"}));
}

/// A server on another origin that records the headers it is sent.
async fn elsewhere() -> (String, tokio::sync::mpsc::UnboundedReceiver<HeaderMap>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = Router::new().route(
        "/landing",
        any(move |headers: HeaderMap| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(headers);
                "landed"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), rx)
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_takes_no_header_along() {
    let base = server().await;
    let (other, mut landed) = elsewhere().await;
    let mut c = call(HttpMethod::Get, "{{env.BASE}}/moved?to={{to}}");
    c.headers.insert("X-Api-Key".into(), "{{env.TOKEN}}".into());
    let to = format!("{other}/landing?key={SECRET}");
    let r = run(&base, &c, json!({"to": to})).await;
    assert!(!r.is_ok(), "{r:?}");
    assert!(r.content.contains("HTTP 302"), "{}", r.content);
    assert!(
        r.content
            .contains(&format!("{other}/landing?key=[redacted]")),
        "the error names where it points, redacted: {}",
        r.content
    );
    assert!(
        landed.try_recv().is_err(),
        "the other origin was sent nothing"
    );
}

#[tokio::test]
async fn a_host_an_argument_chooses_must_be_public() {
    let base = server().await;
    let port = base.rsplit(':').next().unwrap_or_default().to_owned();
    let c = call(
        HttpMethod::Post,
        &format!("http://{{{{host}}}}:{port}/echo"),
    );
    for host in ["127.0.0.1", "localhost", "0x7f.1"] {
        let r = run(&base, &c, json!({"host": host})).await;
        assert!(!r.is_ok(), "{host}: {r:?}");
        assert!(r.content.contains("not a public address"), "{}", r.content);
    }
    // The same with a host an argument extends (as `.evil.example` would).
    let extended = call(
        HttpMethod::Post,
        &format!("http://127.0.0{{{{rest}}}}:{port}/echo"),
    );
    let r = run(&base, &extended, json!({"rest": ".1"})).await;
    assert!(r.content.contains("not a public address"), "{}", r.content);
    // A host the definition fixes is trusted as written (every other test here is one), and
    // an operator may allow private targets.
    let ctx = ToolContext {
        thread: ThreadId::nil(),
        idempotency_key: "thread:call_1".to_owned(),
    };
    let allowed = HttpClient::new()
        .allow_private_targets(true)
        .call(
            ctx,
            "probe",
            &c,
            &json!({"host": "127.0.0.1"}),
            &|_: &str| None,
        )
        .await;
    assert_eq!(json_of(&allowed)["body"], json!({"host": "127.0.0.1"}));
}
