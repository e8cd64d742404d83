//! Leases (columns of the threads table): at most one runner per thread, in any process.

use async_trait::async_trait;
use uuid::Uuid;

use super::StoreError;
use crate::types::ThreadId;

/// A lease claim: `owner` holds the thread until `until` (ms), as of `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The run that holds (or asks for) the lease.
    pub owner: Uuid,
    /// When the lease runs out (ms).
    pub until: i64,
    /// The time of the claim (ms): a lease that ran out before it is free.
    pub now: i64,
}

/// What renewing a lease found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Renewed; `abort_requested`: another process asked this run to abort.
    Held {
        /// Whether an abort was requested for the run.
        abort_requested: bool,
    },
    /// The lease is gone: the run must stop.
    Lost,
}

/// Taking, keeping and finding leases.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes the lease if it is free or expired.
    async fn claim(&self, id: ThreadId, lease: Lease) -> Result<bool, StoreError>;
    /// Extends a lease this owner holds.
    async fn renew(&self, id: ThreadId, lease: Lease) -> Result<Renewal, StoreError>;
    /// Asks the run holding the thread to abort (it sees the request when it next renews its
    /// lease); returns that run's id, or `None` when no run holds the thread.
    async fn request_abort(&self, id: ThreadId, now: i64) -> Result<Option<Uuid>, StoreError>;
    /// Threads that need a runner: running with an expired lease, or with *runnable* queued
    /// messages and no live lease. A queued message is runnable unless the thread was aborted
    /// (stop reason `aborted`: its queue waits for the next delivery), or the thread is `waiting`
    /// and the message is not a late tool result.
    async fn recoverable(&self, now: i64) -> Result<Vec<ThreadId>, StoreError>;
    /// Claims up to `owners.len()` [recoverable](LeaseStore::recoverable) threads at once, the
    /// n-th claimed for `owners[n]` until `until`: what it claimed, as (thread, owner). Safe to
    /// call from many processes at once: on Postgres the rows are picked `FOR UPDATE SKIP
    /// LOCKED`, so concurrent callers split the work instead of queueing on each other.
    async fn claim_runnable(
        &self,
        owners: &[Uuid],
        until: i64,
        now: i64,
    ) -> Result<Vec<(ThreadId, Uuid)>, StoreError>;
    /// Gives the lease back (a run stopping at shutdown): the thread is at once recoverable by
    /// any process. Whether `owner` held it.
    async fn release(&self, id: ThreadId, owner: Uuid) -> Result<bool, StoreError>;
}
