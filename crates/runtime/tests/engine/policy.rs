//! A `tool_call_policy` hook (a duet extension) decides per call, beside the tool's `approval`,
//! on every backend: a denied call never runs (the model gets an error result with the reason,
//! the journal a `tool_call_denied` record, and the model is called again); `ask` makes a call
//! wait as an approval does, with the hook's decisions (approve and reject on a tool with no
//! approval); `allow` waives only a `waivable` approval; a failing hook asks (fail closed). One
//! table of cases, each run to the end: the step, then the decision when the call waits.

use crate::support;

use std::sync::{Arc, Mutex};

use duet_runtime::approval::Refusal;
use duet_runtime::hooks::{Hook, HookContext, HookError, Hooks, Policy, PolicyCall};
use duet_runtime::{
    DecisionInput, RecordBody, Role, RunError, Runtime, Store, ThreadStatus, ToolStatus,
};
use duet_spec::Decision;
use serde_json::json;

use crate::approvals::Calls;

/// A policy hook that gives one answer (or fails), and what it was asked: `(tool, declared an
/// approval, the approval applies)`.
#[derive(Clone)]
struct Fixed {
    answer: Result<Policy, String>,
    asked: Arc<Mutex<Vec<(String, bool, bool)>>>,
}

#[async_trait::async_trait]
impl Hook for Fixed {
    async fn tool_call_policy(
        &self,
        ctx: &HookContext<'_>,
        call: &PolicyCall<'_>,
    ) -> Result<Policy, HookError> {
        assert_eq!(ctx.id, "refund_policy");
        self.asked.lock().expect("asked").push((
            call.call.name.clone(),
            call.approval.is_some(),
            call.applies,
        ));
        self.answer.clone().map_err(HookError::new)
    }
}

/// What became of the call after its step.
#[derive(Debug, PartialEq)]
enum After {
    /// It ran with the step.
    Ran,
    /// It was denied: never ran; the reason is in its error result.
    Denied(&'static str),
    /// It waits, offering these decisions; `by_policy`: the hook asked.
    Waits {
        decisions: Vec<Decision>,
        by_policy: bool,
    },
}

struct Case {
    name: &'static str,
    /// The refund tool's `approval` lines (YAML, indented), or none.
    approval: &'static str,
    amount: u32,
    answer: Result<Policy, String>,
    after: After,
}

fn ask(decisions: Option<Vec<Decision>>) -> Result<Policy, String> {
    Ok(Policy::Ask {
        decisions,
        deadline: None,
    })
}

fn deny(reason: &str) -> Result<Policy, String> {
    Ok(Policy::Deny {
        reason: reason.into(),
    })
}

const OVER_100: &str = "approval:\n  when: { properties: { amount: { exclusiveMinimum: 100 } } }\n  decisions: [approve, reject]\n";
const WAIVABLE: &str = "approval:\n  when: { properties: { amount: { exclusiveMinimum: 100 } } }\n  decisions: [approve, reject]\n  waivable: true\n";

fn cases() -> Vec<Case> {
    use Decision::{Approve, Edit, Reject};
    let tool_asks = || After::Waits {
        decisions: vec![Approve, Reject],
        by_policy: false,
    };
    vec![
        Case {
            name: "no opinion, no approval: runs",
            approval: "",
            amount: 500,
            answer: Ok(Policy::NoOpinion),
            after: After::Ran,
        },
        Case {
            name: "no opinion: the tool's approval decides",
            approval: OVER_100,
            amount: 500,
            answer: Ok(Policy::NoOpinion),
            after: tool_asks(),
        },
        Case {
            name: "deny on a tool with no approval",
            approval: "",
            amount: 5,
            answer: deny("refunds are closed today"),
            after: After::Denied("refunds are closed today"),
        },
        Case {
            name: "deny beats an approval that would ask",
            approval: OVER_100,
            amount: 500,
            answer: deny("over the daily limit"),
            after: After::Denied("over the daily limit"),
        },
        Case {
            name: "ask on a tool with no approval: approve or reject",
            approval: "",
            amount: 5,
            answer: ask(None),
            after: After::Waits {
                decisions: vec![Approve, Reject],
                by_policy: true,
            },
        },
        Case {
            name: "ask where the approval does not apply, with the hook's decisions",
            approval: OVER_100,
            amount: 5,
            answer: ask(Some(vec![Approve, Edit])),
            after: After::Waits {
                decisions: vec![Approve, Edit],
                by_policy: true,
            },
        },
        Case {
            name: "allow does not waive an approval that is not waivable",
            approval: OVER_100,
            amount: 500,
            answer: Ok(Policy::Allow),
            after: tool_asks(),
        },
        Case {
            name: "allow waives a waivable approval",
            approval: WAIVABLE,
            amount: 500,
            answer: Ok(Policy::Allow),
            after: After::Ran,
        },
        Case {
            name: "a failing hook asks (fail closed)",
            approval: "",
            amount: 5,
            answer: Err("policy service unreachable".into()),
            after: After::Waits {
                decisions: vec![Approve, Reject],
                by_policy: true,
            },
        },
    ]
}

fn project(approval: &str, amount: u32) -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("policy");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\nhooks: [refund_policy]\n",
    );
    write(
        "agents/hooks/refund_policy.yaml",
        "id: refund_policy\nhook: tool_call_policy\n",
    );
    write(
        "agents/tools/refund.yaml",
        &format!(
            "description: Refunds an order.\nargs: {{ type: object, properties: {{ order: {{ type: string }}, amount: {{ type: number }} }}, required: [order, amount] }}\nbuiltin: refund\n{approval}"
        ),
    );
    write(
        "agents/models/m.yaml",
        &format!(
            "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{{ name: refund, arguments: {{ order: A1, amount: {amount} }} }}]\n  - text: Done.\n"
        ),
    );
    dir.project()
}

async fn journal(store: &Arc<dyn Store>, key: &str) -> (Vec<RecordBody>, Vec<(bool, String)>) {
    let t = store.thread(key).await.expect("read").expect("thread");
    let records = store.records(t.id).await.expect("records");
    let results = store
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_status == Some(ToolStatus::Success),
                m.content.unwrap_or_default(),
            )
        })
        .collect();
    (records.into_iter().map(|r| r.body).collect(), results)
}

fn decision(d: Decision) -> DecisionInput {
    DecisionInput {
        decision: d,
        args: None,
        reason: None,
        text: None,
        remember: None,
    }
}

#[tokio::test]
async fn a_policy_hook_allows_denies_or_asks_per_call() {
    for backend in support::backends().await {
        for (i, case) in cases().into_iter().enumerate() {
            let at = format!("{}: {}", backend.name(), case.name);
            // One database per backend: a thread per case.
            let key = format!("k{i}");
            let k = key.as_str();
            let store = backend.open().await;
            let refund = Calls::default();
            let hook = Fixed {
                answer: case.answer.clone(),
                asked: Arc::default(),
            };
            let project = project(case.approval, case.amount);
            let rt = Runtime::builder(project, store.clone())
                .providers(duet_models::providers())
                .hooks(Hooks::new().with("refund_policy", hook.clone()))
                .tool("refund", refund.clone())
                .build();
            support::send(&rt, k, Some("desk"), "refund A1").await;
            let args = json!({"order": "A1", "amount": case.amount});
            // The hook saw the call with the tool's approval and whether it applies.
            let declared = !case.approval.is_empty();
            let asked = hook.asked.lock().expect("asked").clone();
            assert_eq!(
                asked,
                vec![("refund".to_owned(), declared, declared && case.amount > 100)],
                "{at}"
            );
            let (records, results) = journal(&store, k).await;
            let ran = refund.seen();
            let status = store.thread(k).await.expect("read").expect("t").status;
            match &case.after {
                After::Ran => {
                    assert_eq!(ran, vec![args.clone()], "{at}");
                    assert_eq!(status, ThreadStatus::AwaitingHuman, "{at}");
                }
                After::Denied(reason) => {
                    assert!(ran.is_empty(), "{at}: a denied call never runs");
                    assert_eq!(results.len(), 1, "{at}: {results:?}");
                    assert!(!results[0].0, "{at}: an error result");
                    assert!(results[0].1.contains(reason), "{at}: {results:?}");
                    let denied: Vec<_> = records
                        .iter()
                        .filter_map(|r| match r {
                            RecordBody::ToolCallDenied {
                                tool, hook, reason, ..
                            } => Some((tool.as_str(), hook.as_str(), reason.as_str())),
                            _ => None,
                        })
                        .collect();
                    assert_eq!(denied, vec![("refund", "refund_policy", *reason)], "{at}");
                    // The model was called again with the error result.
                    let texts = support::texts(&store, k).await;
                    assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Done."), "{at}");
                    assert_eq!(status, ThreadStatus::AwaitingHuman, "{at}");
                }
                After::Waits {
                    decisions,
                    by_policy,
                } => {
                    assert!(ran.is_empty(), "{at}: nothing runs before the decision");
                    assert_eq!(status, ThreadStatus::Waiting, "{at}");
                    let (seq, asked) = records_asked(&store, k).await;
                    assert_eq!(&asked.decisions, decisions, "{at}");
                    assert_eq!(
                        asked.policy.as_deref(),
                        by_policy.then_some("refund_policy"),
                        "{at}"
                    );
                    if case.answer.is_err() {
                        assert!(
                            records.iter().any(|r| matches!(r,
                                RecordBody::HookFailed { kind, .. } if kind == "tool_call_policy")),
                            "{at}: the failure is journaled"
                        );
                    }
                    // A decision the call does not offer is refused; one it offers applies.
                    if !decisions.contains(&Decision::Respond) {
                        let respond = DecisionInput {
                            text: Some("by hand".into()),
                            ..decision(Decision::Respond)
                        };
                        let refused = rt.decide(k, seq, respond, None).await;
                        assert!(
                            matches!(
                                refused,
                                Err(RunError::DecisionRefused {
                                    why: Refusal::NotOffered(Decision::Respond),
                                    ..
                                })
                            ),
                            "{at}: {refused:?}"
                        );
                    }
                    rt.decide(k, seq, decision(Decision::Approve), Some("alice".into()))
                        .await
                        .unwrap_or_else(|e| panic!("{at}: {e}"));
                    assert_eq!(
                        refund.seen(),
                        vec![args.clone()],
                        "{at}: approved, it ran once"
                    );
                    let texts = support::texts(&store, k).await;
                    assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Done."), "{at}");
                }
            }
        }
    }
}

async fn records_asked(store: &Arc<dyn Store>, key: &str) -> (i64, duet_runtime::approval::Asked) {
    let t = store.thread(key).await.expect("read").expect("thread");
    store
        .records(t.id)
        .await
        .expect("records")
        .into_iter()
        .find_map(|r| match r.body {
            RecordBody::ApprovalRequested(a) => Some((r.seq, a)),
            _ => None,
        })
        .expect("an approval_requested record")
}
