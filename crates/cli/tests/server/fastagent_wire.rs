//! fastagent's own HTTP tests, as behaviours, against `duet serve`: what its clients
//! (`connectAgent`, `connectSessionControl`, `fastagent attach`) and its tests send — bodies with
//! no JSON `Content-Type`, a `steer` typed into a session before it has a run, runs observed on
//! `/control/events` — and what they rely on back. Written for duet from the behaviours, not
//! from their code. On every backend.
//!
//! How fastagent's tests map here (`test/http.test.ts`, `test/control-http.test.ts`, and the SPEC
//! conformance suite `test/spec-conformance.ts` run through `connectAgent`):
//!
//! | fastagent test | here |
//! |---|---|
//! | http: POST streams text + completed over SSE | `bodies_are_taken_as_fastagent_sends_them` (no `Content-Type`, and `text/plain` as `fetch` sends a string) |
//! | http: INVOKE_EXAMPLE_BODY satisfies the shape check | `bodies_are_taken_as_fastagent_sends_them` (`{"session":"dev","text":"hello"}`) |
//! | http: same-session concurrency → `session busy` | `control::a_busy_session_refuses_a_second_invoke_and_abort_ends_the_first` |
//! | http: different-session concurrency | `runs_are_named_settle_once_and_differ_per_invoke` |
//! | http: non-POST 405; bad/missing body 400 | `bodies_are_taken_as_fastagent_sends_them` (405, `{not json` 400, `{session}` alone 400) |
//! | http: oversized body 413, in bytes | `bodies_are_taken_as_fastagent_sends_them` (invoke and dispatch; 1 MiB as fastagent's) |
//! | http: consumer cancel runs cleanup (MUST 3) | `control::must_3_a_client_that_disconnects_mid_run_aborts_the_run` |
//! | http: nodeListener bridge, backpressure, destroyed `res`, erroring body stream | not applicable: fastagent's Node bridge internals |
//! | control-http: fails closed, 401 on every route | `control::every_control_route_fails_closed_without_a_valid_key` (bodies without `Content-Type`, as theirs) |
//! | control-http: local and remote isomorphic | `control::capabilities_commands_state_entries_and_dispatch_answer_in_fastagents_shapes` (duet has no local `SessionControl` to compare with; the shapes are checked); `set_thinking`/`navigate` are `unsupported_capability` |
//! | control-http: a serve without the route reads as skew | not applicable: the client's version-skew diagnosis |
//! | control-http: commands() read per call | not applicable: duet has no slash commands (`[]`) |
//! | control-http: events stream live; envelope consumed | `runs_are_named_settle_once_and_differ_per_invoke`, `control::events_stream_live_in_the_wire_envelope` |
//! | control-http: detaching from a quiet stream | `runs_are_named_settle_once_and_differ_per_invoke` |
//! | control-http: steer carries a full Prompt (images) | `a_command_that_arrives_as_the_run_settles_stays_in_that_run` (the image as sent, unknown fields dropped); refused images: `values.rs` |
//! | control-http: unreadable definition → commands() rejects | not applicable: fastagent's definition loading |
//! | control-http: unknown command → `invalid_command` | `control::a_malformed_command_is_a_200_invalid_command_and_a_malformed_body_a_400` |
//! | control-http: connectAgent drives a run via /control/invoke | `attach_starts_the_run_on_no_active_run` |
//! | control-http: without an agent, /control/invoke not mounted | `control::without_a_default_agent_the_root_routes_are_404_and_an_agents_are_served` |
//! | control-http: watchdog, heartbeats, seq gaps, non-envelope data | heartbeats: `connections.rs`; the rest is the client's (`session-remote.ts`) — not applicable |
//! | control-http: mountSessionControl / discovery file / bind warning / refuses without token | not applicable: fastagent's serve (duet's keys are `duet keys`) |
//! | control-http: activePathSlice, answerSlashInput, decideRound, attachRound | not applicable: `attach`'s client internals; its wire steps are `attach_starts_the_run_on_no_active_run` |
//! | spec-conformance via connectAgent: MUST 1, 2, 3, 6, JSON round trip | `control::must_1_and_2_…`, `control::must_3_…`, `control::must_6_…` |
//! | session-control: one `run_settled` per run, a follow-up inside its run | `a_command_that_arrives_as_the_run_settles_stays_in_that_run` |

use serde_json::{Value, json};

use crate::harness::{Event, Server, Sse};
use crate::support;

/// `completes` answers once; `twice` twice; `followed` answers slowly (a follow-up arrives
/// meanwhile) and a person is its other side; `late` stops on its slow answer (a steer arrives
/// during it).
fn project() -> support::Scratch {
    let p = support::Scratch::new("fastagent-wire");
    for (name, stop, script) in [
        (
            "completes",
            false,
            "  - text: hello over the wire\n".to_owned(),
        ),
        (
            "twice",
            false,
            "  - text: first\n  - text: second\n".to_owned(),
        ),
        (
            "followed",
            false,
            "  - { text: first answer, delayMs: 1500 }\n  - text: after the follow-up\n".to_owned(),
        ),
        (
            "late",
            true,
            "  - { text: first answer, delayMs: 1500 }\n  - text: after the steer\n".to_owned(),
        ),
    ] {
        let stop = if stop { ", stopOnResponse: true" } else { "" };
        p.write(
            &format!("agents/agents/{name}.yaml"),
            &format!("name: {name}\nsideA: {{ prompt: {name}{stop} }}\nsideB: {{ human: true }}\n"),
        );
        p.write(
            &format!("agents/prompts/{name}.yaml"),
            &format!(
                "name: {name}\ntoolDescription: d\nmodel: {name}_model\nincludeChat: true\nprompt: p\n"
            ),
        );
        p.write(
            &format!("agents/models/{name}_model.yaml"),
            &format!("name: {name}_model\nprovider: scripted\nmodel: demo\nscript:\n{script}"),
        );
    }
    p
}

async fn start(backend: &support::Backend, project: &support::Scratch) -> Server {
    let options = duet_server::Options {
        default_agent: Some("completes".into()),
        ..crate::harness::options()
    };
    Server::start_with(backend, project.root(), options).await
}

/// `POST path` with `body` as text, `content_type` as given (none: no header, as fastagent's
/// tests send it).
fn raw(
    server: &Server,
    path: &str,
    token: &str,
    content_type: Option<&str>,
    body: &str,
) -> reqwest::RequestBuilder {
    let req = server
        .req(reqwest::Method::POST, path, token)
        .body(body.to_owned());
    match content_type {
        Some(ct) => req.header("content-type", ct),
        None => req,
    }
}

/// Every AgentEvent of an invoke sent with no `Content-Type`, to its end.
async fn invoke(server: &Server, path: &str, token: &str, session: &str, text: &str) -> Vec<Value> {
    let body = json!({"session": session, "text": text}).to_string();
    let resp = raw(server, path, token, None, &body)
        .send()
        .await
        .expect("invoke");
    assert_eq!(resp.status(), 200, "{path}");
    let mut sse = Sse::new(resp);
    let mut events = Vec::new();
    while let Some(e) = sse.next().await {
        events.push(e.data);
    }
    events
}

/// A dispatch sent with no `Content-Type`: the `SessionResult`.
async fn dispatch(
    server: &Server,
    base: &str,
    token: &str,
    session: &str,
    command: Value,
) -> Value {
    let body = json!({"session": session, "command": command}).to_string();
    let path = format!("{base}/dispatch");
    let (status, result) = crate::harness::send(raw(server, &path, token, None, &body)).await;
    assert_eq!(status, 200, "{result}");
    result
}

/// The `SessionEvent`s of `events` until (and with) the first of `kind`.
async fn until(events: &mut Sse, kind: &str) -> Vec<Value> {
    events
        .until(|e: &Event| e.data["event"]["type"] == kind)
        .await
        .into_iter()
        .map(|e| e.data["event"].clone())
        .collect()
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

fn text(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "message_delta" && e["data"]["channel"] == "text")
        .filter_map(|e| e["data"]["delta"].as_str())
        .collect()
}

#[tokio::test]
async fn bodies_are_taken_as_fastagent_sends_them() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        // fastagent's tests send no `Content-Type`; `fetch` with a string body says `text/plain`.
        let kinds = [
            None,
            Some("text/plain;charset=UTF-8"),
            Some("application/json"),
        ];
        for (i, content_type) in kinds.into_iter().enumerate() {
            for (j, path) in [
                "/invoke",
                "/agents/completes/invoke",
                "/control/invoke",
                "/agents/completes/control/invoke",
            ]
            .into_iter()
            .enumerate()
            {
                let session = format!("ct-{i}-{j}");
                let body = json!({"session": session, "text": "hello"}).to_string();
                let resp = raw(&server, path, &token, content_type, &body)
                    .send()
                    .await
                    .expect("invoke");
                assert_eq!(resp.status(), 200, "{path} as {content_type:?}");
                let mut sse = Sse::new(resp);
                let mut last = Value::Null;
                while let Some(e) = sse.next().await {
                    last = e.data;
                }
                assert_eq!(
                    last["type"], "completed",
                    "{path} as {content_type:?}: {last}"
                );
            }
            for base in ["/control", "/agents/completes/control"] {
                let body = json!({"session": "ct-0-0", "command": {"type": "abort"}}).to_string();
                let path = format!("{base}/dispatch");
                let (status, r) =
                    crate::harness::send(raw(&server, &path, &token, content_type, &body)).await;
                assert_eq!(
                    (status, r["error"]["code"].as_str()),
                    (200, Some("no_active_run")),
                    "{path} as {content_type:?}: {r}"
                );
            }
        }
        // What does not parse is still refused, clearly: 400 with the parser's position when
        // nothing (or JSON) was declared, 415 when something else was.
        let cases: [(Option<&str>, &str, u16, &str); 4] = [
            (None, "{not json", 400, "malformed_json"),
            (Some("application/json"), "{not json", 400, "malformed_json"),
            (
                Some("text/plain"),
                "{not json",
                415,
                "unsupported_media_type",
            ),
            (None, r#"{"session": "s"}"#, 400, "invalid_body"),
        ];
        for path in ["/invoke", "/control/invoke", "/control/dispatch"] {
            for (content_type, body, status, code) in cases {
                if path.ends_with("dispatch") && code == "invalid_body" {
                    continue;
                }
                let (got, problem) =
                    crate::harness::send(raw(&server, path, &token, content_type, body)).await;
                assert_eq!(
                    (got, problem["code"].as_str()),
                    (status, Some(code)),
                    "{path} {content_type:?} {body}: {problem}"
                );
                assert!(problem["detail"].is_string(), "{problem}");
            }
        }
        // Over the limit (1 MiB, fastagent's `MAX_BODY_BYTES`), in bytes, not characters: 413
        // before anything runs.
        let wide = "\u{1F642}".repeat(400_000);
        for text in ["x".repeat(2 * 1024 * 1024), wide] {
            for path in ["/invoke", "/control/invoke"] {
                let body = json!({"session": "big", "text": text}).to_string();
                let (status, problem) =
                    crate::harness::send(raw(&server, path, &token, None, &body)).await;
                assert_eq!(
                    (status, problem["code"].as_str()),
                    (413, Some("body_too_large")),
                    "{path}"
                );
            }
            let body =
                json!({"session": "big", "command": {"type": "steer", "prompt": {"text": text}}});
            let (status, _) = crate::harness::send(raw(
                &server,
                "/control/dispatch",
                &token,
                None,
                &body.to_string(),
            ))
            .await;
            assert_eq!(status, 413);
        }
        assert_eq!(
            server.get("/threads/big", &token).await.0,
            404,
            "nothing ran"
        );
        // GET on invoke: 405, as fastagent's handler answers.
        let (status, _) = server.get("/invoke", &token).await;
        assert_eq!(status, 405);
        // A2A's HTTP+JSON binding keeps its 415: its spec requires a JSON media type.
        let body = json!({"message": crate::harness::a2a_message("m-1", "hi")}).to_string();
        let (status, _) = crate::harness::send(raw(
            &server,
            "/a2a/completes/rest/message:send",
            &token,
            Some("text/plain"),
            &body,
        ))
        .await;
        assert_eq!(status, 415);
        server.stop().await;
    }
}

#[tokio::test]
async fn attach_starts_the_run_on_no_active_run() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        let base = "/agents/twice/control";
        // `attach` on a session no invoke has made yet: state reads idle with no leaf.
        let (_, state) = server
            .get(&format!("{base}/state?session=fresh"), &token)
            .await;
        assert_eq!(state["status"], "idle");
        assert!(state.get("leafEntryId").is_none(), "{state}");
        let mut events = server
            .events(&format!("{base}/events?session=fresh"), &token, None)
            .await;
        // Its first typed line is a steer; every run command there is `no_active_run`, which
        // is what makes `attach` start the run with an invoke.
        for command in [
            json!({"type": "steer", "prompt": {"text": "hello"}}),
            json!({"type": "follow_up", "prompt": {"text": "hello"}}),
            json!({"type": "abort"}),
        ] {
            let r = dispatch(&server, base, &token, "fresh", command.clone()).await;
            assert_eq!(r["ok"], false, "{command}: {r}");
            assert_eq!(r["error"]["code"], "no_active_run", "{command}: {r}");
            assert_eq!(r["error"]["retryable"], false, "{r}");
        }
        // So it invokes over the control plane's data route, and the events show that run.
        let answer = invoke(&server, &format!("{base}/invoke"), &token, "fresh", "hello").await;
        assert_eq!(answer.last().map(|e| &e["type"]), Some(&json!("completed")));
        let seen = until(&mut events, "run_settled").await;
        assert_eq!(count(&seen, "run_started"), 1, "{seen:#?}");
        assert_eq!(text(&seen), "first");
        assert_eq!(seen.last().expect("settled")["data"]["status"], "completed");
        // The run is over: the next line is again `no_active_run`, and starts the next run.
        let r = dispatch(
            &server,
            base,
            &token,
            "fresh",
            json!({"type": "steer", "prompt": {"text": "more"}}),
        )
        .await;
        assert_eq!(r["error"]["code"], "no_active_run", "{r}");
        invoke(&server, &format!("{base}/invoke"), &token, "fresh", "more").await;
        let seen = until(&mut events, "run_settled").await;
        assert_eq!(text(&seen), "second");
        server.stop().await;
    }
}

#[tokio::test]
async fn runs_are_named_settle_once_and_differ_per_invoke() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        let base = "/agents/twice/control";
        let mut events = server
            .events(&format!("{base}/events?session=named"), &token, None)
            .await;
        let mut runs = Vec::new();
        for text in ["one", "two"] {
            invoke(&server, &format!("{base}/invoke"), &token, "named", text).await;
            let seen = until(&mut events, "run_settled").await;
            assert_eq!(
                (count(&seen, "run_started"), count(&seen, "run_settled")),
                (1, 1),
                "{seen:#?}"
            );
            let run = seen[0]["runId"].as_str().expect("a run id").to_owned();
            assert!(seen.iter().all(|e| e["runId"] == run.as_str()), "{seen:#?}");
            runs.push(run);
        }
        assert_ne!(runs[0], runs[1]);
        // A client that leaves a quiet stream: the server answers on (no hang, nothing held).
        let quiet = server
            .events(&format!("{base}/events?session=quiet"), &token, None)
            .await;
        drop(quiet);
        let (status, state) = server
            .get(&format!("{base}/state?session=quiet"), &token)
            .await;
        assert_eq!((status, &state["status"]), (200, &json!("idle")));
        // Two sessions at once both complete.
        let (a, b) = tokio::join!(
            invoke(&server, "/agents/completes/invoke", &token, "a", "x"),
            invoke(&server, "/agents/completes/invoke", &token, "b", "y"),
        );
        for events in [a, b] {
            assert_eq!(events.last().map(|e| &e["type"]), Some(&json!("completed")));
        }
        server.stop().await;
    }
}

/// (agent, command type, what the run says once the command is in).
const LATE_COMMANDS: &[(&str, &str, &str)] = &[
    // A follow-up waits for the run's end, which it then extends.
    ("followed", "follow_up", "after the follow-up"),
    // A steer that arrives during the model's final answer (the answer stops the run).
    ("late", "steer", "after the steer"),
];

#[tokio::test]
async fn a_command_that_arrives_as_the_run_settles_stays_in_that_run() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let token = server.key("alice", false).await;
        for (agent, kind, then) in LATE_COMMANDS {
            let base = format!("/agents/{agent}/control");
            let session = format!("late-{kind}");
            let mut events = server
                .events(&format!("{base}/events?session={session}"), &token, None)
                .await;
            let body = json!({"session": session, "text": "go"}).to_string();
            let resp = raw(&server, &format!("{base}/invoke"), &token, None, &body)
                .send()
                .await
                .expect("invoke");
            let mut running = Sse::new(resp);
            let started = until(&mut events, "run_started").await;
            let run = started.last().expect("started")["runId"].clone();
            // A full prompt: its image reaches the run as sent, fields it does not have dropped.
            let image = json!({"mimeType": "image/png", "data": "iVBORw0KGgo="});
            let mut sent = image.clone();
            sent["junk"] = json!(1);
            let command = json!({
                "type": kind,
                "prompt": {"text": "and then?", "images": [sent], "junk": true}
            });
            let r = dispatch(&server, &base, &token, &session, command).await;
            assert_eq!(r, json!({"ok": true, "runId": run}), "{agent}");
            // The invoke ends once, after the command's answer.
            let mut said = String::new();
            let mut terminals = Vec::new();
            while let Some(e) = running.next().await {
                if let Some(delta) = e.data["delta"].as_str() {
                    said.push_str(delta);
                }
                if matches!(e.data["type"].as_str(), Some("completed" | "failed")) {
                    terminals.push(e.data);
                }
            }
            assert_eq!(terminals.len(), 1, "{agent}: {terminals:?}");
            assert_eq!(terminals[0]["type"], "completed", "{agent}");
            assert!(said.ends_with(then), "{agent}: {said}");
            // One run on the control plane: its one settle comes after the command's answer,
            // and no other run starts.
            let seen = until(&mut events, "run_settled").await;
            assert_eq!(count(&seen, "run_started"), 0, "{agent}: {seen:#?}");
            assert!(text(&seen).ends_with(then), "{agent}: {seen:#?}");
            let settled = seen.last().expect("settled");
            assert_eq!(settled["runId"], run, "{agent}: {seen:#?}");
            assert_eq!(settled["data"]["status"], "completed");
            let (_, state) = server
                .get(&format!("{base}/state?session={session}"), &token)
                .await;
            assert_eq!(state["status"], "idle", "{agent}: {state}");
            assert!(state.get("activeRunId").is_none(), "{state}");
            let (_, page) = server
                .get(&format!("/threads/{session}/messages"), &token)
                .await;
            let carried: Vec<&Value> = page["items"]
                .as_array()
                .expect("items")
                .iter()
                .filter(|e| e["data"]["content"] == "and then?")
                .collect();
            assert_eq!(carried.len(), 1, "{page}");
            assert_eq!(carried[0]["data"]["images"], json!([image]), "{page}");
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn keys_and_agents_are_named_as_the_caller_names_them() {
    let project = project();
    for backend in support::backends().await {
        let server = start(&backend, &project).await;
        let alice = server.key("alice", false).await;
        let ops = server.key("ops", true).await;
        // `completed.data.thread` is the key the caller gave, which its REST paths take.
        let events = invoke(&server, "/invoke", &alice, "inv-1", "hi").await;
        let done = events.last().expect("terminal");
        assert_eq!(done["data"]["thread"], "inv-1", "{done}");
        assert_eq!(server.get("/threads/inv-1", &alice).await.0, 200);
        // An admin names it by its stored key, `/` and all: percent-encoded in a path.
        let (status, thread) = server.get("/threads/alice%2Finv-1", &ops).await;
        assert_eq!((status, &thread["key"]), (200, &json!("alice/inv-1")));
        let (status, _) = server.get("/threads/alice%2Finv-1/messages", &ops).await;
        assert_eq!(status, 200);
        // Typed raw, the 404 says how to write it.
        for path in ["/threads/alice/inv-1", "/threads/alice/inv-1/events"] {
            let (status, problem) = server.get(path, &ops).await;
            assert_eq!(status, 404, "{path}");
            let detail = problem["detail"].as_str().unwrap_or_default();
            assert!(
                detail.contains("/threads/alice%2Finv-1"),
                "{path}: {problem}"
            );
        }
        // An agent misspelt gets the CLI's did-you-mean at every door: invoke, the control
        // plane, A2A (among the agents it serves: `completes`, the default) and REST.
        let (status, problem) = crate::harness::send(raw(
            &server,
            "/agents/complete/invoke",
            &alice,
            None,
            r#"{"session": "s", "text": "hi"}"#,
        ))
        .await;
        let mut answers = vec![("invoke", status, 404, problem, "did you mean `completes`?")];
        for (door, path, want, said) in [
            (
                "control",
                "/agents/twise/control/state?session=s",
                404,
                "did you mean `twice`?",
            ),
            (
                "a2a",
                "/a2a/complete/.well-known/agent-card.json",
                404,
                "did you mean `completes`?",
            ),
            (
                "a2a, not served",
                "/a2a/twice/.well-known/agent-card.json",
                404,
                "agents served over A2A: completes",
            ),
        ] {
            let (status, problem) = server.get(path, &alice).await;
            answers.push((door, status, want, problem, said));
        }
        let (status, problem) = server
            .post(
                "/threads",
                &alice,
                json!({"agent": "folowed", "text": "hi"}),
            )
            .await;
        answers.push(("rest", status, 422, problem, "did you mean `followed`?"));
        for (door, status, want, problem, said) in answers {
            assert_eq!(status, want, "{door}: {problem}");
            assert!(
                problem["detail"].as_str().is_some_and(|d| d.contains(said)),
                "{door}: {problem}"
            );
        }
        server.stop().await;
    }
}
