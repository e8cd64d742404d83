//! `GET /threads/{key}/effects` and `DELETE /threads/{key}/effects/{id}`: a thread's timers as
//! its owner sees them (the latest due first; effects unless `?kind=deadline`), cancelling a
//! pending one (204), a cancelled one refused (409 `not_pending` with its status), a deadline
//! refused (409 `not_an_effect`: only an answer ends it), and another
//! principal's thread or another thread's timer not there (404). On every backend.

use duet_runtime::{Commit, Lease, NewTimer, TimerKind, TimerStatus};
use serde_json::json;
use uuid::Uuid;

use crate::harness::{self, Server};
use crate::support;

/// Writes `timers` on the stored thread whose key ends with `key`, as a step would.
async fn schedule(server: &Server, key: &str, timers: Vec<NewTimer>) {
    let t = server
        .store
        .threads(None)
        .await
        .expect("threads")
        .into_iter()
        .find(|t| t.key.ends_with(key))
        .expect("the thread");
    let (owner, now) = (Uuid::now_v7(), t.updated_at + 1);
    let lease = Lease {
        owner,
        until: now + 60_000,
        now,
    };
    assert!(server.store.claim(t.id, lease).await.expect("claim"));
    let commit = Commit {
        timers,
        settle: true,
        ..Commit::default()
    };
    server
        .store
        .commit(&t, owner, commit)
        .await
        .expect("commit");
}

/// A timer an hour or more away (the server's own loop leaves it alone).
fn timer(kind: TimerKind, name: &str, hours: i64) -> NewTimer {
    let now = chrono_free_now();
    NewTimer {
        id: Uuid::now_v7(),
        kind,
        name: name.to_owned(),
        args: json!({"content": name}),
        subject: None,
        due_at: now + hours * 3_600_000,
        max_attempts: 3,
    }
}

fn chrono_free_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("fits")
}

#[tokio::test]
async fn a_threads_effects_are_listed_and_cancelled_by_its_owner_alone() {
    for backend in support::backends().await {
        let name = backend.name();
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        for key in ["e-1", "e-2"] {
            let (status, body) = server
                .post(
                    "/threads?wait=true",
                    &alice,
                    json!({"agent": "question_gate", "key": key, "text": "Rotate?"}),
                )
                .await;
            assert_eq!(status, 200, "{name}: {body}");
        }
        let (soon, later, deadline) = (
            timer(TimerKind::Effect, "queue_message", 1),
            timer(TimerKind::Effect, "queue_message", 2),
            timer(TimerKind::Deadline, "remind", 3),
        );
        let (soon_id, later_id, deadline_id) = (soon.id, later.id, deadline.id);
        schedule(&server, "e-1", vec![soon, later, deadline]).await;

        let (status, body) = server.get("/threads/e-1/effects", &alice).await;
        assert_eq!(status, 200, "{name}: {body}");
        let items = body["items"].as_array().expect("items");
        let ids: Vec<&str> = items.iter().filter_map(|i| i["id"].as_str()).collect();
        assert_eq!(
            ids,
            [later_id.to_string(), soon_id.to_string()],
            "{name}: effects alone, the latest due first"
        );
        assert_eq!(items[1]["status"], "pending", "{name}");
        assert_eq!(items[1]["attempts"], 0, "{name}");
        assert_eq!(items[1]["maxAttempts"], 3, "{name}");
        assert_eq!(items[1]["kind"], "effect", "{name}");
        assert!(items[1]["dueAt"].is_i64(), "{name}");
        let (_, body) = server
            .get("/threads/e-1/effects?kind=deadline", &alice)
            .await;
        assert_eq!(body["items"][0]["id"], deadline_id.to_string(), "{name}");
        let (status, body) = server.get("/threads/e-1/effects?kind=cron", &alice).await;
        assert_eq!(
            (status, &body["code"]),
            (400, &json!("invalid_query")),
            "{name}"
        );
        // Another principal's thread is not there.
        let (status, _) = server.get("/threads/e-1/effects", &bob).await;
        assert_eq!(status, 404, "{name}");

        let delete = async |key: &str, id: &str, token: &str| {
            harness::send(server.req(
                reqwest::Method::DELETE,
                &format!("/threads/{key}/effects/{id}"),
                token,
            ))
            .await
        };
        let soon_id = soon_id.to_string();
        assert_eq!(
            delete("e-1", &soon_id, &bob).await.0,
            404,
            "{name}: bob's no thread"
        );
        assert_eq!(
            delete("e-2", &soon_id, &alice).await.0,
            404,
            "{name}: another thread's timer"
        );
        let unknown = Uuid::now_v7().to_string();
        assert_eq!(delete("e-1", &unknown, &alice).await.0, 404, "{name}");
        assert_eq!(delete("e-1", "not-an-id", &alice).await.0, 404, "{name}");
        assert_eq!(
            delete("e-1", &soon_id, &alice).await.0,
            204,
            "{name}: cancelled"
        );
        let (status, body) = delete("e-1", &soon_id, &alice).await;
        assert_eq!(status, 409, "{name}: {body}");
        assert_eq!(body["code"], "not_pending", "{name}");
        assert_eq!(body["status"], "cancelled", "{name}");
        // A question's deadline is not the caller's to take away: only an answer ends it.
        let (status, body) = delete("e-1", &deadline_id.to_string(), &alice).await;
        assert_eq!(status, 409, "{name}: {body}");
        assert_eq!(body["code"], "not_an_effect", "{name}");
        let t = server
            .store
            .timer(deadline_id)
            .await
            .expect("read")
            .expect("there");
        assert_eq!(
            t.status,
            TimerStatus::Pending,
            "{name}: the deadline stands"
        );
        let t = server
            .store
            .timer(soon_id.parse().expect("uuid"))
            .await
            .expect("read")
            .expect("there");
        assert_eq!(t.status, TimerStatus::Cancelled, "{name}");
        let (_, body) = server
            .get("/threads/e-1/effects?status=cancelled", &alice)
            .await;
        assert_eq!(body["items"].as_array().map(Vec::len), Some(1), "{name}");
        server.stop().await;
    }
}
