//! One model step: the context and the tools on offer, the model call, each tool call routed in
//! order, then the stop rules — committed in one transaction before its events are sent. A step
//! whose blocking subagent calls wait commits with the thread `waiting`, runs those children,
//! and completes when their results are in (`awaits`).

use duet_spec::PromptSide;
use tracing::Instrument;

use super::router::{Dispatched, Offer, StepCalls};
use super::{Flow, Runtime, Turn, emit, hook_output, model_call};
use crate::context;
use crate::decide::{self, CallOutcome};
use crate::error::RunError;
use crate::hooks::Prefiltered;
use crate::model::ModelRequest;
use crate::record::{Record, RecordBody};
use crate::store::Commit;
use crate::tools::ToolResult;
use crate::transition;
use crate::types::{Message, Role, Thread, ThreadId, ThreadStatus, ToolCall};

/// How the tool calls of a step went.
#[derive(Default)]
struct Calls {
    /// What each call produced, in order (`None`: still waiting for a blocking child).
    results: Vec<Option<ToolResult>>,
    /// What is stored for each call: the result after the hooks (`None`: dropped, or waiting).
    stored: Vec<Option<ToolResult>>,
    /// The agent the thread passes to, and which call made the handoff.
    handoff: Option<(String, usize)>,
    /// The blocking children the step waits for: call index, child, child key.
    awaiting: Vec<(usize, ThreadId, String)>,
    /// The `execute_tool` span of each awaited call: its child's runs are inside it.
    awaiting_spans: Vec<tracing::Span>,
}

impl Runtime {
    pub(super) async fn step(
        &self,
        cfg: &PromptSide,
        turn: &Turn<'_>,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
    ) -> Result<Flow, RunError> {
        let (agent, side) = (turn.agent, turn.side);
        let project = self.inner.project.clone();
        let Some(prompt) = project.prompts.get(&cfg.prompt).map(|d| &d.def) else {
            return self
                .step_error(t, &format!("no prompt `{}`", cfg.prompt))
                .await;
        };
        let model = match self.model(&prompt.model) {
            Ok(m) => m,
            Err(e) => return self.step_error(t, &e.message).await,
        };
        let env = self.env(agent, Some(prompt), &turn.scope.env);
        let env_lookup = |k: &str| crate::context::env_value(&env, k);
        let served = self.served_tools(prompt, turn.cancel).await;
        let offer = Offer::new(&project, agent, cfg, prompt, &served, &env_lookup);
        // The hooks of this prompt on this agent, in order; a missing one fails closed.
        let mut hooks = match self.hooks_for(agent, Some(prompt), &env) {
            Ok(active) => active,
            Err(e) => return self.step_error(t, &format!("hooks fail closed: {e}")).await,
        };
        // `immediate` children start when their side first acts, before its first model call.
        if let Some(flow) = self
            .spawn_immediate(agent, cfg, side, t, msgs, &env, &mut hooks, turn.cancel)
            .await?
        {
            return Ok(flow);
        }
        let system = context::system_prompt(&project, prompt, &env, &turn.scope.arguments);
        let system = hooks.after_system_message(t, system).await;
        let context_messages = context::messages(msgs, side, prompt);
        let context_messages = hooks.filter_messages(t, context_messages).await;
        let context_messages = match hooks.prefilter_llm_history(t, context_messages).await {
            Prefiltered::Messages(m) => m,
            Prefiltered::Block(why) => {
                return self
                    .hook_blocked(side, t, msgs, turn.events, hooks, why)
                    .await;
            }
        };
        let request = ModelRequest {
            thread: t.id,
            call_index: context::call_index(msgs, &prompt.model),
            system,
            messages: context_messages,
            tools: offer.specs.clone(),
            tool_choice: prompt.tool_choice,
            parallel_tool_calls: prompt.parallel_tool_calls,
            reasoning: prompt.reasoning.clone(),
            provider_options: prompt.provider_options.clone(),
        };
        // Text streams as it comes — unless a stop tool's response may stand in for it.
        let live_text = cfg.stop_tool_response_property.is_none();
        let chat = model_call::span(&project, &prompt.model);
        if self.inner.capture_content {
            crate::telemetry::record_input(&chat, &request.system, &request.messages);
        }
        let answer =
            match model_call::call(model.as_ref(), request, turn.cancel, turn.events, live_text)
                .instrument(chat.clone())
                .await
            {
                Ok(Some(answer)) => {
                    if self.inner.capture_content {
                        crate::telemetry::record_output(&chat, &answer.text, &answer.calls);
                    }
                    answer
                }
                Ok(None) => return self.abort(t, msgs).await.map(Flow::Done),
                Err(e) => {
                    return self
                        .step_error(t, &format!("model `{}`: {e}", prompt.model))
                        .await;
                }
            };

        let now = self.now();
        let seq = t.take_seq();
        let tool_calls: Vec<ToolCall> = answer
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, (id, name, arguments))| ToolCall {
                id: id.unwrap_or_else(|| format!("call_{seq}_{i}")),
                name,
                arguments,
            })
            .collect();
        let call_refs: Vec<(&str, &serde_json::Value)> = tool_calls
            .iter()
            .map(|c| (c.name.as_str(), &c.arguments))
            .collect();
        let streamed = emit::Streamed {
            seq,
            text: if live_text {
                answer.text.clone()
            } else {
                String::new()
            },
        };
        let text = answer.text;
        let content =
            decide::stop_tool_response(cfg, &call_refs).or((!text.is_empty()).then_some(text));
        let mut message = Message {
            seq,
            session: t.session,
            role: Role::authored_by(side),
            side: Some(side),
            content,
            thinking: (!answer.thinking.is_empty()).then_some(answer.thinking),
            tool_calls,
            tool_call_id: None,
            tool_name: None,
            tool_status: None,
            silent: false,
            model: Some(prompt.model.clone()),
            usage: answer.usage,
            provider_data: answer.provider_data,
            images: Vec::new(),
            created_at: now,
        };

        // Run the tools, in order.
        let mut done = Calls::default();
        // What nested model calls (sub-prompts) of this step cost: the step's usage too.
        let mut nested = None;
        for call in &message.tool_calls {
            if turn.cancel.is_cancelled() {
                t.next_seq = seq;
                return self.abort(t, msgs).await.map(Flow::Done);
            }
            hooks.tool_call_started(t, call).await;
            let tool_span = crate::telemetry::execute_tool(&call.name, &call.id);
            let mut step = StepCalls {
                thread: t,
                history: msgs,
                env: &env,
                hooks: &mut hooks,
                handoff_made: done.handoff.is_some(),
                awaiting: !done.awaiting.is_empty(),
                nested_usage: &mut nested,
            };
            // A cancelled run stops waiting on its tool at once; the step is not committed.
            let dispatched = tokio::select! {
                () = turn.cancel.cancelled() => {
                    t.next_seq = seq;
                    return self.abort(t, msgs).await.map(Flow::Done);
                }
                d = self.route_call(&offer, turn, call, &mut step).instrument(tool_span.clone()) => d,
            };
            if let Dispatched::Done(r) | Dispatched::Handoff(_, r) = &dispatched
                && !r.is_ok()
            {
                tool_span.record(crate::telemetry::attr::ERROR_TYPE, "tool_error");
            }
            let result = match dispatched {
                Dispatched::Done(result) => result,
                Dispatched::Handoff(target, result) => {
                    done.handoff = Some((target, done.stored.len()));
                    result
                }
                Dispatched::Awaiting { child, key } => {
                    done.awaiting.push((done.stored.len(), child, key));
                    done.awaiting_spans.push(tool_span.clone());
                    done.stored.push(None);
                    done.results.push(None);
                    continue;
                }
            };
            let kept = hooks.tool_result(t, call, result.clone()).await;
            // A handoff whose result a hook turned into an error is not made.
            if done
                .handoff
                .as_ref()
                .is_some_and(|(_, at)| *at == done.stored.len())
                && kept.as_ref().is_some_and(|r| !r.is_ok())
            {
                done.handoff = None;
            }
            done.stored.push(kept);
            done.results.push(Some(result));
        }
        if let Some(more) = nested {
            message.usage = Some(message.usage.unwrap_or_default().plus(more));
        }
        let usage = message.usage;
        let calls = message.tool_calls.clone();
        let tool_messages: Vec<Message> = calls
            .iter()
            .zip(&done.stored)
            .filter_map(|(call, r)| Some((call, r.as_ref()?)))
            .map(|(call, r)| tool_message(t, side, call, r, now))
            .collect();
        // A call a hook dropped leaves the history with its result; it still counts below. A
        // call that waits for its child stays.
        message.tool_calls.retain(|c| {
            calls
                .iter()
                .zip(done.stored.iter().zip(&done.results))
                .any(|(k, (s, r))| k.id == c.id && (s.is_some() || r.is_none()))
        });
        t.steps[side] += 1;
        t.steps_total += 1;
        t.updated_at = now;

        let mut new = Vec::with_capacity(2 + tool_messages.len());
        new.push(message);
        new.extend(tool_messages);
        if !done.awaiting.is_empty() {
            return self
                .await_children(
                    t,
                    msgs,
                    new,
                    &calls,
                    (&done.awaiting, &done.awaiting_spans),
                    hooks,
                    turn,
                )
                .await;
        }
        // The stop rules read what was stored (a hook may have rewritten a result); a dropped
        // call counts as it ran.
        let outcomes: Vec<CallOutcome<'_>> = calls
            .iter()
            .zip(done.results.iter().zip(&done.stored))
            .filter_map(|(c, (r, s))| Some((c, s.as_ref().or(r.as_ref())?)))
            .map(|(c, r)| CallOutcome {
                name: &c.name,
                arguments: &c.arguments,
                status: r.status,
                content: &r.content,
            })
            .collect();
        let history = transition::History {
            committed: msgs,
            pending: &new,
        };
        let (mut records, settle) = transition::complete_step(
            agent,
            cfg,
            t,
            side,
            history,
            &outcomes,
            done.handoff.is_some(),
            now,
        );
        drop(outcomes);
        let mut values = Vec::new();
        if let Some((target, at)) = done.handoff {
            let handed = transition::handoff(t, prompt, &target, &calls[at].arguments, now);
            records.push(handed.record);
            new.extend(handed.messages);
            values = handed.values;
        }
        let status_changed = records.iter().find_map(|r| match &r.body {
            RecordBody::Status { text } => Some(text.clone()),
            _ => None,
        });
        let mut commit = Commit {
            messages: hooks.before_create_all(t, new).await,
            records,
            settle,
            values,
            ..Commit::default()
        };
        hook_output(t, &mut hooks, now, &mut commit);
        let new = commit.messages.clone();
        let outcome = self.commit(t, commit).await?;
        // Committed: now the caller may see it (what was not streamed live), and the hooks that
        // watch messages; a child's free-text status shows in its parent's registry.
        emit::streamed(turn.events, &new, Some(&streamed));
        if let Some(usage) = &usage {
            turn.events.usage(usage);
        }
        if let (Some(text), Some(_)) = (&status_changed, t.parent) {
            self.inner.store.set_child_status_text(t.id, text).await?;
        }
        hooks.after_create_message(t, &new).await;
        msgs.extend(new);
        Ok(Flow::of(outcome, t))
    }

    /// A `prefilter_llm_history` hook blocked the step: its message is written by the acting
    /// side and the session ends (`hook_blocked`) before any model call.
    async fn hook_blocked(
        &self,
        side: crate::types::SideId,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        events: &crate::event::EventSink,
        mut hooks: crate::hooks::ActiveHooks,
        why: String,
    ) -> Result<Flow, RunError> {
        let now = self.now();
        let seq = t.take_seq();
        let message = Message::text(
            seq,
            t.session,
            Role::authored_by(side),
            Some(side),
            why.clone(),
            now,
        );
        let message = hooks.before_create_message(t, message).await;
        let records = vec![transition::end_session(
            t,
            crate::types::StopReason::HookBlocked,
            Some(why),
            now,
        )];
        let mut commit = Commit {
            messages: vec![message],
            records,
            settle: true,
            ..Commit::default()
        };
        hook_output(t, &mut hooks, now, &mut commit);
        let new = commit.messages.clone();
        let outcome = self.commit(t, commit).await?;
        emit::messages(events, &new);
        hooks.after_create_message(t, &new).await;
        msgs.extend(new);
        Ok(Flow::of(outcome, t))
    }
}

/// The stored result of `call`.
fn tool_message(
    t: &mut Thread,
    side: crate::types::SideId,
    call: &ToolCall,
    r: &ToolResult,
    now: i64,
) -> Message {
    Message {
        seq: t.take_seq(),
        session: t.session,
        role: Role::Tool,
        side: Some(side),
        content: Some(r.content.clone()),
        thinking: None,
        tool_calls: Vec::new(),
        tool_call_id: Some(call.id.clone()),
        tool_name: Some(call.name.clone()),
        tool_status: Some(r.status),
        silent: false,
        model: None,
        usage: None,
        provider_data: None,
        images: Vec::new(),
        created_at: now,
    }
}

/// A thread that waits: the records saying which calls wait for which children.
pub(super) fn awaited(
    t: &mut Thread,
    calls: &[ToolCall],
    awaiting: &[(usize, ThreadId, String)],
    now: i64,
) -> Vec<Record> {
    t.status = ThreadStatus::Waiting;
    awaiting
        .iter()
        .map(|(at, _, key)| {
            Record::new(
                t.take_seq(),
                RecordBody::ChildAwaited {
                    call: calls[*at].id.clone(),
                    child: key.clone(),
                },
                now,
            )
        })
        .collect()
}
