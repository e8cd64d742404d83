//! Tool calls that wait for a person's decision (a tool's `approval`, issue #29), end to end on
//! every backend: the step commits with the call pending and the thread `waiting`; a decision
//! (approve, edit, reject, respond) resumes it — the tool runs with the proposed or the edited
//! arguments, or never — and the model is called again. Parallel calls are decided one by one,
//! in either order; a second decision is refused naming the first; a bad edit and a decision
//! under changed definitions are refused with nothing written; a new runtime (a restart, another
//! process) takes decisions as the first did.

use crate::support;

use std::sync::{Arc, Mutex};

use duet_runtime::approval::Refusal;
use duet_runtime::{
    DecisionInput, RecordBody, Role, RunError, Runtime, Store, ThreadStatus, ToolContext,
    ToolResult, ToolStatus,
};
use duet_spec::Decision;
use serde_json::{Value, json};

/// What a builtin tool was called with, in order: its side effects.
#[derive(Clone, Default)]
pub(crate) struct Calls(Arc<Mutex<Vec<Value>>>);

impl Calls {
    pub(crate) fn seen(&self) -> Vec<Value> {
        self.0.lock().expect("calls").clone()
    }
}

#[async_trait::async_trait]
impl duet_runtime::Tool for Calls {
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolResult {
        self.0.lock().expect("calls").push(args.clone());
        ToolResult::ok(format!("done: {args}"))
    }
}

const REFUND: &str = "description: Refunds an order.\nargs: { type: object, properties: { order: { type: string }, amount: { type: number } }, required: [order, amount] }\nbuiltin: refund\napproval:\n  when: { properties: { amount: { exclusiveMinimum: 100 } } }\n";

/// A desk whose model makes `calls` in its first step and says `Done.` in its second.
fn project(calls: &str, refund: &str) -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("approvals");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund, note]\n",
    );
    write("agents/tools/refund.yaml", refund);
    write(
        "agents/tools/note.yaml",
        "description: Notes.\nargs: { type: object, properties: { text: { type: string } } }\nbuiltin: note\n",
    );
    write(
        "agents/models/m.yaml",
        &format!(
            "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: {calls}\n  - text: Done.\n"
        ),
    );
    dir.project()
}

struct Desk {
    rt: Runtime,
    refund: Calls,
    note: Calls,
}

fn desk(project: Arc<duet_spec::Project>, store: &Arc<dyn Store>) -> Desk {
    let (refund, note) = (Calls::default(), Calls::default());
    let rt = support::runtime(project, store.clone())
        .tool("refund", refund.clone())
        .tool("note", note.clone())
        .build();
    Desk { rt, refund, note }
}

/// The approval ids of thread `key`'s pending calls, by call order.
async fn approvals(store: &Arc<dyn Store>, key: &str) -> Vec<i64> {
    let t = store.thread(key).await.expect("read").expect("thread");
    store
        .records(t.id)
        .await
        .expect("records")
        .into_iter()
        .filter(|r| matches!(r.body, RecordBody::ApprovalRequested(_)))
        .map(|r| r.seq)
        .collect()
}

async fn status(store: &Arc<dyn Store>, key: &str) -> (ThreadStatus, i64) {
    let t = store.thread(key).await.expect("read").expect("thread");
    (t.status, t.next_seq)
}

/// The tool results thread `key` holds: (tool, ok, text).
async fn results(store: &Arc<dyn Store>, key: &str) -> Vec<(String, bool, String)> {
    let t = store.thread(key).await.expect("read").expect("thread");
    store
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_name.unwrap_or_default(),
                m.tool_status == Some(ToolStatus::Success),
                m.content.unwrap_or_default(),
            )
        })
        .collect()
}

fn input(decision: Decision) -> DecisionInput {
    DecisionInput {
        decision,
        args: None,
        reason: None,
        text: None,
        remember: None,
    }
}

const ONE: &str = "[{ name: refund, arguments: { order: A1, amount: 250 } }]";

#[tokio::test]
async fn one_pending_call_decided_each_way() {
    struct Case {
        name: &'static str,
        decision: DecisionInput,
        /// What the tool was called with (empty: never).
        ran: Vec<Value>,
        /// The call's result: ok, and a text it contains.
        result: (bool, &'static str),
    }
    let cases = [
        Case {
            name: "approve",
            decision: input(Decision::Approve),
            ran: vec![json!({"order": "A1", "amount": 250})],
            result: (true, "done: "),
        },
        Case {
            name: "edit",
            decision: DecisionInput {
                args: Some(json!({"order": "A1", "amount": 90})),
                ..input(Decision::Edit)
            },
            ran: vec![json!({"order": "A1", "amount": 90})],
            result: (true, "\"amount\":90"),
        },
        Case {
            name: "reject",
            decision: DecisionInput {
                reason: Some("over the limit".into()),
                ..input(Decision::Reject)
            },
            ran: vec![],
            result: (false, "over the limit"),
        },
        Case {
            name: "respond",
            decision: DecisionInput {
                text: Some("Refunded by hand.".into()),
                ..input(Decision::Respond)
            },
            ran: vec![],
            result: (true, "Refunded by hand."),
        },
    ];
    for backend in support::backends().await {
        for case in &cases {
            let store = backend.open().await;
            let d = desk(project(ONE, REFUND), &store);
            let at = format!("{} {}", backend.name(), case.name);
            // One database per backend: a thread per case.
            let k = format!("k-{}", case.name);
            let k = k.as_str();
            support::send(&d.rt, k, Some("desk"), "refund A1").await;
            assert_eq!(status(&store, k).await.0, ThreadStatus::Waiting, "{at}");
            assert!(
                d.refund.seen().is_empty(),
                "{at}: nothing runs before the decision"
            );
            let ids = approvals(&store, k).await;
            assert_eq!(ids.len(), 1, "{at}");
            let decided =
                d.rt.decide(k, ids[0], case.decision.clone(), Some("alice".into()))
                    .await
                    .unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(decided.decision, case.decision.decision, "{at}");
            assert_eq!(d.refund.seen(), case.ran, "{at}: the tool's side effects");
            let results = results(&store, k).await;
            assert_eq!(results.len(), 1, "{at}: {results:?}");
            assert_eq!(results[0].1, case.result.0, "{at}: {results:?}");
            assert!(results[0].2.contains(case.result.1), "{at}: {results:?}");
            // The model was called again after the result: its next message is there.
            let texts = support::texts(&store, k).await;
            assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Done."), "{at}");
            assert_eq!(
                status(&store, k).await.0,
                ThreadStatus::AwaitingHuman,
                "{at}"
            );
            // One decision per approval: a second is refused, naming the first.
            let again =
                d.rt.decide(k, ids[0], input(Decision::Approve), Some("bob".into()))
                    .await;
            match again {
                Err(RunError::DecisionTaken { first, .. }) => {
                    assert_eq!(first.author.as_deref(), Some("alice"), "{at}");
                    assert_eq!(first.decision, case.decision.decision, "{at}");
                }
                other => panic!("{at}: {other:?}"),
            }
            assert_eq!(d.refund.seen(), case.ran, "{at}: ran once at most");
        }
    }
}

#[tokio::test]
async fn parallel_calls_are_decided_one_by_one_in_either_order() {
    let calls = "[{ name: refund, arguments: { order: A1, amount: 250 } }, { name: refund, arguments: { order: A2, amount: 500 } }, { name: note, arguments: { text: x } }]";
    for backend in support::backends().await {
        for first_decided in [0usize, 1] {
            let store = backend.open().await;
            let d = desk(project(calls, REFUND), &store);
            let at = format!("{} deciding call {first_decided} first", backend.name());
            let k = format!("k-{first_decided}");
            let k = k.as_str();
            support::send(&d.rt, k, Some("desk"), "refund both").await;
            // The call that needed no approval ran with the step.
            assert_eq!(d.note.seen(), vec![json!({"text": "x"})], "{at}");
            let ids = approvals(&store, k).await;
            assert_eq!(ids.len(), 2, "{at}: each pending call has its own id");
            let decisions = [
                input(Decision::Approve),
                DecisionInput {
                    reason: Some("no".into()),
                    ..input(Decision::Reject)
                },
            ];
            let order = [first_decided, 1 - first_decided];
            d.rt.decide(k, ids[order[0]], decisions[order[0]].clone(), None)
                .await
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            // Still waiting for the other: the model is not called yet.
            assert_eq!(status(&store, k).await.0, ThreadStatus::Waiting, "{at}");
            d.rt.decide(k, ids[order[1]], decisions[order[1]].clone(), None)
                .await
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(
                d.refund.seen(),
                vec![json!({"order": "A1", "amount": 250})],
                "{at}: only the approved call ran"
            );
            assert_eq!(
                d.note.seen().len(),
                1,
                "{at}: the unguarded call ran exactly once"
            );
            let results = results(&store, k).await;
            assert_eq!(results.len(), 3, "{at}: {results:?}");
            let texts = support::texts(&store, k).await;
            assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Done."), "{at}");
        }
    }
}

#[tokio::test]
async fn refused_decisions_write_nothing() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let d = desk(project(ONE, REFUND), &store);
        let at = backend.name();
        support::send(&d.rt, "k", Some("desk"), "refund A1").await;
        let id = approvals(&store, "k").await[0];
        let before = status(&store, "k").await;
        let bad_edit = DecisionInput {
            args: Some(json!({"order": "A1", "amount": "lots"})),
            ..input(Decision::Edit)
        };
        match d.rt.decide("k", id, bad_edit, None).await {
            Err(RunError::DecisionRefused {
                why: Refusal::InvalidArgs(path),
                ..
            }) => assert!(path.starts_with("/amount"), "{at}: {path}"),
            other => panic!("{at}: {other:?}"),
        }
        match d.rt.decide("k", id, input(Decision::Edit), None).await {
            Err(RunError::DecisionRefused {
                why: Refusal::Incomplete(_),
                ..
            }) => {}
            other => panic!("{at}: {other:?}"),
        }
        match d
            .rt
            .decide("k", id + 1, input(Decision::Approve), None)
            .await
        {
            Err(RunError::UnknownApproval { .. }) => {}
            other => panic!("{at}: {other:?}"),
        }
        assert_eq!(status(&store, "k").await, before, "{at}: nothing written");
        let t = store.thread("k").await.expect("read").expect("thread");
        assert!(store.queue(t.id).await.expect("queue").is_empty(), "{at}");
        assert!(d.refund.seen().is_empty(), "{at}");
    }
}

#[tokio::test]
async fn a_small_amount_needs_no_approval() {
    let calls = "[{ name: refund, arguments: { order: A1, amount: 50 } }]";
    for backend in support::backends().await {
        let store = backend.open().await;
        let d = desk(project(calls, REFUND), &store);
        support::send(&d.rt, "k", Some("desk"), "refund A1").await;
        assert!(
            approvals(&store, "k").await.is_empty(),
            "{}",
            backend.name()
        );
        assert_eq!(d.refund.seen(), vec![json!({"order": "A1", "amount": 50})]);
        assert_eq!(status(&store, "k").await.0, ThreadStatus::AwaitingHuman);
    }
}

#[tokio::test]
async fn another_runtime_takes_the_decision_and_a_changed_definition_refuses_it() {
    for backend in support::backends().await {
        let at = backend.name();
        // A restart (or another process): a new runtime on the same store decides.
        let store = backend.open().await;
        let first = desk(project(ONE, REFUND), &store);
        support::send(&first.rt, "k", Some("desk"), "refund A1").await;
        let id = approvals(&store, "k").await[0];
        drop(first);
        let second = desk(project(ONE, REFUND), &store);
        second
            .rt
            .decide("k", id, input(Decision::Approve), None)
            .await
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_eq!(second.refund.seen().len(), 1, "{at}");

        // The definitions changed under a parked approval: refused as stale, nothing written.
        let unguarded = "description: Refunds an order.\nargs: { type: object, properties: { order: { type: string }, amount: { type: number } }, required: [order, amount] }\nbuiltin: refund\n";
        let narrowed = "description: Refunds an order.\nargs: { type: object, properties: { order: { type: string }, amount: { type: number, maximum: 100 } }, required: [order, amount] }\nbuiltin: refund\napproval: {}\n";
        for (k, (what, refund)) in [
            ("k-removed", ("approval removed", unguarded)),
            ("k-narrowed", ("args narrowed", narrowed)),
        ] {
            let store = backend.open().await;
            let before = desk(project(ONE, REFUND), &store);
            support::send(&before.rt, k, Some("desk"), "refund A1").await;
            let id = approvals(&store, k).await[0];
            let seq = status(&store, k).await;
            let after = desk(project(ONE, refund), &store);
            match after.rt.decide(k, id, input(Decision::Approve), None).await {
                Err(
                    e @ RunError::DecisionRefused {
                        why: Refusal::Stale(_),
                        ..
                    },
                ) => assert_eq!(e.kind(), "stale_definition", "{at} {what}"),
                other => panic!("{at} {what}: {other:?}"),
            }
            assert_eq!(status(&store, k).await, seq, "{at} {what}: nothing written");
            assert!(after.refund.seen().is_empty(), "{at} {what}");
        }
    }
}

/// A refund tool that blocks forever on its first call (after signalling `entered`) — where a
/// crash test kills the run — and counts the calls that return.
struct Stuck {
    first: std::sync::atomic::AtomicBool,
    entered: Arc<tokio::sync::Notify>,
    returned: Calls,
}

#[async_trait::async_trait]
impl duet_runtime::Tool for Stuck {
    async fn call(&self, ctx: ToolContext, args: Value) -> ToolResult {
        if self.first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        duet_runtime::Tool::call(&self.returned, ctx, args).await
    }
}

#[tokio::test]
async fn a_decision_survives_a_crash_and_the_tool_runs_once_on_recovery() {
    use duet_runtime::{CancellationToken, ManualClock};
    for backend in support::backends().await {
        for crash_in_tool in [false, true] {
            let at = format!("{} crash in tool: {crash_in_tool}", backend.name());
            let key = if crash_in_tool { "in-tool" } else { "queued" };
            let store = backend.open().await;
            let project = project(ONE, REFUND);
            let entered = Arc::new(tokio::sync::Notify::new());
            let victim_tool = Stuck {
                first: std::sync::atomic::AtomicBool::new(crash_in_tool),
                entered: entered.clone(),
                returned: Calls::default(),
            };
            let victim = support::runtime(project.clone(), store.clone())
                .tool("refund", victim_tool)
                .tool("note", Calls::default())
                .clock(Arc::new(ManualClock::new(1_000)))
                .build();
            support::send(&victim, key, Some("desk"), "refund A1").await;
            let id = approvals(&store, key).await[0];
            let t = store.thread(key).await.expect("read").expect("thread");
            if crash_in_tool {
                // The decision is taken and drained; the process dies inside the tool.
                let task = tokio::spawn({
                    let victim = victim.clone();
                    async move { victim.decide(key, id, input(Decision::Approve), None).await }
                });
                entered.notified().await;
                task.abort();
                assert!(task.await.is_err_and(|e| e.is_cancelled()), "{at}");
            } else {
                // The decision is queued (and the lease taken); the process dies before its run.
                let call = store
                    .messages(t.id)
                    .await
                    .expect("messages")
                    .into_iter()
                    .find_map(|m| m.tool_calls.first().map(|c| c.id.clone()))
                    .expect("the pending call");
                let decided = duet_runtime::approval::Decided {
                    approval: id,
                    call,
                    tool: "refund".into(),
                    decision: Decision::Approve,
                    args: None,
                    reason: None,
                    text: None,
                    remember: None,
                    author: None,
                    at: 1_000,
                    message_id: None,
                };
                let lease = duet_runtime::Lease {
                    owner: uuid::Uuid::now_v7(),
                    until: 2_000,
                    now: 1_000,
                };
                let side = t.acting.expect("acting");
                let outcome = store
                    .decide(t.id, decided, side, lease)
                    .await
                    .expect("decide");
                assert_eq!(
                    outcome,
                    duet_runtime::DecideOutcome::Accepted { claimed: true },
                    "{at}"
                );
            }
            drop(victim);
            // The next runner, once the dead run's lease has expired, runs the tool once.
            let heir_calls = Calls::default();
            let heir = support::runtime(project.clone(), store.clone())
                .tool("refund", heir_calls.clone())
                .tool("note", Calls::default())
                .clock(Arc::new(ManualClock::new(10_000_000)))
                .build();
            let ran = heir
                .recover(&CancellationToken::new())
                .await
                .expect("recover");
            assert!(ran >= 1, "{at}");
            heir.quiesce().await;
            assert_eq!(
                heir_calls.seen(),
                vec![json!({"order": "A1", "amount": 250})],
                "{at}: the approved call ran once after the crash"
            );
            let texts = support::texts(&store, key).await;
            assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Done."), "{at}");
            assert_eq!(
                heir.recover(&CancellationToken::new())
                    .await
                    .expect("recover"),
                0,
                "{at}"
            );
            assert_eq!(heir_calls.seen().len(), 1, "{at}");
        }
    }
}

#[tokio::test]
async fn approve_for_the_rest_of_the_session_skips_later_calls_of_the_tool() {
    let remembering = format!("{REFUND}  remember: [session, thread]\n");
    // Two steps, each calling refund over the limit, then `Done.`.
    let script = |dir: &support::Scratch| {
        dir.write(
            "agents/models/m.yaml",
            "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1, amount: 250 } }]\n  - tool_calls: [{ name: refund, arguments: { order: A2, amount: 300 } }]\n  - text: Done.\n",
        );
    };
    for backend in support::backends().await {
        for (key, remember, waits_again) in [
            ("remembered", Some(duet_spec::RememberScope::Session), false),
            ("once", None, true),
        ] {
            let at = format!("{} {key}", backend.name());
            let dir = support::Scratch::new("approvals-remember");
            dir.write(
                "agents/agents/desk.yaml",
                "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
            );
            dir.write("agents/prompts/desk.yaml", "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n");
            dir.write("agents/tools/refund.yaml", &remembering);
            script(&dir);
            let store = backend.open().await;
            let d = desk(dir.project(), &store);
            support::send(&d.rt, key, Some("desk"), "refund both").await;
            let first = approvals(&store, key).await;
            assert_eq!(first.len(), 1, "{at}");
            let decision = DecisionInput {
                remember,
                ..input(Decision::Approve)
            };
            d.rt.decide(key, first[0], decision, None)
                .await
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            let asked = approvals(&store, key).await;
            if waits_again {
                assert_eq!(asked.len(), 2, "{at}: the next call waits");
                assert_eq!(status(&store, key).await.0, ThreadStatus::Waiting, "{at}");
                assert_eq!(d.refund.seen().len(), 1, "{at}");
            } else {
                assert_eq!(asked.len(), 1, "{at}: the next call skipped approval");
                assert_eq!(d.refund.seen().len(), 2, "{at}");
                let texts = support::texts(&store, key).await;
                assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Done."), "{at}");
            }
        }
        // An approval that does not offer `remember` refuses it, writing nothing.
        let store = backend.open().await;
        let d = desk(project(ONE, REFUND), &store);
        support::send(&d.rt, "plain", Some("desk"), "refund A1").await;
        let id = approvals(&store, "plain").await[0];
        let decision = DecisionInput {
            remember: Some(duet_spec::RememberScope::Thread),
            ..input(Decision::Approve)
        };
        match d.rt.decide("plain", id, decision, None).await {
            Err(RunError::DecisionRefused {
                why: Refusal::Incomplete(_),
                ..
            }) => {}
            other => panic!("{}: {other:?}", backend.name()),
        }
        assert!(d.refund.seen().is_empty(), "{}", backend.name());
    }
}

#[tokio::test]
async fn a_run_that_waits_on_decisions_says_which_calls_wait() {
    use duet_runtime::{AgentEvent, CancellationToken, Delivered, EventSink};
    let calls = "[{ name: refund, arguments: { order: A1, amount: 250 } }, { name: note, arguments: { text: x } }, { name: refund, arguments: { order: A2, amount: 500 } }]";
    for backend in support::backends().await {
        let at = backend.name();
        let store = backend.open().await;
        let d = desk(project(calls, REFUND), &store);
        let done =
            d.rt.send(
                "k",
                Some("desk"),
                "go",
                &EventSink::discard(),
                &CancellationToken::new(),
            )
            .await;
        let Ok(Delivered::Settled(settled)) = done else {
            panic!("{at}: {done:?}");
        };
        let ids = approvals(&store, "k").await;
        let listed: Vec<(i64, &str, Value)> = settled
            .approvals
            .iter()
            .map(|p| (p.seq, p.tool.as_str(), p.arguments.clone()))
            .collect();
        assert_eq!(
            listed,
            vec![
                (ids[0], "refund", json!({"order": "A1", "amount": 250})),
                (ids[1], "refund", json!({"order": "A2", "amount": 500})),
            ],
            "{at}"
        );
        let AgentEvent::Completed { data: Some(data) } = settled.terminal_event() else {
            panic!("{at}");
        };
        assert_eq!(data["status"], "waiting", "{at}");
        let first = &data["approvals"][0];
        assert_eq!(first["id"], format!("1:{}", ids[0]), "{at}: {data}");
        assert_eq!(first["tool"], "refund", "{at}");
        assert_eq!(
            first["decisions"],
            json!(["approve", "edit", "reject", "respond"]),
            "{at}"
        );
    }
}

#[tokio::test]
async fn an_aborted_wait_ends_the_pending_call_and_a_late_decision_is_refused() {
    use duet_runtime::Scope;
    use duet_runtime::control::{Command, SessionResult};
    for backend in support::backends().await {
        let at = backend.name();
        let store = backend.open().await;
        let d = desk(project(ONE, REFUND), &store);
        support::send(&d.rt, "k", Some("desk"), "refund A1").await;
        let id = approvals(&store, "k").await[0];
        let aborted = d.rt.dispatch(&Scope::new("k"), Command::Abort).await;
        assert!(
            matches!(aborted, SessionResult::Ok { .. }),
            "{at}: {aborted:?}"
        );
        let results = results(&store, "k").await;
        assert_eq!(results.len(), 1, "{at}: {results:?}");
        assert!(
            !results[0].1,
            "{at}: the call ended in an error: {results:?}"
        );
        assert!(
            results[0].2.contains("a person's decision"),
            "{at}: {results:?}"
        );
        let before = status(&store, "k").await;
        match d.rt.decide("k", id, input(Decision::Approve), None).await {
            Err(RunError::UnknownApproval { .. }) => {}
            other => panic!("{at}: {other:?}"),
        }
        assert_eq!(status(&store, "k").await, before, "{at}: nothing written");
        assert!(d.refund.seen().is_empty(), "{at}: the tool never ran");
    }
}

/// A `before_store_tool_result` hook that marks every result it stores.
struct Stamp;

#[async_trait::async_trait]
impl duet_runtime::hooks::Hook for Stamp {
    async fn before_store_tool_result(
        &self,
        _ctx: &duet_runtime::hooks::HookContext<'_>,
        _call: &duet_runtime::ToolCall,
        result: ToolResult,
    ) -> Result<ToolResult, duet_runtime::hooks::HookError> {
        Ok(ToolResult {
            content: format!("{} (stamped)", result.content),
            ..result
        })
    }
}

#[tokio::test]
async fn an_approved_calls_result_passes_the_sides_tool_result_hooks() {
    for backend in support::backends().await {
        let at = backend.name();
        let dir = support::Scratch::new("approvals-hooks");
        dir.write(
            "agents/agents/desk.yaml",
            "name: desk\nhooks: [stamp]\nsideA: { prompt: desk }\nsideB: { human: true }\n",
        );
        dir.write(
            "agents/hooks/stamp.yaml",
            "hook: before_store_tool_result\nid: stamp\n",
        );
        dir.write(
            "agents/prompts/desk.yaml",
            "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n",
        );
        dir.write("agents/tools/refund.yaml", REFUND);
        dir.write(
            "agents/models/m.yaml",
            &format!("name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: {ONE}\n  - text: Done.\n"),
        );
        let store = backend.open().await;
        let refund = Calls::default();
        let rt = support::runtime(dir.project(), store.clone())
            .hooks(duet_runtime::hooks::Hooks::new().with("stamp", Stamp))
            .tool("refund", refund.clone())
            .build();
        support::send(&rt, "k", Some("desk"), "refund A1").await;
        let id = approvals(&store, "k").await[0];
        rt.decide("k", id, input(Decision::Approve), None)
            .await
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        let results = results(&store, "k").await;
        assert_eq!(results.len(), 1, "{at}");
        assert!(results[0].2.ends_with("(stamped)"), "{at}: {results:?}");
    }
}
