//! The store port: everything the engine needs from persistence. `duet-store` implements it on
//! SQLite and Postgres; both pass one conformance suite.
//!
//! Writes that change a thread go through [`Store::commit`], one transaction fenced by the
//! runner's lease, so a runner that lost its lease cannot write, and a step's messages, records
//! and counters land together or not at all.

use async_trait::async_trait;
use uuid::Uuid;

use crate::types::{Child, Message, NewQueued, Queued, Record, Thread, ThreadId, ThreadStatus};

/// A lease claim: `owner` holds the thread until `until` (ms), as of `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub owner: Uuid,
    pub until: i64,
    pub now: i64,
}

/// What a new thread is made with.
#[derive(Clone, Copy, Debug)]
pub struct NewThread<'a> {
    pub id: ThreadId,
    pub agent: &'a str,
    pub parent: Option<ThreadId>,
    pub principal: Option<&'a str>,
    pub source: Option<&'a str>,
    pub now: i64,
}

/// Everything one step (or drain, or settle) writes.
#[derive(Clone, Debug, Default)]
pub struct Commit {
    /// Queue rows consumed by this commit.
    pub drained: Vec<i64>,
    /// New messages, in seq order.
    pub messages: Vec<Message>,
    /// New journal records, in seq order.
    pub records: Vec<Record>,
    /// Durable key/value writes (`None` deletes).
    pub values: Vec<(String, Option<serde_json::Value>)>,
    /// Messages to queue on this thread (a handler's `queue_message`).
    pub enqueue: Vec<NewQueued>,
    /// Release the lease after writing, unless the queue holds messages; then keep it and say so.
    pub settle: bool,
}

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Written; the lease is still held. `queued`: messages wait in the thread's queue (as of the
    /// commit), so the runner drains them before its next step. A `settle` commit that finds
    /// messages waiting keeps the lease and says so here.
    Committed { queued: bool },
    /// Written and the lease released (only for `settle`, with the queue empty).
    Settled,
}

/// What renewing a lease found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Renewed; `abort_requested`: another process asked this run to abort.
    Held { abort_requested: bool },
    /// The lease is gone: the run must stop.
    Lost,
}

/// Store failures, by kind: what a caller can act on is the variant, never the message text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The runner's lease is gone (expired and taken by another runner): it must stop.
    #[error("the lease on thread {0} is no longer held by this runner")]
    LeaseLost(ThreadId),
    /// No such thread.
    #[error("no thread {0}")]
    NotFound(String),
    /// The thread exists for another agent.
    #[error("thread `{key}` belongs to agent `{agent}`")]
    AgentMismatch {
        /// The thread's key.
        key: String,
        /// The agent the thread is for.
        agent: String,
    },
    /// Stored data that cannot be read back (a bug or a foreign write).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// A write broke a constraint of the schema (a unique key taken, a reference to a missing
    /// row): nothing was written, and the same write will fail again until what it collides with
    /// changes.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database (or the file system, or the connection to it) failed; `source` is the
    /// underlying error. Usually transient: retrying may succeed.
    #[error("database: {message}")]
    Backend {
        /// What failed, for people.
        message: String,
        /// The backend's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// A [`StoreError::Backend`] with `source` as its cause and its text as the message.
    pub fn backend(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Backend {
            message: source.to_string(),
            source: Box::new(source),
        }
    }

    /// A [`StoreError::Backend`] saying what was being done (`context`) when `source` failed.
    pub fn backend_in(
        context: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend {
            message: format!("{context}: {source}"),
            source: Box::new(source),
        }
    }
}

/// The store port.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The thread addressed by `key`, created (idle, for `new.agent`, owned by `new.principal`,
    /// from `new.source`) if absent; an existing thread comes back as it is.
    async fn open_thread(&self, key: &str, new: NewThread<'_>) -> Result<Thread, StoreError>;
    async fn thread(&self, key: &str) -> Result<Option<Thread>, StoreError>;
    async fn thread_by_id(&self, id: ThreadId) -> Result<Option<Thread>, StoreError>;
    /// Threads, oldest first, optionally with one status.
    async fn threads(&self, status: Option<ThreadStatus>) -> Result<Vec<Thread>, StoreError>;
    /// A thread's messages in seq order.
    async fn messages(&self, id: ThreadId) -> Result<Vec<Message>, StoreError>;
    /// A thread's records in seq order.
    async fn records(&self, id: ThreadId) -> Result<Vec<Record>, StoreError>;
    /// A thread's queued inbound messages in arrival order.
    async fn queue(&self, id: ThreadId) -> Result<Vec<Queued>, StoreError>;
    /// Queues `message` durably, then tries to take the lease if `claim` is given. Serialised
    /// with [`Store::commit`] on the thread row, so a message is either seen by a settling
    /// runner or finds the lease free: never stranded. Returns whether the lease was taken.
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
    /// Takes the lease if it is free or expired.
    async fn claim(&self, id: ThreadId, lease: Lease) -> Result<bool, StoreError>;
    /// Extends a lease this owner holds.
    async fn renew(&self, id: ThreadId, lease: Lease) -> Result<Renewal, StoreError>;
    /// Queues `message` only if a run holds the thread (a live lease); returns that run's id.
    /// The control plane's `steer` and `follow_up`: they modulate a run, never start one.
    async fn enqueue_if_running(
        &self,
        id: ThreadId,
        message: NewQueued,
        now: i64,
    ) -> Result<Option<Uuid>, StoreError>;
    /// Asks the run holding the thread to abort (it sees the request when it next renews its
    /// lease); returns that run's id, or `None` when no run holds the thread.
    async fn request_abort(&self, id: ThreadId, now: i64) -> Result<Option<Uuid>, StoreError>;
    /// Writes `commit` and the thread's new state in one transaction, if `owner` holds the lease.
    async fn commit(
        &self,
        thread: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError>;
    /// A durable value of a thread.
    async fn value(&self, id: ThreadId, key: &str)
    -> Result<Option<serde_json::Value>, StoreError>;
    /// Threads that need a runner: running with an expired lease, or with queued messages and no
    /// live lease.
    async fn recoverable(&self, now: i64) -> Result<Vec<ThreadId>, StoreError>;
    /// Terminates a thread for good: status `terminated`, lease taken away (a run still going
    /// fails its next commit and stops), queue emptied, its registry entry `terminated`.
    async fn terminate(&self, id: ThreadId, now: i64) -> Result<(), StoreError>;
    /// Adds a child to its parent's registry (or replaces the entry).
    async fn put_child(&self, child: &Child) -> Result<(), StoreError>;
    /// Sets a registry entry's status; `false` if there is no such child.
    async fn set_child_status(&self, child: ThreadId, status: &str) -> Result<bool, StoreError>;
    /// A thread's registry entry as a child, if it is one.
    async fn child(&self, child: ThreadId) -> Result<Option<Child>, StoreError>;
    /// A parent's children, oldest first.
    async fn children(&self, parent: ThreadId) -> Result<Vec<Child>, StoreError>;
    /// The database's size in bytes (for benchmarks and operators).
    async fn size_bytes(&self) -> Result<i64, StoreError>;
}
