//! A step's tool calls, run in order: each one announced to the hooks, routed (`router`) inside
//! its `execute_tool` span, and its result passed through the `tool_result` hooks. What they
//! came to is data for the step's plan (`crate::plan::CallsDone`); the children that blocking
//! calls wait for are driven after the step's commit.

use tracing::Instrument;

use super::super::approvals::{Gate, gate};
use super::super::router::{Dispatched, Offer, StepCalls};
use super::super::{Runtime, Turn};
use super::setup::Setup;
use crate::hooks::PolicyCall;
use crate::model::Usage;
use crate::plan::{CallDone, CallsDone};
use crate::record::RecordBody;
use crate::tools::ToolResult;
use crate::types::{Message, Thread, ThreadId, ToolCall};

/// A step's calls, run.
pub(in crate::engine) struct Ran {
    pub(in crate::engine) done: CallsDone,
    /// The children that blocking calls wait for, each with its call's `execute_tool` span
    /// (their runs are inside it).
    pub(in crate::engine) children: Vec<(ThreadId, tracing::Span)>,
    /// What nested model calls (sub-prompts) cost: the step's usage too.
    pub(in crate::engine) nested: Option<Usage>,
}

impl Runtime {
    /// Runs `calls` in order. `None`: the run was cancelled (a cancelled run stops waiting on
    /// its tool at once; nothing of the step is committed).
    pub(in crate::engine) async fn run_calls(
        &self,
        offer: &Offer<'_>,
        turn: &Turn<'_>,
        t: &Thread,
        msgs: &[Message],
        s: &mut Setup<'_>,
        calls: &[ToolCall],
    ) -> Option<Ran> {
        let mut ran = Ran {
            done: CallsDone::default(),
            children: Vec::new(),
            nested: None,
        };
        for (at, call) in calls.iter().enumerate() {
            if turn.cancel.is_cancelled() {
                return None;
            }
            s.hooks.tool_call_started(t, call).await;
            // A policy hook and the tool's `approval` decide whether the call runs now, never
            // (denied) or after a person's decision.
            if offer.is_tool(&call.name)
                && let Some(tool) = self.inner.project.tools.get(&call.name)
            {
                let approval = tool.def.approval.as_ref();
                let applies = approval.is_some_and(|a| a.applies(&call.arguments));
                let asking = PolicyCall {
                    call,
                    approval,
                    applies,
                };
                let policy = s.hooks.tool_call_policy(t, &asking).await;
                let remembered = applies && self.remembered(t, &call.name).await;
                let revision = &self.inner.project.revision;
                match gate(&tool.def, call, revision, policy, applies, remembered) {
                    Gate::Run => {}
                    Gate::Wait(asked) => {
                        ran.done.approvals.push((at, *asked));
                        ran.done.calls.push(CallDone::default());
                        continue;
                    }
                    Gate::Deny { hook, reason } => {
                        let result = ToolResult::error(format!(
                            "This call was denied by policy and did not run: {reason}"
                        ));
                        s.hooks.record(RecordBody::ToolCallDenied {
                            call: call.id.clone(),
                            tool: call.name.clone(),
                            hook,
                            reason,
                        });
                        ran.done.calls.push(CallDone {
                            result: Some(result.clone()),
                            stored: Some(result),
                        });
                        continue;
                    }
                }
            }
            let tool_span = crate::telemetry::execute_tool(&call.name, &call.id);
            let mut step = StepCalls {
                thread: t,
                history: msgs,
                env: &s.env,
                hooks: &mut s.hooks,
                handoff_made: ran.done.handoff.is_some(),
                awaiting: !ran.done.awaiting.is_empty(),
                nested_usage: &mut ran.nested,
            };
            // Boxed: a tool's future (an HTTP call, an MCP server, a sub-prompt, code) is the
            // largest of a step's; inline, every step's future would carry, and move, its size.
            let routed = Box::pin(self.route_call(offer, turn, call, &mut step));
            let dispatched = tokio::select! {
                () = turn.cancel.cancelled() => return None,
                d = routed.instrument(tool_span.clone()) => d,
            };
            if let Dispatched::Done(r) | Dispatched::Handoff(_, r) | Dispatched::Scheduled(_, r) =
                &dispatched
                && !r.is_ok()
            {
                tool_span.record(crate::telemetry::attr::ERROR_TYPE, "tool_error");
            }
            let result = match dispatched {
                Dispatched::Done(result) => result,
                Dispatched::Scheduled(timer, result) => {
                    ran.done.scheduled.push((at, timer));
                    result
                }
                Dispatched::Handoff(target, result) => {
                    ran.done.handoff = Some((target, at));
                    result
                }
                Dispatched::Awaiting { child, key } => {
                    ran.done.awaiting.push((at, key));
                    ran.children.push((child, tool_span.clone()));
                    ran.done.calls.push(CallDone::default());
                    continue;
                }
            };
            // A terminal tool's `attachmentsProperty` paths must be files of this thread.
            let result = match turn.agent.side(turn.side) {
                duet_spec::Side::Prompt(cfg) => {
                    let pending = s.hooks.pending_files();
                    self.bind_attachments(cfg, call, (t.id, &pending), result)
                        .await
                }
                _ => result,
            };
            let kept = s.hooks.tool_result(t, call, result.clone()).await;
            // A handoff whose result a hook turned into an error is not made.
            if ran.done.handoff.as_ref().is_some_and(|(_, h)| *h == at)
                && kept.as_ref().is_some_and(|r| !r.is_ok())
            {
                ran.done.handoff = None;
            }
            // So is an effect whose scheduling result a hook turned into an error.
            if kept.as_ref().is_some_and(|r| !r.is_ok()) {
                ran.done.scheduled.retain(|(i, _)| *i != at);
            }
            ran.done.calls.push(CallDone {
                result: Some(result),
                stored: kept,
            });
        }
        Some(ran)
    }
}
