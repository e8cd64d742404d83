//! Commits: a step's writes to the journal, the queue, durable values and the thread row, in
//! one transaction fenced by the lease; and reading the durable values only commits write.

use async_trait::async_trait;
use uuid::Uuid;

use super::StoreError;
use crate::record::Record;
use crate::types::{Message, NewQueued, Thread, ThreadId};

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
    /// Release the lease after writing, unless the queue holds runnable messages (see
    /// [`super::LeaseStore::recoverable`]); then keep it and say so.
    pub settle: bool,
    /// With `settle`: release the lease even if messages wait (an abort: they wait for the next
    /// delivery).
    pub release: bool,
    /// Timers to write on this thread (effects scheduled, a question's deadlines): they exist
    /// exactly when this commit does.
    pub timers: Vec<super::NewTimer>,
    /// This thread's pending timers to cancel, by id (`removeScheduledEffect` in a step).
    pub cancel_timers: Vec<Uuid>,
    /// This thread's pending timers to cancel, by subject (a question answered: its deadline's
    /// timers).
    pub cancel_subjects: Vec<String>,
    /// Timers this commit finishes as `completed` (an effect's run, written with its writes).
    pub timers_done: Vec<Uuid>,
    /// Changes to this thread's files (a step's `writeFile`s, a tool's attachments), applied in
    /// order with the rest: a commit that fails writes no file.
    pub files: Vec<crate::files::FileWrite>,
}

impl Commit {
    /// Whether it writes nothing but the thread's own journal (messages, records, values): no
    /// settle, no queue row drained or added, no timer, no file.
    pub fn journal_only(&self) -> bool {
        !self.settle
            && self.enqueue.is_empty()
            && self.drained.is_empty()
            && self.timers.is_empty()
            && self.cancel_timers.is_empty()
            && self.cancel_subjects.is_empty()
            && self.timers_done.is_empty()
            && self.files.is_empty()
    }

    /// This commit and `later` as one transaction: `later`'s writes after this one's (its
    /// messages and records have the later seqs), and `later`'s say on the lease (`settle`,
    /// `release`).
    pub fn then(mut self, later: Commit) -> Commit {
        let Commit {
            drained,
            messages,
            records,
            values,
            enqueue,
            settle,
            release,
            timers,
            cancel_timers,
            cancel_subjects,
            timers_done,
            files,
        } = later;
        self.drained.extend(drained);
        self.messages.extend(messages);
        self.records.extend(records);
        self.values.extend(values);
        self.enqueue.extend(enqueue);
        self.timers.extend(timers);
        self.cancel_timers.extend(cancel_timers);
        self.cancel_subjects.extend(cancel_subjects);
        self.timers_done.extend(timers_done);
        self.files.extend(files);
        Commit {
            settle,
            release,
            ..self
        }
    }
}

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Written; the lease is still held. `queued`: messages wait in the thread's queue (as of the
    /// commit), so the runner drains them before its next step. A `settle` commit that finds
    /// messages waiting keeps the lease and says so here.
    Committed {
        /// Whether messages wait in the queue.
        queued: bool,
    },
    /// Written and the lease released (only for `settle`, with the queue empty).
    Settled,
}

/// Committing a step, and the durable values commits write.
#[async_trait]
pub trait CommitStore: Send + Sync {
    /// Writes `commit` and the thread's new state in one transaction, if `owner` holds the lease.
    async fn commit(
        &self,
        thread: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError>;
    /// [`CommitStore::commit`], and with it the entries of the thread's session `session` as
    /// the commit leaves them (what [`super::JournalStore::session_entries`] reads below the
    /// thread's new next seq), each message written before the commit by its seq alone
    /// ([`ReadBack`]), when the store reads them in the same call — `None` when it does not
    /// (the default: the caller reads them if it needs them), and may be `None` for a commit
    /// that did not settle, or a session too long to read inside the write. A run asked to
    /// report its session writes its settling commit with this, so that whoever waits on the
    /// run need not cross to the database again for what it wrote.
    async fn commit_reading(
        &self,
        thread: &Thread,
        owner: Uuid,
        commit: Commit,
        session: i64,
    ) -> Result<(CommitOutcome, Option<Vec<ReadBack>>), StoreError> {
        let _ = session;
        Ok((self.commit(thread, owner, commit).await?, None))
    }
    /// A durable value of a thread.
    async fn value(&self, id: ThreadId, key: &str)
    -> Result<Option<serde_json::Value>, StoreError>;
}

/// One entry of a session as a settling commit read it back ([`CommitStore::commit_reading`]).
// As `JournalEntry`: boxing the entries would cost an allocation each; a read holds few held
// messages, and its vector is turned into entries in place.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum ReadBack {
    /// An entry as the journal holds it: a record, or a message the commit wrote.
    Entry(super::JournalEntry),
    /// A message written before the commit, by its seq alone: the run that commits holds it in
    /// its history, so it is neither copied out of the database nor decoded again.
    Held(i64),
}

impl ReadBack {
    /// The entry's place in its thread's journal.
    pub fn seq(&self) -> i64 {
        match self {
            ReadBack::Entry(e) => e.seq(),
            ReadBack::Held(seq) => *seq,
        }
    }

    /// The entries `read` stands for, each [`ReadBack::Held`] message taken from `history` (a
    /// run's messages, in seq order); `None` if one is not there (the caller reads them).
    pub fn fill(read: Vec<ReadBack>, history: &[Message]) -> Option<Vec<super::JournalEntry>> {
        read.into_iter()
            .map(|entry| match entry {
                ReadBack::Entry(e) => Some(e),
                ReadBack::Held(seq) => {
                    let found = match history.binary_search_by_key(&seq, |m| m.seq) {
                        Ok(i) => history.get(i),
                        // Not in order after all: looked for one by one.
                        Err(_) => history.iter().find(|m| m.seq == seq),
                    };
                    found.cloned().map(super::JournalEntry::Message)
                }
            })
            .collect()
    }
}
