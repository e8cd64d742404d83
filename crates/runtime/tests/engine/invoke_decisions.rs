//! `invoke` carries decisions (issue #29): a run that parks on pending tool calls lists them in
//! `completed.data.approvals`; a prompt with `decisions` (those ids) applies them — the first
//! decision per call wins — and streams the run on until it settles. Refusals are `failed`
//! events with their codes, and write nothing, on every backend.

use crate::support;

use std::sync::Arc;

use duet_runtime::{Agent, AgentEvent, Prompt, PromptDecision, Runtime, Scope, Store};
use duet_spec::Decision;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::approvals::Calls;

/// A desk whose model asks for two refunds (both need approval), then says `Done.`.
fn desk(store: &Arc<dyn Store>) -> (Runtime, Calls) {
    let dir = support::Scratch::new("invoke-decisions");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string }, amount: { type: number } }, required: [order, amount] }\nbuiltin: refund\napproval: { decisions: [approve, edit, reject] }\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1, amount: 250 } }, { name: refund, arguments: { order: A2, amount: 500 } }]\n  - text: Done.\n",
    );
    let refund = Calls::default();
    let rt = support::runtime(dir.project(), store.clone())
        .tool("refund", refund.clone())
        .build();
    (rt, refund)
}

/// Every event of one invoke, and its terminal event.
async fn invoke(rt: &Runtime, key: &str, prompt: Prompt) -> (Vec<AgentEvent>, AgentEvent) {
    let agent = rt.agent("desk").expect("defined");
    let mut events: Vec<AgentEvent> = agent.invoke(Scope::new(key), prompt).collect().await;
    let terminal = events.pop().expect("a terminal event");
    (events, terminal)
}

fn completed(event: &AgentEvent) -> &Value {
    match event {
        AgentEvent::Completed { data: Some(data) } => data,
        other => panic!("not completed: {other:?}"),
    }
}

fn decide(id: &str, decision: Decision) -> PromptDecision {
    PromptDecision {
        id: id.to_owned(),
        decision,
        args: None,
        reason: None,
        text: None,
        remember: None,
    }
}

/// The thread's journal length and queue, which a refusal leaves as they were.
async fn written(store: &Arc<dyn Store>, key: &str) -> (i64, usize) {
    let t = store.thread(key).await.expect("read").expect("thread");
    (t.next_seq, store.queue(t.id).await.expect("queue").len())
}

#[tokio::test]
async fn an_invoke_decides_the_calls_a_run_waits_on_and_streams_the_run_on() {
    for backend in support::backends().await {
        let at = backend.name();
        let store = backend.open().await;
        let (rt, refund) = desk(&store);
        let (_, parked) = invoke(&rt, "k", Prompt::text("refund both")).await;
        let data = completed(&parked);
        assert_eq!(data["status"], "waiting", "{at}");
        let ids: Vec<String> = data["approvals"]
            .as_array()
            .expect("approvals")
            .iter()
            .map(|a| a["id"].as_str().expect("id").to_owned())
            .collect();
        assert_eq!(ids.len(), 2, "{at}: {data}");

        // Refused, each with its code, nothing written.
        let before = written(&store, "k").await;
        let (session, seq) = ids[0].split_once(':').expect("S:N");
        let bad_edit = PromptDecision {
            args: Some(json!({"order": "A1", "amount": "lots"})),
            ..decide(&ids[1], Decision::Edit)
        };
        let refusals = [
            (
                "text beside decisions",
                Prompt {
                    text: "yes".into(),
                    ..Prompt::decisions(vec![decide(&ids[0], Decision::Approve)])
                },
                "invalid_prompt",
            ),
            (
                "an id that does not read",
                Prompt::decisions(vec![decide("first", Decision::Approve)]),
                "invalid_prompt",
            ),
            (
                "the same call twice",
                Prompt::decisions(vec![
                    decide(&ids[0], Decision::Approve),
                    decide(&ids[0], Decision::Reject),
                ]),
                "invalid_prompt",
            ),
            (
                "another session's id",
                Prompt::decisions(vec![decide(
                    &format!("{}:{seq}", session.parse::<i64>().expect("n") + 1),
                    Decision::Approve,
                )]),
                "unknown_approval",
            ),
            (
                "no such call",
                Prompt::decisions(vec![decide(&format!("{session}:999"), Decision::Approve)]),
                "unknown_approval",
            ),
            (
                "a decision not offered",
                Prompt::decisions(vec![PromptDecision {
                    text: Some("x".into()),
                    ..decide(&ids[0], Decision::Respond)
                }]),
                "invalid_decision",
            ),
            // The first is fine, the second breaks the schema: neither is stored.
            (
                "a batch with one bad edit",
                Prompt::decisions(vec![decide(&ids[0], Decision::Approve), bad_edit]),
                "invalid_decision",
            ),
        ];
        for (what, prompt, code) in refusals {
            let (_, terminal) = invoke(&rt, "k", prompt).await;
            match terminal {
                AgentEvent::Failed { code: Some(c), .. } => assert_eq!(c, code, "{at}: {what}"),
                other => panic!("{at}: {what}: {other:?}"),
            }
            assert_eq!(
                written(&store, "k").await,
                before,
                "{at}: {what}: nothing written"
            );
        }
        assert!(refund.seen().is_empty(), "{at}");

        // Both decided in one prompt: the approved call runs once, the model goes on.
        let prompt = Prompt::decisions(vec![
            decide(&ids[0], Decision::Approve),
            PromptDecision {
                reason: Some("too much".into()),
                ..decide(&ids[1], Decision::Reject)
            },
        ]);
        let (events, terminal) = invoke(&rt, "k", prompt).await;
        let data = completed(&terminal);
        assert_eq!(data["status"], "awaiting_human", "{at}: {data}");
        assert_eq!(data["decided"], json!(ids), "{at}");
        assert_eq!(
            refund.seen(),
            vec![json!({"order": "A1", "amount": 250})],
            "{at}"
        );
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Text { delta } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Done.", "{at}: the run streamed on");
        let ended: Vec<bool> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolEnded { is_error, .. } => Some(*is_error),
                _ => None,
            })
            .collect();
        assert_eq!(ended.len(), 2, "{at}: both results streamed: {events:?}");

        // Too late: the first decision won.
        let (_, late) = invoke(
            &rt,
            "k",
            Prompt::decisions(vec![decide(&ids[1], Decision::Approve)]),
        )
        .await;
        match late {
            AgentEvent::Failed {
                code: Some(c),
                details,
                ..
            } => {
                assert_eq!(c, "already_answered", "{at}");
                assert!(
                    details.contains("reject"),
                    "{at}: names the first: {details}"
                );
            }
            other => panic!("{at}: {other:?}"),
        }
        assert_eq!(refund.seen().len(), 1, "{at}: ran once");
    }
}

#[tokio::test]
async fn a_decision_invoke_replays_by_message_id() {
    for backend in support::backends().await {
        let at = backend.name();
        let store = backend.open().await;
        let (rt, refund) = desk(&store);
        let (_, parked) = invoke(&rt, "m", Prompt::text("refund both")).await;
        let ids: Vec<String> = completed(&parked)["approvals"]
            .as_array()
            .expect("approvals")
            .iter()
            .map(|a| a["id"].as_str().expect("id").to_owned())
            .collect();
        let prompt = Prompt {
            message_id: Some("decide-1".into()),
            ..Prompt::decisions(vec![
                decide(&ids[0], Decision::Approve),
                decide(&ids[1], Decision::Approve),
            ])
        };
        let (_, first) = invoke(&rt, "m", prompt.clone()).await;
        assert_eq!(completed(&first)["decided"], json!(ids), "{at}");
        let after = written(&store, "m").await;
        let (_, again) = invoke(&rt, "m", prompt).await;
        let data = completed(&again);
        assert_eq!(data["duplicate"], json!(true), "{at}: {data}");
        assert_eq!(data["decided"], json!([]), "{at}");
        assert_eq!(written(&store, "m").await, after, "{at}: nothing written");
        assert_eq!(refund.seen().len(), 2, "{at}");
    }
}
