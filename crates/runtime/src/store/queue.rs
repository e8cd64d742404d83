//! The queue table: inbound messages waiting, durably, for a thread's runner.

use async_trait::async_trait;
use uuid::Uuid;

use super::{Lease, StoreError};
use crate::types::{NewQueued, Queued, ThreadId};

/// Queueing inbound messages (a runner drains them in [`super::CommitStore::commit`]).
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// Queues `message` durably, then tries to take the lease if `claim` is given. Serialised
    /// with [`super::CommitStore::commit`] on the thread row, so a message is either seen by a
    /// settling runner or finds the lease free: never stranded. Returns whether the lease was
    /// taken.
    async fn enqueue(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Option<Lease>,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Takes the lease if it is free or expired and, only then, queues `message`: a delivery that
    /// is refused when the thread is busy (`invoke`'s `session_busy`). Returns whether it went in.
    async fn deliver_if_free(
        &self,
        id: ThreadId,
        message: NewQueued,
        lease: Lease,
    ) -> Result<bool, StoreError>;
    /// Queues `message` only if a run holds the thread (a live lease); returns that run's id.
    /// The control plane's `steer` and `follow_up`: they modulate a run, never start one.
    async fn enqueue_if_running(
        &self,
        id: ThreadId,
        message: NewQueued,
        now: i64,
    ) -> Result<Option<Uuid>, StoreError>;
    /// A thread's queued inbound messages in arrival order.
    async fn queue(&self, id: ThreadId) -> Result<Vec<Queued>, StoreError>;
}
