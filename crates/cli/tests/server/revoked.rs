//! A stream lasts no longer than what admitted it: revoking a key ends the thread's events, the
//! control plane's events, an A2A subscription and the inbox streams it opened; signing out of
//! the inbox ends that sign-in's streams. Each within the key cache's few seconds (the guard
//! below only keeps a broken build from hanging).

use std::time::Duration;

use serde_json::json;

use crate::harness::{self, Server, Sse};
use crate::support;

/// Reads `sse` to its end; panics if it is still open after a generous guard.
async fn ends(what: &str, mut sse: Sse) {
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        while sse.next().await.is_some() {}
    })
    .await;
    assert!(drained.is_ok(), "{what} is still streaming");
}

/// Opens `path` with the inbox session `cookie` as an event stream.
async fn inbox_stream(server: &Server, path: &str, cookie: &str) -> Sse {
    let resp = reqwest::Client::new()
        .get(format!("{}{path}", server.base))
        .header("cookie", cookie)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("inbox events");
    assert_eq!(resp.status(), 200, "{path}");
    Sse::new(resp)
}

#[tokio::test]
async fn streams_end_when_their_key_is_revoked_or_their_sign_in_ends() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let new = duet_server::auth::new_key("alice", false, None, 0).expect("key");
        server
            .tables
            .create_key(&new.key, &new.hash)
            .await
            .expect("store key");
        let alice = new.token;
        let mut ask = harness::a2a_message("r-ask", "Rotate?");
        ask["message"]["contextId"] = json!("r-1");
        let sent = harness::a2a(&server, "question_gate", &alice, "SendMessage", ask).await;
        let task = sent["result"]["task"]["id"].clone();
        assert!(task.is_string(), "{sent}");
        let (_, approvals) = server.get("/approvals", &alice).await;
        let approval = approvals["items"][0]["id"]
            .as_str()
            .expect("the question")
            .to_owned();

        // Signing out ends the streams of that sign-in.
        let (cookie, csrf) = harness::sign_in(&server, &alice).await;
        let queue = inbox_stream(&server, "/inbox/events", &cookie).await;
        let (status, _) = harness::send(
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client")
                .post(format!("{}/inbox/sign-out", server.base))
                .header("cookie", &cookie)
                .form(&[("csrf", csrf.as_str())]),
        )
        .await;
        assert_eq!(status, 303);
        ends("the signed-out inbox queue", queue).await;

        // Revoking the key ends every stream it opened, and those of its sign-ins.
        let (cookie, _) = harness::sign_in(&server, &alice).await;
        let queue = inbox_stream(&server, "/inbox/events", &cookie).await;
        let page = inbox_stream(&server, &format!("/inbox/items/{approval}/follow"), &cookie).await;
        let thread = server.events("/threads/r-1/events", &alice, None).await;
        let control = server
            .events("/control/events?session=r-1", &alice, None)
            .await;
        let resp = server
            .req(reqwest::Method::POST, "/a2a/question_gate", &alice)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task}}))
            .send()
            .await
            .expect("subscribe");
        assert_eq!(resp.status(), 200);
        let subscription = Sse::new(resp);
        assert!(
            server
                .tables
                .revoke_key(&new.key.id, 1)
                .await
                .expect("revoke"),
            "revoked"
        );
        ends("the thread's events", thread).await;
        ends("the control plane's events", control).await;
        ends("the A2A subscription", subscription).await;
        ends("the inbox queue", queue).await;
        ends("the question page's stream", page).await;
        server.stop().await;
    }
}
