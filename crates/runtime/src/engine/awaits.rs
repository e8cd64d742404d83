//! A blocking subagent call as a durable await. The step that makes it commits with the thread
//! `waiting` (its other calls' results written, a `child_awaited` record per open call); the run
//! then drives each child it started; when a child's session ends — in this run, or weeks later
//! in another process — its result is queued on the parent as the tool result of that call
//! (`Store::resolve_await`, which also clears the wait), and the parent's next drain writes it.
//! Once no call is open the step completes: the stop rules run over all its results.

use duet_spec::{AgentDef, Side};
use uuid::Uuid;

use super::write::{Around, Write};
use super::{Flow, Runtime, Turn};
use crate::delivery::Settled;
use crate::error::RunError;
use crate::event::EventSink;
use crate::lifecycle;
use crate::store::Commit;
use crate::transition;
use crate::types::{
    Child, ChildStatus, Message, NewQueued, Role, SideId, Thread, ThreadId, ThreadStatus,
    ToolReply, ToolStatus,
};

impl Runtime {
    /// Runs each child a step that now waits (committed `waiting`) started, until that child
    /// settles, inside the `execute_tool` span of the call that waits for it. What they answer
    /// is drained next.
    pub(super) async fn drive_awaited(
        &self,
        children: &[(ThreadId, tracing::Span)],
        turn: &Turn<'_>,
    ) -> Result<Flow, RunError> {
        for (child, span) in children {
            if turn.cancel.is_cancelled() {
                break;
            }
            // The child's first message is queued; run it here unless another run has it.
            let run = Uuid::now_v7();
            if self.inner.store.claim(*child, self.lease(run)).await? {
                let cancel = turn.cancel.child_token();
                let sink = EventSink::discard();
                let driven = self.drive(*child, run, &sink, &cancel, true);
                if let Err(e) = tracing::Instrument::instrument(driven, span.clone()).await {
                    tracing::warn!(child = %child, error = %e, "a blocking child's run failed");
                }
            }
        }
        // Whatever the children answered is in this thread's queue now.
        Ok(Flow::Continue { queued: true })
    }

    /// Completes the step of `side` whose blocking calls have all been answered.
    pub(super) async fn complete_awaited_step(
        &self,
        agent: &AgentDef,
        side: SideId,
        t: &mut Thread,
        msgs: &[Message],
    ) -> Result<Flow, RunError> {
        let Side::Prompt(cfg) = agent.side(side) else {
            // A handoff or a definition change left no prompt to complete: the run goes on.
            t.status = ThreadStatus::Running;
            return Ok(Flow::Continue { queued: false });
        };
        let now = self.now();
        t.status = ThreadStatus::Running;
        let calls = msgs
            .iter()
            .rev()
            .find(|m| m.side == Some(side) && m.model.is_some())
            .map(|m| m.tool_calls.clone())
            .unwrap_or_default();
        let outcomes = transition::outcomes_of(&calls, msgs);
        let (records, settle) = transition::complete_step(
            agent,
            cfg,
            t,
            side,
            transition::History::of(msgs),
            &outcomes,
            false,
            now,
        );
        let write = Write::new(Commit {
            records,
            settle,
            ..Commit::default()
        });
        let outcome = self.persist(t, write, Around::default()).await?;
        Ok(Flow::of(outcome, t))
    }

    /// Aborts a thread that waits for blocking children with no run in flight: its open calls
    /// get error results and it stops `aborted`. `false` when it was not waiting (or another run
    /// took it meanwhile).
    pub(crate) async fn abort_wait(&self, id: ThreadId) -> Result<bool, RunError> {
        let store = &self.inner.store;
        let run = Uuid::now_v7();
        if !store.claim(id, self.lease(run)).await? {
            return Ok(false);
        }
        let Some(mut t) = store.thread_by_id(id).await? else {
            return Ok(false);
        };
        if t.status != ThreadStatus::Waiting {
            // Answered meanwhile: it runs on as any claimed thread would.
            self.drive_in_background(id, run);
            return Ok(false);
        }
        let msgs = store.messages(id).await?;
        self.abort(&mut t, &msgs).await?;
        Ok(true)
    }

    /// The wait of `parent`'s call `call` is over without an answer (an abort): the child that
    /// was to answer it reports, if ever, as an ordinary message.
    pub(super) async fn end_wait(&self, parent: ThreadId, call: &str) -> Result<(), RunError> {
        for c in self.inner.store.children(parent).await? {
            if c.awaiting.as_deref() == Some(call) {
                self.inner.store.set_awaiting(c.child, None).await?;
            }
        }
        Ok(())
    }

    /// If `settled`'s parent waits for it (a blocking call), its session result becomes that
    /// call's tool result: queued on the parent, which runs on if no run holds it. Returns
    /// whether an await was resolved (then nothing else is reported for this session).
    pub(super) async fn resolve_await(
        &self,
        settled: &Settled,
        entry: &Child,
        trace: Option<&str>,
    ) -> Result<bool, RunError> {
        let (Some(call), Some(parent_id)) = (entry.awaiting.as_deref(), settled.parent) else {
            return Ok(false);
        };
        if matches!(
            settled.status,
            ThreadStatus::AwaitingHuman | ThreadStatus::Waiting
        ) {
            // Still on its way: a person (or its own child) answers first.
            return Ok(false);
        }
        let agent = self.inner.project.agents.get(&entry.agent).map(|d| &d.def);
        let returned = self.returned_files(settled, agent).await?;
        let (content, ok) = lifecycle::call_result(settled, agent, &returned.text);
        let Some(parent) = self.inner.store.thread_by_id(parent_id).await? else {
            return Ok(false);
        };
        let call_name = lifecycle::CREATE.to_owned();
        let reply = NewQueued {
            tool: Some(ToolReply {
                call_id: call.to_owned(),
                name: call_name,
                status: if ok {
                    ToolStatus::Success
                } else {
                    ToolStatus::Error
                },
            }),
            trace: trace.map(str::to_owned),
            attachments: returned.attachments,
            ..NewQueued::new(Role::Tool, entry.owner, content)
        };
        let run = Uuid::now_v7();
        let claimed = self
            .inner
            .store
            .resolve_await(entry.child, call, parent.id, reply, self.lease(run))
            .await?;
        match claimed {
            None => Ok(false),
            Some(false) => Ok(true),
            Some(true) => {
                // No run holds the parent: it runs on from here, so whoever answered the child
                // sees the parent settle too.
                let (sink, cancel) = (
                    EventSink::discard(),
                    tokio_util::sync::CancellationToken::new(),
                );
                if let Err(e) = self.drive(parent.id, run, &sink, &cancel, false).await {
                    tracing::warn!(parent = %parent.key, error = %e, "the parent's run after its child's answer failed");
                }
                Ok(true)
            }
        }
    }

    /// `child` was terminated: if its parent's call waits for it, that call's result is the
    /// termination (an error), and the parent runs on.
    pub(crate) async fn answer_terminated(&self, child: &Thread) -> Result<(), RunError> {
        let Some(entry) = self.inner.store.child(child.id).await? else {
            return Ok(());
        };
        let Some(mut settled) = self
            .inner
            .store
            .thread_by_id(child.id)
            .await?
            .map(|t| Settled::of(&t))
        else {
            return Ok(());
        };
        // Terminated reads as an abort of its session: the call's result says it ended early.
        settled.status = ThreadStatus::Terminated;
        settled.stop_reason = Some(crate::types::StopReason::Aborted);
        let trace = self.trace_here();
        self.resolve_await(&settled, &entry, trace.as_deref())
            .await
            .map(|_| ())
    }

    /// The registry status for a settled child run.
    pub(super) fn child_status(&self, settled: &Settled, entry: &Child) -> ChildStatus {
        let agent = self.inner.project.agents.get(&entry.agent).map(|d| &d.def);
        lifecycle::status_of(settled, agent)
    }
}
