//! The journal table: a thread's messages and records in one sequence.

use async_trait::async_trait;

use super::StoreError;
use crate::record::Record;
use crate::types::{Message, ThreadId};

/// One entry of a thread's journal: a message or a record, each with its place (`seq`).
// Most entries are messages: boxing them would cost an allocation each to save space on the
// records.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum JournalEntry {
    /// A message of the conversation.
    Message(Message),
    /// Any other fact of a run (a turn completed, a stop, a session's end, ...).
    Record(Record),
}

impl JournalEntry {
    /// The entry's place in its thread's journal.
    pub fn seq(&self) -> i64 {
        match self {
            JournalEntry::Message(m) => m.seq,
            JournalEntry::Record(r) => r.seq,
        }
    }
}

/// Reading the journal (it is written only by [`super::CommitStore::commit`]).
#[async_trait]
pub trait JournalStore: Send + Sync {
    /// A thread's messages in seq order.
    async fn messages(&self, id: ThreadId) -> Result<Vec<Message>, StoreError>;
    /// A thread's records in seq order.
    async fn records(&self, id: ThreadId) -> Result<Vec<Record>, StoreError>;
    /// A thread's entries after `seq` (0 for all), messages and records together, in seq order.
    async fn journal_since(&self, id: ThreadId, seq: i64) -> Result<Vec<JournalEntry>, StoreError>;
    /// At most `limit` of a thread's entries after `seq`, in seq order: a page of the journal.
    async fn journal_page(
        &self,
        id: ThreadId,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<JournalEntry>, StoreError>;
    /// A thread's last message with text (the question a parked thread asks), if any.
    async fn last_message(&self, id: ThreadId) -> Result<Option<Message>, StoreError>;
    /// Session `session`'s range of a thread's journal below seq `below`, in seq order: the
    /// entries from its `session_started` record up to the next session's (messages and
    /// records; a record between sessions belongs to the one before it). None when the journal
    /// has no `session_started` record for it. Reads O(the range), not O(the journal).
    async fn session_entries(
        &self,
        id: ThreadId,
        session: i64,
        below: i64,
    ) -> Result<Vec<JournalEntry>, StoreError>;
    /// The records of [`JournalStore::session_entries`]'s range alone (no message read or
    /// decoded): a question's or a pending call's facts, which all land in its session.
    async fn session_records(
        &self,
        id: ThreadId,
        session: i64,
        below: i64,
    ) -> Result<Vec<Record>, StoreError> {
        Ok(self
            .session_entries(id, session, below)
            .await?
            .into_iter()
            .filter_map(|e| match e {
                JournalEntry::Record(r) => Some(r),
                JournalEntry::Message(_) => None,
            })
            .collect())
    }
    /// At most `limit` of a thread's settle records (`stopped`, `session_ended`) and
    /// `run_continued` records, with seq below `below`, newest first: what says where its last
    /// run ended, read a few at a time.
    async fn settles(
        &self,
        id: ThreadId,
        below: i64,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError>;
}

/// The record kinds [`JournalStore::settles`] reads.
pub const SETTLE_KINDS: [&str; 3] = ["stopped", "session_ended", "run_continued"];
