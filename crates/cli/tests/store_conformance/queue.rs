//! The queue and leases.

use super::*;
use duet_runtime::{Commit, CommitOutcome, Renewal};

#[tokio::test]
async fn leases_exclude_other_owners_until_they_expire() {
    each(async |store, name| {
        let t = thread(&store, "k").await;
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(
            store.claim(t.id, lease(a, 1_000)).await.expect("claim"),
            "{name}"
        );
        assert!(
            !store.claim(t.id, lease(b, 1_500)).await.expect("claim"),
            "{name}: held"
        );
        assert!(
            store.claim(t.id, lease(a, 1_500)).await.expect("claim"),
            "{name}: the owner may re-claim"
        );
        assert_eq!(
            store.renew(t.id, lease(a, 1_800)).await.expect("renew"),
            Renewal::Held {
                abort_requested: false
            },
            "{name}"
        );
        assert!(
            store.renew(t.id, lease(b, 1_800)).await.expect("renew") == Renewal::Lost,
            "{name}: not b's"
        );
        // a's lease runs to 2_800; at 2_801 it is free.
        assert!(
            store.claim(t.id, lease(b, 2_801)).await.expect("claim"),
            "{name}: expired"
        );
        assert!(
            store.renew(t.id, lease(a, 2_900)).await.expect("renew") == Renewal::Lost,
            "{name}: a lost it"
        );
    })
    .await;
}

#[tokio::test]
async fn a_queued_message_is_never_stranded() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let (runner, other) = (Uuid::now_v7(), Uuid::now_v7());
        // Delivered to a free thread: queued and claimed in one go.
        assert!(
            store
                .enqueue(t.id, human("one"), Some(lease(runner, 1_000)), 1_000)
                .await
                .expect("enqueue"),
            "{name}"
        );
        // Delivered while held: queued, not claimed.
        assert!(
            !store
                .enqueue(t.id, human("two"), Some(lease(other, 1_100)), 1_100)
                .await
                .expect("enqueue"),
            "{name}"
        );
        let queue = store.queue(t.id).await.expect("queue");
        assert_eq!(
            queue.iter().map(|q| q.content.as_str()).collect::<Vec<_>>(),
            ["one", "two"]
        );
        assert!(queue[0].human && queue[0].side == SideId::B && queue[0].role == Role::User);
        // Settling with messages waiting keeps the lease.
        let drain_one = Commit {
            drained: vec![queue[0].id],
            settle: true,
            ..Commit::default()
        };
        assert_eq!(
            store.commit(&t, runner, drain_one).await.expect("commit"),
            CommitOutcome::Committed { queued: true },
            "{name}"
        );
        t.status = ThreadStatus::AwaitingHuman;
        let drain_two = Commit {
            drained: vec![queue[1].id],
            settle: true,
            ..Commit::default()
        };
        assert_eq!(
            store.commit(&t, runner, drain_two).await.expect("commit"),
            CommitOutcome::Settled,
            "{name}"
        );
        assert!(store.queue(t.id).await.expect("queue").is_empty());
        assert_eq!(
            store
                .thread_by_id(t.id)
                .await
                .expect("read")
                .and_then(|x| x.lease_owner),
            None
        );
        // Nothing needs a runner now.
        assert!(
            store
                .recoverable(5_000)
                .await
                .expect("recoverable")
                .is_empty(),
            "{name}"
        );
    })
    .await;
}

#[tokio::test]
async fn recoverable_finds_dead_runners_and_orphaned_queues() {
    each(async |store, name| {
        let mut running = thread(&store, "running").await;
        let orphan = thread(&store, "orphan").await;
        let _idle = thread(&store, "idle").await;
        let dead = Uuid::now_v7();
        assert!(
            store
                .claim(running.id, lease(dead, 1_000))
                .await
                .expect("claim")
        );
        running.status = ThreadStatus::Running;
        store
            .commit(&running, dead, Commit::default())
            .await
            .expect("commit");
        // A message queued without a claim (its sender died before running it).
        store
            .enqueue(orphan.id, human("hi"), None, 1_000)
            .await
            .expect("enqueue");
        assert_eq!(
            store.recoverable(1_500).await.expect("recoverable"),
            vec![orphan.id],
            "{name}: lease still live"
        );
        assert_eq!(
            store.recoverable(2_001).await.expect("recoverable"),
            vec![running.id, orphan.id],
            "{name}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_busy_refusing_delivery_writes_nothing_and_owners_are_kept() {
    each(async |store, name| {
        let owned = NewThread {
            principal: Some("{\"p\":1}"),
            source: Some("slack"),
            ..new("agent", 100)
        };
        let t = store.open_thread("owned", owned).await.expect("open");
        assert_eq!(
            (t.principal.as_deref(), t.source.as_deref()),
            (Some("{\"p\":1}"), Some("slack")),
            "{name}"
        );
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(
            store
                .deliver_if_free(t.id, human("first"), lease(a, 1_000))
                .await
                .expect("deliver"),
            "{name}"
        );
        assert!(
            !store
                .deliver_if_free(t.id, human("second"), lease(b, 1_100))
                .await
                .expect("deliver"),
            "{name}: busy"
        );
        let queue = store.queue(t.id).await.expect("queue");
        assert_eq!(
            queue.iter().map(|q| q.content.as_str()).collect::<Vec<_>>(),
            ["first"],
            "{name}: the refused one left no trace"
        );
        assert_eq!(
            store
                .thread_by_id(t.id)
                .await
                .expect("read")
                .and_then(|x| x.lease_owner),
            Some(a)
        );
        // The write connection is still usable after a refusal.
        assert_eq!(
            store.renew(t.id, lease(a, 1_200)).await.expect("renew"),
            Renewal::Held {
                abort_requested: false
            },
            "{name}"
        );
        assert!(
            !store
                .deliver_if_free(t.id, human("third"), lease(b, 1_300))
                .await
                .expect("deliver"),
            "{name}: busy"
        );
        store
            .open_thread("another", new("agent", 1_400))
            .await
            .expect("the writer is free");
    })
    .await;
}

#[tokio::test]
async fn control_requests_need_a_live_run() {
    each(async |store, name| {
        let t = thread(&store, "k").await;
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let steer = NewQueued {
            follow_up: true,
            ..human("later")
        };
        assert_eq!(
            store
                .enqueue_if_running(t.id, steer.clone(), 1_000)
                .await
                .expect("enqueue"),
            None,
            "{name}: idle"
        );
        assert_eq!(
            store.request_abort(t.id, 1_000).await.expect("abort"),
            None,
            "{name}: idle"
        );
        assert!(store.claim(t.id, lease(a, 1_000)).await.expect("claim"));
        assert_eq!(
            store
                .enqueue_if_running(t.id, steer, 1_100)
                .await
                .expect("enqueue"),
            Some(a),
            "{name}"
        );
        assert!(
            store.queue(t.id).await.expect("queue")[0].follow_up,
            "{name}"
        );
        assert_eq!(
            store.request_abort(t.id, 1_100).await.expect("abort"),
            Some(a),
            "{name}"
        );
        assert_eq!(
            store.renew(t.id, lease(a, 1_200)).await.expect("renew"),
            Renewal::Held {
                abort_requested: true
            },
            "{name}"
        );
        // A new run starts without the old run's abort request.
        assert!(
            store.claim(t.id, lease(b, 2_500)).await.expect("claim"),
            "{name}: expired"
        );
        assert_eq!(
            store.renew(t.id, lease(b, 2_600)).await.expect("renew"),
            Renewal::Held {
                abort_requested: false
            },
            "{name}"
        );
        // An expired lease is no run to steer.
        assert_eq!(
            store
                .enqueue_if_running(t.id, human("x"), 99_999)
                .await
                .expect("enqueue"),
            None,
            "{name}"
        );
    })
    .await;
}
