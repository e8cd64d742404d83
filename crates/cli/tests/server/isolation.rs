//! Principal isolation: one principal's threads are absent (404, not 403) to another — to list,
//! read, follow, answer and terminate — while an admin key sees them all; and two principals'
//! keys never collide.

use serde_json::json;

use crate::harness::Server;
use crate::support;

#[tokio::test]
async fn another_principals_threads_are_not_there() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let admin = server.key("ops", true).await;
        let (status, thread) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "question_gate", "key": "t-1", "text": "Deploy?"}),
            )
            .await;
        assert_eq!(status, 200, "{thread}");
        let approval = thread["approval"].as_str().expect("approval").to_owned();

        // Bob sees nothing of it.
        for path in [
            "/threads/t-1",
            "/threads/t-1/messages",
            "/threads/t-1/events",
        ] {
            let (status, body) = server.get(path, &bob).await;
            assert_eq!(status, 404, "{path}: {body}");
        }
        assert_eq!(
            server.get(&format!("/approvals/{approval}"), &bob).await.0,
            404
        );
        let (status, _) = server
            .post(
                &format!("/approvals/{approval}"),
                &bob,
                json!({"text": "approved"}),
            )
            .await;
        assert_eq!(status, 404);
        let (status, _) = server
            .post("/threads/t-1/messages", &bob, json!({"text": "hi"}))
            .await;
        assert_eq!(status, 404);
        assert_eq!(
            server
                .post("/threads/t-1/terminate", &bob, json!({}))
                .await
                .0,
            404
        );
        assert_eq!(server.get("/threads", &bob).await.1["items"], json!([]));
        assert_eq!(server.get("/approvals", &bob).await.1["items"], json!([]));

        // Bob's own `t-1` is another thread.
        let (status, own) = server
            .post(
                "/threads?wait=true",
                &bob,
                json!({"agent": "question_gate", "key": "t-1", "text": "Mine?"}),
            )
            .await;
        assert_eq!(status, 200, "{own}");
        assert_ne!(own["id"], thread["id"]);
        assert_eq!(
            server.get("/threads", &alice).await.1["items"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );

        // The admin sees both, and may answer Alice's; the answer is recorded as the admin's.
        let all = server.get("/threads", &admin).await.1;
        assert_eq!(all["items"].as_array().map(Vec::len), Some(2), "{all}");
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}?wait=true"),
                &admin,
                json!({"text": "approved"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let (status, problem) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"text": "approved"}),
            )
            .await;
        assert_eq!(status, 409, "{problem}");
        assert_eq!(problem["answer"]["author"], "ops");

        // A revoked key is refused.
        let keys = server.tables.keys().await.expect("keys");
        let bobs = keys
            .iter()
            .find(|k| k.principal == "bob")
            .expect("bob's key");
        assert!(server.tables.revoke_key(&bobs.id, 1).await.expect("revoke"));
        server.stop().await;
    }
}

#[tokio::test]
async fn a_thread_with_no_owner_is_no_principals() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        // Made outside the server (as `duet run` would), in the key space Alice's keys map to.
        let rt = support::runtime(support::project(&support::repo()), server.store.clone()).build();
        support::send(&rt, "alice/free", Some("question_gate"), "Deploy?").await;
        assert_eq!(server.get("/threads/free", &alice).await.0, 404);
        // Creating it is "not there" too, never a 409 that says it exists.
        let (status, body) = server
            .post(
                "/threads",
                &alice,
                json!({"agent": "question_gate", "key": "free", "text": "hi"}),
            )
            .await;
        assert_eq!(status, 404, "{body}");
        // And invoke cannot drive it.
        let resp = server
            .req(
                reqwest::Method::POST,
                "/agents/question_gate/invoke",
                &alice,
            )
            .json(&json!({"session": "free", "text": "approved"}))
            .send()
            .await
            .expect("invoke");
        let mut events = crate::harness::Sse::new(resp);
        let terminal = events
            .until(|e| e.data["type"] == "failed" || e.data["type"] == "completed")
            .await;
        let last = terminal.last().expect("a terminal");
        assert_eq!(last.data["code"], "forbidden", "{last:?}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_create_is_replayed_only_with_its_own_idempotency_key() {
    let backend = support::backends().await.remove(0);
    let server = Server::start(&backend).await;
    let token = server.key("fay", false).await;
    let create = |id: &'static str| {
        server
            .req(reqwest::Method::POST, "/threads?wait=true", &token)
            .header("Idempotency-Key", id)
            .json(&json!({"agent": "question_gate", "key": "once", "text": "Deploy?"}))
    };
    let (status, first) = crate::harness::send(create("c-1")).await;
    assert_eq!(status, 200, "{first}");
    let (status, replay) = crate::harness::send(create("c-1")).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["seq"], first["seq"], "nothing written");
    let (status, other) = crate::harness::send(create("c-2")).await;
    assert_eq!(
        (status, other["code"].as_str()),
        (409, Some("thread_exists")),
        "{other}"
    );
    server.stop().await;
}

/// The `Authorization` scheme is case-insensitive (RFC 9110 §11.1): a key sent as `BEARER` or
/// `bearer` is the same key; another scheme, or no token, is refused.
#[tokio::test]
async fn the_bearer_scheme_is_read_whatever_its_case() {
    let backend = support::backends().await.remove(0);
    let server = Server::start(&backend).await;
    let token = server.key("alice", false).await;
    let http = reqwest::Client::new();
    for (value, status) in [
        (format!("Bearer {token}"), 200),
        (format!("BEARER {token}"), 200),
        (format!("bearer  {token}"), 200),
        (format!("Basic {token}"), 401),
        ("Bearer ".to_owned(), 401),
    ] {
        let got = http
            .get(format!("{}/threads", server.base))
            .header("authorization", &value)
            .send()
            .await
            .expect("request");
        assert_eq!(got.status().as_u16(), status, "{value:?}");
    }
    server.stop().await;
}
