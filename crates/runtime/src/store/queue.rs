//! The queue table: inbound messages waiting, durably, for a thread's runner.

use async_trait::async_trait;
use uuid::Uuid;

use super::{Lease, NewThread, Starting, StoreError};
use crate::types::{NewQueued, Park, Queued, Thread, ThreadId};

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
    /// is refused when the thread is busy (`invoke`'s `session_busy`) or, with `read_at`, when
    /// the thread's `next_seq` is no longer that (something was written since the sender read
    /// it). Returns whether it went in.
    async fn deliver_if_free(
        &self,
        id: ThreadId,
        message: NewQueued,
        lease: Lease,
        read_at: Option<i64>,
    ) -> Result<bool, StoreError>;
    /// Queues `message` only if a run holds the thread (a live lease); returns that run's id.
    /// The control plane's `steer` and `follow_up`: they modulate a run, never start one.
    async fn enqueue_if_running(
        &self,
        id: ThreadId,
        message: NewQueued,
        now: i64,
    ) -> Result<Option<Uuid>, StoreError>;
    /// Queues `message` as the answer to park `park` of thread `id`, and tries the lease with
    /// `claim` — only if the thread is still parked there and no answer is queued for it yet
    /// (one question, one answer). Otherwise writes nothing and says what answered first. In
    /// one transaction on the thread row, so of two racing answers exactly one is accepted.
    async fn answer(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
    ) -> Result<AnswerOutcome, StoreError>;
    /// Creates the thread `key` (as [`super::ThreadStore::open_thread`] would) with `message`
    /// queued on it and its lease taken by `claim`, in one transaction: a thread never exists
    /// without its first message. `None`, writing nothing, when `key` exists already.
    async fn create_with(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<Option<Thread>, StoreError>;
    /// [`QueueStore::enqueue`] claiming with `claim`; when the lease is taken, the backend may
    /// read the run's start in the same call (SQLite does: a call to its driver costs more than
    /// the reads). By default it does not.
    async fn enqueue_starting(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Lease,
        now: i64,
    ) -> Result<Starting<bool>, StoreError> {
        Ok(Starting::of(
            self.enqueue(id, message, Some(claim), now).await?,
        ))
    }
    /// [`QueueStore::create_with`], with the run's start when the backend reads it in the same
    /// call (see [`QueueStore::enqueue_starting`]).
    async fn create_starting(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<Starting<Option<Thread>>, StoreError> {
        Ok(Starting::of(
            self.create_with(key, new, message, claim).await?,
        ))
    }
    /// [`QueueStore::answer`], with the run's start when the answer took the lease and the
    /// backend reads it in the same call (see [`QueueStore::enqueue_starting`]).
    async fn answer_starting(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
    ) -> Result<Starting<AnswerOutcome>, StoreError> {
        Ok(Starting::of(self.answer(id, message, park, claim).await?))
    }
    /// Queues `decided` as the decision on pending tool call `decided.call` (approval
    /// `decided.approval`, the seq of its `approval_requested` record) of thread `id`, queued
    /// with `side` (the side whose call it is), and tries the lease with `claim` — only if that
    /// record exists for that call and no decision on it is queued or written yet (one
    /// approval, one decision). Otherwise writes nothing and says which decision came first. A
    /// decision with a message id records it as a delivery; one whose id was delivered before is
    /// [`DecideOutcome::Duplicate`] (checked first, so a retry is never told its own decision
    /// came first). In one transaction on the thread row, so of two racing decisions exactly one
    /// is accepted.
    async fn decide(
        &self,
        id: ThreadId,
        decided: crate::approval::Decided,
        side: crate::types::SideId,
        claim: Lease,
    ) -> Result<DecideOutcome, StoreError>;
    /// A thread's queued inbound messages in arrival order.
    async fn queue(&self, id: ThreadId) -> Result<Vec<Queued>, StoreError>;
    /// Whether a delivery with `message_id` was made to thread `id`.
    async fn delivered(&self, id: ThreadId, message_id: &str) -> Result<bool, StoreError>;
    /// Answered parks, newest answer first: who answered what, when, and the question asked
    /// (the thread's last message before the park). The inbox's history.
    async fn answered(&self, query: &AnsweredQuery<'_>) -> Result<Vec<Answered>, StoreError>;
    /// Decisions on tool calls as the runs wrote them (`approval_decided` records), newest
    /// first, under the same filters (`before`: `(written_at, thread, park)` of the last of the
    /// previous page, of which only `park.seq`, the record's seq, counts). The inbox's history.
    async fn decisions(&self, query: &AnsweredQuery<'_>) -> Result<Vec<DecisionEntry>, StoreError>;
}

/// A decision on a tool call, as its thread's journal recorded it ([`QueueStore::decisions`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionEntry {
    /// The thread.
    pub thread: ThreadId,
    /// Its stored key.
    pub key: String,
    /// Its agent.
    pub agent: String,
    /// Its principal (canonical JSON), if it has one.
    pub principal: Option<String>,
    /// The session of the step that asked (its last message before the record).
    pub session: i64,
    /// The seq of the `approval_decided` record.
    pub seq: i64,
    /// When the run wrote it.
    pub written_at: i64,
    /// The decision (its `approval` is the seq of the call's `approval_requested` record).
    pub decided: crate::approval::Decided,
}

/// Which answered parks [`QueueStore::answered`] lists.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnsweredQuery<'a> {
    /// Only answers to threads of this principal (canonical JSON); `None`: every thread's.
    pub principal: Option<&'a str>,
    /// Only answers to this agent's threads.
    pub agent: Option<&'a str>,
    /// Only answers to this thread.
    pub thread: Option<ThreadId>,
    /// Only answers older than this one (the last of the previous page): `(at, thread, park)`.
    pub before: Option<(i64, ThreadId, Park)>,
    /// At most this many.
    pub limit: usize,
}

/// A park and the answer it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The thread that was parked.
    pub thread: ThreadId,
    /// Its stored key.
    pub key: String,
    /// Its agent.
    pub agent: String,
    /// Its principal (canonical JSON), if it has one.
    pub principal: Option<String>,
    /// Where it was parked.
    pub park: Park,
    /// What it asked: its last message before the park.
    pub question: Option<String>,
    /// The answer.
    pub answer: FirstAnswer,
}

/// What [`QueueStore::answer`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// Queued as the park's answer; `claimed`: this caller took the lease and must run it.
    Accepted {
        /// Whether the lease was taken.
        claimed: bool,
    },
    /// The thread is no longer at that park: nothing was written.
    Refused {
        /// The answer that came first, when the store still has it (queued, or the first
        /// message written at the park's seq).
        first: Option<FirstAnswer>,
    },
}

/// The answer that won a park.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstAnswer {
    /// What it said.
    pub content: String,
    /// When it arrived (ms since the Unix epoch).
    pub at: i64,
    /// Who gave it (the principal, canonical JSON), when the answer was recorded with one.
    pub author: Option<String>,
    /// The message id it was delivered with, if any.
    pub message_id: Option<String>,
}

/// What [`QueueStore::decide`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum DecideOutcome {
    /// Queued; `claimed`: this caller took the lease and must run the thread.
    Accepted {
        /// Whether the lease was taken.
        claimed: bool,
    },
    /// A decision on this approval came first: nothing was written.
    Refused {
        /// That decision.
        first: Box<crate::approval::Decided>,
    },
    /// The thread has no such pending call: nothing was written.
    NotPending,
    /// The decision's message id (`Idempotency-Key`) was delivered to the thread before:
    /// nothing was written.
    Duplicate,
}
