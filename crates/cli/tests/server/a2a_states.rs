//! How a session's end reads over A2A, on both backends: `sessionFail` is `TASK_STATE_FAILED`
//! with the reason as the status message; a message sent while the task works joins the same
//! task (queued as a follow-up) when it asks to, and is refused when it does not; a context holds a task per session, listed
//! newest first, filtered and paged.

use serde_json::{Value, json};

use crate::harness::{Server, a2a_message as message, options};
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
        // Without asking to be a follow-up, a message to a working task is refused (it may be
        // an answer that lost a race): nothing is stored.
        let mut stray = message("w-0", "Is this an answer?");
        stray["message"]["taskId"] = id.clone();
        let refused = rpc(&server, "slow", &alice, "SendMessage", stray).await;
        assert_eq!(refused["error"]["code"], -32004, "{refused}");
        let said = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(said.contains("metadata.followUp"), "{refused}");
        let mut second = message("w-2", "Second thought.");
        second["message"]["taskId"] = id.clone();
        second["message"]["metadata"] = json!({"followUp": true});
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

#[tokio::test]
async fn a_context_holds_one_task_per_session() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let ask = |id: &str, text: &str| {
            let mut m = message(id, text);
            m["message"]["contextId"] = json!("ops-7");
            m
        };
        let first = rpc(
            &server,
            "question_gate",
            &alice,
            "SendMessage",
            ask("c-1", "Rotate?"),
        )
        .await;
        let one = first["result"]["task"]["id"].clone();
        let mut answer = message("c-2", "approved");
        answer["message"]["taskId"] = one.clone();
        let done = rpc(&server, "question_gate", &alice, "SendMessage", answer).await;
        assert_eq!(
            done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{done}"
        );
        let between = done["result"]["task"]["status"]["timestamp"].clone();
        // A new message in the same context, without a task id: the thread's next session.
        let second = rpc(
            &server,
            "question_gate",
            &alice,
            "SendMessage",
            ask("c-3", "Reboot?"),
        )
        .await;
        let two = second["result"]["task"]["id"].clone();
        assert_ne!(two, one, "{second}");
        assert_eq!(second["result"]["task"]["contextId"], "ops-7");
        // The example's scripted model answers one session per thread: the second's step
        // fails, which is a FAILED task (its error the status message).
        assert_eq!(
            second["result"]["task"]["status"]["state"], "TASK_STATE_FAILED",
            "{second}"
        );
        let why = second["result"]["task"]["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(why.contains("script exhausted"), "{second}");

        let listed = rpc(
            &server,
            "question_gate",
            &alice,
            "ListTasks",
            json!({"contextId": "ops-7"}),
        )
        .await;
        let ids: Vec<&Value> = listed["result"]["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| &t["id"])
            .collect();
        assert_eq!(ids, [&two, &one], "newest first: {listed}");
        assert_eq!(listed["result"]["totalSize"], 2);
        let done_only = rpc(
            &server,
            "question_gate",
            &alice,
            "ListTasks",
            json!({"contextId": "ops-7", "status": "TASK_STATE_COMPLETED"}),
        )
        .await;
        assert_eq!(done_only["result"]["tasks"][0]["id"], one, "{done_only}");
        assert_eq!(done_only["result"]["totalSize"], 1, "{done_only}");
        let paged = rpc(
            &server,
            "question_gate",
            &alice,
            "ListTasks",
            json!({"contextId": "ops-7", "pageSize": 1}),
        )
        .await;
        assert_eq!(paged["result"]["tasks"][0]["id"], two, "{paged}");
        let token = paged["result"]["nextPageToken"].clone();
        assert_ne!(token, json!(""), "{paged}");
        let rest = rpc(
            &server,
            "question_gate",
            &alice,
            "ListTasks",
            json!({"contextId": "ops-7", "pageSize": 1, "pageToken": token}),
        )
        .await;
        assert_eq!(rest["result"]["tasks"][0]["id"], one, "{rest}");
        assert_eq!(rest["result"]["nextPageToken"], "", "the last page: {rest}");
        // The first task ended before `between`... so only the second changed after it.
        let after = rpc(
            &server,
            "question_gate",
            &alice,
            "ListTasks",
            json!({"contextId": "ops-7", "statusTimestampAfter": between}),
        )
        .await;
        let recent: Vec<&Value> = after["result"]["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| &t["id"])
            .collect();
        assert_eq!(recent, [&two], "{after}");
        // The first task is still there to read, and takes no more messages.
        let old = rpc(
            &server,
            "question_gate",
            &alice,
            "GetTask",
            json!({"id": one}),
        )
        .await;
        assert_eq!(
            old["result"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{old}"
        );
        server.stop().await;
    }
}
