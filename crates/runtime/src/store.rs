//! The store port: everything the engine needs from persistence, one trait per table (threads,
//! journal, queue, leases, registry, commits, timers), the change feed, and [`Store`], the supertrait of
//! them all that the engine holds as `Arc<dyn Store>`. `duet-store` implements it on SQLite and
//! Postgres; all implementations pass one conformance suite.
//!
//! Writes that change a thread go through [`CommitStore::commit`], one transaction fenced by the
//! runner's lease, so a runner that lost its lease cannot write, and a step's messages, records
//! and counters land together or not at all.

use async_trait::async_trait;

use crate::types::{Message, Queued, Thread, ThreadId};

mod commits;
mod feed;
mod files;
mod journal;
mod leases;
mod queue;
mod registry;
mod threads;
mod timers;

pub use commits::{Commit, CommitOutcome, CommitStore, ReadBack};
pub use feed::{Change, ChangeFeed, ChangeHub, FeedEvent};
pub use files::{BlobStore, FileStore};
pub use journal::{JournalEntry, JournalStore, SETTLE_KINDS};
pub use leases::{Lease, LeaseStore, Renewal};
pub use queue::{
    AnswerOutcome, Answered, AnsweredQuery, DecideOutcome, DecisionEntry, FirstAnswer, QueueStore,
};
pub use registry::RegistryStore;
pub use threads::{
    Listed, MAX_PARENTS, NewThread, ParentFilter, StatusCounts, ThreadQuery, ThreadStore,
};
pub use timers::{
    CancelOutcome, NewTimer, Timer, TimerCounts, TimerKind, TimerOutcome, TimerQuery, TimerStatus,
    TimerStore, TimerWake, WakeHub,
};

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
    /// A delivery with this message id was already made to this thread: nothing was written.
    #[error("message `{message_id}` was already delivered to thread {thread}")]
    Duplicate {
        /// The thread.
        thread: ThreadId,
        /// The caller's message id.
        message_id: String,
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

/// The whole store port: every table's trait, and what concerns the database as a whole.
/// `Arc<dyn Store>` is what the engine holds; any method of the part traits can be called on it.
#[async_trait]
pub trait Store:
    ThreadStore
    + JournalStore
    + QueueStore
    + LeaseStore
    + RegistryStore
    + CommitStore
    + TimerStore
    + FileStore
    + BlobStore
    + ChangeFeed
    + 'static
{
    /// The database's size in bytes (for benchmarks and operators).
    async fn size_bytes(&self) -> Result<i64, StoreError>;

    /// What a run of thread `id` starts from: the thread, its messages and its queue. The run
    /// holds the lease, so nothing else writes the first two meanwhile, and a message queued
    /// after the queue was read is reported by the run's next commit. By default the three are
    /// read at once; a backend may read them in one call.
    async fn run_start(&self, id: ThreadId) -> Result<RunStart, StoreError> {
        let (thread, messages, queue) =
            tokio::try_join!(self.thread_by_id(id), self.messages(id), self.queue(id))?;
        Ok(RunStart {
            thread,
            messages,
            queue,
            deadline_override: None,
        })
    }
}

/// What a run starts from ([`Store::run_start`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStart {
    /// The thread, if there is one.
    pub thread: Option<Thread>,
    /// Its messages in seq order.
    pub messages: Vec<Message>,
    /// Its queued inbound messages in arrival order.
    pub queue: Vec<Queued>,
    /// The thread's durable value [`crate::deadline::OVERRIDE_KEY`] (the deadline code set for
    /// its next question), when the backend read it with the rest (`Some(None)`: not set);
    /// `None`: not read, the run reads it when it parks.
    pub deadline_override: Option<Option<serde_json::Value>>,
}

/// What a write that may take a thread's lease did ([`QueueStore::enqueue_starting`] and its
/// kin): its `outcome`, and — when it took the lease and the backend read it in the same call —
/// what the run it starts reads first ([`Store::run_start`]), as of that write's transaction.
#[derive(Debug)]
pub struct Starting<T> {
    /// What the write did.
    pub outcome: T,
    /// The run's first read, when read with the write; `None`: the run reads it itself.
    pub start: Option<RunStart>,
}

impl<T> Starting<T> {
    /// `outcome`, the run left to read its start itself.
    pub fn of(outcome: T) -> Self {
        Starting {
            outcome,
            start: None,
        }
    }
}
