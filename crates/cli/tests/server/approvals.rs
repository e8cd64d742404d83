//! Create → park → list approvals → answer → follow events; the double answer; reconnects.

use serde_json::{Value, json};

use crate::harness::{Server, seg};
use crate::support;

/// Creates an approval-gate thread and waits until it parks: its view.
async fn parked(server: &Server, token: &str, key: &str) -> Value {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            token,
            json!({"agent": "question_gate", "key": key, "text": "Rotate the keys tonight?"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "awaiting_human", "{body}");
    body
}

#[tokio::test]
async fn an_approval_is_listed_answered_once_and_followed_to_its_end() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let thread = parked(&server, &alice, "ticket-1").await;
        let approval = thread["approval"].as_str().expect("approval id").to_owned();

        let (status, list) = server.get("/approvals", &alice).await;
        assert_eq!(status, 200, "{list}");
        let items = list["items"].as_array().expect("items");
        assert_eq!(items.len(), 1, "{list}");
        assert_eq!(items[0]["id"], approval.as_str());
        assert_eq!(items[0]["thread"], "ticket-1");
        assert!(
            items[0]["question"]
                .as_str()
                .unwrap_or_default()
                .contains("Do you approve?"),
            "{list}"
        );

        // Follow the thread from the start while answering it.
        let mut events = server
            .events("/threads/ticket-1/events", &alice, None)
            .await;
        let (status, accepted) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"text": "Yes, approved."}),
            )
            .await;
        assert_eq!(status, 202, "{accepted}");
        assert_eq!(accepted["delivery"], "accepted");
        let seen = events
            .until(|e| e.event == "status" && e.data["status"] == "idle")
            .await;
        let seqs: Vec<i64> = seen
            .iter()
            .filter_map(|e| e.id.as_deref().map(|i| i.parse().expect("seq id")))
            .collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        assert_eq!(seqs.first(), Some(&1), "{seqs:?}");
        assert!(
            seen.iter()
                .any(|e| e.event == "message" && e.data["data"]["content"] == "Yes, approved."),
            "{seen:#?}"
        );

        // A second answer to the same park: 409, naming the answer that won; nothing written.
        let before = server
            .get("/threads/ticket-1/messages?limit=500", &alice)
            .await
            .1;
        let (status, problem) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"text": "No!"}),
            )
            .await;
        assert_eq!(status, 409, "{problem}");
        assert_eq!(problem["code"], "already_answered");
        assert_eq!(problem["answer"]["content"], "Yes, approved.");
        assert_eq!(problem["answer"]["author"], "alice");
        let after = server
            .get("/threads/ticket-1/messages?limit=500", &alice)
            .await
            .1;
        assert_eq!(before, after, "the refused answer wrote nothing");

        let (_, done) = server.get("/threads/ticket-1", &alice).await;
        assert_eq!(done["status"], "idle", "{done}");
        assert_eq!(done["result"], "approved", "{done}");
        let (_, list) = server.get("/approvals", &alice).await;
        assert_eq!(list["items"], json!([]), "{list}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_reconnecting_follower_gets_what_it_missed_exactly_once() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let token = server.key("bob", false).await;
        let thread = parked(&server, &token, "re/connect").await;
        let path = format!("/threads/{}/events", seg("re/connect"));
        // Read the first two entries, then drop the connection.
        let mut first = server.events(&path, &token, None).await;
        let head = first.until(|e| e.id.as_deref() == Some("2")).await;
        drop(first);
        let answered = server
            .post(
                &format!(
                    "/approvals/{}?wait=true",
                    thread["approval"].as_str().expect("id")
                ),
                &token,
                json!({"text": "approved"}),
            )
            .await;
        assert_eq!(answered.0, 200, "{}", answered.1);
        // Reconnect after entry 2: the rest, then the live status.
        let mut second = server.events(&path, &token, Some(2)).await;
        let tail = second
            .until(|e| e.event == "status" && e.data["status"] == "idle")
            .await;
        let ids = |es: &[crate::harness::Event]| -> Vec<i64> {
            es.iter()
                .filter_map(|e| e.id.as_deref().map(|i| i.parse().expect("seq")))
                .collect()
        };
        let mut all = ids(&head);
        all.extend(ids(&tail));
        let last = server
            .get(&format!("/threads/{}", seg("re/connect")), &token)
            .await
            .1["seq"]
            .as_i64()
            .expect("seq");
        assert_eq!(all, (1..=last).collect::<Vec<_>>(), "no gap, no duplicate");
        // `?after=` is the same cursor.
        let mut third = server
            .events(&format!("{path}?after={last}"), &token, None)
            .await;
        let status = third.next().await.expect("status first");
        assert_eq!(status.event, "status", "{status:?}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_message_with_an_idempotency_key_is_delivered_once() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let token = server.key("carol", false).await;
        let thread = parked(&server, &token, "idem").await;
        let park = thread["park"].as_str().expect("park").to_owned();
        let answer = || {
            server
                .req(
                    reqwest::Method::POST,
                    "/threads/idem/messages?wait=true",
                    &token,
                )
                .header("Idempotency-Key", "answer-1")
                .header("If-Match", format!("\"{park}\""))
                .json(&json!({"text": "approved"}))
        };
        let (status, first) = crate::harness::send(answer()).await;
        assert_eq!(status, 200, "{first}");
        let (status, again) = crate::harness::send(answer()).await;
        assert_eq!(status, 200, "a replay is not an error: {again}");
        assert_eq!(first["seq"], again["seq"], "nothing was written");
        server.stop().await;
    }
}

#[tokio::test]
async fn an_idle_event_stream_sends_heartbeats() {
    let backend = support::backends().await.remove(0);
    let server = Server::start(&backend).await;
    let token = server.key("dana", false).await;
    parked(&server, &token, "quiet").await;
    let mut events = server.events("/threads/quiet/events", &token, None).await;
    // The journal, the status, then nothing happens: a `: ping` comment keeps the stream open.
    let before = events.heartbeat().await;
    assert!(before.iter().any(|e| e.event == "status"), "{before:#?}");
    let after = events.heartbeat().await;
    assert!(
        after.is_empty(),
        "nothing but a heartbeat while nothing happens: {after:#?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn images_sent_over_rest_are_kept_with_the_message() {
    let backend = support::backends().await.remove(0);
    let server = Server::start(&backend).await;
    let token = server.key("erin", false).await;
    let image = json!({"mimeType": "image/png", "data": "iVBORw0KGgo="});
    let (status, body) = server
        .post(
            "/threads?wait=true",
            &token,
            json!({"agent": "question_gate", "key": "pic", "text": "Approve this diagram?", "images": [image]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, messages) = server.get("/threads/pic/messages", &token).await;
    let first = &messages["items"][0]["data"];
    assert_eq!(first["content"], "Approve this diagram?");
    assert_eq!(first["images"], json!([image]), "{messages}");
    server.stop().await;
}
