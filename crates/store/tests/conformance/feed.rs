//! The change feed: every write that changes a thread, in order, to every subscriber; across
//! processes on Postgres, and after a lost connection.

use super::*;
use std::time::Duration;

use duet_runtime::{
    Change, Commit, CommitOutcome, FeedEvent, Message, Record, RecordBody, ThreadId,
};
use futures::StreamExt;
use futures::stream::BoxStream;

/// A subscription to `store`'s feed once it is live (its opening resync received): every change
/// committed from then on reaches it. Fails the test after 10 s.
pub(crate) async fn live(store: &Arc<dyn Store>) -> BoxStream<'static, FeedEvent> {
    let mut feed = store.changes();
    match tokio::time::timeout(Duration::from_secs(10), feed.next()).await {
        Ok(Some(FeedEvent::Resync)) => feed,
        other => panic!("a subscription opens with a resync, not {other:?}"),
    }
}

/// The next change of thread `id` on `feed` (resyncs and other threads skipped); fails the test
/// after 10 s without one.
async fn next_change(feed: &mut BoxStream<'static, FeedEvent>, id: ThreadId) -> Change {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), feed.next()).await {
            Ok(Some(FeedEvent::Changed(c))) if c.thread == id => return c,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the feed ended"),
            Err(_) => panic!("no change of thread {id} within 10 s"),
        }
    }
}

fn change(thread: ThreadId, seq: i64, status: ThreadStatus) -> Change {
    Change {
        thread,
        seq,
        status,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_that_changes_a_thread_is_on_the_feed_in_order() {
    each(async |store, name| {
        let mut feed = live(&store).await;
        let mut t = thread(&store, "k").await;
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, 0, ThreadStatus::Idle),
            "{name}: created"
        );
        // Opening it again changes nothing; neither does a claim, nor a commit without the lease.
        thread(&store, "k").await;
        let (owner, thief) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        t.status = ThreadStatus::Running;
        let seq = t.take_seq();
        let commit = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "hi".into(),
                5,
            )],
            ..Commit::default()
        };
        let lost = store.commit(&t, thief, commit.clone()).await;
        assert!(matches!(lost, Err(StoreError::LeaseLost(_))), "{name}");
        store.commit(&t, owner, commit).await.expect("commit");
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, 1, ThreadStatus::Running),
            "{name}: the commit, and only it"
        );
        store
            .enqueue(t.id, human("more"), None, 1_100)
            .await
            .expect("enqueue");
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, 1, ThreadStatus::Running),
            "{name}: a queued message"
        );
        // A refused delivery is not a change.
        assert!(
            !store
                .deliver_if_free(t.id, human("no"), lease(thief, 1_200), None)
                .await
                .expect("deliver"),
            "{name}"
        );
        store
            .enqueue_if_running(t.id, human("steer"), 1_300)
            .await
            .expect("steer");
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, 1, ThreadStatus::Running),
            "{name}: a steering message"
        );
        store.terminate(t.id, 1_400).await.expect("terminate");
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, 1, ThreadStatus::Terminated),
            "{name}: terminated"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settling_commit_announces_the_new_status_to_every_subscriber() {
    each(async |store, name| {
        let (mut one, mut two) = (live(&store).await, live(&store).await);
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(
            store
                .enqueue(t.id, human("hello"), Some(lease(owner, 1_000)), 1_000)
                .await
                .expect("enqueue")
        );
        let queued = store.queue(t.id).await.expect("queue");
        t.status = ThreadStatus::AwaitingHuman;
        let (m, r) = (t.take_seq(), t.take_seq());
        let settle = Commit {
            drained: vec![queued[0].id],
            messages: vec![Message::text(
                m,
                1,
                Role::User,
                Some(SideId::B),
                "hello".into(),
                5,
            )],
            records: vec![Record {
                seq: r,
                body: RecordBody::Status {
                    text: "feed".into(),
                },
                created_at: 6,
            }],
            settle: true,
            ..Commit::default()
        };
        assert_eq!(
            store.commit(&t, owner, settle).await.expect("commit"),
            CommitOutcome::Settled
        );
        for feed in [&mut one, &mut two] {
            assert_eq!(
                next_change(feed, t.id).await,
                change(t.id, 0, ThreadStatus::Idle),
                "{name}: created"
            );
            assert_eq!(
                next_change(feed, t.id).await,
                change(t.id, 0, ThreadStatus::Idle),
                "{name}: the enqueue"
            );
            assert_eq!(
                next_change(feed, t.id).await,
                change(t.id, 2, ThreadStatus::AwaitingHuman),
                "{name}: the settle"
            );
        }
    })
    .await;
}

/// Postgres: a store in another process (here: another connection pool and listener on the same
/// database) hears of a commit at once, and again after its listening connection was killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_reaches_a_store_in_another_process_and_survives_a_lost_connection() {
    for backend in support::backends().await {
        let support::Backend::Postgres(url) = &backend else {
            continue;
        };
        let (writer, follower) = (backend.open().await, backend.open().await);
        let mut feed = live(&follower).await;
        let mut t = thread(&writer, "k").await;
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, 0, ThreadStatus::Idle)
        );
        let owner = Uuid::now_v7();
        assert!(
            writer
                .claim(t.id, lease(owner, 1_000))
                .await
                .expect("claim")
        );
        let commit_one = async |t: &mut Thread, text: &str| {
            let seq = t.take_seq();
            let commit = Commit {
                messages: vec![Message::text(
                    seq,
                    1,
                    Role::User,
                    Some(SideId::B),
                    text.into(),
                    5,
                )],
                ..Commit::default()
            };
            writer.commit(t, owner, commit).await.expect("commit");
            seq
        };
        t.status = ThreadStatus::Running;
        let seq = commit_one(&mut t, "one").await;
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, seq, ThreadStatus::Running)
        );

        // Kill every listening connection on the database (the follower's: a store nobody
        // subscribes to does not listen): it reconnects and says changes may have been missed.
        let killed = support::psql(
            url,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND query = 'LISTEN \"duet_changes\"'",
        )
        .await;
        assert_eq!(killed.trim(), "1", "one listener, the follower's");
        let resynced = async {
            loop {
                match feed.next().await {
                    Some(FeedEvent::Resync) => return,
                    Some(_) => {}
                    None => panic!("the feed ended"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), resynced)
            .await
            .expect("a resync after the listener reconnected");
        let seq = commit_one(&mut t, "two").await;
        assert_eq!(
            next_change(&mut feed, t.id).await,
            change(t.id, seq, ThreadStatus::Running),
            "heard again after reconnecting"
        );
    }
}
