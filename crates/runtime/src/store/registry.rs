//! The children table: the subagent registry, written outside either thread's lease.

use async_trait::async_trait;

use super::StoreError;
use crate::types::{Child, ThreadId};

/// The subagent registry.
#[async_trait]
pub trait RegistryStore: Send + Sync {
    /// Adds a child to its parent's registry (or replaces the entry).
    async fn put_child(&self, child: &Child) -> Result<(), StoreError>;
    /// Sets a registry entry's status; `false` if there is no such child.
    async fn set_child_status(&self, child: ThreadId, status: &str) -> Result<bool, StoreError>;
    /// A thread's registry entry as a child, if it is one.
    async fn child(&self, child: ThreadId) -> Result<Option<Child>, StoreError>;
    /// A parent's children, oldest first.
    async fn children(&self, parent: ThreadId) -> Result<Vec<Child>, StoreError>;
}
