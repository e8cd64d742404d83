//! The children table: the subagent registry, written outside either thread's lease.

use async_trait::async_trait;

use super::Lease;
use super::StoreError;
use crate::types::{Child, ChildStatus, NewQueued, ThreadId};

/// The subagent registry.
#[async_trait]
pub trait RegistryStore: Send + Sync {
    /// Adds a child to its parent's registry (or replaces the entry).
    async fn put_child(&self, child: &Child) -> Result<(), StoreError>;
    /// Sets a registry entry's lifecycle status; `false` if there is no such child.
    async fn set_child_status(
        &self,
        child: ThreadId,
        status: ChildStatus,
    ) -> Result<bool, StoreError>;
    /// Sets a registry entry's free-text status; `false` if there is no such child.
    async fn set_child_status_text(&self, child: ThreadId, text: &str) -> Result<bool, StoreError>;
    /// Sets (or clears) the parent's tool call that waits for `child`; `false` if there is no
    /// such child.
    async fn set_awaiting(&self, child: ThreadId, call: Option<&str>) -> Result<bool, StoreError>;
    /// Answers a waiting call, exactly once: if `call` of the parent waits for `child`, clears the
    /// wait, queues `reply` on `parent` and tries the parent's lease with `claim`, all in one
    /// transaction. `None` when nothing waited (someone answered first, or the wait was ended);
    /// else whether the lease was taken.
    async fn resolve_await(
        &self,
        child: ThreadId,
        call: &str,
        parent: ThreadId,
        reply: NewQueued,
        claim: Lease,
    ) -> Result<Option<bool>, StoreError>;
    /// A thread's registry entry as a child, if it is one.
    async fn child(&self, child: ThreadId) -> Result<Option<Child>, StoreError>;
    /// A parent's children, oldest first.
    async fn children(&self, parent: ThreadId) -> Result<Vec<Child>, StoreError>;
}
