//! Notices (issue #31): each committed fact a person may need to hear of (a park, a pending tool
//! call, a decision, a reminder, an escalation, a session's end) and each accepted answer is one
//! notice, written by the database in the fact's transaction — none for other records, none for
//! a commit that failed, one per thread for commits grouped at once; a notice is routed once,
//! its deliveries and links written with it, and one routed to nothing is gone. Old
//! `push_outbox` rows move into the outbox with the migration. The outbox itself, links,
//! subscriptions and secrets: `notify_outbox.rs`.

use super::*;
use duet_runtime::approval::{Asked, Decided, Decision};
use duet_runtime::{AnswerOutcome, Commit, Message, Park, Record, RecordBody, StopReason};
use duet_server_store::{DeliveryQuery, Link, NewDelivery, Notice, ServerStore};

const ALICE: &str = r#"{"iss":"test","sub":"alice"}"#;

/// Every store implementation, fresh, with both of its ports.
pub(crate) async fn stores() -> Vec<(support::Backend, duet_store::Stores)> {
    let mut out = Vec::new();
    for backend in support::store_backends().await {
        let stores = backend.open_both().await;
        out.push((backend, stores));
    }
    out
}

/// A park's `stopped` record at `seq`.
fn parked_at(seq: i64, at: i64) -> Record {
    Record::new(
        seq,
        RecordBody::Stopped {
            stop_reason: StopReason::AwaitingHuman,
            status: ThreadStatus::AwaitingHuman,
            trace: None,
            revision: None,
        },
        at,
    )
}

/// Thread `key` asks a question in session 1 and parks on it (at 1 000): the thread, its park
/// and the seq of the `stopped` record.
async fn park(store: &Arc<dyn Store>, key: &str) -> (Thread, Park, i64) {
    let mut t = thread(store, key).await;
    let run = Uuid::now_v7();
    assert!(store.claim(t.id, lease(run, 1_000)).await.expect("claim"));
    t.session = 1;
    let asked = t.take_seq();
    let stopped = t.take_seq();
    t.status = ThreadStatus::AwaitingHuman;
    let commit = Commit {
        messages: vec![Message::text(
            asked,
            1,
            Role::Assistant,
            Some(SideId::A),
            "which?".into(),
            1_000,
        )],
        records: vec![parked_at(stopped, 1_000)],
        settle: true,
        ..Commit::default()
    };
    store.commit(&t, run, commit).await.expect("commit");
    let t = store
        .thread_by_id(t.id)
        .await
        .expect("read")
        .expect("thread");
    let park = t.park().expect("parked");
    (t, park, stopped)
}

/// The unrouted notices about `thread`, oldest first.
pub(crate) async fn notices_of(server: &Arc<dyn ServerStore>, thread: Uuid) -> Vec<Notice> {
    let all = server.notices(1_000).await.expect("notices");
    all.into_iter().filter(|n| n.thread == thread).collect()
}

/// A fresh unrouted notice: a committed park on a SQL backend, put in by hand in memory (which
/// has no journal).
pub(crate) async fn a_notice(
    backend: &support::Backend,
    stores: &duet_store::Stores,
    key: &str,
) -> Notice {
    let thread = match backend {
        support::Backend::Memory(_, server) => {
            let t = Uuid::now_v7();
            server.push_notice(t, 2, Some(1), "stopped", "{}", 1_000);
            t
        }
        _ => park(&stores.engine, key).await.0.id,
    };
    let mut found = notices_of(&stores.server, thread).await;
    assert_eq!(found.len(), 1, "{}: {found:?}", backend.name());
    found.remove(0)
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn asked() -> Asked {
    Asked {
        call: "c1".into(),
        tool: "refund".into(),
        arguments: serde_json::json!({"amount": 250}),
        decisions: Decision::ALL.to_vec(),
        remember: Vec::new(),
        approvers: Default::default(),
        revision: None,
        policy: None,
        deadline: None,
    }
}

fn decided(approval: i64) -> Decided {
    Decided {
        approval,
        call: "c1".into(),
        tool: "refund".into(),
        decision: Decision::Approve,
        args: None,
        reason: None,
        text: None,
        remember: None,
        author: Some(ALICE.into()),
        at: 3_000,
        message_id: None,
    }
}

#[tokio::test]
async fn each_committed_fact_a_person_needs_is_one_notice() {
    for backend in support::backends().await {
        let name = backend.name();
        let stores = backend.open_both().await;
        let (store, server) = (&stores.engine, &stores.server);
        let (t, at, stopped) = park(store, "k").await;
        let found = notices_of(server, t.id).await;
        assert_eq!(found.len(), 1, "{name}: the park: {found:?}");
        let n = &found[0];
        assert_eq!(
            (n.fact.as_str(), n.seq, n.session, n.created_at),
            ("stopped", stopped, Some(1), 1_000),
            "{name}"
        );
        assert_eq!(json(&n.data), parked_at(stopped, 0).data(), "{name}");

        // The accepted answer: the park's seq and session, who and what.
        let answer = NewQueued {
            author: Some(ALICE.into()),
            message_id: Some("m1".into()),
            ..human("the blue one")
        };
        let runner = Uuid::now_v7();
        let outcome = store
            .answer(t.id, answer, at, lease(runner, 2_000))
            .await
            .expect("answer");
        assert_eq!(outcome, AnswerOutcome::Accepted { claimed: true }, "{name}");
        let found = notices_of(server, t.id).await;
        assert_eq!(found.len(), 2, "{name}: {found:?}");
        let n = &found[1];
        assert_eq!(
            (n.fact.as_str(), n.seq, n.session, n.created_at),
            ("answer", at.seq, Some(at.session), 2_000),
            "{name}"
        );
        assert_eq!(
            json(&n.data),
            serde_json::json!({"author": ALICE, "messageId": "m1", "content": "the blue one"}),
            "{name}"
        );

        // The run takes it: a message, a finished turn and a stop that is no park make none.
        let mut t = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        let queue = store.queue(t.id).await.expect("queue");
        let said = t.take_seq();
        let turn = t.take_seq();
        let idle = t.take_seq();
        t.status = ThreadStatus::Idle;
        let commit = Commit {
            drained: queue.iter().map(|q| q.id).collect(),
            messages: vec![Message::text(
                said,
                1,
                Role::User,
                Some(SideId::B),
                "the blue one".into(),
                2_500,
            )],
            records: vec![
                Record::new(turn, RecordBody::TurnCompleted { side: SideId::B }, 2_500),
                Record::new(
                    idle,
                    RecordBody::Stopped {
                        stop_reason: StopReason::SessionStop,
                        status: ThreadStatus::Idle,
                        trace: None,
                        revision: None,
                    },
                    2_500,
                ),
            ],
            ..Commit::default()
        };
        store.commit(&t, runner, commit).await.expect("commit");
        assert_eq!(notices_of(server, t.id).await.len(), 2, "{name}: no more");

        // A pending call, its decision, a reminder, an escalation, the session's end and a
        // failed step: one
        // each, in order, each in the session of the last message before it.
        let bodies = |approval: i64| {
            vec![
                RecordBody::ApprovalRequested(asked()),
                RecordBody::ApprovalDecided(decided(approval)),
                RecordBody::QuestionReminded {
                    subject: format!("{}:1:{approval}", t.id),
                    n: 1,
                },
                RecordBody::QuestionEscalated {
                    subject: format!("{}:1:{approval}", t.id),
                    to: Default::default(),
                },
                RecordBody::SessionEnded {
                    stop_reason: StopReason::SessionStop,
                    result: Some("done".into()),
                },
                RecordBody::StepError {
                    error: "the model is down".into(),
                },
            ]
        };
        let first = t.next_seq;
        let records: Vec<Record> = bodies(first)
            .into_iter()
            .map(|body| Record::new(t.take_seq(), body, 3_000))
            .collect();
        let commit = Commit {
            records: records.clone(),
            ..Commit::default()
        };
        store.commit(&t, runner, commit).await.expect("commit");
        let found = notices_of(server, t.id).await;
        assert_eq!(found.len(), 8, "{name}: {found:?}");
        for (n, r) in found[2..].iter().zip(&records) {
            assert_eq!(
                (n.fact.as_str(), n.seq, n.session, n.created_at),
                (r.kind(), r.seq, Some(1), 3_000),
                "{name}"
            );
            assert_eq!(json(&n.data), r.data(), "{name}: {}", r.kind());
        }

        // A commit that fails (its lease is gone) leaves no notice.
        let mut late = t.clone();
        let seq = late.take_seq();
        let lost = store
            .commit(
                &late,
                Uuid::now_v7(),
                Commit {
                    records: vec![parked_at(seq, 4_000)],
                    ..Commit::default()
                },
            )
            .await;
        assert!(
            matches!(lost, Err(StoreError::LeaseLost(_))),
            "{name}: {lost:?}"
        );
        assert_eq!(notices_of(server, t.id).await.len(), 8, "{name}: none");
    }
}

#[tokio::test]
async fn commits_grouped_at_once_each_write_their_notice() {
    for backend in support::backends().await {
        let name = backend.name();
        let stores = backend.open_both().await;
        let store = &stores.engine;
        // Eight parks committed at once (Postgres writes them in one `duet_commit` call, its
        // journal rows by one `INSERT … SELECT … FROM unnest`); half also write a timer, which
        // takes the call through its timers statement.
        let parks = (0..8).map(|i| {
            let store = store.clone();
            async move {
                let mut t = thread(&store, &format!("k{i}")).await;
                let run = Uuid::now_v7();
                assert!(store.claim(t.id, lease(run, 1_000)).await.expect("claim"));
                t.session = 1;
                let seq = t.take_seq();
                t.status = ThreadStatus::AwaitingHuman;
                let timers = if i % 2 == 0 {
                    vec![super::timers::effect("later", 9_000)]
                } else {
                    Vec::new()
                };
                let commit = Commit {
                    records: vec![parked_at(seq, 1_000)],
                    settle: true,
                    timers,
                    ..Commit::default()
                };
                store.commit(&t, run, commit).await.expect("commit");
                (t.id, seq)
            }
        });
        let parked = futures::future::join_all(parks).await;
        for (thread, seq) in parked {
            let found = notices_of(&stores.server, thread).await;
            assert_eq!(
                found
                    .iter()
                    .map(|n| (n.fact.as_str(), n.seq))
                    .collect::<Vec<_>>(),
                [("stopped", seq)],
                "{name}"
            );
            assert_eq!(found[0].session, None, "{name}: no message before it");
        }
    }
}

fn delivery(notice: i64, i: usize, channel: &str) -> NewDelivery {
    NewDelivery {
        channel: channel.into(),
        stream: format!("{channel}:ops:target"),
        target: "https://hooks.test/ops".into(),
        notice: Some(notice),
        thread: Some(Uuid::now_v7()),
        event: "question.parked".into(),
        subject: Some("t:1:2".into()),
        subscription: Some("agents/notifications/ops".into()),
        recipient: Some("alice".into()),
        body: format!("{{\"n\":{i}}}"),
        meta: Some("{\"secretEnv\":\"OPS\"}".into()),
        idempotency_key: format!("n{notice}-{i}"),
        due_at: 7_000,
    }
}

pub(crate) fn link(id: &str, approval: &str, expires_at: i64) -> Link {
    Link {
        id: id.into(),
        approval: approval.into(),
        action: "approve".into(),
        approver: "alice".into(),
        roles: "[\"ops\"]".into(),
        delivery: None,
        expires_at,
        used_at: None,
        used_by: None,
        revoked_at: None,
        created_at: 5_000,
    }
}

#[tokio::test]
async fn a_notice_is_routed_once_with_its_deliveries_and_links() {
    for (backend, stores) in stores().await {
        let name = backend.name();
        let server = &stores.server;
        let n = a_notice(&backend, &stores, "k").await;
        let deliveries = [delivery(n.id, 0, "webhook"), delivery(n.id, 1, "slack")];
        let links = [
            (link("l-open", "a:1:2", 90_000), None),
            (link("l-yes", "a:1:2", 90_000), Some(1)),
        ];

        // A link naming a delivery that is not there: refused, nothing written.
        let bad = server
            .route_notice(
                n.id,
                &deliveries,
                &[(link("l-x", "a:1:2", 1), Some(2))],
                6_000,
            )
            .await;
        assert!(
            matches!(bad, Err(StoreError::Conflict(_))),
            "{name}: {bad:?}"
        );
        assert_eq!(
            notices_of(server, n.thread).await,
            std::slice::from_ref(&n),
            "{name}"
        );
        assert_eq!(server.link("l-x").await.expect("link"), None, "{name}");

        // Routers racing on it: one routes it, the others find it routed.
        let racing = (0..4).map(|_| server.route_notice(n.id, &deliveries, &links, 6_000));
        let routed = futures::future::join_all(racing).await;
        let won = routed.iter().filter(|r| matches!(r, Ok(true))).count();
        assert_eq!(won, 1, "{name}: {routed:?}");
        assert!(routed.iter().all(Result::is_ok), "{name}: {routed:?}");
        assert!(
            !server
                .route_notice(n.id, &deliveries, &links, 6_500)
                .await
                .expect("route"),
            "{name}: routed already"
        );
        assert!(notices_of(server, n.thread).await.is_empty(), "{name}");

        // Its deliveries, oldest first, as given, made at the routing; the link in the second.
        let query = DeliveryQuery {
            notice: Some(n.id),
            limit: 10,
            ..DeliveryQuery::default()
        };
        let mut written = server.deliveries(&query).await.expect("deliveries");
        written.reverse();
        assert_eq!(written.len(), 2, "{name}: {written:?}");
        for (d, new) in written.iter().zip(&deliveries) {
            assert_eq!(
                (
                    &d.channel,
                    &d.stream,
                    &d.target,
                    d.notice,
                    d.thread,
                    &d.event,
                    &d.subject,
                    &d.subscription,
                    &d.recipient,
                    &d.body,
                    &d.meta,
                    &d.idempotency_key,
                ),
                (
                    &new.channel,
                    &new.stream,
                    &new.target,
                    new.notice,
                    new.thread,
                    &new.event,
                    &new.subject,
                    &new.subscription,
                    &new.recipient,
                    &new.body,
                    &new.meta,
                    &new.idempotency_key,
                ),
                "{name}"
            );
            assert_eq!(
                (d.attempts, d.status, d.next_at, d.created_at, d.finished_at),
                (
                    0,
                    duet_server_store::DeliveryStatus::Pending,
                    7_000,
                    6_000,
                    None
                ),
                "{name}"
            );
        }
        let yes = server.link("l-yes").await.expect("link").expect("stored");
        assert_eq!(
            yes,
            Link {
                delivery: Some(written[1].id),
                ..links[1].0.clone()
            },
            "{name}"
        );
        let open = server.link("l-open").await.expect("link").expect("stored");
        assert_eq!(open.delivery, None, "{name}");

        // A notice routed to nothing is gone; routing it again finds nothing to do.
        let other = a_notice(&backend, &stores, "k2").await;
        assert!(
            server
                .route_notice(other.id, &[], &[], 6_000)
                .await
                .expect("route"),
            "{name}"
        );
        assert!(notices_of(server, other.thread).await.is_empty(), "{name}");
        assert!(
            !server
                .route_notice(other.id, &[], &[], 6_100)
                .await
                .expect("route"),
            "{name}: gone"
        );
        let none = DeliveryQuery {
            notice: Some(other.id),
            limit: 10,
            ..DeliveryQuery::default()
        };
        assert!(server.deliveries(&none).await.expect("list").is_empty());
    }
}

#[tokio::test]
async fn notices_routed_to_nobody_go_in_one_call_and_a_routed_one_stays() {
    for (backend, stores) in stores().await {
        let name = backend.name();
        let server = &stores.server;
        let routed = a_notice(&backend, &stores, "routed").await;
        let a = a_notice(&backend, &stores, "a").await;
        let b = a_notice(&backend, &stores, "b").await;
        // Another router got to the first one with a delivery.
        assert!(
            server
                .route_notice(routed.id, &[delivery(routed.id, 0, "webhook")], &[], 6_000)
                .await
                .expect("route"),
            "{name}"
        );
        let n = server
            .route_to_nobody(&[routed.id, a.id, b.id, i64::MAX], 6_100)
            .await
            .expect("route to nobody");
        assert_eq!(n, 2, "{name}: the two unrouted ones");
        assert!(notices_of(server, a.thread).await.is_empty(), "{name}");
        assert!(notices_of(server, b.thread).await.is_empty(), "{name}");
        let kept = DeliveryQuery {
            notice: Some(routed.id),
            limit: 10,
            ..DeliveryQuery::default()
        };
        assert_eq!(
            server.deliveries(&kept).await.expect("list").len(),
            1,
            "{name}"
        );
        // Again: nothing left to route.
        assert_eq!(
            server
                .route_to_nobody(&[a.id, b.id], 6_200)
                .await
                .expect("again"),
            0,
            "{name}"
        );
        assert_eq!(
            server.route_to_nobody(&[], 6_300).await.expect("none"),
            0,
            "{name}"
        );
    }
}

/// While a router holds them off (nobody to tell), facts are copied into no notice — a park,
/// an answer — and a fact at or after the hold's end is; no hold is set while a router said it
/// needs them, nor while a subscription exists, and a fact is copied whatever the hold once
/// one exists.
#[tokio::test]
async fn held_notices_are_not_written_unless_needed_or_subscribed() {
    for (backend, stores) in stores().await {
        let name = backend.name();
        let (store, server) = (&stores.engine, &stores.server);
        if let support::Backend::Memory(..) = backend {
            assert!(
                !server.hold_notices(5_000, 0).await.expect("hold"),
                "{name}"
            );
            continue;
        }
        // The parks are written at 1 000, the answer at 2 000.
        assert!(server.hold_notices(2_001, 0).await.expect("hold"), "{name}");
        let (t, at, _) = park(store, "held").await;
        let outcome = store.answer(t.id, human("yes"), at, lease(Uuid::now_v7(), 2_000));
        let outcome = outcome.await.expect("answer");
        assert_eq!(outcome, AnswerOutcome::Accepted { claimed: true }, "{name}");
        assert!(notices_of(server, t.id).await.is_empty(), "{name}");
        assert!(server.hold_notices(1_000, 0).await.expect("hold"), "{name}");
        let (t, ..) = park(store, "at-the-end").await;
        assert_eq!(notices_of(server, t.id).await.len(), 1, "{name}");

        // Another router needs them until 5 000: no hold before then.
        server.need_notices(5_000).await.expect("need");
        let (t, ..) = park(store, "needed").await;
        assert_eq!(
            notices_of(server, t.id).await.len(),
            1,
            "{name}: the hold ended"
        );
        assert!(
            !server.hold_notices(9_000, 4_999).await.expect("hold"),
            "{name}"
        );
        assert!(
            server.hold_notices(9_000, 5_000).await.expect("hold"),
            "{name}"
        );
        let (t, ..) = park(store, "held-again").await;
        assert!(notices_of(server, t.id).await.is_empty(), "{name}");

        // A subscription: copied whatever the hold, and no hold set.
        let s = super::notify_outbox::subscription("s", "alice", 1_500);
        server.put_subscription(&s).await.expect("subscribe");
        let (t, ..) = park(store, "subscribed").await;
        assert_eq!(notices_of(server, t.id).await.len(), 1, "{name}");
        let refused = server.hold_notices(9_000, 6_000).await.expect("hold");
        assert!(!refused, "{name}: not while a subscription exists");
    }
}

/// A database at migration 0017 (the one before the outbox), made with this build's own
/// migration files up to it.
async fn at_0017(backend: &support::Backend) {
    let dir = std::env::temp_dir().join(format!("duet-migrations-{}", Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend.name());
    for entry in std::fs::read_dir(&source).expect("migrations").flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if file.as_str() < "0018" {
            std::fs::copy(entry.path(), dir.join(&file)).expect("copy");
        }
    }
    let migrator = sqlx::migrate::Migrator::new(dir.as_path())
        .await
        .expect("migrations");
    use sqlx::Connection;
    match backend {
        support::Backend::Sqlite(path) => {
            let url = format!("sqlite:{}?mode=rwc", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url)
                .await
                .expect("connect");
            migrator.run(&mut conn).await.expect("migrate to 0017");
        }
        support::Backend::Postgres(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
            migrator.run(&mut conn).await.expect("migrate to 0017");
        }
        support::Backend::Memory(..) => unreachable!("SQL backends only"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `sql` on `backend`'s database.
async fn exec(backend: &support::Backend, sql: &str) {
    match backend {
        support::Backend::Sqlite(path) => {
            use sqlx::Connection;
            let url = format!("sqlite:{}", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url)
                .await
                .expect("connect");
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&mut conn)
                .await
                .expect("run the SQL");
        }
        support::Backend::Postgres(url) => {
            support::psql(url, sql).await;
        }
        support::Backend::Memory(..) => unreachable!("SQL backends only"),
    }
}

#[tokio::test]
async fn the_push_outbox_moves_into_the_outbox() {
    for backend in support::backends().await {
        let name = backend.name();
        at_0017(&backend).await;
        let th = Uuid::now_v7();
        exec(
            &backend,
            &format!(
                "INSERT INTO push_outbox (id, thread, config, url, token, auth_scheme, auth_credentials, body, attempts, next_at, last_error, gave_up_at, created_at) VALUES \
                 (7, '{th}', 'cfg', 'https://a.test/hook', 'tok', 'Bearer', 'sec', '{{\"n\":1}}', 2, 5000, '503', NULL, 100), \
                 (9, '{th}', 'cfg', 'https://a.test/hook', NULL, NULL, NULL, '{{\"n\":2}}', 10, 6000, 'gone', 6100, 200)"
            ),
        )
        .await;
        let stores = backend.open_both().await;
        let server = &stores.server;
        let all = DeliveryQuery {
            limit: 10,
            ..DeliveryQuery::default()
        };
        let moved = server.deliveries(&all).await.expect("list");
        assert_eq!(moved.len(), 2, "{name}: {moved:?}");
        let (gone, pending) = (&moved[0], &moved[1]);
        assert_eq!(
            (
                pending.id,
                pending.channel.as_str(),
                pending.stream.as_str(),
                pending.target.as_str(),
                pending.thread,
                pending.event.as_str(),
                pending.body.as_str(),
                pending.idempotency_key.as_str(),
            ),
            (
                7,
                "a2a_push",
                format!("a2a_push:{th}:cfg").as_str(),
                "https://a.test/hook",
                Some(th),
                "task.update",
                "{\"n\":1}",
                "a2a_push:7",
            ),
            "{name}"
        );
        assert_eq!(
            (
                pending.attempts,
                pending.next_at,
                pending.last_error.as_deref(),
                pending.status,
                pending.created_at,
                pending.finished_at
            ),
            (
                2,
                5_000,
                Some("503"),
                duet_server_store::DeliveryStatus::Pending,
                100,
                None
            ),
            "{name}"
        );
        let meta: duet_server_store::PushMeta =
            serde_json::from_str(pending.meta.as_deref().expect("meta")).expect("push meta");
        assert_eq!(
            meta,
            duet_server_store::PushMeta {
                token: Some("tok".into()),
                auth_scheme: Some("Bearer".into()),
                auth_credentials: Some("sec".into()),
                config: Some("cfg".into()),
            },
            "{name}"
        );
        assert_eq!(
            json(gone.meta.as_deref().expect("meta")),
            serde_json::json!({"config": "cfg"}),
            "{name}: absent settings left out"
        );
        assert_eq!(
            (gone.id, gone.status, gone.finished_at, gone.attempts),
            (
                9,
                duet_server_store::DeliveryStatus::Failed,
                Some(6_100),
                10
            ),
            "{name}"
        );
        // The outbox's ids go on after the moved rows.
        let ids = server
            .enqueue(&[delivery(1, 0, "webhook")])
            .await
            .expect("enqueue");
        assert!(ids[0] > 9, "{name}: {ids:?}");
        let claimed = server
            .claim_deliveries(5_000, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(
            claimed.iter().map(|d| d.id).collect::<Vec<_>>(),
            [7],
            "{name}: the moved row is due; the new one is not yet"
        );
    }
}
