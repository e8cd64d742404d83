//! The memory store's timer table: [`TimerStore`] with the SQL stores' semantics, and what a
//! commit writes to it.

use async_trait::async_trait;
use futures::stream::BoxStream;
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::store::{
    CancelOutcome, Commit, NewTimer, StoreError, Timer, TimerCounts, TimerOutcome, TimerQuery,
    TimerStatus, TimerStore, TimerWake,
};
use crate::types::ThreadId;

/// What a commit writes to the timer table, taken out of it before the rest is applied.
#[derive(Debug, Default)]
pub(super) struct TimerWrites {
    timers: Vec<NewTimer>,
    cancel: Vec<Uuid>,
    subjects: Vec<String>,
    done: Vec<Uuid>,
}

impl TimerWrites {
    fn take(commit: &mut Commit) -> Self {
        TimerWrites {
            timers: std::mem::take(&mut commit.timers),
            cancel: std::mem::take(&mut commit.cancel_timers),
            subjects: std::mem::take(&mut commit.cancel_subjects),
            done: std::mem::take(&mut commit.timers_done),
        }
    }

    /// A conflict the commit would hit (a timer id taken), checked before anything is written.
    fn check(&self, state: &State) -> Result<(), StoreError> {
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.timers {
            if state.timers.contains_key(&t.id) || !seen.insert(t.id) {
                return Err(StoreError::Conflict(format!("timer {} exists", t.id)));
            }
        }
        Ok(())
    }

    /// Applies the writes for thread `thread` at `now`; the due times of the timers written.
    pub(super) fn apply(self, state: &mut State, thread: ThreadId, now: i64) -> Vec<i64> {
        for t in state.timers.values_mut() {
            let mine = t.thread == thread && t.status == TimerStatus::Pending;
            let named = self.cancel.contains(&t.id)
                || t.subject
                    .as_ref()
                    .is_some_and(|s| self.subjects.contains(s));
            if mine && named {
                t.status = TimerStatus::Cancelled;
                t.updated_at = now;
            }
            if t.thread == thread
                && t.status == TimerStatus::Processing
                && self.done.contains(&t.id)
            {
                t.status = TimerStatus::Completed;
                t.updated_at = now;
                t.claimed_by = None;
                t.claimed_until = None;
            }
        }
        let mut due = Vec::new();
        for n in self.timers {
            due.push(n.due_at);
            state.timers.insert(
                n.id,
                Timer {
                    id: n.id,
                    thread,
                    kind: n.kind,
                    name: n.name,
                    args: n.args,
                    subject: n.subject,
                    due_at: n.due_at,
                    created_at: now,
                    status: TimerStatus::Pending,
                    attempts: 0,
                    max_attempts: n.max_attempts.max(1),
                    last_error: None,
                    updated_at: now,
                    claimed_by: None,
                    claimed_until: None,
                },
            );
        }
        due
    }
}

impl State {
    /// What `commit` writes to the timer table, taken out of it and checked against the table
    /// before anything is written (a method here, not a path the parent names: the parent
    /// naming this module while it names the parent's types would be a circle).
    pub(super) fn timer_writes(&self, commit: &mut Commit) -> Result<TimerWrites, StoreError> {
        let writes = TimerWrites::take(commit);
        writes.check(self)?;
        Ok(writes)
    }
}

/// Whether `t` needs a process as of `now`.
fn needs_process(t: &Timer, now: i64) -> bool {
    match t.status {
        TimerStatus::Pending => t.due_at <= now,
        TimerStatus::Processing => t.claimed_until.is_some_and(|u| u < now),
        _ => false,
    }
}

#[async_trait]
impl TimerStore for MemoryStore {
    async fn timers(&self, q: &TimerQuery<'_>) -> Result<Vec<Timer>, StoreError> {
        let state = self.state();
        let mut out: Vec<Timer> = state
            .timers
            .values()
            .filter(|t| q.thread.is_none_or(|id| t.thread == id))
            .filter(|t| q.status.is_none_or(|s| t.status == s))
            .filter(|t| q.kind.is_none_or(|k| t.kind == k))
            .filter(|t| q.name.is_none_or(|n| t.name == n))
            .filter(|t| {
                q.after.is_none_or(|after| {
                    let at = (t.due_at, t.id);
                    if q.newest_first {
                        at < after
                    } else {
                        at > after
                    }
                })
            })
            .cloned()
            .collect();
        out.sort_by_key(|t| (t.due_at, t.id));
        if q.newest_first {
            out.reverse();
        }
        out.truncate(q.limit);
        Ok(out)
    }

    async fn timer(&self, id: Uuid) -> Result<Option<Timer>, StoreError> {
        Ok(self.state().timers.get(&id).cloned())
    }

    async fn cancel_timer(&self, id: Uuid, now: i64) -> Result<CancelOutcome, StoreError> {
        let mut state = self.state();
        let Some(t) = state.timers.get_mut(&id) else {
            return Ok(CancelOutcome::NotFound);
        };
        if t.status != TimerStatus::Pending {
            return Ok(CancelOutcome::NotPending(t.clone()));
        }
        t.status = TimerStatus::Cancelled;
        t.updated_at = now;
        Ok(CancelOutcome::Cancelled(t.clone()))
    }

    async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        let state = self.state();
        Ok(state
            .timers
            .values()
            .filter_map(|t| match t.status {
                TimerStatus::Pending => Some(t.due_at),
                TimerStatus::Processing => t.claimed_until,
                _ => None,
            })
            .min())
    }

    async fn claim_due(
        &self,
        owner: Uuid,
        until: i64,
        now: i64,
        limit: usize,
    ) -> Result<Vec<Timer>, StoreError> {
        let mut state = self.state();
        let mut due: Vec<(i64, Uuid)> = state
            .timers
            .values()
            .filter(|t| needs_process(t, now))
            .map(|t| (t.due_at, t.id))
            .collect();
        due.sort();
        due.truncate(limit);
        let mut out = Vec::with_capacity(due.len());
        for (_, id) in due {
            if let Some(t) = state.timers.get_mut(&id) {
                t.status = TimerStatus::Processing;
                t.attempts += 1;
                t.claimed_by = Some(owner);
                t.claimed_until = Some(until);
                t.updated_at = now;
                out.push(t.clone());
            }
        }
        Ok(out)
    }

    async fn finish_timer(
        &self,
        id: Uuid,
        owner: Uuid,
        outcome: TimerOutcome,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let Some(t) = state.timers.get_mut(&id) else {
            return Ok(false);
        };
        if t.status != TimerStatus::Processing || t.claimed_by != Some(owner) {
            return Ok(false);
        }
        t.claimed_by = None;
        t.claimed_until = None;
        t.updated_at = now;
        let mut wake = None;
        match outcome {
            TimerOutcome::Completed => t.status = TimerStatus::Completed,
            TimerOutcome::Failed { error } => {
                t.status = TimerStatus::Failed;
                t.last_error = Some(error);
            }
            TimerOutcome::Retry { at, error } => {
                t.last_error = Some(error);
                if t.attempts >= t.max_attempts {
                    t.status = TimerStatus::Failed;
                } else {
                    t.status = TimerStatus::Pending;
                    t.due_at = at;
                    wake = Some(at);
                }
            }
            TimerOutcome::Defer { at } => {
                t.status = TimerStatus::Pending;
                t.attempts = t.attempts.saturating_sub(1);
                t.due_at = at;
                wake = Some(at);
            }
        }
        drop(state);
        if let Some(at) = wake {
            self.wakes.due(at);
        }
        Ok(true)
    }

    async fn timer_counts(&self, now: i64) -> Result<TimerCounts, StoreError> {
        let state = self.state();
        let mut c = TimerCounts::default();
        for t in state.timers.values() {
            match t.status {
                TimerStatus::Pending if t.due_at <= now => c.due += 1,
                TimerStatus::Pending => c.pending += 1,
                TimerStatus::Processing => c.processing += 1,
                TimerStatus::Failed => c.failed += 1,
                _ => {}
            }
        }
        Ok(c)
    }

    fn timer_wakeups(&self) -> BoxStream<'static, TimerWake> {
        self.wakes.subscribe()
    }
}
