//! The timer table: durable time. A timer is a thing to do at a time on a thread — an effect to
//! run, or a question's deadline to act on — written in the same commit as the step that made it
//! (so it exists exactly when that step does), claimed when due by one process at a time, run
//! at least once, retried with backoff and finally `failed`.
//!
//! A claim is a lease on the timer (`claimed_by` until `claimed_until`): a process that dies
//! holding it loses it when it runs out, and any process takes the timer over.

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::StoreError;
use crate::types::ThreadId;

/// What a timer does when it falls due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerKind {
    /// Runs the effect `name` (`agents/effects/`) with `args`, with the thread's state.
    Effect,
    /// Acts on a question's or a pending tool call's deadline: `name` is the action (`remind`,
    /// `escalate`, `default`), `subject` what it waits on.
    Deadline,
}

impl TimerKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            TimerKind::Effect => "effect",
            TimerKind::Deadline => "deadline",
        }
    }

    /// The kind stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "effect" => Some(TimerKind::Effect),
            "deadline" => Some(TimerKind::Deadline),
            _ => None,
        }
    }
}

/// Where a timer is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerStatus {
    /// Waiting for its time (or for its next attempt).
    Pending,
    /// Claimed by a process that is running it.
    Processing,
    /// Ran.
    Completed,
    /// Ran out of attempts, or can never run (its effect is gone, its arguments refused).
    Failed,
    /// Cancelled before it ran.
    Cancelled,
}

impl TimerStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            TimerStatus::Pending => "pending",
            TimerStatus::Processing => "processing",
            TimerStatus::Completed => "completed",
            TimerStatus::Failed => "failed",
            TimerStatus::Cancelled => "cancelled",
        }
    }

    /// The status stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(TimerStatus::Pending),
            "processing" => Some(TimerStatus::Processing),
            "completed" => Some(TimerStatus::Completed),
            "failed" => Some(TimerStatus::Failed),
            "cancelled" => Some(TimerStatus::Cancelled),
            _ => None,
        }
    }

    /// Whether the timer is done with (completed, failed or cancelled).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TimerStatus::Completed | TimerStatus::Failed | TimerStatus::Cancelled
        )
    }
}

/// A timer to write with a commit ([`super::Commit::timers`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NewTimer {
    /// Its id (what `scheduleEffect` returns).
    pub id: Uuid,
    /// What it does.
    pub kind: TimerKind,
    /// The effect's name, or the deadline's action.
    pub name: String,
    /// The effect's arguments, or what the deadline's action needs.
    pub args: serde_json::Value,
    /// What it belongs to (a question's park, a pending call's approval), so the commit that
    /// settles that can cancel it ([`super::Commit::cancel_subjects`]); `None` for an effect.
    pub subject: Option<String>,
    /// When it falls due (ms since the Unix epoch).
    pub due_at: i64,
    /// How many times it may be tried before it is `failed` (at least 1).
    pub max_attempts: u32,
}

/// A stored timer.
#[derive(Clone, Debug, PartialEq)]
pub struct Timer {
    /// Its id.
    pub id: Uuid,
    /// The thread it acts on.
    pub thread: ThreadId,
    /// What it does.
    pub kind: TimerKind,
    /// The effect's name, or the deadline's action.
    pub name: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// What it belongs to, if anything.
    pub subject: Option<String>,
    /// When it falls due (its next attempt's time while it is retried).
    pub due_at: i64,
    /// When it was written.
    pub created_at: i64,
    /// Where it is in its life.
    pub status: TimerStatus,
    /// How many times it was claimed to run.
    pub attempts: u32,
    /// How many times it may be.
    pub max_attempts: u32,
    /// The last attempt's error, if it failed.
    pub last_error: Option<String>,
    /// When its status last changed.
    pub updated_at: i64,
    /// The process holding it while `processing`, and until when.
    pub claimed_by: Option<Uuid>,
    /// Until when that claim holds (ms).
    pub claimed_until: Option<i64>,
}

/// What running a claimed timer came to ([`TimerStore::finish_timer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimerOutcome {
    /// It ran.
    Completed,
    /// It failed and is not tried again.
    Failed {
        /// Why.
        error: String,
    },
    /// It failed and is tried again at `at`, unless that was its last attempt (then `failed`).
    Retry {
        /// When to try again.
        at: i64,
        /// Why it failed.
        error: String,
    },
    /// It could not run yet (its thread is busy): pending again at `at`, the attempt not
    /// counted.
    Defer {
        /// When to try again.
        at: i64,
    },
}

/// Which timers [`TimerStore::timers`] lists.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimerQuery<'a> {
    /// Only this thread's.
    pub thread: Option<ThreadId>,
    /// Only those with this status.
    pub status: Option<TimerStatus>,
    /// Only those of this kind.
    pub kind: Option<TimerKind>,
    /// Only those with this name.
    pub name: Option<&'a str>,
    /// Only those after this one in the listing's order (the last of the previous page).
    pub after: Option<(i64, Uuid)>,
    /// List the latest due first (`(due_at, id)` descending) instead of the earliest.
    pub newest_first: bool,
    /// At most this many.
    pub limit: usize,
}

/// What [`TimerStore::cancel_timer`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum CancelOutcome {
    /// It was pending and is now cancelled.
    Cancelled(Timer),
    /// It is not pending (running, or done with): unchanged.
    NotPending(Timer),
    /// No such timer.
    NotFound,
}

/// Counts of timers, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerCounts {
    /// Pending, not yet due.
    pub pending: u64,
    /// Pending and due (`due_at <= now`): waiting for a process to claim them.
    pub due: u64,
    /// Being run.
    pub processing: u64,
    /// Failed.
    pub failed: u64,
}

/// What a subscriber to [`TimerStore::timer_wakeups`] hears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerWake {
    /// A timer was written (or put back) that falls due at this time (ms).
    Due(i64),
    /// Wakeups may have been missed: read [`TimerStore::next_due`] again.
    Resync,
}

/// The timer table. Timers are written by commits ([`super::Commit::timers`]); this trait finds,
/// claims, finishes and cancels them.
#[async_trait]
pub trait TimerStore: Send + Sync {
    /// Timers under `query`, in `(due_at, id)` order (descending with `newest_first`).
    async fn timers(&self, query: &TimerQuery<'_>) -> Result<Vec<Timer>, StoreError>;
    /// One timer.
    async fn timer(&self, id: Uuid) -> Result<Option<Timer>, StoreError>;
    /// Cancels timer `id` if it is pending.
    async fn cancel_timer(&self, id: Uuid, now: i64) -> Result<CancelOutcome, StoreError>;
    /// When the next timer needs a process: the earliest `due_at` of a pending timer, or
    /// `claimed_until` of a processing one (a claim that runs out is taken over). `None`: no
    /// timer waits.
    async fn next_due(&self) -> Result<Option<i64>, StoreError>;
    /// Claims up to `limit` timers that need a process as of `now` (pending and due, or
    /// processing with a claim that ran out), earliest first, for `owner` until `until`: each
    /// becomes `processing` with one more attempt. Safe from many processes at once: on Postgres
    /// the rows are picked `FOR UPDATE SKIP LOCKED`, so no timer is claimed twice.
    async fn claim_due(
        &self,
        owner: Uuid,
        until: i64,
        now: i64,
        limit: usize,
    ) -> Result<Vec<Timer>, StoreError>;
    /// Records what running timer `id` came to, if `owner` still holds its claim (whether it
    /// did). A retry past the last attempt is `failed`.
    async fn finish_timer(
        &self,
        id: Uuid,
        owner: Uuid,
        outcome: TimerOutcome,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// How many timers are pending, due, processing and failed as of `now`.
    async fn timer_counts(&self, now: i64) -> Result<TimerCounts, StoreError>;
    /// A subscription to timers being written, from any process ([`TimerWake`]): first a
    /// `Resync` once live, then the due time of every timer written or put back after that.
    fn timer_wakeups(&self) -> BoxStream<'static, TimerWake>;
}

/// An in-process fan-out of [`TimerWake`]s, for store implementations: publishing never waits,
/// and a subscriber that lags gets a `Resync` in place of what it missed.
#[derive(Clone, Debug)]
pub struct WakeHub {
    tx: tokio::sync::broadcast::Sender<TimerWake>,
}

impl Default for WakeHub {
    fn default() -> Self {
        let (tx, _) = tokio::sync::broadcast::channel(256);
        WakeHub { tx }
    }
}

impl WakeHub {
    /// Tells every subscriber a timer falls due at `at`.
    pub fn due(&self, at: i64) {
        let _ = self.tx.send(TimerWake::Due(at));
    }

    /// Tells every subscriber to read the next due time again.
    pub fn resync(&self) {
        let _ = self.tx.send(TimerWake::Resync);
    }

    /// A new subscriber, live at once: a `Resync`, then everything published from now on.
    pub fn subscribe(&self) -> BoxStream<'static, TimerWake> {
        use futures::StreamExt;
        futures::stream::once(async { TimerWake::Resync })
            .chain(self.subscribe_silently())
            .boxed()
    }

    /// A new subscriber without the opening `Resync`: for a hub whose source says itself when
    /// its subscribers are live (with [`WakeHub::resync`]), as a store listening to another
    /// process's wakeups does.
    pub fn subscribe_silently(&self) -> BoxStream<'static, TimerWake> {
        use futures::StreamExt;
        use tokio::sync::broadcast::error::RecvError;
        futures::stream::unfold(self.tx.subscribe(), |mut rx| async move {
            match rx.recv().await {
                Ok(wake) => Some((wake, rx)),
                Err(RecvError::Lagged(_)) => Some((TimerWake::Resync, rx)),
                Err(RecvError::Closed) => None,
            }
        })
        .boxed()
    }

    /// How many subscribers it has.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }
}
