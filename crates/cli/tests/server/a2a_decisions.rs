//! Tool calls that wait for a person's decision, over A2A (issue #29), on every backend: the
//! task is `INPUT_REQUIRED` with the pending calls in a data part; a data part of decisions
//! answers them (approve, reject with a reason, edit), and the task goes on to complete; words,
//! an unknown id, a second decision, a bad edit and a batch with one bad item are refused with
//! nothing written. The official Python client drives the same desk on both bindings
//! (`tests/clients/a2a_approvals_client.py`).

use serde_json::{Value, json};

use crate::harness::{Server, Sse, options};
use crate::support;

/// A desk (exposed over A2A) whose model calls `refund` twice at once (both need approval),
/// then once more, then closes the session; and a chat agent with no such tool.
fn project() -> support::Scratch {
    let p = support::Scratch::new("a2a-decisions");
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nexposeAsTool: true\ntoolDescription: Refunds orders, with a person's approval.\n\
         sideA: { prompt: desk, sessionStop: { name: close, messageProperty: summary } }\n\
         sideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund, close]\n",
    );
    p.write(
        "agents/tools/refund.yaml",
        "description: Refunds an order.\n\
         args: { type: object, properties: { order: { type: string }, amount: { type: number, description: In euros. } }, required: [order, amount] }\n\
         result: \"refunded {{order}}: {{amount}}\"\n\
         approval: { decisions: [approve, edit, reject], remember: [session] }\n",
    );
    p.write(
        "agents/tools/close.yaml",
        "description: Ends the session.\nargs: { type: object, properties: { summary: { type: string } }, required: [summary] }\nresult: closed\n",
    );
    p.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n\
         \x20 - text: Two refunds to make.\n\
         \x20   tool_calls: [{ name: refund, arguments: { order: A1, amount: 250 } }, { name: refund, arguments: { order: B2, amount: 999 } }]\n\
         \x20 - tool_calls: [{ name: refund, arguments: { order: C3, amount: 40 } }]\n\
         \x20 - tool_calls: [{ name: close, arguments: { summary: Refunds handled. } }]\n",
    );
    p.write(
        "agents/agents/chat.yaml",
        "name: chat\nexposeAsTool: true\ntoolDescription: Chats.\nsideA: { prompt: chat }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/chat.yaml",
        "name: chat\ntoolDescription: d\nmodel: q\nincludeChat: true\nprompt: p\n",
    );
    p.write(
        "agents/models/q.yaml",
        "name: q\nprovider: scripted\nmodel: demo\nscript:\n  - text: Hello.\n",
    );
    p
}

/// A JSON-RPC call to the desk: the `result` (a `SendMessage`'s task), or the `error`.
async fn rpc(server: &Server, token: &str, method: &str, params: Value) -> Result<Value, Value> {
    let body = crate::harness::a2a(server, "desk", token, method, params).await;
    match body.get("error") {
        Some(e) => Err(e.clone()),
        None if method == "SendMessage" => Ok(body["result"]["task"].clone()),
        None => Ok(body["result"].clone()),
    }
}

/// A message with `parts`, to `task` (or, without, to context `context`).
fn message(id: &str, task: Option<&str>, context: Option<&str>, parts: Value) -> Value {
    let mut m = json!({"messageId": id, "role": "ROLE_USER", "parts": parts});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    if let Some(c) = context {
        m["contextId"] = json!(c);
    }
    json!({ "message": m })
}

fn decisions(items: Value) -> Value {
    json!([{ "data": { "decisions": items } }])
}

/// The calls a task's status lists as waiting (its `duet.approvals` data part).
fn pending(task: &Value) -> Vec<Value> {
    task["status"]["message"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["data"]["kind"] == "duet.approvals")
        .flat_map(|p| {
            p["data"]["approvals"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// An error's `BadRequest` field violations (field names) and its `ErrorInfo` metadata.
fn detail(err: &Value) -> (Vec<String>, Value) {
    let data = err["data"].as_array().cloned().unwrap_or_default();
    let fields = data
        .iter()
        .flat_map(|d| d["fieldViolations"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v["field"].as_str().map(str::to_owned))
        .collect();
    let meta = data
        .iter()
        .find(|d| d["reason"].is_string())
        .map(|d| d["metadata"].clone())
        .unwrap_or(Value::Null);
    (fields, meta)
}

/// What is written for thread `key`: its messages, and each approval's decision.
async fn written(server: &Server, token: &str, key: &str, ids: &[&str]) -> Value {
    let (status, page) = server
        .get(&format!("/threads/{key}/messages?limit=500"), token)
        .await;
    assert_eq!(status, 200, "{page}");
    let mut decided = Vec::new();
    for id in ids {
        let (status, one) = server.get(&format!("/approvals/{id}"), token).await;
        assert_eq!(status, 200, "{one}");
        decided.push(one["decided"].clone());
    }
    json!({"messages": page["items"], "decided": decided})
}

#[tokio::test]
async fn pending_calls_are_input_required_and_decided_with_a_data_part() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;

        // The cards: the desk takes (and gives) JSON; an agent with no such tool, text.
        let (_, card) = server
            .get("/a2a/desk/.well-known/agent-card.json", &alice)
            .await;
        assert!(
            card["defaultInputModes"]
                .as_array()
                .is_some_and(|m| m.contains(&json!("application/json"))),
            "{at}: {card}"
        );
        let (_, chat) = server
            .get("/a2a/chat/.well-known/agent-card.json", &alice)
            .await;
        assert_eq!(chat["defaultInputModes"], json!(["text/plain"]), "{at}");

        let asked = rpc(
            &server,
            &alice,
            "SendMessage",
            message(
                "m1",
                None,
                Some("c1"),
                json!([{"text": "refund A1 and B2"}]),
            ),
        )
        .await
        .expect("sent");
        assert_eq!(
            asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{at}: {asked}"
        );
        let task = asked["id"].as_str().expect("task id").to_owned();
        let parts = &asked["status"]["message"]["parts"];
        assert!(
            parts[0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("refund")),
            "{at}: a text part says what is asked: {parts}"
        );
        assert_eq!(parts[1]["mediaType"], "application/json", "{at}: {parts}");
        let calls = pending(&asked);
        assert_eq!(calls.len(), 2, "{at}: {asked}");
        assert_eq!(calls[0]["tool"], "refund");
        assert_eq!(calls[0]["arguments"], json!({"order": "A1", "amount": 250}));
        assert_eq!(calls[1]["arguments"]["order"], "B2");
        assert_eq!(calls[0]["decisions"], json!(["approve", "edit", "reject"]));
        assert_eq!(calls[0]["remember"], json!(["session"]));
        assert_eq!(calls[0]["description"], "Refunds an order.");
        assert_eq!(
            calls[0]["schema"]["properties"]["amount"]["description"],
            "In euros."
        );
        let (a1, b2) = (
            calls[0]["id"].as_str().expect("id").to_owned(),
            calls[1]["id"].as_str().expect("id").to_owned(),
        );
        // The id is the one `/approvals` lists.
        let (status, listed) = server.get(&format!("/approvals/{a1}"), &alice).await;
        assert_eq!(status, 200, "{at}: {listed}");
        assert_eq!(listed["arguments"]["order"], "A1", "{at}");
        let got = rpc(&server, &alice, "GetTask", json!({"id": task}))
            .await
            .expect("got");
        assert_eq!(got["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{at}");
        let listed = rpc(
            &server,
            &alice,
            "ListTasks",
            json!({"status": "TASK_STATE_INPUT_REQUIRED"}),
        )
        .await
        .expect("listed");
        assert_eq!(listed["tasks"][0]["id"], task.as_str(), "{at}: {listed}");

        // Refused, each with nothing written.
        let before = written(&server, &alice, "c1", &[&a1, &b2]).await;
        let unknown = format!("{}:999", a1.rsplit_once(':').expect("id").0);
        let cases: Vec<(Value, i64, &str)> = vec![
            // Words are no decision, with the task's id or its context's.
            (
                message("r1", Some(&task), None, json!([{"text": "approve"}])),
                -32602,
                "message.parts",
            ),
            (
                message("r2", None, Some("c1"), json!([{"text": "yes, both"}])),
                -32602,
                "message.parts",
            ),
            (
                message(
                    "r3",
                    Some(&task),
                    None,
                    decisions(json!([{"id": unknown, "decision": "approve"}])),
                ),
                -32602,
                "message.parts[0].data.decisions[0].id",
            ),
            (
                message(
                    "r4",
                    Some(&task),
                    None,
                    decisions(json!([{"id": "nope", "decision": "approve"}])),
                ),
                -32602,
                "message.parts[0].data.decisions[0].id",
            ),
            (
                message(
                    "r5",
                    Some(&task),
                    None,
                    decisions(
                        json!([{"id": a1, "decision": "edit", "args": {"order": "A1", "amount": "lots"}}]),
                    ),
                ),
                -32602,
                "message.parts[0].data.decisions[0].args.amount",
            ),
            // One bad item: the good one before it is not stored either.
            (
                message(
                    "r6",
                    Some(&task),
                    None,
                    decisions(
                        json!([{"id": a1, "decision": "approve"}, {"id": b2, "decision": "respond", "text": "x"}]),
                    ),
                ),
                -32602,
                "message.parts[0].data.decisions[1].decision",
            ),
            (
                message(
                    "r7",
                    Some(&task),
                    None,
                    decisions(
                        json!([{"id": a1, "decision": "approve"}, {"id": a1, "decision": "reject"}]),
                    ),
                ),
                -32602,
                "message.parts[0].data.decisions[1].id",
            ),
            (
                message(
                    "r8",
                    Some(&task),
                    None,
                    json!([{"text": "and also"}, {"data": {"decisions": [{"id": a1, "decision": "approve"}]}}]),
                ),
                -32602,
                "message.parts[0]",
            ),
            (
                message(
                    "r9",
                    Some(&task),
                    None,
                    decisions(json!([{"id": a1, "decision": "approve", "reason": "x"}])),
                ),
                -32602,
                "message.parts[0].data.decisions[0]",
            ),
            (
                message(
                    "r10",
                    None,
                    Some("c2"),
                    decisions(json!([{"id": a1, "decision": "approve"}])),
                ),
                -32602,
                "message.parts",
            ),
        ];
        for (params, code, field) in cases {
            let err = rpc(&server, &alice, "SendMessage", params.clone())
                .await
                .expect_err("refused");
            assert_eq!(err["code"], code, "{at}: {params} → {err}");
            let (fields, meta) = detail(&err);
            assert_eq!(
                fields.first().map(String::as_str),
                Some(field),
                "{at}: {params} → {err}"
            );
            let words = params["message"]["parts"]
                .as_array()
                .is_some_and(|p| p.len() == 1 && p[0]["text"].is_string());
            if words {
                let named = meta["pendingApprovals"].as_str().unwrap_or_default();
                assert!(named.contains(&a1) && named.contains(&b2), "{at}: {err}");
            }
        }
        assert_eq!(
            written(&server, &alice, "c1", &[&a1, &b2]).await,
            before,
            "{at}: nothing written"
        );

        // Decided first elsewhere (REST): a second decision over A2A is the double-answer
        // refusal, naming the first.
        let (status, body) = server
            .post(
                &format!("/approvals/{a1}?wait=true"),
                &alice,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        let err = rpc(
            &server,
            &alice,
            "SendMessage",
            message(
                "s1",
                Some(&task),
                None,
                decisions(json!([{"id": a1, "decision": "reject"}])),
            ),
        )
        .await
        .expect_err("decided first");
        assert_eq!(err["code"], -32004, "{at}: {err}");
        let (_, meta) = detail(&err);
        assert_eq!(meta["decision"], "approve", "{at}: {err}");
        assert!(
            meta["answeredBy"]
                .as_str()
                .is_some_and(|b| b.contains("alice")),
            "{at}: {err}"
        );
        let still = rpc(&server, &alice, "GetTask", json!({"id": task}))
            .await
            .expect("got");
        assert_eq!(pending(&still).len(), 1, "{at}: B2 still waits: {still}");

        // B2 rejected with a reason: the model goes on and asks about C3.
        let next = rpc(
            &server,
            &alice,
            "SendMessage",
            message(
                "d1",
                Some(&task),
                None,
                decisions(json!([{"id": b2, "decision": "reject", "reason": "too much"}])),
            ),
        )
        .await
        .expect("decided");
        assert_eq!(next["id"], task.as_str(), "{at}");
        assert_eq!(
            next["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{at}: {next}"
        );
        let c3 = pending(&next);
        assert_eq!(c3.len(), 1, "{at}: {next}");
        assert_eq!(c3[0]["arguments"]["order"], "C3", "{at}: {next}");
        let c3 = c3[0]["id"].as_str().expect("id").to_owned();
        // The same message again replays: nothing new.
        let again = rpc(
            &server,
            &alice,
            "SendMessage",
            message(
                "d1",
                Some(&task),
                None,
                decisions(json!([{"id": b2, "decision": "reject", "reason": "too much"}])),
            ),
        )
        .await
        .expect("replayed");
        assert_eq!(pending(&again), pending(&next), "{at}: {again}");

        // C3 edited, streamed: working, then completed with the session's result.
        let resp = server
            .req(reqwest::Method::POST, "/a2a/desk", &alice)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                "params": message("d2", Some(&task), None, decisions(json!([{"id": c3, "decision": "edit", "args": {"order": "C3", "amount": 30}}])))}))
            .send()
            .await
            .expect("a stream");
        assert_eq!(resp.status(), 200, "{at}");
        let mut sse = Sse::new(resp);
        let mut events = Vec::new();
        while let Some(e) = sse.next().await {
            events.push(e.data["result"].clone());
        }
        let last = events.last().cloned().unwrap_or(Value::Null);
        assert_eq!(
            last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{at}: {events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"] == "Refunds handled."),
            "{at}: {events:?}"
        );
        let (_, page) = server.get("/threads/c1/messages?limit=500", &alice).await;
        let mut results: Vec<&str> = page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["data"]["role"] == "tool")
            .filter_map(|m| m["data"]["content"].as_str())
            .collect();
        results.sort_unstable();
        assert_eq!(
            results,
            [
                "A person rejected this call: too much",
                "closed",
                "refunded A1: 250",
                "refunded C3: 30"
            ],
            "{at}: each call got what was decided"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn the_python_sdk_sees_pending_calls_and_decides_them_over_both_bindings() {
    let present = std::process::Command::new("python3")
        .args(["-c", "import a2a.client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        assert!(
            std::env::var_os("DUET_REQUIRE_A2A").is_none(),
            "DUET_REQUIRE_A2A is set but a2a-sdk is not installed (scripts/test-servers installs it)"
        );
        eprintln!("SKIPPED: a2a-sdk (python3 cannot import it)");
        return;
    }
    let script = support::repo().join("crates/cli/tests/clients/a2a_approvals_client.py");
    for backend in support::backends().await {
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let out = tokio::process::Command::new("python3")
            .arg(&script)
            .arg(&server.base)
            .arg(&alice)
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
