//! The session control plane over HTTP, as fastagent's clients drive it (a port of its
//! `test/control-http.test.ts`): auth fails closed on every route, capabilities / state /
//! entries / dispatch answer in fastagent's shapes (a malformed command is a 200
//! `invalid_command`), events stream live in the `{sessionId, epoch, seq, event}` envelope,
//! another principal's session reads as absent; and the Agent Handler conformance over
//! `POST /control/invoke` (SPEC MUSTs 1, 2, 3 and 6, the JSON round trip) with `session_busy`.

use serde_json::{Value, json};

use crate::harness::{Event, Server, Sse};
use crate::support;

/// The agents: `completes` answers once, `fails` has one answer (a second turn fails),
/// `twice` answers twice, `tools` calls a tool, `slow` takes a minute (it is aborted), `steered`
/// calls a tool slowly and then answers.
fn project() -> support::Scratch {
    let p = support::Scratch::new("control");
    for (name, script) in [
        ("completes", "  - text: hello over the wire\n"),
        ("fails", "  - text: only once\n"),
        ("twice", "  - text: first\n  - text: second\n"),
        (
            "tools",
            "  - tool_calls: [{ name: note, arguments: { n: 1 } }]\n  - text: noted it\n",
        ),
        ("slow", "  - { text: never, delayMs: 60000 }\n"),
        (
            "steered",
            "  - { tool_calls: [{ name: note }], delayMs: 2500 }\n  - text: after the steer\n",
        ),
    ] {
        p.write(
            &format!("agents/agents/{name}.yaml"),
            &format!("name: {name}\nsideA: {{ prompt: {name} }}\nsideB: {{ human: true }}\n"),
        );
        p.write(
            &format!("agents/prompts/{name}.yaml"),
            &format!(
                "name: {name}\ntoolDescription: d\nmodel: {name}_model\nincludeChat: true\nprompt: p\ntools: [note]\n"
            ),
        );
        p.write(
            &format!("agents/models/{name}_model.yaml"),
            &format!("name: {name}_model\nprovider: scripted\nmodel: demo\nscript:\n{script}"),
        );
    }
    p.write(
        "agents/tools/note.yaml",
        "description: Notes.\nargs: { type: object, properties: { n: { type: integer } } }\nresult: noted\n",
    );
    p
}

fn options() -> duet_server::Options {
    duet_server::Options {
        default_agent: Some("completes".into()),
        ..crate::harness::options()
    }
}

async fn start(backend: &support::Backend, project: &support::Scratch) -> Server {
    Server::start_with(backend, project.root(), options()).await
}

/// `POST path` with `body`, read as SSE.
async fn stream(server: &Server, path: &str, token: &str, body: Value) -> Sse {
    let resp = server
        .req(reqwest::Method::POST, path, token)
        .json(&body)
        .send()
        .await
        .expect("invoke request");
    assert_eq!(resp.status(), 200, "{path}");
    Sse::new(resp)
}

/// Every AgentEvent of one invoke, to its end.
async fn invoke(server: &Server, path: &str, token: &str, session: &str, text: &str) -> Vec<Value> {
    let mut sse = stream(
        server,
        path,
        token,
        json!({"session": session, "text": text}),
    )
    .await;
    let mut events = Vec::new();
    while let Some(e) = sse.next().await {
        events.push(e.data);
    }
    events
}

fn terminal(e: &Value) -> bool {
    matches!(e["type"].as_str(), Some("completed" | "failed"))
}

/// The session's control events, as `SessionEvent`s, until (and with) the first `type`.
async fn until_type(events: &mut Sse, kind: &str) -> Vec<Value> {
    events
        .until(|e: &Event| e.data["event"]["type"] == kind)
        .await
        .into_iter()
        .map(|e| e.data)
        .collect()
}

fn event_types(wire: &[Value]) -> Vec<&str> {
    wire.iter()
        .filter_map(|w| w["event"]["type"].as_str())
        .collect()
}

async fn dispatch(server: &Server, token: &str, session: &str, command: Value) -> Value {
    let (status, result) = server
        .post(
            "/control/dispatch",
            token,
            json!({"session": session, "command": command}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    result
}

const ROUTES: &[(&str, &str)] = &[
    ("GET", "capabilities"),
    ("GET", "commands"),
    ("GET", "state"),
    ("GET", "entries"),
    ("POST", "dispatch"),
    ("GET", "events"),
    ("POST", "invoke"),
];

#[tokio::test]
async fn every_control_route_fails_closed_without_a_valid_key() {
    let project = project();
    let backend = support::backends().await.remove(0);
    let server = start(&backend, &project).await;
    for prefix in ["", "/agents/completes"] {
        for (method, route) in ROUTES {
            let path = format!("{prefix}/control/{route}?session=s");
            for token in ["", "duet_wrong_key"] {
                let req = server.req(method.parse().expect("method"), &path, token);
                // As fastagent's test sends it: `{}` with no `Content-Type`.
                let req = if *method == "POST" {
                    req.body("{}")
                } else {
                    req
                };
                let (status, body) = crate::harness::send(req).await;
                assert_eq!(status, 401, "{method} {path} with {token:?}: {body}");
            }
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn capabilities_commands_state_entries_and_dispatch_answer_in_fastagents_shapes() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        let events = invoke(&server, "/control/invoke", &token, "sW", "hi").await;
        assert_eq!(events.last().map(|e| &e["type"]), Some(&json!("completed")));

        let (status, caps) = server.get("/control/capabilities", &token).await;
        assert_eq!(status, 200);
        assert_eq!(
            caps,
            json!({"steering": true, "followUp": true, "manualCompaction": false,
                "modelSelection": false, "thinkingLevel": false, "navigate": false,
                "toolProgress": false, "usage": false})
        );
        assert_eq!(server.get("/control/commands", &token).await.1, json!([]));

        let (status, entries) = server.get("/control/entries?session=sW", &token).await;
        assert_eq!(status, 200, "{entries}");
        let list = entries["entries"].as_array().expect("entries").clone();
        let kinds: Vec<&str> = list.iter().filter_map(|e| e["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "session_started",
                "user",
                "turn_completed",
                "assistant",
                "turn_completed",
                "stopped"
            ]
        );
        assert_eq!(list[1]["data"]["text"], "hi");
        assert_eq!(list[3]["data"]["text"], "hello over the wire");
        assert_eq!(list[5]["data"]["status"], "awaiting_human");
        for pair in list.windows(2) {
            assert_eq!(pair[1]["parentId"], pair[0]["id"], "{entries}");
        }
        assert!(list[0].get("parentId").is_none());
        assert_eq!(entries["leafEntryId"], list.last().expect("one")["id"]);
        // The cursor round-trips through the query string; one the journal lacks gives it all.
        let since = list[0]["id"].as_str().expect("id");
        let after = server
            .get(
                &format!("/control/entries?session=sW&since={since}"),
                &token,
            )
            .await
            .1;
        assert_eq!(
            after["entries"].as_array().map(|a| &a[..]),
            Some(&list[1..])
        );
        let unknown = server
            .get("/control/entries?session=sW&since=nope", &token)
            .await
            .1;
        assert_eq!(unknown["entries"], json!(list));

        let (_, state) = server.get("/control/state?session=sW", &token).await;
        assert_eq!(
            state,
            json!({"status": "idle", "pending": {"steering": 0, "followUp": 0},
                "leafEntryId": entries["leafEntryId"]})
        );
        // A session that does not exist reads as empty, not as an error.
        let (status, state) = server.get("/control/state?session=nobody", &token).await;
        assert_eq!(
            (status, state),
            (
                200,
                json!({"status": "idle", "pending": {"steering": 0, "followUp": 0}})
            )
        );
        assert_eq!(
            server
                .get("/control/entries?session=nobody", &token)
                .await
                .1,
            json!({"entries": []})
        );
        let (status, problem) = server.get("/control/state", &token).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (400, Some("missing_session"))
        );

        // Dispatch: rejections before acceptance, in the SessionResult shape.
        let idle = dispatch(
            &server,
            &token,
            "sW",
            json!({"type": "steer", "prompt": {"text": "x"}}),
        )
        .await;
        assert_eq!(idle["ok"], false);
        assert_eq!(idle["error"]["code"], "no_active_run");
        assert_eq!(idle["error"]["retryable"], false);
        assert!(idle["error"]["message"].is_string());
        for command in [
            json!({"type": "set_thinking", "level": "low"}),
            json!({"type": "set_model", "model": "x"}),
            json!({"type": "compact"}),
            json!({"type": "navigate", "targetId": since}),
        ] {
            let r = dispatch(&server, &token, "sW", command.clone()).await;
            assert_eq!(r["error"]["code"], "unsupported_capability", "{command}");
        }
        // A session no invoke created has no run, as fastagent answers (its `attach` then
        // starts one with an invoke).
        let absent = dispatch(&server, &token, "nobody", json!({"type": "abort"})).await;
        assert_eq!(absent["error"]["code"], "no_active_run");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_malformed_command_is_a_200_invalid_command_and_a_malformed_body_a_400() {
    let project = project();
    let backend = support::backends().await.remove(0);
    let server = start(&backend, &project).await;
    let token = server.key("alice", false).await;
    invoke(&server, "/control/invoke", &token, "sX", "hi").await;
    for command in [
        json!({"type": "steer"}),
        json!({"type": "steer", "prompt": {"text": 42}}),
        json!({"type": "steer", "prompt": {"text": "look", "images": [42]}}),
        json!({"type": "follow_up", "prompt": "hi"}),
        json!({"type": "compact", "instructions": 42}),
        json!({"type": "set_model", "model": 42}),
        json!({"type": "set_thinking", "level": 42}),
        json!({"type": "navigate", "targetId": 42}),
        json!({"type": "make_coffee"}),
        json!(null),
    ] {
        let r = dispatch(&server, &token, "sX", command.clone()).await;
        assert_eq!(
            (r["ok"].as_bool(), r["error"]["code"].as_str()),
            (Some(false), Some("invalid_command")),
            "{command}: {r}"
        );
    }
    let (status, problem) = server
        .post(
            "/control/dispatch",
            &token,
            json!({"command": {"type": "abort"}}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    let req = server
        .req(reqwest::Method::POST, "/control/dispatch", &token)
        .header("content-type", "application/json")
        .body("{not json");
    assert_eq!(crate::harness::send(req).await.0, 400);
    server.stop().await;
}

#[tokio::test]
async fn events_stream_live_in_the_wire_envelope() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        let mut events = server
            .events("/control/events?session=sE", &token, None)
            .await;
        let answer = invoke(&server, "/control/invoke", &token, "sE", "hi").await;
        let seen = until_type(&mut events, "run_settled").await;
        let types = event_types(&seen);
        assert_eq!(
            types,
            [
                "run_started",
                "message_started",
                "message_delta",
                "message_finished",
                "run_settled"
            ],
            "{seen:#?}"
        );
        let text: String = seen
            .iter()
            .filter(|w| w["event"]["type"] == "message_delta")
            .filter_map(|w| w["event"]["data"]["delta"].as_str())
            .collect();
        assert_eq!(text, "hello over the wire");
        // The AgentEvent stream is its projection.
        let projected: String = answer
            .iter()
            .filter(|e| e["type"] == "text")
            .filter_map(|e| e["delta"].as_str())
            .collect();
        assert_eq!(projected, text);
        let settled = &seen.last().expect("settled")["event"];
        assert_eq!(settled["data"]["status"], "completed");
        let run = &seen[0]["event"]["runId"];
        assert!(run.is_string());
        for (i, wire) in seen.iter().enumerate() {
            assert_eq!(wire["sessionId"], "sE");
            assert_eq!(wire["seq"], json!(i), "seq counts per connection");
            assert_eq!(wire["epoch"], seen[0]["epoch"]);
            let event = &wire["event"];
            assert_eq!(&event["runId"], run, "{event}");
            assert!(
                event["timestamp"].is_i64() && event["data"].is_object(),
                "{event}"
            );
            for envelope in ["epoch", "seq", "sessionId"] {
                assert!(event.get(envelope).is_none(), "{event}");
            }
        }
        // The state names the same run while it runs; afterwards it is idle.
        let (_, state) = server.get("/control/state?session=sE", &token).await;
        assert_eq!(state["status"], "idle");

        // Tools, on an agent's own routes: started, then finished.
        let mut events = server
            .events("/agents/tools/control/events?session=sT", &token, None)
            .await;
        let answer = invoke(&server, "/agents/tools/control/invoke", &token, "sT", "go").await;
        assert_eq!(answer.last().map(|e| &e["type"]), Some(&json!("completed")));
        let seen = until_type(&mut events, "run_settled").await;
        let tools: Vec<&Value> = seen
            .iter()
            .map(|w| &w["event"])
            .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("tool_")))
            .collect();
        assert_eq!(tools.len(), 2, "{seen:#?}");
        assert_eq!(tools[0]["type"], "tool_started");
        assert_eq!(tools[0]["data"]["name"], "note");
        assert_eq!(tools[0]["data"]["args"], json!({"n": 1}));
        assert_eq!(tools[1]["type"], "tool_finished");
        assert_eq!(tools[1]["data"]["id"], tools[0]["data"]["id"]);
        assert_eq!(tools[1]["data"]["isError"], false);
        assert_eq!(tools[1]["data"]["content"], "noted");
        server.stop().await;
    }
}

#[tokio::test]
async fn another_principals_session_reads_as_one_that_does_not_exist() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let ops = server.key("ops", true).await;
        // Bob follows `shared` first; Alice's `shared` is another thread and never shows.
        let mut bobs = server
            .events("/control/events?session=shared", &bob, None)
            .await;
        invoke(&server, "/control/invoke", &alice, "shared", "hi").await;
        // An admin's thread stored under Bob's key space is not Bob's either.
        invoke(&server, "/control/invoke", &ops, "bob/x", "hi").await;
        let empty = json!({"status": "idle", "pending": {"steering": 0, "followUp": 0}});
        for session in ["shared", "x"] {
            let path = format!("/control/state?session={session}");
            assert_eq!(server.get(&path, &bob).await.1, empty, "{session}");
            let path = format!("/control/entries?session={session}");
            assert_eq!(server.get(&path, &bob).await.1, json!({"entries": []}));
            let r = dispatch(&server, &bob, session, json!({"type": "abort"})).await;
            let absent = dispatch(&server, &bob, "never-made", json!({"type": "abort"})).await;
            assert_eq!(r["error"]["code"], "no_active_run", "{session}: {r}");
            assert_eq!(
                r["error"]["message"]
                    .as_str()
                    .map(|m| m.replace(session, "_")),
                absent["error"]["message"]
                    .as_str()
                    .map(|m| m.replace("never-made", "_")),
                "another's session reads word for word as an absent one"
            );
        }
        // Bob's own `shared`: the first run his stream shows is his.
        invoke(&server, "/control/invoke", &bob, "shared", "mine").await;
        let seen = until_type(&mut bobs, "run_settled").await;
        assert_eq!(
            event_types(&seen)
                .iter()
                .filter(|t| **t == "run_started")
                .count(),
            1,
            "{seen:#?}"
        );
        let (_, entries) = server.get("/control/entries?session=shared", &bob).await;
        assert_eq!(entries["entries"][1]["data"]["text"], "mine");
        // The admin sees Alice's (by its stored key).
        let (_, state) = server
            .get("/control/state?session=alice/shared", &ops)
            .await;
        assert!(state["leafEntryId"].is_string(), "{state}");
        server.stop().await;
    }
}

#[tokio::test]
async fn without_a_default_agent_the_root_routes_are_404_and_an_agents_are_served() {
    let project = project();
    let backend = support::backends().await.remove(0);
    let mut options = options();
    options.default_agent = None;
    let server = Server::start_with(&backend, project.root(), options).await;
    let token = server.key("alice", false).await;
    for path in [
        "/control/capabilities",
        "/control/state?session=s",
        "/agents/nope/control/commands",
    ] {
        let (status, problem) = server.get(path, &token).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    let (status, _) = server
        .post(
            "/control/invoke",
            &token,
            json!({"session": "s", "text": "hi"}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        server
            .get("/agents/twice/control/capabilities", &token)
            .await
            .0,
        200
    );
    // A session is an agent's: another agent's routes do not see it.
    invoke(&server, "/agents/twice/control/invoke", &token, "s", "hi").await;
    let (_, entries) = server
        .get("/agents/completes/control/entries?session=s", &token)
        .await;
    assert_eq!(entries, json!({"entries": []}));
    server.stop().await;
}

// ── The Agent Handler conformance over HTTP ───────────────────────────────────────────────

#[tokio::test]
async fn must_1_and_2_one_terminal_last_and_failures_are_events_that_round_trip_json() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        // MUST 1: exactly one terminal, `completed`, last.
        let ok = invoke(&server, "/control/invoke", &token, "spec-ok", "go").await;
        assert!(!ok.is_empty());
        assert_eq!(ok.iter().filter(|e| terminal(e)).count(), 1, "{ok:?}");
        assert_eq!(ok.last().map(|e| &e["type"]), Some(&json!("completed")));
        // MUSTs 1 and 2: the engine fails (its script is spent): one `failed`, nothing after.
        invoke(
            &server,
            "/agents/fails/control/invoke",
            &token,
            "spec-fail",
            "once",
        )
        .await;
        let failed = invoke(
            &server,
            "/agents/fails/control/invoke",
            &token,
            "spec-fail",
            "twice",
        )
        .await;
        assert_eq!(
            failed.iter().filter(|e| terminal(e)).count(),
            1,
            "{failed:?}"
        );
        let last = failed.last().expect("terminal");
        assert_eq!(last["type"], "failed");
        assert!(
            last["details"].is_string() && last["retryable"].is_boolean(),
            "{last}"
        );
        // §5: every event survives JSON, as the protocol's own type.
        for e in ok.iter().chain(&failed) {
            let typed: duet_runtime::AgentEvent =
                serde_json::from_value(e.clone()).expect("an AgentEvent");
            assert_eq!(&serde_json::to_value(&typed).expect("serialises"), e);
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn must_3_a_client_that_disconnects_mid_run_aborts_the_run() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        let mut events = server
            .events(
                "/agents/slow/control/events?session=spec-cancel",
                &token,
                None,
            )
            .await;
        let body = json!({"session": "spec-cancel", "text": "go"});
        let running = stream(&server, "/agents/slow/control/invoke", &token, body).await;
        let started = until_type(&mut events, "run_started").await;
        // The client goes away mid-step, having seen no terminal.
        drop(running);
        let seen = until_type(&mut events, "run_settled").await;
        let settled = &seen.last().expect("settled")["event"];
        assert_eq!(settled["data"]["status"], "aborted", "{seen:#?}");
        assert_eq!(
            settled["runId"],
            started.last().expect("started")["event"]["runId"]
        );
        let (_, thread) = server.get("/threads/spec-cancel", &token).await;
        assert_eq!(thread["stopReason"], "aborted", "{thread}");
        server.stop().await;
    }
}

#[tokio::test]
async fn must_6_a_second_server_on_the_same_database_continues_the_session() {
    let project = project();
    for backend in support::backends().await {
        let a = start(&backend, &project).await;
        let b = start(&backend, &project).await;
        let token = a.key("alice", false).await;
        // A session id in the shape a real caller mints (a Telegram group).
        let session = "-1001234567890";
        let text = |events: &[Value]| -> String {
            events
                .iter()
                .filter(|e| e["type"] == "text")
                .filter_map(|e| e["delta"].as_str())
                .collect()
        };
        let one = invoke(
            &a,
            "/agents/twice/control/invoke",
            &token,
            session,
            "turn one",
        )
        .await;
        assert_eq!(one.last().map(|e| &e["type"]), Some(&json!("completed")));
        let two = invoke(
            &b,
            "/agents/twice/control/invoke",
            &token,
            session,
            "turn two",
        )
        .await;
        assert_eq!(
            two.last().map(|e| &e["type"]),
            Some(&json!("completed")),
            "{two:?}"
        );
        assert_eq!((text(&one), text(&two)), ("first".into(), "second".into()));
        let path = format!("/agents/twice/control/entries?session={session}");
        let (_, entries) = b.get(&path, &token).await;
        let said: Vec<&str> = entries["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| matches!(e["kind"].as_str(), Some("user" | "assistant")))
            .filter_map(|e| e["data"]["text"].as_str())
            .collect();
        assert_eq!(said, ["turn one", "first", "turn two", "second"]);
        a.stop().await;
        b.stop().await;
    }
}

#[tokio::test]
async fn a_busy_session_refuses_a_second_invoke_and_abort_ends_the_first() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        let mut events = server
            .events("/agents/slow/control/events?session=busy", &token, None)
            .await;
        let body = json!({"session": "busy", "text": "go"});
        let mut first = stream(&server, "/agents/slow/control/invoke", &token, body).await;
        let started = until_type(&mut events, "run_started").await;
        let run = started.last().expect("started")["event"]["runId"].clone();
        let (_, state) = server
            .get("/agents/slow/control/state?session=busy", &token)
            .await;
        assert_eq!(
            (&state["status"], &state["activeRunId"]),
            (&json!("running"), &run)
        );

        // The second invoke is refused before it starts: one event, retryable.
        let refused = invoke(
            &server,
            "/agents/slow/control/invoke",
            &token,
            "busy",
            "me too",
        )
        .await;
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0]["code"], "session_busy");
        assert_eq!(refused[0]["retryable"], true);

        // The control plane aborts the run: accepted for that run; the invoke ends `aborted`.
        let (status, r) = server
            .post(
                "/agents/slow/control/dispatch",
                &token,
                json!({"session": "busy", "command": {"type": "abort"}}),
            )
            .await;
        assert_eq!((status, &r), (200, &json!({"ok": true, "runId": run})));
        let ended = first.until(|e| terminal(&e.data)).await;
        let last = &ended.last().expect("terminal").data;
        assert_eq!(
            (&last["type"], &last["code"]),
            (&json!("failed"), &json!("aborted"))
        );
        assert!(first.next().await.is_none(), "nothing after the terminal");
        let seen = until_type(&mut events, "run_settled").await;
        let settled = &seen.last().expect("settled")["event"];
        assert_eq!(
            (&settled["runId"], &settled["data"]["status"]),
            (&run, &json!("aborted"))
        );
        // Nothing of the refused prompt was written.
        let (_, entries) = server
            .get("/agents/slow/control/entries?session=busy", &token)
            .await;
        assert!(!entries.to_string().contains("me too"), "{entries}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_steer_joins_the_run_before_its_next_model_call() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        let base = "/agents/steered/control";
        let mut events = server
            .events(&format!("{base}/events?session=st"), &token, None)
            .await;
        let body = json!({"session": "st", "text": "go"});
        let mut running = stream(&server, &format!("{base}/invoke"), &token, body).await;
        let started = until_type(&mut events, "run_started").await;
        let run = started.last().expect("started")["event"]["runId"].clone();
        let (status, r) = server
            .post(
                &format!("{base}/dispatch"),
                &token,
                json!({"session": "st", "command": {"type": "steer", "prompt": {"text": "also this"}}}),
            )
            .await;
        assert_eq!((status, &r), (200, &json!({"ok": true, "runId": run})));
        let (_, state) = server
            .get(&format!("{base}/state?session=st"), &token)
            .await;
        assert_eq!(
            state["pending"],
            json!({"steering": 1, "followUp": 0}),
            "{state}"
        );
        let seen = until_type(&mut events, "run_settled").await;
        let queue: Vec<&Value> = seen
            .iter()
            .map(|w| &w["event"])
            .filter(|e| e["type"] == "queue_changed")
            .collect();
        assert_eq!(
            queue.first().map(|e| &e["data"]),
            Some(&json!({"steering": 1, "followUp": 0}))
        );
        assert_eq!(
            event_types(&seen)
                .iter()
                .filter(|t| **t == "run_started")
                .count(),
            0
        );
        assert_eq!(seen.last().expect("settled")["event"]["runId"], run);
        let ended = running.until(|e| terminal(&e.data)).await;
        assert_eq!(ended.last().expect("terminal").data["type"], "completed");
        let (_, entries) = server
            .get(&format!("{base}/entries?session=st"), &token)
            .await;
        let said: Vec<(&str, &str)> = entries["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| Some((e["kind"].as_str()?, e["data"]["text"].as_str()?)))
            .filter(|(k, _)| *k != "tool")
            .collect();
        assert_eq!(
            said,
            [
                ("user", "go"),
                ("assistant", ""),
                ("user", "also this"),
                ("assistant", "after the steer")
            ]
        );
        server.stop().await;
    }
}
