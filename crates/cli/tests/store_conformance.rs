//! One conformance suite for every store backend: SQLite always, Postgres when `DATABASE_URL`
//! is set (`.ci/run` sets it). Each check runs on a fresh database of each backend.

mod support;

use std::sync::Arc;

use duet_runtime::{
    Commit, CommitOutcome, JournalEntry, Lease, Message, NewQueued, NewThread, Record, RecordBody,
    Renewal, Role, SideId, StopReason, Store, StoreError, Thread, ThreadStatus, ToolCall,
    ToolStatus,
};
use serde_json::json;
use uuid::Uuid;

fn new(agent: &str, now: i64) -> NewThread<'_> {
    NewThread {
        id: Uuid::now_v7(),
        agent,
        parent: None,
        principal: None,
        source: None,
        now,
    }
}

fn lease(owner: Uuid, now: i64) -> Lease {
    Lease {
        owner,
        until: now + 1_000,
        now,
    }
}

fn human(text: &str) -> NewQueued {
    NewQueued {
        role: Role::User,
        side: SideId::B,
        content: text.into(),
        human: true,
        silent: false,
        follow_up: false,
        tool: None,
    }
}

async fn each(check: impl AsyncFn(Arc<dyn Store>, &'static str)) {
    for backend in support::backends().await {
        let store = backend.open().await;
        check(store, backend.name()).await;
    }
}

async fn thread(store: &Arc<dyn Store>, key: &str) -> Thread {
    store
        .open_thread(key, new("agent", 100))
        .await
        .expect("open")
}

#[tokio::test]
async fn open_thread_is_idempotent_per_key() {
    each(async |store, name| {
        let a = thread(&store, "k1").await;
        let again = store
            .open_thread("k1", new("other", 200))
            .await
            .expect("open");
        assert_eq!(a, again, "{name}: the first thread wins");
        assert_eq!(a.status, ThreadStatus::Idle);
        assert_eq!(store.thread("k1").await.expect("read"), Some(a.clone()));
        assert_eq!(store.thread_by_id(a.id).await.expect("read"), Some(a));
        assert_eq!(store.thread("nope").await.expect("read"), None);
    })
    .await;
}

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
async fn commits_are_fenced_by_the_lease() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(store.claim(t.id, lease(a, 1_000)).await.expect("claim"));
        t.status = ThreadStatus::Running;
        let seq = t.take_seq();
        let commit = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "hello".into(),
                5,
            )],
            ..Commit::default()
        };
        let err = store.commit(&t, b, commit.clone()).await;
        assert!(
            matches!(err, Err(StoreError::LeaseLost(_))),
            "{name}: {err:?}"
        );
        assert!(
            store.messages(t.id).await.expect("read").is_empty(),
            "{name}: nothing written"
        );
        assert_eq!(
            store.commit(&t, a, commit).await.expect("commit"),
            CommitOutcome::Committed { queued: false }
        );
        assert_eq!(store.messages(t.id).await.expect("read").len(), 1);
        assert_eq!(
            store
                .thread_by_id(t.id)
                .await
                .expect("read")
                .map(|x| x.status),
            Some(ThreadStatus::Running)
        );
    })
    .await;
}

#[tokio::test]
async fn a_write_that_breaks_a_constraint_is_a_conflict_and_writes_nothing() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        let seq = t.take_seq();
        let first = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "one".into(),
                5,
            )],
            ..Commit::default()
        };
        store.commit(&t, owner, first).await.expect("commit");
        // The same seq again (a runner that lost track of its thread): the journal's key is taken.
        let again = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "two".into(),
                6,
            )],
            values: vec![("written".into(), Some(json!(true)))],
            ..Commit::default()
        };
        t.status = ThreadStatus::Running;
        let err = store.commit(&t, owner, again).await;
        assert!(
            matches!(err, Err(StoreError::Conflict(_))),
            "{name}: {err:?}"
        );
        let contents: Vec<_> = store
            .messages(t.id)
            .await
            .expect("read")
            .into_iter()
            .filter_map(|m| m.content)
            .collect();
        assert_eq!(contents, ["one"], "{name}");
        assert_eq!(
            store.value(t.id, "written").await.expect("read"),
            None,
            "{name}"
        );
        assert_eq!(
            store
                .thread_by_id(t.id)
                .await
                .expect("read")
                .map(|x| x.status),
            Some(ThreadStatus::Idle),
            "{name}: the thread row was not written either"
        );
        // A new thread reusing another's id under a new key.
        let taken = NewThread {
            id: t.id,
            ..new("agent", 200)
        };
        let err = store.open_thread("other key", taken).await;
        assert!(
            matches!(err, Err(StoreError::Conflict(_))),
            "{name}: {err:?}"
        );
        // The store still works after both.
        store
            .open_thread("fine", new("agent", 300))
            .await
            .expect("open");
    })
    .await;
}

#[tokio::test]
async fn everything_a_commit_writes_reads_back() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        t.status = ThreadStatus::AwaitingHuman;
        t.status_text = Some("half".into());
        t.session = 3;
        t.session_open = true;
        t.stop_reason = Some(StopReason::StopTool);
        t.result = Some("r".into());
        t.turns.a = 2;
        t.turns.b = 1;
        t.steps.a = 4;
        t.steps.b = 5;
        t.steps_total = 9;
        t.acting = Some(SideId::B);
        t.watermarks.a = 7;
        t.watermarks.b = 8;
        let s1 = t.take_seq();
        let s2 = t.take_seq();
        let s3 = t.take_seq();
        let mut call = Message::text(
            s1,
            3,
            Role::Assistant,
            Some(SideId::A),
            "calling".into(),
            10,
        );
        call.thinking = Some("hm".into());
        call.model = Some("demo".into());
        call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "look".into(),
            arguments: json!({"q": "ünïcode"}),
        }];
        let mut result = Message::text(s2, 3, Role::Tool, Some(SideId::A), "found".into(), 11);
        result.tool_call_id = Some("c1".into());
        result.tool_name = Some("look".into());
        result.tool_status = Some(ToolStatus::Error);
        result.silent = true;
        let record = Record {
            seq: s3,
            body: RecordBody::TurnCompleted { side: SideId::A },
            created_at: 12,
        };
        let commit = Commit {
            messages: vec![call.clone(), result.clone()],
            records: vec![record.clone()],
            values: vec![
                ("count".into(), Some(json!({"n": 1}))),
                ("gone".into(), None),
            ],
            ..Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        let mut back = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        back.updated_at = t.updated_at;
        assert_eq!(
            back,
            Thread {
                lease_owner: Some(owner),
                lease_expires: 2_000,
                ..t.clone()
            },
            "{name}"
        );
        assert_eq!(
            store.messages(t.id).await.expect("read"),
            vec![call, result],
            "{name}"
        );
        assert_eq!(
            store.records(t.id).await.expect("read"),
            vec![record],
            "{name}"
        );
        assert_eq!(
            store.value(t.id, "count").await.expect("read"),
            Some(json!({"n": 1}))
        );
        let delete = Commit {
            values: vec![("count".into(), None)],
            ..Commit::default()
        };
        store.commit(&t, owner, delete).await.expect("commit");
        assert_eq!(
            store.value(t.id, "count").await.expect("read"),
            None,
            "{name}"
        );
        let parked = store
            .threads(Some(ThreadStatus::AwaitingHuman))
            .await
            .expect("list");
        assert_eq!(parked.len(), 1);
        assert!(
            store
                .threads(Some(ThreadStatus::Running))
                .await
                .expect("list")
                .is_empty()
        );
        assert!(store.size_bytes().await.expect("size") > 0);
    })
    .await;
}

#[tokio::test]
async fn the_journal_reads_from_a_cursor_in_seq_order() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let mut other = thread(&store, "other").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        assert!(
            store
                .claim(other.id, lease(owner, 1_000))
                .await
                .expect("claim")
        );
        let text = |seq, s: &str| Message::text(seq, 1, Role::User, Some(SideId::B), s.into(), 5);
        let record = |seq, kind: &str| Record {
            seq,
            body: RecordBody::from_parts(kind, json!({"at": seq})),
            created_at: 6,
        };
        // Two commits, each with messages and records whose seqs interleave.
        let (m1, r2, m3) = (t.take_seq(), t.take_seq(), t.take_seq());
        let first = Commit {
            messages: vec![text(m1, "one"), text(m3, "three")],
            records: vec![record(r2, "turn_completed")],
            ..Commit::default()
        };
        store.commit(&t, owner, first).await.expect("commit");
        let (r4, m5) = (t.take_seq(), t.take_seq());
        let second = Commit {
            messages: vec![text(m5, "five")],
            records: vec![record(r4, "stopped")],
            ..Commit::default()
        };
        store.commit(&t, owner, second).await.expect("commit");
        let noise = Commit {
            messages: vec![text(other.take_seq(), "elsewhere")],
            ..Commit::default()
        };
        store.commit(&other, owner, noise).await.expect("commit");

        let all = store.journal_since(t.id, 0).await.expect("read");
        assert_eq!(
            all.iter().map(JournalEntry::seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5],
            "{name}"
        );
        assert_eq!(all[0], JournalEntry::Message(text(m1, "one")), "{name}");
        assert_eq!(
            all[3],
            JournalEntry::Record(record(r4, "stopped")),
            "{name}"
        );
        let later = store.journal_since(t.id, 2).await.expect("read");
        assert_eq!(later, all[2..].to_vec(), "{name}");
        assert!(
            store.journal_since(t.id, 5).await.expect("read").is_empty(),
            "{name}: nothing after the last"
        );
        assert!(
            store
                .journal_since(Uuid::now_v7(), 0)
                .await
                .expect("read")
                .is_empty(),
            "{name}: no such thread, no entries"
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_opening_a_new_database_at_once_all_succeed() {
    for _ in 0..3 {
        let backend = support::backends().await.remove(0);
        let opens: Vec<_> = (0..4)
            .map(|_| {
                let b = backend.clone();
                tokio::spawn(async move { b.open().await.threads(None).await.map(|t| t.len()) })
            })
            .collect();
        for open in opens {
            assert_eq!(
                open.await.expect("joins").expect("migrated and readable"),
                0
            );
        }
    }
}

#[tokio::test]
async fn a_failing_backend_keeps_its_cause() {
    let file = std::env::temp_dir().join(format!("duet-not-a-dir-{}", Uuid::now_v7().simple()));
    std::fs::write(&file, "").expect("scratch file");
    let under_a_file = file.join("store.db").display().to_string();
    let mut urls = vec![under_a_file];
    // A database the server refuses (answered at once: an unreachable server is retried).
    if let Some((server, _)) = std::env::var("DATABASE_URL")
        .ok()
        .as_deref()
        .and_then(|u| u.rsplit_once('/'))
    {
        urls.push(format!("{server}/duet_no_such_database"));
    }
    for url in &urls {
        match duet_store::connect(url).await {
            Err(err @ StoreError::Backend { .. }) => {
                assert!(std::error::Error::source(&err).is_some(), "{url}: {err}");
            }
            Err(other) => panic!("{url}: not a backend failure: {other:?}"),
            Ok(_) => panic!("{url}: opened"),
        }
    }
    let _ = std::fs::remove_file(file);
}
