//! duet's agents over A2A 1.0, on both backends: the official Python SDK drives the approval
//! gate on both bindings (`tests/clients/a2a_duet_client.py`), and the JS SDK sends, streams,
//! gets and cancels (`tests/clients/a2a_duet_client.mjs`); a principal's tasks are its
//! own; a thread waiting on a child that awaits a person stays WORKING; a client that leaves a
//! stream does not stop the run; an answer someone gave first is refused; a message sent again
//! writes nothing.

use serde_json::{Value, json};

use crate::harness::{Server, Sse, a2a_message as message, options, send, until};
use crate::support;

/// A JSON-RPC call to `/a2a/{agent}`: the `result`, or the `error`.
async fn rpc(
    server: &Server,
    agent: &str,
    token: &str,
    method: &str,
    params: Value,
) -> Result<Value, Value> {
    let body = crate::harness::a2a(server, agent, token, method, params).await;
    match body.get("error") {
        Some(e) => Err(e.clone()),
        None => Ok(body["result"].clone()),
    }
}

/// A streaming JSON-RPC call: the SSE stream.
async fn stream(server: &Server, agent: &str, token: &str, method: &str, params: Value) -> Sse {
    let resp = server
        .req(reqwest::Method::POST, &format!("/a2a/{agent}"), token)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("a stream");
    assert_eq!(resp.status(), 200);
    Sse::new(resp)
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

/// The text of each of the client's messages in a task's history, in order.
fn user_texts(task: &Value) -> Vec<&str> {
    task["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "ROLE_USER")
        .filter_map(|m| m["parts"][0]["text"].as_str())
        .collect()
}

/// Reads a stream to its end: the state of each event that has one.
async fn states(mut sse: Sse) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(e) = sse.next().await {
        let r = &e.data["result"];
        let s = r["task"]["status"]["state"]
            .as_str()
            .or(r["statusUpdate"]["status"]["state"].as_str());
        if let Some(s) = s {
            out.push(s.to_owned());
        }
    }
    out
}

/// Whether an official client is installed; when not, the test says SKIPPED, or fails under
/// `DUET_REQUIRE_A2A` (CI).
fn installed(present: bool, what: &str) -> bool {
    if !present {
        assert!(
            std::env::var_os("DUET_REQUIRE_A2A").is_none(),
            "DUET_REQUIRE_A2A is set but {what} is not installed (scripts/test-servers installs it)"
        );
        eprintln!("SKIPPED: {what} is not installed (scripts/test-servers installs it)");
    }
    present
}

/// Runs `program script BASE KEY extra…` against a fresh server on every backend: it must
/// exit 0 and say "all checks passed".
async fn drive(program: &str, script: &str, extra: &[&std::path::Path]) {
    let script = support::repo().join(script);
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let out = tokio::process::Command::new(program)
            .arg(&script)
            .arg(&server.base)
            .arg(&alice)
            .args(extra)
            .output()
            .await
            .expect("the client runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("all checks passed"),
            "{backend:?}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn the_python_sdk_drives_an_question_gate_over_both_bindings() {
    let present = std::process::Command::new("python3")
        .args(["-c", "import a2a.client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if installed(present, "a2a-sdk (python3 cannot import it)") {
        drive(
            "python3",
            "crates/cli/tests/clients/a2a_duet_client.py",
            &[],
        )
        .await;
    }
}

#[tokio::test]
async fn the_js_sdk_sends_streams_gets_and_cancels_over_both_bindings() {
    let modules = support::repo().join(".ci/node/node_modules");
    let present = modules.join("@a2a-js/sdk/package.json").exists()
        && std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if installed(present, "@a2a-js/sdk (in .ci/node)") {
        drive(
            "node",
            "crates/cli/tests/clients/a2a_duet_client.mjs",
            &[&modules],
        )
        .await;
    }
}

#[tokio::test]
async fn a_principals_tasks_are_its_own() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let task = rpc(
            &server,
            "question_gate",
            &alice,
            "SendMessage",
            message("a-1", "Rotate?"),
        )
        .await
        .expect("sent")["task"]
            .clone();
        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
        let id = task["id"].as_str().expect("an id");
        let context = task["contextId"].as_str().expect("a context");

        let e = rpc(&server, "question_gate", &bob, "GetTask", json!({"id": id}))
            .await
            .expect_err("hidden");
        assert_eq!(e["code"], -32001, "{e}");
        let e = rpc(
            &server,
            "question_gate",
            &bob,
            "CancelTask",
            json!({"id": id}),
        )
        .await
        .expect_err("hidden");
        assert_eq!(e["code"], -32001, "{e}");
        let listed = rpc(&server, "question_gate", &bob, "ListTasks", json!({}))
            .await
            .expect("listed");
        assert_eq!(listed["tasks"], json!([]), "{listed}");
        assert_eq!(listed["nextPageToken"], "", "{listed}");
        // Bob's own key space: the same context name is a new conversation of his, not Alice's.
        let mut theirs = message("b-1", "Rotate?");
        theirs["message"]["contextId"] = json!(context);
        let bobs = rpc(&server, "question_gate", &bob, "SendMessage", theirs)
            .await
            .expect("his own");
        assert_ne!(bobs["task"]["id"], json!(id));
        assert_eq!(bobs["task"]["contextId"], json!(context));
        // The answer with Alice's task id, from Bob: not found, and Alice's task still waits.
        let mut answer = message("b-2", "approved");
        answer["message"]["taskId"] = json!(id);
        let e = rpc(&server, "question_gate", &bob, "SendMessage", answer)
            .await
            .expect_err("hidden");
        assert_eq!(e["code"], -32001, "{e}");
        let still = rpc(
            &server,
            "question_gate",
            &alice,
            "GetTask",
            json!({"id": id}),
        )
        .await
        .expect("hers");
        assert_eq!(state(&still), "TASK_STATE_INPUT_REQUIRED");

        // No key: 401, but the card is public.
        let (status, _) = send(
            reqwest::Client::new()
                .post(format!("{}/a2a/question_gate", server.base))
                .header("A2A-Version", "1.0")
                .json(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}}),
                ),
        )
        .await;
        assert_eq!(status, 401);
        let card = reqwest::get(format!(
            "{}/a2a/question_gate/.well-known/agent-card.json",
            server.base
        ))
        .await
        .expect("the card");
        assert_eq!(card.status(), 200);
        assert!(card.headers().contains_key("etag"));
        server.stop().await;
    }
}

#[tokio::test]
async fn an_orchestrator_waiting_on_its_gate_stays_working_until_the_person_answers() {
    for backend in support::backends().await {
        let options = duet_server::Options {
            default_agent: Some("orchestrator".into()),
            ..options()
        };
        let server = Server::start_with(&backend, &support::repo(), options).await;
        let alice = server.key("alice", false).await;
        let mut send_now = message("o-1", "Rotate the production keys tonight.");
        send_now["configuration"] = json!({"returnImmediately": true});
        let task = rpc(&server, "orchestrator", &alice, "SendMessage", send_now)
            .await
            .expect("sent")["task"]
            .clone();
        let id = task["id"].as_str().expect("an id").to_owned();
        let context = task["contextId"].as_str().expect("a context").to_owned();
        // Follow the thread until it waits on its gate, then the gate until its proposal waits
        // for a person's decision.
        until(&server, &alice, &context, "waiting").await;
        let (_, parent) = server.get(&format!("/threads/{context}"), &alice).await;
        let child = parent["children"][0]["key"]
            .as_str()
            .expect("the gate's thread")
            .to_owned();
        until(&server, &alice, &child, "waiting").await;
        let now = rpc(
            &server,
            "orchestrator",
            &alice,
            "GetTask",
            json!({"id": id}),
        )
        .await
        .expect("read");
        assert_eq!(state(&now), "TASK_STATE_WORKING", "{now}");
        let subscription = stream(
            &server,
            "orchestrator",
            &alice,
            "SubscribeToTask",
            json!({"id": id}),
        )
        .await;
        let (_, approvals) = server.get("/approvals", &alice).await;
        let approval = approvals["items"][0]["id"]
            .as_str()
            .expect("the gate's proposal")
            .to_owned();
        assert_eq!(approvals["items"][0]["kind"], "tool_call", "{approvals}");
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"decision": "approve"}),
            )
            .await;
        assert!(status == 200 || status == 202, "{body}");
        let seen = states(subscription).await;
        assert_eq!(
            seen.first().map(String::as_str),
            Some("TASK_STATE_WORKING"),
            "{seen:?}"
        );
        assert_eq!(
            seen.last().map(String::as_str),
            Some("TASK_STATE_INPUT_REQUIRED"),
            "{seen:?}"
        );
        let after = rpc(
            &server,
            "orchestrator",
            &alice,
            "GetTask",
            json!({"id": id}),
        )
        .await
        .expect("read");
        let said = after["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            said, "The approver said yes: the key rotation is approved for tonight.",
            "{after}"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn a_client_leaving_a_stream_does_not_stop_the_task() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let mut sse = stream(
            &server,
            "question_gate",
            &alice,
            "SendStreamingMessage",
            message("s-1", "Rotate?"),
        )
        .await;
        let first = sse.next().await.expect("the task");
        let id = first.data["result"]["task"]["id"]
            .as_str()
            .expect("an id")
            .to_owned();
        drop(sse);
        // The run goes on to its question, though the sender left.
        let context = first.data["result"]["task"]["contextId"]
            .as_str()
            .expect("a context")
            .to_owned();
        // Until the run settles either way: an aborted run would leave it idle (with a stop
        // reason), not asking. (A new thread is idle with none before its run starts.)
        let mut events = server
            .events(&format!("/threads/{context}/events"), &alice, None)
            .await;
        while let Some(e) = events.next().await {
            let settled = e.data["status"] == "awaiting_human"
                || (e.data["status"] == "idle" && !e.data["stopReason"].is_null());
            if e.event == "status" && settled {
                assert_eq!(
                    e.data["status"], "awaiting_human",
                    "the run went on: {:?}",
                    e.data
                );
                break;
            }
        }
        let now = rpc(
            &server,
            "question_gate",
            &alice,
            "GetTask",
            json!({"id": id}),
        )
        .await
        .expect("read");
        assert_eq!(state(&now), "TASK_STATE_INPUT_REQUIRED", "{now}");
        let asked = now["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(asked.contains("Do you approve?"), "{now}");
        server.stop().await;
    }
}

#[tokio::test]
async fn an_answer_someone_gave_first_is_refused() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let task = rpc(
            &server,
            "question_gate",
            &alice,
            "SendMessage",
            message("q-1", "Rotate?"),
        )
        .await
        .expect("sent")["task"]
            .clone();
        let id = task["id"].as_str().expect("an id").to_owned();
        let (_, approvals) = server.get("/approvals", &alice).await;
        let approval = approvals["items"][0]["id"]
            .as_str()
            .expect("the question")
            .to_owned();
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}?wait=true"),
                &alice,
                json!({"text": "rejected"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let mut late = message("q-2", "approved");
        late["message"]["taskId"] = json!(id);
        let e = rpc(&server, "question_gate", &alice, "SendMessage", late)
            .await
            .expect_err("too late");
        assert_eq!(e["code"], -32004, "{e}");
        let done = rpc(
            &server,
            "question_gate",
            &alice,
            "GetTask",
            json!({"id": id}),
        )
        .await
        .expect("read");
        assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
        // The first answer is the one in the task's history; the late one is not there.
        let answers = user_texts(&done);
        assert_eq!(answers, ["Rotate?", "rejected"], "{done}");
        assert_eq!(done["artifacts"][0]["name"], "result", "{done}");
        server.stop().await;
    }
}

/// A message sent again to the task parked at a question (its id delivered already) is no
/// answer: nothing is written and the task comes back as it stands; the answer that follows
/// completes it, and that answer sent again replays the completed task.
#[tokio::test]
async fn a_message_sent_again_to_a_waiting_task_writes_nothing() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let call = |params: Value| rpc(&server, "question_gate", &alice, "SendMessage", params);
        let task = call(message("r-1", "Rotate?")).await.expect("sent")["task"].clone();
        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
        let id = task["id"].as_str().expect("an id").to_owned();
        let to_task = |mut m: Value| {
            m["message"]["taskId"] = json!(id);
            m
        };
        let again = call(to_task(message("r-1", "Rotate?")))
            .await
            .expect("a replay is no error")["task"]
            .clone();
        assert_eq!(state(&again), "TASK_STATE_INPUT_REQUIRED", "{again}");
        let done = call(to_task(message("r-2", "approved")))
            .await
            .expect("answered")["task"]
            .clone();
        assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
        let replayed = call(to_task(message("r-2", "approved")))
            .await
            .expect("a replay is no error")["task"]
            .clone();
        assert_eq!(state(&replayed), "TASK_STATE_COMPLETED", "{replayed}");
        let read = rpc(
            &server,
            "question_gate",
            &alice,
            "GetTask",
            json!({"id": id}),
        )
        .await
        .expect("read");
        let said = user_texts(&read);
        assert_eq!(said, ["Rotate?", "approved"], "{read}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_subscriber_on_another_process_follows_the_task_to_its_end() {
    for backend in support::backends().await {
        if !matches!(backend, support::Backend::Postgres(_)) {
            continue; // one process per SQLite file: its change feed is in-process
        }
        let one = Server::start(&backend).await;
        let two = Server::start(&backend).await;
        let alice = one.key("alice", false).await;
        let task = rpc(
            &one,
            "question_gate",
            &alice,
            "SendMessage",
            message("x-1", "Rotate?"),
        )
        .await
        .expect("sent")["task"]
            .clone();
        let id = task["id"].as_str().expect("an id").to_owned();
        let mut subscription = stream(
            &two,
            "question_gate",
            &alice,
            "SubscribeToTask",
            json!({"id": id}),
        )
        .await;
        let first = subscription.next().await.expect("the snapshot");
        assert_eq!(
            first.data["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{:?}",
            first.data
        );
        let mut answer = message("x-2", "approved");
        answer["message"]["taskId"] = json!(id);
        let done = rpc(&one, "question_gate", &alice, "SendMessage", answer)
            .await
            .expect("answered");
        assert_eq!(
            done["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{done}"
        );
        let seen = states(subscription).await;
        assert_eq!(
            seen.last().map(String::as_str),
            Some("TASK_STATE_COMPLETED"),
            "{seen:?}"
        );
        two.stop().await;
        one.stop().await;
    }
}
