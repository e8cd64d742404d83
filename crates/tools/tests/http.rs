//! `http` tools against a local server: a JSON answer, templates (URL encoding, headers, a JSON
//! body), a non-2xx answer, a timeout, an oversize body (announced and streamed), a connection
//! refused, and env secrets redacted from results and errors.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, RawQuery};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
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
