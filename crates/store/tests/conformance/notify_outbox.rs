//! The one outbox (issue #31): a stream's deliveries are claimed one at a time in id order (a
//! retried head holds its stream back, never another; one given up on holds nothing back),
//! concurrent claimers never share a row; delivered, failed and retried deliveries are listed
//! and counted by what they are. One-time links: the first use of a live link wins, however many
//! follow it at once; used, expired, revoked and unknown ones say so. Principals'
//! subscriptions; secrets shared by every process, the first writer's kept.

use super::*;
use duet_server_store::{DeliveryQuery, DeliveryStatus, LinkUse, NewDelivery, Subscription};

use super::notify::link;

fn to(stream: &str, n: usize, due_at: i64) -> NewDelivery {
    NewDelivery {
        channel: stream.split(':').next().unwrap_or("webhook").into(),
        stream: stream.into(),
        target: format!("https://hooks.test/{stream}"),
        event: "question.parked".into(),
        body: format!("{stream} {n}"),
        meta: Some(r#"{"secret":"whsec_c2VjcmV0"}"#.into()),
        idempotency_key: format!("{stream}-{n}-{}", Uuid::now_v7()),
        due_at,
        ..NewDelivery::default()
    }
}

fn bodies(claimed: &[duet_server_store::Delivery]) -> Vec<&str> {
    claimed.iter().map(|d| d.body.as_str()).collect()
}

#[tokio::test]
async fn a_stream_is_sent_in_order_and_holds_back_only_itself() {
    each_server(async |store, name| {
        let ids = store
            .enqueue(&[
                to("webhook:a", 1, 100),
                to("webhook:a", 2, 100),
                to("slack:b", 1, 100),
                to("webhook:c", 1, 500),
            ])
            .await
            .expect("enqueue");
        assert_eq!(ids.len(), 4, "{name}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{name}: {ids:?}");
        // Each stream's head, if due: `c`'s is not yet.
        let first = store.claim_deliveries(100, 1_000, 10).await.expect("claim");
        assert_eq!(bodies(&first), ["webhook:a 1", "slack:b 1"], "{name}");
        assert_eq!(first[0].next_at, 1_100, "{name}: leased");
        assert!(
            store
                .claim_deliveries(600, 1_000, 10)
                .await
                .expect("claim")
                .iter()
                .all(|d| d.body == "webhook:c 1"),
            "{name}: the leased ones are no one else's, and `a 2` waits behind `a 1`"
        );
        // `a 1` fails and is retried later: it holds `a 2` back, and nothing else.
        store
            .delivery_failed(first[0].id, Some(5_000), "HTTP 503", 700)
            .await
            .expect("failed");
        store
            .delivered(first[1].id, Some("{\"ts\":\"1.2\"}"), 700)
            .await
            .expect("delivered");
        store
            .enqueue(&[to("slack:b", 2, 700)])
            .await
            .expect("enqueue");
        let next = store
            .claim_deliveries(2_000, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(bodies(&next), ["webhook:c 1", "slack:b 2"], "{name}");
        for d in &next {
            store.delivered(d.id, None, 2_100).await.expect("delivered");
        }
        // A delivered row keeps what the target answered, not what it was sent with.
        let sent = store
            .delivery(first[1].id)
            .await
            .expect("read")
            .expect("kept");
        assert_eq!(
            (sent.response.as_deref(), sent.meta.as_deref()),
            (Some("{\"ts\":\"1.2\"}"), None),
            "{name}"
        );
        let again = store
            .claim_deliveries(5_000, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(bodies(&again), ["webhook:a 1"], "{name}");
        assert_eq!(
            (again[0].attempts, again[0].last_error.as_deref()),
            (1, Some("HTTP 503")),
            "{name}"
        );
        // Given up on, it holds nothing back.
        store
            .delivery_failed(again[0].id, None, "gone", 5_100)
            .await
            .expect("give up");
        let last = store
            .claim_deliveries(5_100, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(bodies(&last), ["webhook:a 2"], "{name}");
        // A limit: the oldest due first.
        store
            .enqueue(&[to("webhook:d", 1, 6_000), to("webhook:e", 1, 6_000)])
            .await
            .expect("enqueue");
        let one = store
            .claim_deliveries(9_000, 1_000, 1)
            .await
            .expect("claim");
        assert_eq!(bodies(&one), ["webhook:a 2"], "{name}: its lease ran out");
        assert!(
            store
                .claim_deliveries(9_000, 1_000, 0)
                .await
                .expect("claim")
                .is_empty(),
            "{name}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_never_get_the_same_delivery() {
    each_server(async |store, name| {
        let news: Vec<NewDelivery> = (0..24)
            .flat_map(|i| {
                [
                    to(&format!("webhook:{i}"), 1, 100),
                    to(&format!("webhook:{i}"), 2, 100),
                ]
            })
            .collect();
        store.enqueue(&news).await.expect("enqueue");
        let claimers = (0..4).map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let claimed = store.claim_deliveries(100, 60_000, 3).await.expect("claim");
                    if claimed.is_empty() {
                        return got;
                    }
                    got.extend(claimed.into_iter().map(|d| d.id));
                }
            })
        });
        let mut all: Vec<i64> = Vec::new();
        for claimer in claimers {
            all.extend(claimer.await.expect("joins"));
        }
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "{name}: a delivery claimed twice");
        assert_eq!(
            count, 24,
            "{name}: every stream's head, once; the rest wait behind"
        );
    })
    .await;
}

#[tokio::test]
async fn deliveries_are_listed_filtered_counted_and_retried() {
    each_server(async |store, name| {
        let thread = Uuid::now_v7();
        let news = [
            NewDelivery {
                thread: Some(thread),
                subject: Some("q1".into()),
                recipient: Some("alice".into()),
                notice: Some(4),
                ..to("webhook:a", 1, 100)
            },
            NewDelivery {
                subject: Some("q1".into()),
                ..to("slack:b", 1, 100)
            },
            to("email:c", 1, 100),
        ];
        let ids = store.enqueue(&news).await.expect("enqueue");
        let claimed = store.claim_deliveries(100, 1_000, 10).await.expect("claim");
        assert_eq!(claimed.len(), 3, "{name}");
        store.delivered(ids[0], None, 200).await.expect("delivered");
        store
            .delivery_failed(ids[1], None, "channel_not_found", 300)
            .await
            .expect("failed");
        // Recording twice changes nothing: a delivered one stays delivered.
        store
            .delivery_failed(ids[0], None, "late", 400)
            .await
            .expect("failed");

        let list = |q: DeliveryQuery| {
            let store = store.clone();
            async move {
                let found = store
                    .deliveries(&DeliveryQuery { limit: 10, ..q })
                    .await
                    .expect("list");
                found.into_iter().map(|d| d.id).collect::<Vec<_>>()
            }
        };
        assert_eq!(
            list(DeliveryQuery::default()).await,
            [ids[2], ids[1], ids[0]],
            "{name}"
        );
        let by_status = |s: Vec<DeliveryStatus>| DeliveryQuery {
            status: s,
            ..DeliveryQuery::default()
        };
        assert_eq!(
            list(by_status(vec![DeliveryStatus::Failed])).await,
            [ids[1]],
            "{name}"
        );
        assert_eq!(
            list(by_status(vec![
                DeliveryStatus::Delivered,
                DeliveryStatus::Pending
            ]))
            .await,
            [ids[2], ids[0]],
            "{name}"
        );
        for (q, want) in [
            (
                DeliveryQuery {
                    thread: Some(thread),
                    ..DeliveryQuery::default()
                },
                vec![ids[0]],
            ),
            (
                DeliveryQuery {
                    notice: Some(4),
                    ..DeliveryQuery::default()
                },
                vec![ids[0]],
            ),
            (
                DeliveryQuery {
                    subject: Some("q1".into()),
                    ..DeliveryQuery::default()
                },
                vec![ids[1], ids[0]],
            ),
            (
                DeliveryQuery {
                    channel: Some("email".into()),
                    ..DeliveryQuery::default()
                },
                vec![ids[2]],
            ),
            (
                DeliveryQuery {
                    recipient: Some("alice".into()),
                    ..DeliveryQuery::default()
                },
                vec![ids[0]],
            ),
            (
                DeliveryQuery {
                    before: Some(ids[2]),
                    ..DeliveryQuery::default()
                },
                vec![ids[1], ids[0]],
            ),
        ] {
            assert_eq!(list(q.clone()).await, want, "{name}: {q:?}");
        }
        let one = store
            .deliveries(&DeliveryQuery {
                limit: 1,
                ..DeliveryQuery::default()
            })
            .await
            .expect("list");
        assert_eq!(one.len(), 1, "{name}");
        assert!(
            store
                .deliveries(&DeliveryQuery::default())
                .await
                .expect("list")
                .is_empty(),
            "{name}: limit 0"
        );

        let delivered = store.delivery(ids[0]).await.expect("read").expect("there");
        assert_eq!(
            (
                delivered.status,
                delivered.finished_at,
                delivered.response,
                delivered.attempts
            ),
            (DeliveryStatus::Delivered, Some(200), None, 0),
            "{name}"
        );
        let failed = store.delivery(ids[1]).await.expect("read").expect("there");
        assert_eq!(
            (
                failed.status,
                failed.finished_at,
                failed.last_error.as_deref(),
                failed.attempts
            ),
            (
                DeliveryStatus::Failed,
                Some(300),
                Some("channel_not_found"),
                1
            ),
            "{name}"
        );
        assert_eq!(
            store.delivery(i64::MAX).await.expect("read"),
            None,
            "{name}"
        );
        let counts = store.delivery_counts().await.expect("counts");
        assert_eq!(
            counts,
            [
                ("email".to_owned(), DeliveryStatus::Pending, 1),
                ("slack".to_owned(), DeliveryStatus::Failed, 1),
                ("webhook".to_owned(), DeliveryStatus::Delivered, 1),
            ],
            "{name}"
        );

        // Only a failed one is retried: due at once, its attempts starting again.
        assert!(
            !store.retry_delivery(ids[0], 500).await.expect("retry"),
            "{name}"
        );
        assert!(
            !store.retry_delivery(i64::MAX, 500).await.expect("retry"),
            "{name}"
        );
        assert!(
            store.retry_delivery(ids[1], 500).await.expect("retry"),
            "{name}"
        );
        assert!(
            !store.retry_delivery(ids[1], 500).await.expect("retry"),
            "{name}: once"
        );
        let back = store.claim_deliveries(500, 1_000, 10).await.expect("claim");
        assert_eq!(
            back.iter()
                .map(|d| (d.id, d.attempts, d.status, d.finished_at))
                .collect::<Vec<_>>(),
            [(ids[1], 0, DeliveryStatus::Pending, None)],
            "{name}"
        );
        // A taken idempotency key writes nothing.
        let taken = store
            .enqueue(&[
                to("webhook:z", 1, 100),
                NewDelivery {
                    idempotency_key: news[0].idempotency_key.clone(),
                    ..to("webhook:z", 2, 100)
                },
            ])
            .await;
        assert!(
            matches!(taken, Err(StoreError::Conflict(_))),
            "{name}: {taken:?}"
        );
        assert_eq!(list(DeliveryQuery::default()).await.len(), 3, "{name}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_link_is_used_once() {
    for (backend, stores) in super::notify::stores().await {
        let name = backend.name();
        let store = &stores.server;
        // Links are written with the notice they were routed from.
        let n = super::notify::a_notice(&backend, &stores, "k").await;
        let links = [
            (link("live", "t:1:2", 10_000), None),
            (link("short", "t:1:2", 1_000), None),
            (link("other", "t:1:9", 10_000), None),
            (link("kept", "t:1:2", 10_000), None),
        ];
        assert!(
            store
                .route_notice(n.id, &[], &links, 500)
                .await
                .expect("route")
        );
        assert_eq!(
            store.link("live").await.expect("link"),
            Some(links[0].0.clone()),
            "{name}"
        );

        // Eight follow it at once: one is first, the others find it used.
        let followers = (0..8).map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.use_link("live", &format!("user{i}"), 2_000).await })
        });
        let mut firsts = 0;
        for f in followers {
            match f.await.expect("joins").expect("use") {
                LinkUse::First(l) => {
                    firsts += 1;
                    assert_eq!(l.used_at, Some(2_000), "{name}");
                }
                LinkUse::Used(l) => assert_eq!(l.used_at, Some(2_000), "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!(firsts, 1, "{name}");
        let used = store.link("live").await.expect("link").expect("there");
        assert!(
            used.used_by
                .as_deref()
                .is_some_and(|b| b.starts_with("user")),
            "{name}: {used:?}"
        );
        let late = store.use_link("live", "late", 3_000).await.expect("use");
        assert_eq!(
            late,
            LinkUse::Used(used.clone()),
            "{name}: says when and by whom"
        );
        let short = store.use_link("short", "u", 1_000).await.expect("use");
        assert_eq!(
            short,
            LinkUse::Expired(links[1].0.clone()),
            "{name}: at its expiry"
        );
        let unknown = store.use_link("nope", "u", 1).await.expect("use");
        assert_eq!(unknown, LinkUse::Unknown, "{name}");

        // Revoking an approval's links: the unused, unrevoked ones (`short` and `kept`).
        assert_eq!(
            store.revoke_links("t:1:2", 4_000).await.expect("revoke"),
            2,
            "{name}"
        );
        assert_eq!(
            store.revoke_links("t:1:2", 4_100).await.expect("revoke"),
            0,
            "{name}"
        );
        let kept = store.use_link("kept", "u", 4_200).await.expect("use");
        assert!(
            matches!(&kept, LinkUse::Revoked(l) if l.revoked_at == Some(4_000) && l.used_at.is_none()),
            "{name}: {kept:?}"
        );
        let other = store.use_link("other", "u", 4_200).await.expect("use");
        assert!(
            matches!(other, LinkUse::First(_)),
            "{name}: another approval's: {other:?}"
        );
    }
}

pub(crate) fn subscription(id: &str, principal: &str, at: i64) -> Subscription {
    Subscription {
        id: id.into(),
        principal: principal.into(),
        channel: "webhook".into(),
        target: "https://hooks.test/mine".into(),
        events: "[\"question.parked\"]".into(),
        agents: "[]".into(),
        secret: Some("whsec_c2VjcmV0".into()),
        created_at: at,
    }
}

#[tokio::test]
async fn subscriptions_are_kept_per_principal() {
    each_server(async |store, name| {
        for s in [
            subscription("s2", "alice", 20),
            subscription("s1", "alice", 10),
            subscription("s3", "bob", 30),
        ] {
            store.put_subscription(&s).await.expect("put");
        }
        let taken = store.put_subscription(&subscription("s1", "bob", 40)).await;
        assert!(
            matches!(taken, Err(StoreError::Conflict(_))),
            "{name}: {taken:?}"
        );
        let alice = store.subscriptions(Some("alice")).await.expect("list");
        assert_eq!(
            alice,
            [
                subscription("s1", "alice", 10),
                subscription("s2", "alice", 20)
            ],
            "{name}: oldest first, every field back"
        );
        let ids = |all: Vec<Subscription>| all.into_iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(
            ids(store.subscriptions(None).await.expect("list")),
            ["s1", "s2", "s3"],
            "{name}"
        );
        assert!(
            !store
                .delete_subscription(Some("bob"), "s1")
                .await
                .expect("delete"),
            "{name}: not bob's"
        );
        assert!(
            store
                .delete_subscription(Some("alice"), "s1")
                .await
                .expect("delete"),
            "{name}"
        );
        assert!(
            !store
                .delete_subscription(Some("alice"), "s1")
                .await
                .expect("delete"),
            "{name}: once"
        );
        assert!(
            store.delete_subscription(None, "s3").await.expect("delete"),
            "{name}: anyone's"
        );
        assert_eq!(
            ids(store.subscriptions(None).await.expect("list")),
            ["s2"],
            "{name}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_secret_is_the_first_writers() {
    each_server(async |store, name| {
        let writers = (0..8).map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.secret("links", &format!("fresh{i}")).await })
        });
        let mut seen = Vec::new();
        for w in writers {
            seen.push(w.await.expect("joins").expect("secret"));
        }
        let first = seen[0].clone();
        assert!(first.starts_with("fresh"), "{name}: {first}");
        assert!(seen.iter().all(|s| *s == first), "{name}: {seen:?}");
        assert_eq!(
            store.secret("links", "later").await.expect("secret"),
            first,
            "{name}"
        );
        assert_eq!(
            store.secret("other", "mine").await.expect("secret"),
            "mine",
            "{name}"
        );
    })
    .await;
}
