//! How a session's end reads over A2A, on both backends: `sessionFail` is `TASK_STATE_FAILED`
//! with the reason as the status message; a message sent while the task works joins the same
//! task (queued as a follow-up), not a refusal.

use serde_json::{Value, json};

use crate::harness::{Server, options};
use crate::support;

/// A project with `quitter` (side A's model fails the session at once) and `slow` (side A's
/// first answer takes a while, then it asks).
fn project() -> support::Scratch {
    let p = support::Scratch::new("a2a-states");
    p.write(
        "agents/agents/quitter.yaml",
        "name: quitter\nexposeAsTool: true\ntoolDescription: gives up\nsideA:\n  prompt: quit\n  sessionFail: { name: give_up, messageProperty: reason }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/quit.yaml",
        "name: quit\ntoolDescription: gives up\nmodel: quit_demo\nprompt: Give up.\ntools: [give_up]\n",
    );
    p.write(
        "agents/tools/give_up.yaml",
        "description: Give up.\nargs:\n  type: object\n  properties:\n    reason: { type: string }\n  required: [reason]\nresult: \"Gave up: {{reason}}\"\n",
    );
    p.write(
        "agents/models/quit_demo.yaml",
        "name: quit_demo\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls:\n      - { name: give_up, arguments: { reason: the disk is full } }\n",
    );
    p.write(
        "agents/agents/slow.yaml",
        "name: slow\nexposeAsTool: true\ntoolDescription: thinks slowly\nsideA:\n  prompt: slow\n  stopOnResponse: true\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/slow.yaml",
        "name: slow\ntoolDescription: thinks\nmodel: slow_demo\nprompt: Think.\nincludeChat: true\n",
    );
    p.write(
        "agents/models/slow_demo.yaml",
        "name: slow_demo\nprovider: scripted\nmodel: demo\nscript:\n  - { text: \"Still thinking about it.\", delayMs: 800 }\n  - text: \"Noted both.\"\n",
    );
    p
}

async fn rpc(server: &Server, agent: &str, token: &str, method: &str, params: Value) -> Value {
    crate::harness::a2a(server, agent, token, method, params).await
}

fn message(id: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

#[tokio::test]
async fn a_failed_session_is_a_failed_task() {
    for backend in support::backends().await {
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let sent = rpc(
            &server,
            "quitter",
            &alice,
            "SendMessage",
            message("f-1", "Try."),
        )
        .await;
        let task = &sent["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{sent}");
        let why = task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(why.contains("the disk is full"), "{sent}");
        assert_eq!(
            task["artifacts"],
            Value::Null,
            "a failure has no result artifact: {sent}"
        );
        let mut more = message("f-2", "Again?");
        more["message"]["taskId"] = task["id"].clone();
        let refused = rpc(&server, "quitter", &alice, "SendMessage", more).await;
        assert_eq!(
            refused["error"]["code"], -32004,
            "a failed task takes no message: {refused}"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn a_message_to_a_working_task_joins_it() {
    for backend in support::backends().await {
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let mut first = message("w-1", "First thought.");
        first["configuration"] = json!({"returnImmediately": true});
        let started = rpc(&server, "slow", &alice, "SendMessage", first).await;
        let id = started["result"]["task"]["id"].clone();
        let mut second = message("w-2", "Second thought.");
        second["message"]["taskId"] = id.clone();
        let joined = rpc(&server, "slow", &alice, "SendMessage", second).await;
        let task = &joined["result"]["task"];
        assert_eq!(task["id"], id, "the same task: {joined}");
        let users: Vec<&str> = task["history"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "ROLE_USER")
            .filter_map(|m| m["parts"][0]["text"].as_str())
            .collect();
        assert_eq!(users, ["First thought.", "Second thought."], "{joined}");
        assert_eq!(
            task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{joined}"
        );
        server.stop().await;
    }
}
