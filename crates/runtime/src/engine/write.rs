//! The engine's one write path. Whatever a run persists — a drain, a step, a handler's
//! delivery, a settle, an abort, an activation — is a [`Write`]: the commit a step decided plus
//! what goes around it. [`Runtime::persist`] does it in one fixed order:
//!
//! 1. the new messages pass `before_create_message` (unless the caller already put them
//!    through a stricter check, [`Create::Done`]);
//! 2. what the hooks left is added: their failures as records, the messages they injected, the
//!    values they set; then each NUL in the commit's texts and the thread's becomes U+FFFD
//!    (`crate::nul`: the run keeps what the store writes);
//! 3. the commit, fenced by the run's lease (a park saves the trace context it continues; a
//!    question asked writes its deadline's timers, a decision taken cancels them), with the
//!    drain held for it written first in the same transaction ([`Runtime::hold`]);
//! 4. once committed: a child's new free-text status into its parent's registry (a failure
//!    there is logged: the commit stands and its events are still owed);
//! 5. the events the caller is owed ([`Emit`]), then the step's usage;
//! 6. the hooks that watch committed messages (`after_create_message`);
//! 7. the run's history grows by what was written.
//!
//! Nothing is emitted before the commit it describes, and no other engine module calls the
//! store's `commit`.

use tracing::Instrument;

use super::{Flow, Runtime, emit};
use crate::error::RunError;
use crate::event::EventSink;
use crate::hooks::ActiveHooks;
use crate::model::Usage;
use crate::record::{Record, RecordBody};
use crate::store::{Commit, CommitOutcome, StoreError};
use crate::types::{Message, Role, SideId, Thread};

/// What one commit writes, and what goes with it.
pub(super) struct Write {
    pub(super) commit: Commit,
    pub(super) create: Create,
    pub(super) emit: Emit,
    /// A model step's tokens, sent as the `usage` event after the step's messages.
    pub(super) usage: Option<Usage>,
    /// Skip the commit when, hooks' output included, it writes nothing.
    pub(super) if_any: bool,
    /// When the hooks' records and messages are written: the step's (or drain's, or
    /// delivery's) time, else the commit's.
    pub(super) at: Option<i64>,
    /// A model step's commit that may be held for the run's next commit ([`Runtime::hold`]):
    /// the caller has checked that nothing waits on it (no child waits, no tool read the
    /// journal, the next thing the run does is a model step); `persist` checks the rest (no
    /// hook sees it, no parent copies it, its step has not waited).
    pub(super) may_hold: bool,
}

/// Whether the new messages still pass `before_create_message`.
pub(super) enum Create {
    /// Here, in order, before the commit.
    Here,
    /// Already (a handler's writes pass the strict form, which can reject the delivery).
    Done,
}

/// What the caller is told once the commit is in.
pub(super) enum Emit {
    Nothing,
    /// The events of the committed messages ([`emit::messages`]).
    Messages,
    /// Likewise, but for what the model streamed live ([`emit::streamed`]).
    Streamed(emit::Streamed),
    /// The ends of tool calls answered late, among drained messages ([`emit::tool_ends`]).
    ToolEnds,
}

impl Write {
    /// `commit`, its messages passing the create hooks here, nothing emitted.
    pub(super) fn new(commit: Commit) -> Write {
        Write {
            commit,
            create: Create::Here,
            emit: Emit::Nothing,
            usage: None,
            if_any: false,
            at: None,
            may_hold: false,
        }
    }

    /// `records`, settling: the lease is released unless runnable messages wait.
    pub(super) fn settle(records: Vec<Record>) -> Write {
        Write::new(Commit {
            records,
            settle: true,
            ..Commit::default()
        })
    }

    pub(super) fn emit(self, emit: Emit) -> Write {
        Write { emit, ..self }
    }

    pub(super) fn usage(self, usage: Option<Usage>) -> Write {
        Write { usage, ..self }
    }

    pub(super) fn created(self) -> Write {
        Write {
            create: Create::Done,
            ..self
        }
    }

    /// The hooks' output is stamped `now` (the time of what they ran around).
    pub(super) fn at(self, now: i64) -> Write {
        Write {
            at: Some(now),
            ..self
        }
    }

    /// The step's commit may be held for the run's next commit (see [`Write::may_hold`]).
    pub(super) fn may_hold(self, may_hold: bool) -> Write {
        Write { may_hold, ..self }
    }

    pub(super) fn if_any(self) -> Write {
        Write {
            if_any: true,
            ..self
        }
    }
}

/// Where a write's effects land besides the store: the hooks in force, the caller's events and
/// the run's history. Each is optional: a settle has no hooks, an abort tells no one.
#[derive(Default)]
pub(super) struct Around<'a> {
    pub(super) hooks: Option<&'a mut ActiveHooks>,
    pub(super) events: Option<&'a EventSink>,
    pub(super) history: Option<&'a mut Vec<Message>>,
}

impl<'a> Around<'a> {
    pub(super) fn new(
        hooks: &'a mut ActiveHooks,
        events: &'a EventSink,
        history: &'a mut Vec<Message>,
    ) -> Around<'a> {
        Around {
            hooks: Some(hooks),
            events: Some(events),
            history: Some(history),
        }
    }
}

impl Runtime {
    /// Writes `records` and settles: the lease is released unless runnable messages wait.
    pub(super) async fn finish(
        &self,
        t: &mut Thread,
        records: Vec<Record>,
    ) -> Result<Flow, RunError> {
        t.updated_at = self.now();
        let outcome = self
            .persist(t, Write::settle(records), Around::default())
            .await?;
        Ok(Flow::of(outcome, t))
    }

    /// Records a failed step and stops the run (`step_error`); the session stays open.
    pub(super) async fn step_error(&self, t: &mut Thread, error: &str) -> Result<Flow, RunError> {
        // Inside the step's `invoke_agent` span.
        tracing::Span::current().record(crate::telemetry::attr::ERROR_TYPE, "step_error");
        let records = crate::transition::step_error(t, error, self.now());
        self.finish(t, records).await
    }

    /// Persists `w` in the module's fixed order; see the module docs.
    pub(super) async fn persist(
        &self,
        t: &mut Thread,
        w: Write,
        around: Around<'_>,
    ) -> Result<CommitOutcome, RunError> {
        let Write {
            mut commit,
            create,
            emit: to_emit,
            usage,
            if_any,
            at,
            may_hold,
        } = w;
        let Around {
            mut hooks,
            events,
            history,
        } = around;
        if let Some(hooks) = hooks.as_deref_mut() {
            // Boxed, and only with such a hook (without one it changes nothing): a hook's
            // future is large, and every commit's future would carry its size.
            if let Create::Here = create
                && hooks.has("before_create_message")
            {
                let messages = std::mem::take(&mut commit.messages);
                commit.messages = Box::pin(hooks.before_create_all(t, messages)).await;
            }
            hook_output(t, hooks, at.unwrap_or_else(|| self.now()), &mut commit);
        }
        if if_any && is_empty(&commit) {
            return Ok(CommitOutcome::Committed { queued: false });
        }
        // What the run keeps (its history, its thread) as the store writes it: no NUL.
        crate::nul::commit(&mut commit);
        crate::nul::replace_opt(&mut t.result);
        crate::nul::replace_opt(&mut t.status_text);
        // Only a child has a registry row to copy its status text into.
        let status = t.parent.and_then(|_| {
            commit.records.iter().find_map(|r| match &r.body {
                RecordBody::Status { text } => Some(text.clone()),
                _ => None,
            })
        });
        let status = status.map(|mut text| {
            crate::nul::replace(&mut text);
            text
        });
        let new = commit.messages.clone();
        // Held (nothing is owed until it is written: its events wait with it) when its step
        // never waited (its events are still held back: anything queued meanwhile came in the
        // moment it computed), or written now with whatever the run held.
        let quiet = may_hold && status.is_none() && hooks.as_ref().is_none_or(|h| h.is_empty());
        let held = match events {
            Some(events) if quiet && events.holding() => self.hold(t, commit, events, true),
            _ => Some(commit),
        };
        let outcome = match held {
            None => CommitOutcome::Committed { queued: false },
            Some(commit) => {
                let outcome = self.commit(t, commit).await?;
                // Landed: what the run held back (a step's streamed text) may go now, before
                // the events this write owes.
                if let Some(events) = events {
                    events.settle(true);
                }
                outcome
            }
        };
        if let (Some(text), Some(_)) = (&status, t.parent)
            && let Err(e) = self.inner.store.set_child_status_text(t.id, text).await
        {
            // The registry's copy of what the journal now holds: a failure to update it is
            // said and the run goes on (the commit stands, its events are owed).
            tracing::warn!(thread = %t.key, error = %e, "a child's status text did not reach its parent's registry");
        }
        if let Some(events) = events {
            match &to_emit {
                Emit::Nothing => {}
                Emit::Messages => emit::messages(events, &new),
                Emit::Streamed(live) => emit::streamed(events, &new, Some(live)),
                Emit::ToolEnds => emit::tool_ends(events, &new),
            }
            if let Some(usage) = &usage {
                events.usage(usage);
            }
        }
        if let Some(hooks) = hooks {
            hooks.after_create_message(t, &new).await;
        }
        if let Some(history) = history {
            history.extend(new);
        }
        Ok(outcome)
    }

    /// Holds a drain's or a model step's `commit` (`step`; its messages already in the run's
    /// history, what is owed for them held back) for the run's next commit, which writes it
    /// first: until then the journal does not have it, its queue rows stay queued, and a crash
    /// runs it again. The caller writes it when it comes back (`Some`). The run writes what it
    /// holds on its own ([`Runtime::flush_held`]) before it waits on anything or runs anything
    /// that may read the thread.
    pub(super) fn hold(
        &self,
        t: &Thread,
        commit: Commit,
        events: &EventSink,
        step: bool,
    ) -> Option<Commit> {
        self.inner.held.hold(t, commit, events, step)
    }

    /// Whether anything is held for the run of `t` ([`Runtime::hold`]).
    pub(super) fn holds(&self, t: &Thread) -> bool {
        self.inner.held.holds(t.id, t.lease_owner)
    }

    /// Writes the drain held for the run of `t`, if any, now, as it would have been written
    /// then (the thread as the drain left it). Whether messages wait, as of that commit.
    pub(super) async fn flush_held(&self, t: &Thread) -> Result<bool, RunError> {
        self.flush_held_of(t.id, t.lease_owner).await
    }

    /// [`Runtime::flush_held`] by the thread's id and the run's lease.
    pub(super) async fn flush_held_of(
        &self,
        id: crate::types::ThreadId,
        owner: Option<uuid::Uuid>,
    ) -> Result<bool, RunError> {
        let Some(held) = self.inner.held.take(id, owner) else {
            return Ok(false);
        };
        let outcome = self.commit_now(&held.thread, held.commit).await;
        held.events.settle(outcome.is_ok());
        Ok(outcome? == CommitOutcome::Committed { queued: true })
    }

    /// Writes `commit` under the run's lease (the owner the thread row was claimed with), after
    /// the drain held for it, in one transaction.
    async fn commit(&self, t: &Thread, commit: Commit) -> Result<CommitOutcome, RunError> {
        let Some(held) = self.inner.held.take(t.id, t.lease_owner) else {
            return self.commit_now(t, commit).await;
        };
        let outcome = self.commit_now(t, held.commit.then(commit)).await;
        held.events.settle(outcome.is_ok());
        outcome
    }

    /// Writes `commit` under the run's lease.
    async fn commit_now(&self, t: &Thread, mut commit: Commit) -> Result<CommitOutcome, RunError> {
        // Writing from here on (a park's deadline read included): what the run held is taken,
        // and its events go once this lands.
        let writing = self.inner.held.writing(t.id, t.lease_owner);
        self.mark_park(&mut commit);
        self.schedule_deadlines(t, &mut commit).await;
        // The deadline override as this commit leaves it (set by code, or consumed by a park).
        let deadline_override = commit
            .values
            .iter()
            .rev()
            .find(|(k, _)| k == crate::deadline::OVERRIDE_KEY)
            .map(|(_, v)| v.clone());
        let span = crate::telemetry::commit(&t.key);
        let turns = commit
            .records
            .iter()
            .filter(|r| matches!(r.body, RecordBody::TurnCompleted { .. }))
            .count();
        span.record(crate::telemetry::attr::TURNS, turns);
        let owner = t.lease_owner.ok_or(StoreError::LeaseLost(t.id))?;
        let due = commit.timers.iter().map(|timer| timer.due_at).min();
        // A settling commit of a run asked for its session reads it back with the write.
        let outcome = if commit.settle && self.inner.runs.reports_session(t.id, owner) {
            let written = self
                .inner
                .store
                .commit_reading(t, owner, commit, t.session)
                .instrument(span.clone())
                .await;
            written.map(|(outcome, entries)| {
                let read = entries.filter(|_| outcome == CommitOutcome::Settled);
                self.inner
                    .runs
                    .read_session(t.id, owner, read.map(|e| (t.session, e)));
                outcome
            })
        } else {
            self.inner
                .store
                .commit(t, owner, commit)
                .instrument(span.clone())
                .await
        };
        drop(writing);
        span.record(
            crate::telemetry::attr::OUTCOME,
            match &outcome {
                Ok(_) => "committed",
                Err(StoreError::LeaseLost(_)) => "lease_lost",
                Err(_) => "error",
            },
        );
        let outcome = outcome?;
        if let Some(value) = deadline_override {
            self.inner.runs.know_override(t.id, value);
        }
        // This process's timer loop hears of its own timers at once, whatever the store relays.
        if let Some(at) = due {
            self.inner.timer_wakes.due(at);
        }
        Ok(outcome)
    }
}

fn is_empty(c: &Commit) -> bool {
    c.records.is_empty() && c.messages.is_empty() && c.values.is_empty() && c.journal_only()
}

/// Adds to `commit` what the hooks left: their failures as records, the messages they injected
/// (after the commit's own) and the values they set.
fn hook_output(t: &mut Thread, hooks: &mut ActiveHooks, now: i64, commit: &mut Commit) {
    commit.records.extend(
        std::mem::take(&mut hooks.failures)
            .into_iter()
            .map(|f| Record::new(t.take_seq(), f, now)),
    );
    let writes = hooks.take_writes();
    commit.values.extend(writes.values);
    commit.enqueue.extend(writes.queued);
    commit.timers.extend(writes.timers);
    commit.cancel_timers.extend(writes.cancel);
    commit.files.extend(writes.files);
    for (event, data) in writes.events {
        let seq = t.take_seq();
        commit
            .records
            .push(Record::new(seq, RecordBody::Emitted { event, data }, now));
    }
    if let Some(text) = writes.status {
        t.status_text = Some(text.clone());
        let seq = t.take_seq();
        commit
            .records
            .push(Record::new(seq, RecordBody::Status { text }, now));
    }
    commit.messages.extend(writes.messages.into_iter().map(|w| {
        let writer = match w.role {
            Role::Assistant => Some(SideId::A),
            Role::User => Some(SideId::B),
            _ => None,
        };
        let mut m = Message::text(t.take_seq(), t.session, w.role, writer, w.content, now);
        m.silent = w.silent;
        m.attachments = w.attachments;
        m
    }));
}
