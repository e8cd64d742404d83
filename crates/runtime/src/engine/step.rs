//! One model step: the context and the tools on offer, the model call, each tool call routed in
//! order, then what the step writes — planned as data (`crate::plan`: the messages, the stop
//! rules' records, a wait on blocking children) and persisted by the one write path before its
//! events are sent. A step whose blocking subagent calls wait commits with the thread
//! `waiting`, then runs those children (`awaits`).
//!
//! - `setup`: the step's definitions, model, env, hooks, and the model request they shape.
//! - `calls`: the model's tool calls, run in order.

mod calls;
mod setup;

use duet_spec::PromptSide;

use super::write::{Around, Emit, Write};
use super::{Flow, Runtime, Turn, emit};
use crate::error::RunError;
use crate::plan;
use crate::record::Record;
use crate::transition;
use crate::types::{Message, Role, SideId, StopReason, Thread};

impl Runtime {
    pub(super) async fn step(
        &self,
        cfg: &PromptSide,
        turn: &Turn<'_>,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
    ) -> Result<Flow, RunError> {
        let project = self.inner.project.clone();
        let mut s = match self.setup(&project, cfg, turn).await {
            Ok(s) => s,
            Err(why) => return self.step_error(t, &why).await,
        };
        let (agent, side, prompt) = (turn.agent, turn.side, s.prompt);
        // What the run holds for the step's commit is written before anything that may read
        // the store or wait while holding one of its connections: the side's hooks (steps of
        // the other side, held, are not theirs to miss), `immediate` children (they may read
        // the journal), an MCP server's listing, the files the model is sent.
        if self.holds(t)
            && (!s.hooks.is_empty()
                || super::immediate::has_immediate(cfg)
                || self.names_servers(prompt)
                || msgs.iter().any(|m| !m.attachments.is_empty()))
        {
            self.flush_held(t).await?;
        }
        let served = self.served_tools(prompt, turn.cancel).await;
        let env_lookup = |k: &str| crate::context::env_value(&s.env, k);
        let offer = super::router::Offer::new(&project, agent, cfg, prompt, &served, &env_lookup);
        // `immediate` children start when their side first acts, before its first model call.
        // Boxed, and only for a side that has them: inline, every step's future would carry
        // the size of theirs.
        if super::immediate::has_immediate(cfg)
            && let Some(flow) = Box::pin(self.spawn_immediate(
                agent,
                cfg,
                side,
                t,
                msgs,
                &s.env,
                &mut s.hooks,
                turn.cancel,
            ))
            .await?
        {
            return Ok(flow);
        }
        let request = match self.request(&offer, &mut s, turn, t, msgs).await {
            Ok(request) => request,
            Err(why) => return self.hook_blocked(side, t, msgs, turn, s.hooks, why).await,
        };
        // Text streams as it comes — unless a stop tool's response may stand in for it.
        let live_text = cfg.stop_tool_response_property.is_none();
        let answer = match self.ask(&s, request, turn, live_text).await {
            Ok(Some(answer)) => answer,
            Ok(None) => return self.abort(t, msgs).await.map(Flow::Done),
            Err(e) => {
                let why = format!("model `{}`: {e}", prompt.model);
                return self.step_error(t, &why).await;
            }
        };
        let live = emit::Streamed {
            seq: t.next_seq,
            text: if live_text {
                answer.text.clone()
            } else {
                String::new()
            },
        };
        // A tool may read the journal: a drain held for the step's commit is written before
        // any tool but a fixed `result` runs.
        let tools_read = answer
            .calls
            .iter()
            .any(|(_, name, _)| !offer.is_tool(name) || !fixed_result(&project, name));
        if tools_read {
            self.flush_held(t).await?;
        }
        let now = self.now();
        let mut message = plan::model_message(t, side, cfg, &prompt.model, answer, now);
        let calls = &message.tool_calls;
        let Some(ran) = self.run_calls(&offer, turn, t, msgs, &mut s, calls).await else {
            // Cancelled: nothing of the step is committed.
            t.next_seq = live.seq;
            return self.abort(t, msgs).await.map(Flow::Done);
        };
        if let Some(more) = ran.nested {
            message.usage = Some(message.usage.unwrap_or_default().plus(more));
        }
        let usage = message.usage;
        let of = plan::StepOf {
            agent,
            cfg,
            prompt,
            side,
            history: msgs,
            now,
        };
        let plan = plan::step(t, of, message, ran.done);
        let waits = plan.waits;
        let commit = plan.into_commit();
        // A step that ran nothing but its model, with another model step next, may be held for
        // that step's commit (`docs/decisions.md`, "a step's commit held for the next one's").
        let may_hold = !waits
            && !tools_read
            && commit.journal_only()
            && self
                .agent_def(&t.agent)
                .is_ok_and(|agent| super::run::model_next(agent, t));
        let write = Write::new(commit)
            .emit(Emit::Streamed(live))
            .usage(usage)
            .at(now)
            .may_hold(may_hold);
        let around = Around::new(&mut s.hooks, turn.events, msgs);
        let outcome = self.persist(t, write, around).await?;
        if waits {
            return self.drive_awaited(&ran.children, turn).await;
        }
        Ok(Flow::of(outcome, t))
    }

    /// A `prefilter_llm_history` hook blocked the step: its message is written by the acting
    /// side and the session ends (`hook_blocked`) before any model call.
    async fn hook_blocked(
        &self,
        side: SideId,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        turn: &Turn<'_>,
        mut hooks: crate::hooks::ActiveHooks,
        why: String,
    ) -> Result<Flow, RunError> {
        let now = self.now();
        let (seq, session) = (t.take_seq(), t.session);
        let message = Message::text(
            seq,
            session,
            Role::authored_by(side),
            Some(side),
            why.clone(),
            now,
        );
        let end: Record = transition::end_session(t, StopReason::HookBlocked, Some(why), now);
        let write = Write::new(crate::store::Commit {
            messages: vec![message],
            records: vec![end],
            settle: true,
            ..crate::store::Commit::default()
        })
        .emit(Emit::Messages)
        .at(now);
        let around = Around::new(&mut hooks, turn.events, msgs);
        let outcome = self.persist(t, write, around).await?;
        Ok(Flow::of(outcome, t))
    }
}

/// Whether tool `name` is a fixed `result` (a template over its arguments) that needs no
/// approval: running it reads nothing of the thread.
fn fixed_result(project: &duet_spec::Project, name: &str) -> bool {
    project.tools.get(name).is_some_and(|tool| {
        tool.def.approval.is_none()
            && matches!(
                tool.def.implementation,
                Some(duet_spec::ToolImpl::Result(_))
            )
    })
}
