//! Tool calls that wait for a person's decision over HTTP (issue #29): `GET /approvals` lists
//! them beside questions (`kind`), `POST /approvals/{id}` takes `{"decision": …}` (202 once
//! stored, 200 settled with `?wait=true`, an `Idempotency-Key` retried replays), and
//! `GET /approvals/{id}` shows a decided call with its decision; racing decisions (one applied,
//! one 409 naming it), another principal (404), a bad edit (422 at its field) and hostile
//! bodies (400 problem+json) write nothing. On every backend.

use serde_json::{Value, json};

use crate::harness::{Server, options};
use crate::support;

/// A desk whose model calls `refund` (always needing approval), then says `Done.`.
fn project() -> support::Scratch {
    let p = support::Scratch::new("tool-approvals");
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    p.write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string }, amount: { type: number } }, required: [order, amount] }\nresult: \"refunded {{order}}\"\napproval: { decisions: [approve, edit, reject], approvers: { roles: [refunds], principals: [alice] } }\n",
    );
    p.write(
        "agents/agents/chat.yaml",
        "name: chat\nsideA: { prompt: chat }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/agents/gate.yaml",
        "name: gate\nsideA: { prompt: chat }\nsideB: { human: true, approver: true }\n",
    );
    p.write(
        "agents/prompts/chat.yaml",
        "name: chat\ntoolDescription: d\nmodel: q\nincludeChat: true\nprompt: p\n",
    );
    p.write(
        "agents/models/q.yaml",
        "name: q\nprovider: scripted\nmodel: demo\nscript:\n  - text: Which order?\n",
    );
    p.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1, amount: 250 } }]\n  - text: Done.\n",
    );
    p
}

/// Thread `key` of the desk, waiting on its refund: the approval's listing entry.
async fn waiting(server: &Server, token: &str, key: &str) -> Value {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            token,
            json!({"agent": "desk", "key": key, "text": "refund A1"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "waiting", "{body}");
    let (status, list) = server.get("/approvals", token).await;
    assert_eq!(status, 200, "{list}");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["thread"] == key)
        .cloned()
        .unwrap_or_else(|| panic!("{key} is listed: {list}"))
}

async fn messages(server: &Server, token: &str, key: &str) -> Vec<Value> {
    let (status, page) = server
        .get(&format!("/threads/{key}/messages?limit=500"), token)
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| i["data"].clone())
        .collect()
}

#[tokio::test]
async fn a_pending_call_is_listed_and_decided_once_by_racing_callers() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let item = waiting(&server, &alice, "r1").await;
        assert_eq!(item["kind"], "tool_call", "{at}: {item}");
        assert_eq!(item["tool"], "refund");
        assert_eq!(item["arguments"], json!({"order": "A1", "amount": 250}));
        assert_eq!(item["decisions"], json!(["approve", "edit", "reject"]));
        assert_eq!(
            item["approvers"],
            json!({"roles": ["refunds"], "principals": ["alice"]})
        );
        let id = item["id"].as_str().expect("id").to_owned();
        let (status, one) = server.get(&format!("/approvals/{id}"), &alice).await;
        assert_eq!(status, 200, "{at}: {one}");
        assert_eq!(one["call"], item["call"]);

        // Another principal sees nothing of it, and cannot decide it.
        let bob = server.key("bob", false).await;
        let (status, _) = server.get(&format!("/approvals/{id}"), &bob).await;
        assert_eq!(status, 404, "{at}");
        let (status, _) = server
            .post(
                &format!("/approvals/{id}"),
                &bob,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 404, "{at}");

        // Two decisions at once: one is applied, the other is 409 naming it.
        let path = format!("/approvals/{id}?wait=true");
        let (a, b) = tokio::join!(
            server.post(&path, &alice, json!({"decision": "approve"})),
            server.post(&path, &alice, json!({"decision": "reject", "reason": "no"})),
        );
        let (won, lost) = if a.0 == 200 { (a, b) } else { (b, a) };
        assert_eq!(won.0, 200, "{at}: {won:?} {lost:?}");
        assert_eq!(lost.0, 409, "{at}: {lost:?}");
        assert_eq!(lost.1["code"], "already_answered", "{at}: {lost:?}");
        assert_eq!(
            lost.1["decision"]["decision"], won.1["decided"]["decision"],
            "{at}"
        );
        let results: Vec<Value> = messages(&server, &alice, "r1")
            .await
            .into_iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        assert_eq!(results.len(), 1, "{at}: one decision applied: {results:?}");
        let (_, after) = server.get("/threads/r1", &alice).await;
        assert_eq!(after["status"], "awaiting_human", "{at}: {after}");
        assert_eq!(won.1["thread"]["status"], "awaiting_human", "{at}: settled");
        // Decided, it is still found, with its decision as recorded.
        let (status, one) = server.get(&format!("/approvals/{id}"), &alice).await;
        assert_eq!(status, 200, "{at}: {one}");
        assert_eq!(one["kind"], "tool_call", "{at}: {one}");
        assert_eq!(one["arguments"], item["arguments"], "{at}: {one}");
        assert_eq!(one["decided"], won.1["decided"], "{at}: {one}");
        assert!(one["decided"]["author"].is_string(), "{at}: {one}");
        assert!(one["decided"]["at"].is_i64(), "{at}: {one}");
        server.stop().await;
    }
}

#[tokio::test]
async fn refused_decisions_are_problems_and_write_nothing() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let id = waiting(&server, &alice, "r2").await["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let before = messages(&server, &alice, "r2").await;
        let path = format!("/approvals/{id}");
        let cases: [(Value, u16, &str); 10] = [
            (json!({"decision": "veto"}), 400, "invalid_decision"),
            (
                json!({"decision": "respond", "text": "x"}),
                422,
                "invalid_decision",
            ),
            (json!({"decision": "edit"}), 400, "invalid_decision"),
            (
                json!({"decision": "edit", "args": [1]}),
                400,
                "invalid_decision",
            ),
            (
                json!({"decision": "edit", "args": {"order": "A1", "amount": "lots"}}),
                422,
                "invalid_decision",
            ),
            (
                json!({"decision": "approve", "reason": "x"}),
                400,
                "invalid_decision",
            ),
            (
                json!({"decision": "reject", "remember": "thread"}),
                400,
                "invalid_decision",
            ),
            (
                json!({"decision": "approve", "remember": "thread"}),
                422,
                "invalid_decision",
            ),
            (json!({"decision": "approve", "bogus": 1}), 400, ""),
            (json!({"reason": "x"}), 400, "invalid_body"),
        ];
        for (body, want, code) in cases {
            let resp = server
                .req(reqwest::Method::POST, &path, &alice)
                .json(&body)
                .send()
                .await
                .expect("request");
            let status = resp.status().as_u16();
            let ct = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let problem: Value = resp.json().await.unwrap_or(Value::Null);
            assert_eq!(status, want, "{at}: {body} → {problem}");
            assert_eq!(ct, "application/problem+json", "{at}: {body}");
            if !code.is_empty() {
                assert_eq!(problem["code"], code, "{at}: {body} → {problem}");
            }
            if body["args"]["amount"] == "lots" {
                assert_eq!(problem["field"], "/amount", "{at}: {problem}");
            }
        }
        assert_eq!(
            messages(&server, &alice, "r2").await,
            before,
            "{at}: nothing written"
        );
        let (_, after) = server.get("/threads/r2", &alice).await;
        assert_eq!(after["status"], "waiting", "{at}");
        // Still decidable: an edit within the schema runs the tool with it.
        let (status, decided) = server
            .post(
                &format!("{path}?wait=true"),
                &alice,
                json!({"decision": "edit", "args": {"order": "A9", "amount": 1}}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {decided}");
        assert_eq!(
            decided["thread"]["status"], "awaiting_human",
            "{at}: {decided}"
        );
        let results: Vec<Value> = messages(&server, &alice, "r2")
            .await
            .into_iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        assert_eq!(results.len(), 1, "{at}");
        assert_eq!(results[0]["content"], "refunded A9", "{at}: {results:?}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_decision_is_stored_before_the_answer_and_a_retried_key_replays() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let id = waiting(&server, &alice, "r3").await["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let decide = |path: String, key: &'static str, body: Value| {
            let req = server
                .req(reqwest::Method::POST, &path, &alice)
                .header("Idempotency-Key", key)
                .json(&body);
            async move {
                let resp = req.send().await.expect("request");
                let status = resp.status().as_u16();
                let header = |name: &str| {
                    resp.headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned()
                };
                let (location, replayed) = (header("location"), header("idempotent-replayed"));
                let body: Value = resp.json().await.unwrap_or(Value::Null);
                (status, location, replayed, body)
            }
        };
        let reject = json!({"decision": "reject", "reason": "too much"});
        let path = format!("/approvals/{id}");

        // Without `wait`: 202 once the decision is stored, with where to follow the thread.
        let (status, location, replayed, first) =
            decide(path.clone(), "decide-1", reject.clone()).await;
        assert_eq!(status, 202, "{at}: {first}");
        assert_eq!(location, "/threads/r3", "{at}");
        assert_eq!(replayed, "", "{at}");
        assert_eq!(first["id"], id.as_str(), "{at}: {first}");
        assert_eq!(first["thread"], "r3", "{at}: {first}");
        assert_eq!(first["decided"]["decision"], "reject", "{at}: {first}");
        assert_eq!(first["decided"]["reason"], "too much", "{at}: {first}");
        assert_eq!(first["decided"]["messageId"], "decide-1", "{at}: {first}");
        assert!(
            ["accepted", "queued"].contains(&first["delivery"].as_str().unwrap_or_default()),
            "{at}: {first}"
        );
        assert!(
            first["events"]
                .as_str()
                .is_some_and(|e| e.starts_with("/threads/r3/events?after=")),
            "{at}: {first}"
        );
        crate::harness::until(&server, &alice, "r3", "awaiting_human").await;
        let before = messages(&server, &alice, "r3").await;
        let results: Vec<&Value> = before.iter().filter(|m| m["role"] == "tool").collect();
        assert_eq!(results.len(), 1, "{at}: {results:?}");
        assert!(
            results[0]["content"]
                .as_str()
                .is_some_and(|c| c.contains("too much")),
            "{at}: the model saw the reason: {results:?}"
        );

        // The same key again (with `wait`, even with another decision): the first replayed,
        // nothing written.
        for body in [reject, json!({"decision": "approve"})] {
            let (status, _, replayed, again) =
                decide(format!("{path}?wait=true"), "decide-1", body).await;
            assert_eq!(status, 200, "{at}: {again}");
            assert_eq!(replayed, "true", "{at}");
            assert_eq!(again["decided"], first["decided"], "{at}: {again}");
            assert_eq!(again["thread"]["status"], "awaiting_human", "{at}: {again}");
        }
        assert_eq!(messages(&server, &alice, "r3").await, before, "{at}");

        // Another key: refused, naming the first; nothing written.
        let (status, _, _, late) =
            decide(path.clone(), "decide-2", json!({"decision": "approve"})).await;
        assert_eq!(status, 409, "{at}: {late}");
        assert_eq!(late["code"], "already_answered", "{at}: {late}");
        assert_eq!(late["decision"]["decision"], "reject", "{at}: {late}");
        assert_eq!(messages(&server, &alice, "r3").await, before, "{at}");

        // The decided call, with its decision.
        let (status, one) = server.get(&path, &alice).await;
        assert_eq!(status, 200, "{at}: {one}");
        assert_eq!(one["decided"], first["decided"], "{at}: {one}");

        // A key that brought the thread's first message is no decision's: refused, nothing
        // written, and the call still waits.
        let (status, body) = crate::harness::send(
            server
                .req(reqwest::Method::POST, "/threads?wait=true", &alice)
                .header("Idempotency-Key", "r4-create")
                .json(&json!({"agent": "desk", "key": "r4", "text": "refund A1"})),
        )
        .await;
        assert_eq!(status, 200, "{at}: {body}");
        let r4 = body["id"].as_str().expect("thread id").to_owned();
        let (_, list) = server.get("/approvals", &alice).await;
        let id4 = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["thread"] == "r4")
            .and_then(|i| i["id"].as_str())
            .unwrap_or_else(|| panic!("{at}: r4 waits: {list}"))
            .to_owned();
        assert!(id4.starts_with(&r4), "{at}: {id4}");
        let before = messages(&server, &alice, "r4").await;
        let (status, _, _, refused) = decide(
            format!("/approvals/{id4}"),
            "r4-create",
            json!({"decision": "approve"}),
        )
        .await;
        assert_eq!(status, 422, "{at}: {refused}");
        assert_eq!(refused["code"], "invalid_decision", "{at}: {refused}");
        assert_eq!(messages(&server, &alice, "r4").await, before, "{at}");
        let (status, listed) = server.get(&format!("/approvals/{id4}"), &alice).await;
        assert_eq!(status, 200, "{at}: {listed}");
        assert!(listed.get("decided").is_none(), "{at}: {listed}");
        server.stop().await;
    }
}

/// Every page of `/approvals{query}` (one item a page): `(thread, kind)` in order.
async fn listed(server: &Server, token: &str, query: &str) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut path = format!("/approvals?limit=1{query}");
    loop {
        let (status, page) = server.get(&path, token).await;
        assert_eq!(status, 200, "{page}");
        for item in page["items"].as_array().into_iter().flatten() {
            seen.push((
                item["thread"].as_str().unwrap_or_default().to_owned(),
                item["kind"].as_str().unwrap_or_default().to_owned(),
            ));
        }
        match page["nextCursor"].as_str() {
            Some(c) => path = format!("/approvals?limit=1{query}&cursor={c}"),
            None => break,
        }
    }
    seen
}

#[tokio::test]
async fn approvals_are_listed_a_page_at_a_time_and_chats_only_when_asked_for() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        // A chat waiting for its user's next line, a tool call, a question of an approver.
        for (agent, key) in [
            ("chat", "q1"),
            ("chat", "q2"),
            ("desk", "t1"),
            ("gate", "g1"),
        ] {
            let (status, body) = server
                .post(
                    "/threads?wait=true",
                    &alice,
                    json!({"agent": agent, "key": key, "text": "hi"}),
                )
                .await;
            assert_eq!(status, 200, "{at}: {body}");
        }
        let pair = |t: &str, k: &str| (t.to_owned(), k.to_owned());
        assert_eq!(
            listed(&server, &alice, "").await,
            vec![pair("t1", "tool_call"), pair("g1", "question")],
            "{at}: approvals only"
        );
        assert_eq!(
            listed(&server, &alice, "&all=true").await,
            vec![
                pair("q1", "question"),
                pair("q2", "question"),
                pair("t1", "tool_call"),
                pair("g1", "question")
            ],
            "{at}: every thread waiting for a person"
        );
        assert_eq!(
            listed(&server, &alice, "&order=newest").await,
            vec![pair("g1", "question"), pair("t1", "tool_call")],
            "{at}"
        );
        server.stop().await;
    }
}

/// The events of `POST /agents/desk/invoke` with `body`, to the terminal one.
async fn invoke(server: &Server, token: &str, body: Value) -> Vec<Value> {
    let resp = server
        .req(reqwest::Method::POST, "/agents/desk/invoke", token)
        .json(&body)
        .send()
        .await
        .expect("invoke");
    assert_eq!(resp.status(), 200);
    let mut sse = crate::harness::Sse::new(resp);
    let mut events = Vec::new();
    while let Some(e) = sse.next().await {
        events.push(e.data);
    }
    events
}

#[tokio::test]
async fn an_invoke_carries_decisions_in_either_body_shape() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        for (key, nested) in [("i1", false), ("i2", true)] {
            let parked = invoke(
                &server,
                &alice,
                json!({"session": key, "text": "refund A1"}),
            )
            .await;
            let done = parked.last().expect("terminal");
            assert_eq!(done["data"]["status"], "waiting", "{at}: {done}");
            let id = done["data"]["approvals"][0]["id"].clone();
            let decisions =
                json!([{"id": id, "decision": "edit", "args": {"order": "A9", "amount": 1}}]);
            let body = if nested {
                json!({"scope": {"session": key}, "prompt": {"decisions": decisions}})
            } else {
                json!({"session": key, "decisions": decisions})
            };
            let events = invoke(&server, &alice, body.clone()).await;
            let done = events.last().expect("terminal");
            assert_eq!(done["type"], "completed", "{at}: {events:?}");
            assert_eq!(done["data"]["decided"], json!([id]), "{at}: {done}");
            assert_eq!(done["data"]["status"], "awaiting_human", "{at}: {done}");
            assert!(
                events.iter().any(|e| e["type"] == "tool_ended"
                    && e["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("refunded A9"))),
                "{at}: the edited call ran: {events:?}"
            );
            // Again: the first decision won.
            let again = invoke(&server, &alice, body).await;
            let last = again.last().expect("terminal");
            assert_eq!(last["type"], "failed", "{at}: {last}");
            assert_eq!(last["code"], "already_answered", "{at}: {last}");
        }
        // A decision field the wire does not know is a 400, as any unknown field.
        let (status, problem) = server
            .post(
                "/agents/desk/invoke",
                &alice,
                json!({"session": "i1", "decisions": [{"id": "1:3", "decision": "approve", "why": "x"}]}),
            )
            .await;
        assert_eq!(status, 400, "{at}: {problem}");
        server.stop().await;
    }
}
