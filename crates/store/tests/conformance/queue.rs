//! The queue, leases, the registry and termination; a queued message keeps its sender's id.

use super::*;
use duet_runtime::{Child, ChildStatus, Commit, CommitOutcome, Renewal};
use serde_json::json;

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
                .deliver_if_free(t.id, human("first"), lease(a, 1_000), None)
                .await
                .expect("deliver"),
            "{name}"
        );
        assert!(
            !store
                .deliver_if_free(t.id, human("second"), lease(b, 1_100), None)
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
                .deliver_if_free(t.id, human("third"), lease(b, 1_300), None)
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

#[tokio::test]
async fn the_registry_keeps_children_and_termination_takes_everything_away() {
    each(async |store, name| {
        let parent = thread(&store, "p").await;
        let (older, younger) = (thread(&store, "p/a-1").await, thread(&store, "p/b-1").await);
        let child = |c: &Thread, created_at: i64| Child {
            child: c.id,
            parent: parent.id,
            relationship: "rel".into(),
            owner: SideId::A,
            agent: "agent".into(),
            name: Some("n".into()),
            blocking: true,
            explicit: false,
            status: ChildStatus::Running,
            status_text: None,
            awaiting: None,
            created_at,
            arguments: json!({"topic": "x"}),
            env: [("KEY".to_owned(), "v".to_owned())].into(),
        };
        // Registered out of order: children come back oldest first.
        store.put_child(&child(&younger, 20)).await.expect("put");
        store.put_child(&child(&older, 10)).await.expect("put");
        // Putting a child again changes its status only.
        let again = Child {
            status: ChildStatus::Idle,
            relationship: "changed".into(),
            arguments: json!({}),
            ..child(&older, 99)
        };
        store.put_child(&again).await.expect("put");
        assert_eq!(
            store.child(older.id).await.expect("read"),
            Some(Child {
                status: ChildStatus::Idle,
                ..child(&older, 10)
            }),
            "{name}"
        );
        assert_eq!(
            store
                .children(parent.id)
                .await
                .expect("read")
                .iter()
                .map(|c| c.child)
                .collect::<Vec<_>>(),
            [older.id, younger.id],
            "{name}"
        );
        assert!(
            store
                .set_child_status(younger.id, ChildStatus::AwaitingHuman)
                .await
                .expect("set"),
            "{name}"
        );
        assert!(
            !store
                .set_child_status(parent.id, ChildStatus::Idle)
                .await
                .expect("set"),
            "{name}: not a child"
        );
        assert_eq!(store.child(parent.id).await.expect("read"), None, "{name}");

        // Terminating a running child: its lease, queue and registry status go.
        let mut running = younger.clone();
        let owner = Uuid::now_v7();
        assert!(
            store
                .enqueue(running.id, human("a"), Some(lease(owner, 1_000)), 1_000)
                .await
                .expect("enqueue")
        );
        store
            .enqueue(running.id, human("b"), None, 1_000)
            .await
            .expect("enqueue");
        store.terminate(running.id, 1_500).await.expect("terminate");
        let gone = store
            .thread_by_id(running.id)
            .await
            .expect("read")
            .expect("thread");
        assert_eq!(
            (gone.status, gone.lease_owner, gone.updated_at),
            (ThreadStatus::Terminated, None, 1_500),
            "{name}"
        );
        assert!(
            store.queue(running.id).await.expect("queue").is_empty(),
            "{name}"
        );
        assert_eq!(
            store
                .child(running.id)
                .await
                .expect("read")
                .map(|c| c.status),
            Some(ChildStatus::Terminated),
            "{name}"
        );
        running.status = ThreadStatus::Running;
        let late = store.commit(&running, owner, Commit::default()).await;
        assert!(
            matches!(late, Err(StoreError::LeaseLost(_))),
            "{name}: {late:?}"
        );
        assert!(
            matches!(
                store.terminate(Uuid::now_v7(), 1_600).await,
                Err(StoreError::NotFound(_))
            ),
            "{name}"
        );
        assert!(
            store
                .recoverable(99_999)
                .await
                .expect("recoverable")
                .is_empty(),
            "{name}: nothing to run"
        );
    })
    .await;
}

#[tokio::test]
async fn a_thread_is_created_with_its_first_message_or_not_at_all() {
    each(async |store, name| {
        let run = Uuid::now_v7();
        let made = store
            .create_with(
                "fresh",
                crate::new("agent", 5),
                human("hello"),
                lease(run, 5),
            )
            .await
            .expect("create")
            .expect("a new key");
        assert_eq!(made.lease_owner, Some(run), "{name}: the creator holds it");
        let queue = store.queue(made.id).await.expect("queue");
        assert_eq!(
            queue.iter().map(|q| q.content.as_str()).collect::<Vec<_>>(),
            ["hello"],
            "{name}"
        );
        // A key that exists: nothing is written.
        assert!(
            store
                .create_with(
                    "fresh",
                    crate::new("agent", 6),
                    human("again"),
                    lease(Uuid::now_v7(), 6)
                )
                .await
                .expect("create")
                .is_none(),
            "{name}"
        );
        // A retry of the same creation (the same id and key), with a message id or without:
        // the key is taken and nothing is written.
        let id = made.id;
        for message_id in [None, Some("m-retry")] {
            let retry = store
                .create_with(
                    "fresh",
                    NewThread {
                        id,
                        ..crate::new("agent", 7)
                    },
                    NewQueued {
                        message_id: message_id.map(str::to_owned),
                        ..human("retried")
                    },
                    lease(run, 7),
                )
                .await;
            assert!(matches!(retry, Ok(None)), "{name}: {retry:?}");
        }
        assert!(
            !store.delivered(id, "m-retry").await.expect("delivered"),
            "{name}"
        );
        assert_eq!(
            store.queue(made.id).await.expect("queue").len(),
            1,
            "{name}"
        );
        assert_eq!(
            store.threads(None).await.expect("threads").len(),
            1,
            "{name}"
        );
    })
    .await;
}

/// A queued message keeps the trace context it was queued in, by every way of queueing, and a
/// message queued without one has none.
#[tokio::test]
async fn a_queued_message_keeps_its_trace_context() {
    each(async |store, name| {
        let traced = |text: &str, trace: &str| NewQueued {
            trace: Some(trace.to_owned()),
            ..human(text)
        };
        let run = Uuid::now_v7();
        let made = store
            .create_with(
                "traced",
                crate::new("agent", 5),
                traced("first", r#"{"traceparent":"00-a-b-01"}"#),
                lease(run, 5),
            )
            .await
            .expect("create")
            .expect("a new key");
        store
            .enqueue(
                made.id,
                traced("second", r#"{"traceparent":"00-c-d-01"}"#),
                None,
                6,
            )
            .await
            .expect("enqueue");
        store
            .enqueue(made.id, human("untraced"), None, 7)
            .await
            .expect("enqueue");
        let queue = store.queue(made.id).await.expect("queue");
        let traces: Vec<Option<&str>> = queue.iter().map(|q| q.trace.as_deref()).collect();
        assert_eq!(
            traces,
            [
                Some(r#"{"traceparent":"00-a-b-01"}"#),
                Some(r#"{"traceparent":"00-c-d-01"}"#),
                None
            ],
            "{name}"
        );
    })
    .await;
}

/// `enqueue` writes its message id, its message and its claim together or not at all: a message
/// id delivered before is `Duplicate` and queues nothing, a missing thread is `NotFound`, a held
/// lease is not taken, and a caller dropped at any point leaves each message wholly queued or
/// not at all, with the store still writable.
#[tokio::test]
async fn an_enqueue_lands_whole_or_not_at_all() {
    each(async |store, name| {
        let with_id = |text: &str| NewQueued {
            message_id: Some(text.to_owned()),
            ..human(text)
        };
        let run = Uuid::now_v7();
        let t = store
            .create_with("k", crate::new("agent", 5), human("first"), lease(run, 5))
            .await
            .expect("create")
            .expect("a new key");
        let other = Uuid::now_v7();
        let claimed = store
            .enqueue(t.id, with_id("m1"), Some(lease(other, 6)), 6)
            .await
            .expect("enqueue");
        assert!(!claimed, "{name}: the lease is held by the creator");
        let again = store
            .enqueue(t.id, with_id("m1"), Some(lease(other, 7)), 7)
            .await;
        assert!(
            matches!(&again, Err(StoreError::Duplicate { message_id, .. }) if message_id == "m1"),
            "{name}: {again:?}"
        );
        let missing = store
            .enqueue(Uuid::now_v7(), with_id("m2"), Some(lease(other, 7)), 7)
            .await;
        assert!(
            matches!(missing, Err(StoreError::NotFound(_))),
            "{name}: {missing:?}"
        );
        for polls in 0..6 {
            let text = format!("dropped-{polls}");
            let mut dropped = Box::pin(store.enqueue(t.id, with_id(&text), None, 8));
            for _ in 0..polls {
                if futures::poll!(&mut dropped).is_ready() {
                    break;
                }
                tokio::task::yield_now().await;
            }
            drop(dropped);
        }
        store
            .enqueue(t.id, human("after"), None, 9)
            .await
            .expect("the store still writes");
        // A dropped caller's statement may still be running on the server (Postgres finishes
        // what it was sent, on a connection of its own): read until the queue and the message
        // ids agree. Each enqueue is one atomic write, so once it has run they do; a half
        // write never would.
        let mut queue = Vec::new();
        let mut halves = Vec::new();
        for _ in 0..200 {
            queue = store.queue(t.id).await.expect("queue");
            halves.clear();
            for polls in 0..6 {
                let text = format!("dropped-{polls}");
                let queued = queue.iter().filter(|q| q.content == text).count();
                assert!(queued <= 1, "{name}: {text} queued {queued} times");
                let delivered = store.delivered(t.id, &text).await.expect("delivered");
                if (queued == 1) != delivered {
                    halves.push(text);
                }
            }
            if halves.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(halves.is_empty(), "{name}: half written: {halves:?}");
        // In arrival order, whenever the dropped ones landed.
        let texts: Vec<&str> = queue
            .iter()
            .map(|q| q.content.as_str())
            .filter(|c| !c.starts_with("dropped-"))
            .collect();
        assert_eq!(texts, ["first", "m1", "after"], "{name}");
        // The lease once free is taken by the delivery that finds it free.
        store.release(t.id, run).await.expect("release");
        let claimed = store
            .enqueue(t.id, human("claims"), Some(lease(other, 10)), 10)
            .await
            .expect("enqueue");
        assert!(claimed, "{name}: the lease was free");
        let now = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        assert_eq!(now.lease_owner, Some(other), "{name}");
        // What a run starts from is the thread, its history and its queue as they stand.
        let mut running = now;
        let first = queue[0].id;
        let seq = running.take_seq();
        let drain = Commit {
            drained: vec![first],
            messages: vec![duet_runtime::Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "first".into(),
                11,
            )],
            ..Commit::default()
        };
        store.commit(&running, other, drain).await.expect("drain");
        let start = store.run_start(t.id).await.expect("run start");
        assert_eq!(
            start.thread,
            store.thread_by_id(t.id).await.expect("read"),
            "{name}"
        );
        assert_eq!(
            start.messages,
            store.messages(t.id).await.expect("read"),
            "{name}"
        );
        assert_eq!(start.messages.len(), 1, "{name}");
        let rest = store.queue(t.id).await.expect("queue");
        assert_eq!(start.queue, rest, "{name}");
        assert!(
            !rest.is_empty() && rest.iter().all(|q| q.id != first),
            "{name}"
        );
        let none = store.run_start(Uuid::now_v7()).await.expect("run start");
        assert!(none.thread.is_none() && none.queue.is_empty(), "{name}");
    })
    .await;
}

/// A queued message keeps the id its sender chose, whichever write queued it (a new thread's
/// first message, `enqueue`, `deliver_if_free`): the run that drains it writes it with the
/// message, so a protocol can show the sender its own id.
#[tokio::test]
async fn a_queued_message_keeps_its_senders_id() {
    each(async |store, name| {
        let with_id = |text: &str, id: Option<&str>| NewQueued {
            message_id: id.map(str::to_owned),
            ..human(text)
        };
        let run = Uuid::now_v7();
        let t = store
            .create_with(
                "ids",
                crate::new("agent", 5),
                with_id("first", Some("c-1")),
                lease(run, 5),
            )
            .await
            .expect("create")
            .expect("a new key");
        store
            .enqueue(t.id, with_id("second", Some("e-2")), None, 6)
            .await
            .expect("enqueue");
        store
            .enqueue(t.id, with_id("third", None), None, 7)
            .await
            .expect("enqueue");
        // The creator's lease ran out: a delivery that needs the thread free takes it.
        let taken = store
            .deliver_if_free(
                t.id,
                with_id("fourth", Some("f-4")),
                lease(Uuid::now_v7(), 5_000),
                None,
            )
            .await
            .expect("deliver");
        assert!(taken, "{name}: the lease was free");
        let ids: Vec<(String, Option<String>)> = store
            .queue(t.id)
            .await
            .expect("queue")
            .into_iter()
            .map(|q| (q.content, q.message_id))
            .collect();
        let want = [
            ("first", Some("c-1")),
            ("second", Some("e-2")),
            ("third", None),
            ("fourth", Some("f-4")),
        ]
        .map(|(c, id)| (c.to_owned(), id.map(str::to_owned)));
        assert_eq!(ids, want, "{name}");
    })
    .await;
}
