//! The change feed: a stream of "thread T was written: its journal ends at seq N, its status is
//! S", published by every write that changes a thread's journal, queue or status, after it
//! commits. Followers read the journal and wait on the feed instead of polling it.
//!
//! A subscription opens with [`FeedEvent::Resync`], sent once it is live: every change committed
//! after that reaches it. A subscriber that falls behind never holds writers back: it misses what
//! it could not keep up with and receives a `Resync` instead, as it does whenever the feed itself
//! may have missed changes (a store's connection to its database was lost and restored). A
//! `Resync` means "re-read whatever you follow from the journal".

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use tokio::sync::broadcast;

use crate::types::{ThreadId, ThreadStatus};

/// One change of one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// The thread written.
    pub thread: ThreadId,
    /// The last journal seq written so far (`next_seq - 1`; 0 for an empty journal).
    pub seq: i64,
    /// The thread's status after the write.
    pub status: ThreadStatus,
}

/// What a subscriber to the feed receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedEvent {
    /// A thread was written.
    Changed(Change),
    /// Changes may have been missed (this subscriber lagged, or the feed lost its source and got
    /// it back): re-read what you follow.
    Resync,
}

impl FeedEvent {
    /// Whether a follower of `thread` should re-read: a change of that thread, or a resync.
    pub fn concerns(&self, thread: ThreadId) -> bool {
        match self {
            FeedEvent::Changed(c) => c.thread == thread,
            FeedEvent::Resync => true,
        }
    }
}

/// Subscribing to the change feed.
pub trait ChangeFeed: Send + Sync {
    /// A subscription: first a [`FeedEvent::Resync`] once it is live (at once in process; on a
    /// feed that crosses processes, when its listener is listening), then every change committed
    /// after that, in commit order, until the store is dropped. Cheap: a receiver on an
    /// in-process channel. A feed that crosses processes hears of a commit a moment after it
    /// returns, so a subscription may also see a few changes committed just before it went live:
    /// harmless to a follower, which re-reads.
    fn changes(&self) -> BoxStream<'static, FeedEvent>;
}

/// An in-process fan-out of changes, for store implementations: publishing never waits, and a
/// subscriber that lags gets [`FeedEvent::Resync`] in place of what it missed.
#[derive(Clone, Debug)]
pub struct ChangeHub {
    tx: broadcast::Sender<FeedEvent>,
}

impl Default for ChangeHub {
    fn default() -> Self {
        ChangeHub::with_capacity(ChangeHub::CAPACITY)
    }
}

impl ChangeHub {
    /// How many events a subscriber may fall behind by before it lags.
    pub const CAPACITY: usize = 1024;

    /// A hub whose subscribers lag after falling `capacity` events behind.
    pub fn with_capacity(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        ChangeHub { tx }
    }

    /// Sends `change` to every subscriber (none is fine).
    pub fn publish(&self, change: Change) {
        let _ = self.tx.send(FeedEvent::Changed(change));
    }

    /// Tells every subscriber to re-read: changes may have been missed.
    pub fn resync(&self) {
        let _ = self.tx.send(FeedEvent::Resync);
    }

    /// How many subscribers there are now.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// A new subscriber, live at once: a [`FeedEvent::Resync`], then everything published from
    /// now on. It ends when every clone of the hub is dropped.
    pub fn subscribe(&self) -> BoxStream<'static, FeedEvent> {
        stream::once(async { FeedEvent::Resync })
            .chain(self.subscribe_silently())
            .boxed()
    }

    /// A new subscriber without the opening resync: for a hub whose source says itself when its
    /// subscribers are live (with [`ChangeHub::resync`]).
    pub fn subscribe_silently(&self) -> BoxStream<'static, FeedEvent> {
        stream::unfold(self.tx.subscribe(), |mut rx| async move {
            match rx.recv().await {
                Ok(event) => Some((event, rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((FeedEvent::Resync, rx)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(seq: i64) -> Change {
        Change {
            thread: uuid::Uuid::nil(),
            seq,
            status: ThreadStatus::Running,
        }
    }

    #[tokio::test]
    async fn a_lagging_subscriber_gets_a_resync_and_never_blocks_the_publisher() {
        let hub = ChangeHub::with_capacity(2);
        let mut slow = hub.subscribe();
        assert_eq!(hub.subscribers(), 1);
        assert_eq!(slow.next().await, Some(FeedEvent::Resync), "live");
        // Five publishes with nobody reading: none of them waits.
        for seq in 1..=5 {
            hub.publish(change(seq));
        }
        assert_eq!(slow.next().await, Some(FeedEvent::Resync));
        // Then what is still buffered, newest last.
        assert_eq!(slow.next().await, Some(FeedEvent::Changed(change(4))));
        assert_eq!(slow.next().await, Some(FeedEvent::Changed(change(5))));
        hub.resync();
        assert_eq!(slow.next().await, Some(FeedEvent::Resync));
        drop(hub);
        assert_eq!(slow.next().await, None, "the feed ends with its hub");
    }

    #[test]
    fn a_follower_re_reads_on_its_thread_or_a_resync() {
        let other = uuid::Uuid::now_v7();
        assert!(FeedEvent::Changed(change(1)).concerns(uuid::Uuid::nil()));
        assert!(!FeedEvent::Changed(change(1)).concerns(other));
        assert!(FeedEvent::Resync.concerns(other));
    }
}
