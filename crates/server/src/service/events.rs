//! What a follower reads: [`Feed`], a handle a stream keeps (`'static`, cheap to clone) on the
//! store's change feed and on the rows it reads again each time it wakes — a thread, its journal
//! after a seq, its queue, where its current run starts. The streams themselves (SSE, A2A, the
//! inbox's live parts) are their adapters'; they open a feed for threads their caller was
//! already found allowed to ([`super::threads::find`]), or check each thread they adopt.

use std::sync::Arc;

use duet_runtime::{FeedEvent, JournalEntry, Queued, RecordBody, Store, Thread, ThreadId};
use futures::stream::BoxStream;

use super::ServiceError;
use crate::state::AppState;

/// A follower's view of the store.
#[derive(Clone)]
pub(crate) struct Feed(Arc<dyn Store>);

impl Feed {
    /// The feed of `state`'s store.
    pub(crate) fn of(state: &AppState) -> Self {
        Feed(state.runtime().store().clone())
    }

    /// A feed on an empty store of its own (for tests of what maps its reads).
    #[cfg(test)]
    pub(crate) fn memory() -> Self {
        Feed(Arc::new(duet_runtime::testing::MemoryStore::default()))
    }

    /// Every change from now on. Subscribe before the first read, so whatever commits after
    /// that read is announced.
    pub(crate) fn changes(&self) -> BoxStream<'static, FeedEvent> {
        self.0.changes()
    }

    /// Thread `id` as it is now.
    pub(crate) async fn thread(&self, id: ThreadId) -> Result<Option<Thread>, ServiceError> {
        Ok(self.0.thread_by_id(id).await?)
    }

    /// The thread stored as `stored` (a key already in the caller's key space).
    pub(crate) async fn by_key(&self, stored: &str) -> Result<Option<Thread>, ServiceError> {
        Ok(self.0.thread(stored).await?)
    }

    /// At most `limit` journal entries of thread `id` after seq `after`.
    pub(crate) async fn journal_page(
        &self,
        id: ThreadId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<JournalEntry>, ServiceError> {
        Ok(self.0.journal_page(id, after, limit).await?)
    }

    /// Every journal entry of thread `id` after seq `after`.
    pub(crate) async fn journal_since(
        &self,
        id: ThreadId,
        after: i64,
    ) -> Result<Vec<JournalEntry>, ServiceError> {
        Ok(self.0.journal_since(id, after).await?)
    }

    /// Thread `id`'s queued inbound messages, in arrival order.
    pub(crate) async fn queue(&self, id: ThreadId) -> Result<Vec<Queued>, ServiceError> {
        Ok(self.0.queue(id).await?)
    }

    /// The seq of the first entry after `t`'s last settle record (`stopped` or
    /// `session_ended`, unless a `run_continued` says its run went on; its next seq when there
    /// is none yet): where its current (or next) run starts.
    pub(crate) async fn run_start(&self, t: &Thread) -> Result<i64, ServiceError> {
        let records = self.0.records(t.id).await?;
        // A settle its run went on from (a `run_continued` after it) did not end that run.
        let mut went_on = false;
        let last = records
            .iter()
            .rev()
            .find(|r| match r.body {
                RecordBody::RunContinued { .. } => {
                    went_on = true;
                    false
                }
                RecordBody::Stopped { .. } | RecordBody::SessionEnded { .. } => {
                    !std::mem::take(&mut went_on)
                }
                _ => false,
            })
            .map_or(0, |r| r.seq);
        let first = self.0.journal_page(t.id, last, 1).await?;
        Ok(first.first().map_or(t.next_seq, JournalEntry::seq))
    }
}
