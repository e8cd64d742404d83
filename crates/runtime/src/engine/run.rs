//! The run loop: while a run holds a thread's lease it drains queued messages into the journal,
//! asks `decide::next` what to do, does it (a model step, a handler turn, a settle), commits, and
//! only then emits — until the thread settles.

use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::lease::LeaseGuard;
use super::write::{Around, Emit, Write};
use super::{ChildScope, Flow, Runtime, Turn};
use crate::decide::{self, Next};
use crate::delivery::Settled;
use crate::error::RunError;
use crate::event::EventSink;
use crate::store::{Commit, CommitOutcome, ReadBack, StoreError};
use crate::telemetry::RunTrace;
use crate::transition;
use duet_spec::Side;

use crate::types::{Message, Role, StopReason, Thread, ThreadId, ThreadStatus, ToolStatus};

impl Runtime {
    /// Runs a thread whose lease run `run` holds, renewing the lease meanwhile, then reports a
    /// child's outcome to its parent. `inline`: a parent drives this child's run and waits for it
    /// (a blocking spawn): the run stops at its session's end, and what was queued meanwhile runs
    /// on in the background. Boxed: a child's run may run its parent, so runs recurse.
    pub(super) fn drive<'a>(
        &'a self,
        id: ThreadId,
        run: Uuid,
        events: &'a EventSink,
        cancel: &'a CancellationToken,
        inline: bool,
    ) -> futures::future::BoxFuture<'a, Result<Settled, RunError>> {
        self.drive_from(id, run, None, false, events, cancel, inline)
    }

    /// [`Runtime::drive`] from `start`, the run's first read when the write that claimed the
    /// lease read it too (`None`: the run reads it); `report`: the run's outcome carries its
    /// session's entries when its settling write read them ([`crate::Claim::reporting_session`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn drive_from<'a>(
        &'a self,
        id: ThreadId,
        run: Uuid,
        start: Option<crate::store::RunStart>,
        report: bool,
        events: &'a EventSink,
        cancel: &'a CancellationToken,
        inline: bool,
    ) -> futures::future::BoxFuture<'a, Result<Settled, RunError>> {
        Box::pin(async move {
            let guard = LeaseGuard::hold(self, id, run, cancel);
            if report {
                self.inner.runs.report_session(id, run);
            }
            let mut trace = RunTrace::default();
            // The run's messages as it leaves them: what its settling write read of its session
            // names its earlier messages by seq, and they are taken from here.
            let mut history = Vec::new();
            // Boxed, as the step below is: a run's future is large, and held inline this one
            // would be as large, and each would be copied whole as it is made.
            let result = Box::pin(self.run(
                id,
                run,
                start,
                events,
                &guard.abort,
                &guard.lost,
                inline,
                &mut trace,
                &mut history,
            ))
            .await;
            // Only a run asked for its session has one to take (no lock for the others).
            let read = report
                .then(|| self.inner.runs.take_session(id, run))
                .flatten();
            drop(guard);
            if matches!(result, Err(RunError::ShuttingDown)) {
                // Stopped between commits: the thread is as its last commit left it, and the
                // next process to look continues it.
                if let Err(e) = self.inner.store.release(id, run).await {
                    tracing::warn!(thread = %id, error = %e, "giving the lease back failed");
                }
            }
            let (result, rest) = match result {
                Ok((mut settled, rest)) => {
                    // Read by the write that settled it, of the session it settled in.
                    settled.session_entries = read
                        .filter(|(session, _)| *session == settled.session)
                        .and_then(|(_, read)| ReadBack::fill(read, &history));
                    drop(history);
                    (Ok(self.with_approvals(settled).await), rest)
                }
                Err(e) => (Err(e), false),
            };
            if let Ok(settled) = &result
                && settled.parent.is_some()
            {
                self.after_child_settled(settled, inline, rest, trace.last.as_deref())
                    .await;
            }
            if rest {
                // Stopped at its session's end with messages waiting: they run on in the
                // background under the same lease, reporting as a non-blocking child does.
                self.drive_in_background(id, run);
            }
            result
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        id: ThreadId,
        run: Uuid,
        start: Option<crate::store::RunStart>,
        events: &EventSink,
        cancel: &CancellationToken,
        lost: &CancellationToken,
        inline: bool,
        trace: &mut RunTrace,
        msgs: &mut Vec<Message>,
    ) -> Result<(Settled, bool), RunError> {
        let store = &self.inner.store;
        // The thread, its history and its queue, read at once — or with the write that took
        // the lease (the queue is read again whenever a commit says messages wait).
        let start = match start {
            Some(start) => start,
            None => store.run_start(id).await?,
        };
        let crate::store::RunStart {
            thread,
            messages,
            queue,
            deadline_override,
        } = start;
        *msgs = messages;
        if let Some(value) = deadline_override {
            self.inner.runs.know_override(id, value);
        }
        let mut t = thread.ok_or_else(|| RunError::UnknownThread(id.to_string()))?;
        // Read after the claim: another run may have taken the lease since (its commits, and a
        // drain this run holds, are fenced and keyed by the owner the row names).
        if t.lease_owner != Some(run) {
            return Err(StoreError::LeaseLost(id).into());
        }
        let mut first_queue = Some(queue);
        let project = self.inner.project.clone();
        // The queue is read when a commit said messages wait (and once at the start): each
        // commit reports the queue as of its own transaction, right before the next step.
        let mut queued = true;
        // Set when a settle kept the lease because messages waited (the run goes on): the last
        // seq of that commit, for the `run_continued` record the next drain writes first.
        let mut continued: Option<i64> = None;
        // Read once per run: a child's arguments and scoped env never change after its spawn.
        let scope = self.child_scope(&t).await?;
        if t.session == 0 {
            // A new thread: `after_thread_created` runs before anything else does. (Should the
            // process die before the first session opens, it runs again: hooks are meant to be
            // idempotent.)
            self.thread_created(&mut t, &scope).await?;
        }
        loop {
            if lost.is_cancelled() {
                return Err(StoreError::LeaseLost(id).into());
            }
            if self.inner.detached.is_cancelled() {
                // Steps held for a later commit are written: the next process goes on from them.
                if let Err(e) = self.flush_held_of(id, Some(run)).await {
                    tracing::warn!(thread = %id, error = %e, "held steps were not written at shutdown");
                }
                return Err(RunError::ShuttingDown);
            }
            if cancel.is_cancelled() {
                return self.abort(&mut t, msgs).await.map(|s| (s, false));
            }
            if queued {
                let queue = match first_queue.take() {
                    Some(queue) => queue,
                    None => store.queue(id).await?,
                };
                let queue = transition::drainable(&t, queue);
                self.trace_drain(&t, &queue, trace).await;
                if !queue.is_empty() {
                    let after = continued.take();
                    queued = self
                        .drain(&mut t, msgs, queue, after, &scope, events)
                        .await?;
                } else {
                    queued = false;
                }
            }
            let session_was_open = t.session_open;
            // The definitions may have changed since the thread parked: one that lost what
            // it needs fails here, its answer (drained above) kept.
            if let Some(why) = crate::stale::missing(&project, &t) {
                let error = format!(
                    "the definitions changed under this thread (now revision {}): {why}",
                    project.revision
                );
                match self.step_error(&mut t, &error).await? {
                    Flow::Done(settled) => return Ok((settled, false)),
                    Flow::Continue { queued: more } => {
                        queued |= more;
                        continue;
                    }
                }
            }
            // Looked up each round: a handoff changes the thread's agent.
            let agent = &project
                .agents
                .get(&t.agent)
                .ok_or_else(|| RunError::UnknownAgent(t.agent.clone()))?
                .def;
            // Calls a person approved (or edited) run now, their results written.
            if t.status == ThreadStatus::Waiting
                && self
                    .run_approved(agent, &mut t, msgs, &scope, events)
                    .await?
            {
                queued = true;
            }
            let flow = if t.status == ThreadStatus::Waiting
                && let Some(side) = t.acting
                && transition::open_calls(msgs, side).is_empty()
            {
                // Every blocking child this step waited for has answered: the step completes.
                self.complete_awaited_step(agent, side, &mut t, msgs)
                    .await?
            } else {
                match decide::next(agent, &t) {
                    Next::Settle => {
                        // Nothing to run. A thread left `running` with no side to act (never made
                        // by this engine, but a journal from elsewhere could) stops rather than
                        // being recovered forever.
                        let records = if t.status == ThreadStatus::Running {
                            vec![transition::stop(&mut t, StopReason::Aborted, self.now())]
                        } else {
                            Vec::new()
                        };
                        self.finish(&mut t, records).await?
                    }
                    Next::EndSession(reason) => {
                        let result = decide::cap_result(agent, msgs);
                        let records =
                            vec![transition::end_session(&mut t, reason, result, self.now())];
                        self.finish(&mut t, records).await?
                    }
                    Next::Park => {
                        let records = vec![transition::park(
                            &mut t,
                            StopReason::AwaitingHuman,
                            self.now(),
                        )];
                        self.finish(&mut t, records).await?
                    }
                    Next::Stop(reason) => {
                        let records = vec![transition::stop(&mut t, reason, self.now())];
                        self.finish(&mut t, records).await?
                    }
                    Next::Handler(side) | Next::Step(side) => {
                        let turn = Turn {
                            agent,
                            side,
                            scope: &scope,
                            events,
                            cancel,
                        };
                        let span = crate::telemetry::invoke_agent(
                            &agent.name,
                            &t.key,
                            crate::types::side_str(side),
                        );
                        self.trace_step(&span, trace);
                        let flow = match decide::side(agent, side) {
                            Side::Handler(cfg) => {
                                // A handler's code may read the thread: what the run holds is
                                // written first.
                                queued |= self.flush_held(&t).await?;
                                self.handler_turn(cfg, &turn, &mut t, msgs)
                                    .instrument(span.clone())
                                    .await
                            }
                            Side::Prompt(cfg) => {
                                // Boxed: passed by value, a step's future would be held
                                // twice in the run's (as the argument, and pinned), and
                                // copied whole each time.
                                let step = Box::pin(
                                    self.step(cfg, &turn, &mut t, msgs).instrument(span.clone()),
                                );
                                self.until_it_waits(id, run, events, step).await.map(
                                    |(flow, more)| {
                                        queued |= more;
                                        flow
                                    },
                                )
                            }
                            Side::Human(_) => continue,
                        };
                        if let Err(e) = &flow {
                            span.record(crate::telemetry::attr::ERROR_TYPE, e.kind());
                        }
                        flow?
                    }
                }
            };
            match flow {
                Flow::Done(settled) => return Ok((settled, false)),
                Flow::Continue { queued: more } => {
                    // A commit that left the thread settled, yet the run holds its lease:
                    // messages waited, and the run goes on with them.
                    if !matches!(t.status, ThreadStatus::Running | ThreadStatus::Waiting) {
                        continued = Some(t.next_seq - 1);
                    }
                    if session_was_open && !t.session_open && t.parent.is_some() {
                        if inline {
                            // The parent waits for this session's outcome; what was queued
                            // meanwhile runs on in a run of its own (the lease is still held).
                            return Ok((Settled::of(&t), true));
                        }
                        // The run goes on with the next session: this one reports now, before
                        // the next can.
                        self.report_session(&t, trace.last.as_deref()).await;
                    }
                    queued |= more;
                }
            }
        }
    }

    /// Drives `step`, the run's next model step, and writes what the run holds for its commit
    /// (a drain, earlier steps' commits: [`Runtime::hold`]) the moment the step first waits on
    /// anything — a model on the network, a hook's code, a read — before the step goes on:
    /// while anyone outside the run could look or act, the journal shows it. A step that never
    /// waits (a model answering in the process) writes it with its own commit, or adds its own
    /// to it for the next step's, so nothing can tell the two apart. A drain still held when
    /// the step ends is written then (whatever is held is dropped if the step failed: the
    /// messages stay queued for the next run, and what was streamed meanwhile is not sent).
    /// Also whether such a write found messages waiting.
    async fn until_it_waits<F>(
        &self,
        id: ThreadId,
        run: Uuid,
        events: &EventSink,
        step: F,
    ) -> Result<(Flow, bool), RunError>
    where
        F: std::future::Future<Output = Result<Flow, RunError>>,
    {
        let mut step = std::pin::pin!(step);
        let mut queued = false;
        // Until the step first waits, what it streams is held back: a step that never waits
        // sends nothing before its commit (or the one its commit is held for) has landed.
        events.hold();
        let flow = loop {
            match futures::poll!(step.as_mut()) {
                std::task::Poll::Ready(flow) => break flow,
                // Waiting on its own write, the step has waited on nothing outside the run yet:
                // polled again once the write has moved.
                std::task::Poll::Pending if self.inner.held.is_writing(id, Some(run)) => {
                    futures::pending!();
                }
                // On anything else, what is held is written and sent first.
                std::task::Poll::Pending => {
                    queued = self.flush_held_of(id, Some(run)).await?;
                    events.settle(true);
                    break step.await;
                }
            }
        };
        match flow {
            // A step's commit held on purpose waits for the run's next commit (its events with
            // it); a drain the step did not write (it committed nothing) is written now.
            Ok(flow) if self.inner.held.holds_steps(id, Some(run)) => Ok((flow, queued)),
            Ok(flow) => {
                queued |= self.flush_held_of(id, Some(run)).await?;
                events.settle(true);
                Ok((flow, queued))
            }
            Err(e) => {
                if let Some(held) = self.inner.held.take(id, Some(run)) {
                    held.events.settle(false);
                }
                events.settle(false);
                Err(e)
            }
        }
    }

    /// Runs `after_thread_created` (the agent's hooks: no prompt is active yet).
    async fn thread_created(&self, t: &mut Thread, scope: &ChildScope) -> Result<(), RunError> {
        let agent = self.agent_def(&t.agent)?;
        // A missing hook is reported by the first step, which fails closed.
        let Ok(mut hooks) = self.hooks_for(agent, None, &self.env(agent, None, &scope.env)) else {
            return Ok(());
        };
        if !hooks.has("after_thread_created") {
            return Ok(());
        }
        hooks.after_thread_created(t).await;
        let around = Around {
            hooks: Some(&mut hooks),
            ..Around::default()
        };
        self.persist(t, Write::new(Commit::default()).if_any(), around)
            .await?;
        Ok(())
    }

    /// Persists the queued messages `queue` (see [`transition::drain`]); their inserts pass the
    /// create hooks of the side about to act, and late tool results its tool-result hooks.
    /// `continued`: the run settled in its last commit and went on (messages waited), so the
    /// drain opens with a `run_continued` record naming that commit's last seq.
    /// Returns whether more messages arrived meanwhile.
    async fn drain(
        &self,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        queue: Vec<crate::types::Queued>,
        continued: Option<i64>,
        scope: &ChildScope,
        events: &EventSink,
    ) -> Result<bool, RunError> {
        let now = self.now();
        let marker = continued.map(|after| {
            crate::record::Record::new(
                t.take_seq(),
                crate::record::RecordBody::RunContinued { after },
                now,
            )
        });
        // A late tool result whose call is no longer open (answered by an abort, or made by a
        // step that never committed) has nothing to answer: it is dropped.
        let open: Vec<String> = match t.acting {
            Some(side) if queue.iter().any(|q| q.tool.is_some()) => {
                transition::open_calls(msgs, side)
                    .into_iter()
                    .map(|c| c.id.clone())
                    .collect()
            }
            _ => Vec::new(),
        };
        let (queue, stale): (Vec<_>, Vec<_>) = queue.into_iter().partition(|q| {
            q.tool
                .as_ref()
                .is_none_or(|r| t.status == ThreadStatus::Waiting && open.contains(&r.call_id))
        });
        for q in &stale {
            tracing::warn!(thread = %t.key, queued = q.id, "a late tool result answers no open call; dropped");
        }
        let plain = stale.is_empty()
            && queue
                .iter()
                .all(|q| q.tool.is_none() && q.decision.is_none());
        let mut commit = transition::drain(t, &queue, &scope.arguments, now);
        commit.records.splice(0..0, marker);
        commit.drained.extend(stale.iter().map(|q| q.id));
        let acting = t.acting.unwrap_or(crate::types::SideId::A);
        let agent = self.agent_def(&t.agent).ok();
        // Should the side's hooks not resolve, they run for none of them: that side's step
        // fails closed.
        let mut hooks = agent.and_then(|agent| self.side_hooks(agent, acting, scope).ok());
        // Plain messages that no hook sees and no event is owed for, before a model step: held
        // for the step's commit (`docs/decisions.md`, "a drain held for the step's commit").
        if plain
            && hooks.as_ref().is_none_or(|h| h.is_empty())
            && agent.is_some_and(|agent| model_next(agent, t))
        {
            let messages = commit.messages.clone();
            match self.hold(t, commit, events, false) {
                None => {
                    msgs.extend(messages);
                    return Ok(false);
                }
                Some(back) => commit = back,
            }
        }
        // Hooks may read the thread: steps held for a later commit are written first.
        if hooks.as_ref().is_some_and(|h| !h.is_empty()) && self.holds(t) {
            self.flush_held(t).await?;
        }
        if let Some(hooks) = hooks.as_mut() {
            let mut messages = Vec::with_capacity(commit.messages.len());
            for mut m in std::mem::take(&mut commit.messages) {
                if let Some(call) = late_call(msgs, &m) {
                    let result = crate::tools::ToolResult {
                        status: m.tool_status.unwrap_or(ToolStatus::Success),
                        content: m.content.clone().unwrap_or_default(),
                        attachments: m.attachments.clone(),
                    };
                    // A late result cannot leave the history (its call is committed): a hook's
                    // `None` keeps it as it was.
                    if let Some(kept) = hooks.tool_result(t, &call, result).await {
                        m.tool_status = Some(kept.status);
                        m.content = Some(kept.content);
                    }
                }
                messages.push(m);
            }
            commit.messages = messages;
        }
        let around = Around {
            hooks: hooks.as_mut(),
            events: Some(events),
            history: Some(msgs),
        };
        let outcome = self
            .persist(t, Write::new(commit).emit(Emit::ToolEnds).at(now), around)
            .await?;
        Ok(outcome == CommitOutcome::Committed { queued: true })
    }

    /// Stops the run on an abort: a tool call still waiting for a blocking child gets an error
    /// result (the wait is over; the child stops with its parent, or answers later as an
    /// ordinary message), and queued messages stay queued for the next delivery — an aborted
    /// thread is not run again by recovery.
    pub(super) async fn abort(
        &self,
        t: &mut Thread,
        msgs: &[Message],
    ) -> Result<Settled, RunError> {
        let now = self.now();
        let mut commit = Commit {
            settle: true,
            release: true,
            ..Commit::default()
        };
        if let Some(side) = t.acting {
            for call in transition::open_calls(msgs, side) {
                self.end_wait(t.id, &call.id).await?;
                // A call of a tool that needs approval waited for a person; any other for its
                // subagent.
                let waited_for = if self
                    .inner
                    .project
                    .tools
                    .get(&call.name)
                    .is_some_and(|d| d.def.approval.is_some())
                {
                    "a person's decision"
                } else {
                    "its subagent"
                };
                let mut m = Message::text(
                    t.take_seq(),
                    t.session,
                    Role::Tool,
                    Some(side),
                    format!("The run was aborted while this call waited for {waited_for}."),
                    now,
                );
                m.tool_call_id = Some(call.id.clone());
                m.tool_name = Some(call.name.clone());
                m.tool_status = Some(ToolStatus::Error);
                commit.messages.push(m);
            }
        }
        commit
            .records
            .push(transition::stop(t, StopReason::Aborted, now));
        self.persist(t, Write::new(commit), Around::default())
            .await?;
        Ok(Settled::released(t))
    }
}

/// Whether the next thing the run does for `t` is a model step (what a drain, or a step's
/// commit, may be held for).
pub(super) fn model_next(agent: &duet_spec::AgentDef, t: &Thread) -> bool {
    t.status != ThreadStatus::Waiting
        && match decide::next(agent, t) {
            Next::Step(side) => matches!(decide::side(agent, side), Side::Prompt(_)),
            _ => false,
        }
}

/// For a late tool result, the call it answers (from the committed history).
fn late_call(history: &[Message], m: &Message) -> Option<crate::types::ToolCall> {
    if m.role != Role::Tool {
        return None;
    }
    let id = m.tool_call_id.as_deref()?;
    history
        .iter()
        .rev()
        .flat_map(|h| h.tool_calls.iter())
        .find(|c| c.id == id)
        .cloned()
}
