//! The threads table: opening, reading, listing and terminating threads.

use async_trait::async_trait;

use super::StoreError;
use crate::types::{Thread, ThreadId, ThreadStatus};

/// What a new thread is made with.
#[derive(Clone, Copy, Debug)]
pub struct NewThread<'a> {
    /// The new thread's id (ignored when the key already has a thread).
    pub id: ThreadId,
    /// The agent it runs.
    pub agent: &'a str,
    /// The parent thread, for a subagent.
    pub parent: Option<ThreadId>,
    /// The principal that owns it (canonical JSON), if any.
    pub principal: Option<&'a str>,
    /// Where it came from (a channel name), if known.
    pub source: Option<&'a str>,
    /// Creation time (ms).
    pub now: i64,
}

/// Which threads by parent a [`ThreadQuery`] lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ParentFilter {
    /// Top-level threads and subagents alike.
    #[default]
    Any,
    /// Only threads with no parent.
    TopLevel,
    /// Only the children of this thread.
    Of(ThreadId),
}

/// A page of threads to list: filters, a cursor and a page size.
#[derive(Clone, Copy, Debug)]
pub struct ThreadQuery<'a> {
    /// Only threads whose current agent is this one.
    pub agent: Option<&'a str>,
    /// Only threads with this status.
    pub status: Option<ThreadStatus>,
    /// Only threads with this parent (or none).
    pub parent: ParentFilter,
    /// Only threads owned by this principal (canonical JSON); `None`: every thread.
    pub principal: Option<&'a str>,
    /// The cursor: only threads after this one in the listing's order.
    pub after: Option<ThreadId>,
    /// Newest first (by id, which is time-ordered) instead of oldest first.
    pub newest_first: bool,
    /// At most this many.
    pub limit: usize,
}

impl Default for ThreadQuery<'_> {
    fn default() -> Self {
        ThreadQuery {
            agent: None,
            status: None,
            parent: ParentFilter::Any,
            principal: None,
            after: None,
            newest_first: false,
            limit: 100,
        }
    }
}

/// Threads: one row each, the cached state of its journal.
#[async_trait]
pub trait ThreadStore: Send + Sync {
    /// The thread addressed by `key`, created (idle, for `new.agent`, owned by `new.principal`,
    /// from `new.source`) if absent; an existing thread comes back as it is.
    async fn open_thread(&self, key: &str, new: NewThread<'_>) -> Result<Thread, StoreError>;
    /// The thread addressed by `key`.
    async fn thread(&self, key: &str) -> Result<Option<Thread>, StoreError>;
    /// The thread with id `id`.
    async fn thread_by_id(&self, id: ThreadId) -> Result<Option<Thread>, StoreError>;
    /// Threads, oldest first, optionally with one status.
    async fn threads(&self, status: Option<ThreadStatus>) -> Result<Vec<Thread>, StoreError>;
    /// One page of threads as `query` says, in id order (UUID v7: creation order).
    async fn list_threads(&self, query: &ThreadQuery<'_>) -> Result<Vec<Thread>, StoreError>;
    /// [`list_threads`](Self::list_threads)' page (only thread `only` of it, when given), each
    /// with what a queue of questions shows of it ([`Listed`]), in one read: the approvals
    /// queue's page, whatever its size.
    async fn list_listed(
        &self,
        query: &ThreadQuery<'_>,
        only: Option<ThreadId>,
    ) -> Result<Vec<Listed>, StoreError>;
    /// How many threads have each status (statuses no thread has are left out), and since when
    /// the longest-parked thread has waited for a person (its `updated_at`): what an operator's
    /// dashboard shows.
    async fn status_counts(&self) -> Result<StatusCounts, StoreError>;
    /// Terminates a thread for good: status `terminated`, lease taken away (a run still going
    /// fails its next commit and stops), queue emptied, its registry entry `terminated`, its
    /// pending timers `cancelled` (one being fired finds the thread terminated and fails).
    async fn terminate(&self, id: ThreadId, now: i64) -> Result<(), StoreError>;
}

/// How many parents above a thread [`ThreadStore::list_listed`] reads (a deeper chain is cut).
pub const MAX_PARENTS: usize = 64;

/// A listed thread with what a queue of questions shows of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// The thread.
    pub thread: Thread,
    /// Its last message with text (the question a parked thread asks), if any: the content of
    /// [`super::JournalStore::last_message`].
    pub question: Option<String>,
    /// Its parents, nearest first, up to the top-level one (at most [`MAX_PARENTS`]).
    pub parents: Vec<Thread>,
    /// Whether it is parked with a deadline on its question: a `deadline` timer, not cancelled,
    /// whose subject is the question it is parked at (`question:SESSION:TURNS`).
    pub deadline: bool,
}

/// What [`ThreadStore::status_counts`] counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// Threads by status.
    pub by_status: Vec<(ThreadStatus, u64)>,
    /// The oldest `updated_at` of a thread `awaiting_human`, if any is.
    pub oldest_awaiting: Option<i64>,
}
