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
    /// is none yet): where its current (or next) run starts. Reads the settle records below
    /// `t`'s next seq newest first, a few at a time (as `t` was read, and O(what it passes)),
    /// never the thread's whole history.
    pub(crate) async fn run_start(&self, t: &Thread) -> Result<i64, ServiceError> {
        const PAGE: usize = 8;
        // A settle its run went on from (a `run_continued` after it) did not end that run.
        let mut went_on = false;
        let mut below = t.next_seq;
        let last = 'found: loop {
            let page = self.0.settles(t.id, below, PAGE).await?;
            for r in &page {
                match r.body {
                    RecordBody::RunContinued { .. } => went_on = true,
                    // The guard clears `went_on` as it reads it: that settle is passed over.
                    RecordBody::Stopped { .. } | RecordBody::SessionEnded { .. }
                        if !std::mem::take(&mut went_on) =>
                    {
                        break 'found r.seq;
                    }
                    _ => {}
                }
            }
            match page.last() {
                Some(r) if page.len() == PAGE => below = r.seq,
                _ => break 0,
            }
        };
        let first = self.0.journal_page(t.id, last, 1).await?;
        Ok(first.first().map_or(t.next_seq, JournalEntry::seq))
    }
}

#[cfg(test)]
mod tests {
    use duet_runtime::testing::MemoryStore;
    use duet_runtime::{
        Commit, CommitStore, JournalStore, Lease, LeaseStore, NewThread, Record, StopReason,
        ThreadStatus, ThreadStore,
    };

    use super::*;

    fn stopped() -> RecordBody {
        RecordBody::Stopped {
            stop_reason: StopReason::AwaitingHuman,
            status: ThreadStatus::AwaitingHuman,
            trace: None,
            revision: None,
        }
    }

    /// `run_start` as it read every record of the thread before it read them a page at a time.
    fn whole(records: &[Record], next_seq: i64, journal: &[JournalEntry]) -> i64 {
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
        journal
            .iter()
            .find(|e| e.seq() > last)
            .map_or(next_seq, JournalEntry::seq)
    }

    #[tokio::test]
    async fn the_run_start_reads_settles_a_page_at_a_time_as_the_whole_history_says() {
        let store = Arc::new(MemoryStore::default());
        let feed = Feed(store.clone());
        let new = NewThread {
            id: uuid::Uuid::now_v7(),
            agent: "a",
            parent: None,
            principal: None,
            source: None,
            now: 1,
        };
        let mut t = store.open_thread("k", new).await.expect("memory store");
        assert_eq!(
            feed.run_start(&t).await.expect("memory store"),
            t.next_seq,
            "nothing yet"
        );
        let owner = uuid::Uuid::now_v7();
        let lease = Lease {
            owner,
            until: 1_000,
            now: 1,
        };
        // The run that settled last, then runs that each went on past their settle: groups of
        // three (a settle and two `run_continued`), so pages of eight split them.
        let mut bodies = vec![
            RecordBody::SessionStarted { session: 1 },
            stopped(),
            RecordBody::TurnCompleted {
                side: duet_runtime::SideId::A,
            },
        ];
        for _ in 0..7 {
            bodies.push(stopped());
            bodies.push(RecordBody::RunContinued { after: 0 });
            bodies.push(RecordBody::RunContinued { after: 0 });
        }
        let mut checked = 0;
        for body in bodies {
            assert!(store.claim(t.id, lease).await.expect("memory store"));
            let commit = Commit {
                records: vec![Record::new(t.take_seq(), body, 2)],
                settle: true,
                ..Commit::default()
            };
            store.commit(&t, owner, commit).await.expect("memory store");
            let records = store.records(t.id).await.expect("memory store");
            let journal = store.journal_since(t.id, 0).await.expect("memory store");
            assert_eq!(
                feed.run_start(&t).await.expect("memory store"),
                whole(&records, t.next_seq, &journal),
                "after {} records",
                records.len()
            );
            checked += 1;
        }
        assert_eq!(checked, 24);
        assert_eq!(
            feed.run_start(&t).await.expect("memory store"),
            3,
            "after the first stop"
        );
    }
}
