//! Hostile input, case by case from `hostile.json`: each request gets its status and one
//! problem+json shape — never a 5xx — and nothing of any of them is stored (no thread, no
//! subscription).

use serde::Deserialize;
use serde_json::Value;

use crate::harness::Server;
use crate::support;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    method: String,
    path: String,
    #[serde(default = "json_type")]
    content_type: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    token: Option<String>,
    status: u16,
    code: String,
    #[serde(default)]
    detail_has: Option<String>,
}

fn json_type() -> Option<String> {
    Some("application/json".into())
}

/// `KEY600` stands for 600 bytes; `BIG` for a body twice the server's limit.
fn expand(s: &str) -> String {
    if s == "BIG" {
        return format!(
            "{{\"agent\":\"question_gate\",\"text\":\"{}\"}}",
            "x".repeat(2 << 20)
        );
    }
    s.replace("KEY600", &"k".repeat(600))
}

#[tokio::test]
async fn every_hostile_request_gets_a_problem_and_stores_nothing() {
    let cases: Vec<Case> =
        serde_json::from_str(include_str!("hostile.json")).expect("hostile.json");
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let token = server.key("mallory", false).await;
        for case in &cases {
            let method: reqwest::Method = case.method.parse().expect("method");
            let who = match case.token.as_deref() {
                None => token.clone(),
                Some("none") => String::new(),
                Some(other) => other.to_owned(),
            };
            let mut req = server.req(method, &case.path, &who);
            if who.is_empty() {
                req = reqwest::Client::new().request(
                    case.method.parse().expect("method"),
                    format!("{}{}", server.base, case.path),
                );
            }
            if let Some(body) = &case.body {
                req = req.body(expand(body));
                if let Some(ct) = &case.content_type {
                    req = req.header("content-type", ct);
                }
            }
            for (name, value) in &case.headers {
                req = req.header(name, expand(value));
            }
            let resp = req.send().await.expect("request");
            let status = resp.status().as_u16();
            let ct = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            let what = format!("{} ({}): {status} {body}", case.name, backend.name());
            assert_eq!(status, case.status, "{what}");
            assert_eq!(ct, "application/problem+json", "{what}");
            assert_eq!(body["code"], case.code.as_str(), "{what}");
            assert_eq!(body["status"], case.status, "{what}");
            for field in ["type", "title", "detail"] {
                assert!(body[field].is_string(), "{what}: no `{field}`");
            }
            if let Some(part) = &case.detail_has {
                assert!(
                    body["detail"]
                        .as_str()
                        .unwrap_or_default()
                        .contains(part.as_str()),
                    "{what}: detail lacks {part:?}"
                );
            }
        }
        let threads = server
            .store
            .list_threads(&duet_runtime::ThreadQuery::default())
            .await
            .expect("list");
        assert!(threads.is_empty(), "a refused request stored {threads:?}");
        let subscriptions = server.tables.subscriptions(None).await.expect("list");
        assert!(
            subscriptions.is_empty(),
            "a refused request stored {subscriptions:?}"
        );
        server.stop().await;
    }
}
