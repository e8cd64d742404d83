//! The server's own surface: health and readiness, the OpenAPI document (every route in it, and
//! every path in it served), and a graceful shutdown that gives a running thread's lease back.

use std::collections::BTreeSet;

use serde_json::json;

use crate::harness::Server;
use crate::support;

#[tokio::test]
async fn health_and_readiness_answer_without_a_key() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        assert_eq!(server.get("/healthz", "").await.0, 200);
        let (status, body) = server.get("/readyz", "").await;
        assert_eq!((status, body["status"].as_str()), (200, Some("ready")));
        server.stop().await;
    }
}

/// The routes the server has, by method and path template.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/agents"),
    ("get", "/threads"),
    ("post", "/threads"),
    ("get", "/threads/{key}"),
    ("post", "/threads/{key}/terminate"),
    ("get", "/threads/{key}/effects"),
    ("delete", "/threads/{key}/effects/{id}"),
    ("get", "/threads/{key}/messages"),
    ("post", "/threads/{key}/messages"),
    ("get", "/threads/{key}/events"),
    ("get", "/threads/{key}/api"),
    ("post", "/threads/{key}/api"),
    ("put", "/threads/{key}/api"),
    ("patch", "/threads/{key}/api"),
    ("delete", "/threads/{key}/api"),
    ("get", "/threads/{key}/api/{path}"),
    ("post", "/threads/{key}/api/{path}"),
    ("put", "/threads/{key}/api/{path}"),
    ("patch", "/threads/{key}/api/{path}"),
    ("delete", "/threads/{key}/api/{path}"),
    ("get", "/threads/{key}/files"),
    ("post", "/threads/{key}/files"),
    ("get", "/threads/{key}/files/{path}"),
    ("delete", "/threads/{key}/files/{path}"),
    ("get", "/approvals"),
    ("get", "/approvals/{id}"),
    ("post", "/approvals/{id}"),
    ("delete", "/approvals/{id}/links"),
    ("get", "/notifications"),
    ("get", "/notifications/{id}"),
    ("post", "/notifications/{id}/retry"),
    ("get", "/notifications/subscriptions"),
    ("post", "/notifications/subscriptions"),
    ("delete", "/notifications/subscriptions/{id}"),
    ("post", "/invoke"),
    ("post", "/agents/{agent}/invoke"),
    ("get", "/control/capabilities"),
    ("get", "/agents/{agent}/control/capabilities"),
    ("get", "/control/commands"),
    ("get", "/agents/{agent}/control/commands"),
    ("get", "/control/state"),
    ("get", "/agents/{agent}/control/state"),
    ("get", "/control/entries"),
    ("get", "/agents/{agent}/control/entries"),
    ("post", "/control/dispatch"),
    ("post", "/agents/{agent}/control/dispatch"),
    ("get", "/control/events"),
    ("get", "/agents/{agent}/control/events"),
    ("post", "/control/invoke"),
    ("post", "/agents/{agent}/control/invoke"),
];

#[tokio::test]
async fn the_openapi_document_has_every_route_and_every_route_in_it_answers() {
    let backend = support::backends().await.remove(0);
    let server = Server::start(&backend).await;
    let token = server.key("doc", false).await;
    let (status, doc) = server.get("/openapi.json", &token).await;
    assert_eq!(status, 200);
    assert!(
        doc["openapi"]
            .as_str()
            .unwrap_or_default()
            .starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("item").keys() {
            documented.insert((method.clone(), path.clone()));
        }
    }
    let expected: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(documented, expected, "the document and the routes differ");
    // Every documented route is served: not the router's 404 or 405.
    for (method, path) in &documented {
        let concrete = path
            .replace("{key}", "no-such-thread")
            .replace("{id}", "no-such-approval")
            .replace("{agent}", "question_gate");
        let method_name = method.to_uppercase();
        let req = server.req(method_name.parse().expect("method"), &concrete, &token);
        let req = if method == "post" {
            req.json(&json!({}))
        } else {
            req
        };
        let (status, body) = crate::harness::send(req).await;
        assert_ne!(status, 405, "{method} {path}: {body}");
        if status == 404 {
            assert_ne!(
                body["detail"], "no such route",
                "{method} {path} is not served"
            );
        }
    }
    server.stop().await;
}

/// Two models, one exchange: side A answers after `delayMs`, then side B.
fn slow_project() -> support::Scratch {
    let p = support::Scratch::new("slow");
    p.write(
        "agents/agents/slow.yaml",
        "name: slow\nmaxSessionTurns: 1\nsideA: { prompt: pa }\nsideB: { prompt: pb }\n",
    );
    for (side, script) in [("a", "{ text: a1, delayMs: 1500 }"), ("b", "{ text: b1 }")] {
        p.write(
            &format!("agents/prompts/p{side}.yaml"),
            &format!(
                "name: p{side}\ntoolDescription: d\nmodel: m{side}\nincludeChat: true\nprompt: p\n"
            ),
        );
        p.write(
            &format!("agents/models/m{side}.yaml"),
            &format!("name: m{side}\nprovider: scripted\nmodel: demo\nscript:\n  - {script}\n"),
        );
    }
    p
}

#[tokio::test]
async fn a_shutdown_stops_a_run_at_its_next_commit_and_another_server_finishes_it() {
    for backend in support::backends().await {
        let project = slow_project();
        let mut options = crate::harness::options();
        options.default_agent = None;
        let server = Server::start_with(&backend, project.root(), options.clone()).await;
        let token = server.key("ops", false).await;
        let (status, body) = server
            .post(
                "/threads",
                &token,
                json!({"agent": "slow", "key": "k", "text": "Go"}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        // The run has taken the message (its first commit) and is in its model call.
        let mut events = server.events("/threads/k/events", &token, None).await;
        events.until(|e| e.event == "message").await;
        let store = server.store.clone();
        server.stop().await;
        let t = store.thread("ops/k").await.expect("read").expect("thread");
        assert_eq!(t.status, duet_runtime::ThreadStatus::Running, "{t:?}");
        assert!(t.lease_owner.is_none(), "the lease was given back: {t:?}");
        let texts = support::texts(&store, "ops/k").await;
        assert_eq!(
            texts.last().map(|m| m.2.as_str()),
            Some("a1"),
            "the step in flight committed: {texts:?}"
        );
        // The next server recovers it and the run ends as it would have.
        let next = Server::start_with(&backend, project.root(), options).await;
        let mut events = next.events("/threads/k/events", &token, None).await;
        events
            .until(|e| e.event == "status" && e.data["status"] == "idle")
            .await;
        let (_, messages) = next.get("/threads/k/messages", &token).await;
        let texts: Vec<&str> = messages["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|m| m["data"]["content"].as_str())
            .collect();
        assert_eq!(texts, ["Go", "a1", "b1"], "nothing lost or doubled");
        next.stop().await;
    }
}
