//! A client's message ids over A2A, on both backends and both bindings: a task's history shows
//! each message the client sent with the `messageId` the client gave it — in `GetTask`,
//! `ListTasks` and a stream's task — and each message duet wrote with duet's own id.

use serde_json::{Value, json};

use crate::harness::{Server, Sse, a2a, a2a_message, send};
use crate::support;

/// The ids of the history's messages of `role`.
fn ids(task: &Value, role: &str) -> Vec<String> {
    task["history"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter(|m| m["role"] == role)
                .filter_map(|m| m["messageId"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The task as the HTTP+JSON binding's `GET /tasks/{id}` shows it.
async fn rest_task(server: &Server, token: &str, id: &str) -> Value {
    let (status, task) = send(
        server
            .req(
                reqwest::Method::GET,
                &format!("/a2a/question_gate/rest/tasks/{id}"),
                token,
            )
            .header("A2A-Version", "1.0"),
    )
    .await;
    assert_eq!(status, 200, "{task}");
    task
}

#[tokio::test]
async fn a_clients_message_ids_are_kept_in_every_view_of_its_task() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        // Asked over JSON-RPC…
        let sent = a2a(
            &server,
            "question_gate",
            &alice,
            "SendMessage",
            a2a_message("client-ask-1", "Reboot the cluster?"),
        )
        .await;
        let task = sent["result"]["task"].clone();
        let id = task["id"].as_str().expect("a task").to_owned();
        assert_eq!(ids(&task, "ROLE_USER"), ["client-ask-1"], "{task}");
        // … answered over HTTP+JSON, streaming: the stream's task shows the client's ids too.
        let resp = server
            .req(
                reqwest::Method::POST,
                "/a2a/question_gate/rest/message:stream",
                &alice,
            )
            .header("A2A-Version", "1.0")
            .json(
                &json!({"message": {"messageId": "client-answer-2", "taskId": id,
                "role": "ROLE_USER", "parts": [{"text": "approved"}]}}),
            )
            .send()
            .await
            .expect("a stream");
        assert_eq!(resp.status(), 200);
        let mut sse = Sse::new(resp);
        let mut first = None;
        let mut agent_said = Vec::new();
        while let Some(e) = sse.next().await {
            let data = e.data.get("result").cloned().unwrap_or(e.data);
            if first.is_none() {
                first = Some(data["task"].clone());
            }
            if let Some(m) = data["statusUpdate"]["status"]["message"]["messageId"].as_str() {
                agent_said.push(m.to_owned());
            }
        }
        // The stream's task is read as the answer is delivered (it may not be in the journal
        // yet): the question's message, with its id.
        let first = first.expect("the stream's first event");
        let users = ids(&first, "ROLE_USER");
        assert_eq!(
            users.first().map(String::as_str),
            Some("client-ask-1"),
            "{first}"
        );
        assert!(
            ["client-ask-1", "client-answer-2"]
                .starts_with(&users.iter().map(String::as_str).collect::<Vec<_>>()),
            "{first}"
        );
        let ours = format!("{id}.");
        assert!(
            agent_said.iter().all(|m| m.starts_with(&ours)),
            "duet's messages keep duet's ids: {agent_said:?}"
        );

        // Read back on each binding, and listed.
        let got = a2a(
            &server,
            "question_gate",
            &alice,
            "GetTask",
            json!({"id": id}),
        )
        .await["result"]
            .clone();
        let rest = rest_task(&server, &alice, &id).await;
        let listed = a2a(
            &server,
            "question_gate",
            &alice,
            "ListTasks",
            json!({"historyLength": 50}),
        )
        .await;
        let listed = listed["result"]["tasks"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["id"] == json!(id)).cloned())
            .unwrap_or_else(|| panic!("task {id} listed: {listed}"));
        for (binding, task) in [("GetTask", &got), ("rest", &rest), ("ListTasks", &listed)] {
            assert_eq!(
                task["status"]["state"], "TASK_STATE_COMPLETED",
                "{binding}: {task}"
            );
            assert_eq!(
                ids(task, "ROLE_USER"),
                ["client-ask-1", "client-answer-2"],
                "{binding}: {task}"
            );
            let agent = ids(task, "ROLE_AGENT");
            assert!(
                !agent.is_empty() && agent.iter().all(|m| m.starts_with(&ours)),
                "{binding}: {agent:?}"
            );
        }
        server.stop().await;
    }
}
