//! Push configs and the outbox: a config per task id, replaced in place with its watermark kept;
//! updates enqueued only from the watermark a notifier read (one of two racing wins); its
//! notifications go in the one outbox on the config's stream (channel `a2a_push`, its settings
//! in `meta`); claims lease a notification so no other claim gets it; a config's notifications
//! go in order (a retried one holds back the rest); a failure is retried or given up on; a
//! config outlives its task's end (read, not watched); deleting a config drops what it had not
//! sent.

use super::*;
use duet_server_store::{DeliveryQuery, DeliveryStatus, PushConfig, PushMeta};

fn config(thread: Uuid, id: &str, at: i64) -> PushConfig {
    PushConfig {
        thread,
        session: 1,
        id: id.into(),
        url: "http://127.0.0.1:9/hook".into(),
        token: Some("tok".into()),
        auth_scheme: Some("Bearer".into()),
        auth_credentials: Some("secret".into()),
        principal: None,
        watermark: 0,
        last_state: None,
        created_at: at,
        ended_at: None,
    }
}

#[tokio::test]
async fn configs_are_kept_per_task_and_replaced_in_place() {
    each_server(async |store, name| {
        let t = Uuid::now_v7();
        store
            .put_push_config(&config(t, "a", 10))
            .await
            .expect("put");
        store
            .put_push_config(&config(t, "b", 20))
            .await
            .expect("put");
        let a = store.push_config(t, 1, "a").await.expect("read");
        assert_eq!(a, Some(config(t, "a", 10)), "{name}: every field back");
        assert!(
            store
                .enqueue_pushes(
                    &config(t, "a", 10),
                    0,
                    7,
                    "TASK_STATE_WORKING",
                    &[],
                    false,
                    30
                )
                .await
                .expect("move")
        );
        let replaced = PushConfig {
            url: "https://hooks.test/new".into(),
            ..config(t, "a", 10)
        };
        store.put_push_config(&replaced).await.expect("replace");
        let now = store
            .push_config(t, 1, "a")
            .await
            .expect("read")
            .expect("there");
        assert_eq!(
            (now.url.as_str(), now.watermark),
            ("https://hooks.test/new", 7),
            "{name}: watermark kept"
        );
        let ids: Vec<String> = store
            .push_configs(t, 1)
            .await
            .expect("list")
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, ["a", "b"], "{name}");
        assert!(
            store.push_configs(t, 2).await.expect("list").is_empty(),
            "{name}: another session"
        );
        assert!(
            store.delete_push_config(t, 1, "b").await.expect("delete"),
            "{name}"
        );
        assert!(
            !store.delete_push_config(t, 1, "b").await.expect("delete"),
            "{name}: once"
        );
        assert_eq!(
            store.all_push_configs().await.expect("all").len(),
            1,
            "{name}"
        );
    })
    .await;
}

#[tokio::test]
async fn the_outbox_is_filled_from_the_watermark_and_drained_at_least_once() {
    each_server(async |store, name| {
        let t = Uuid::now_v7();
        let c = config(t, "a", 10);
        store.put_push_config(&c).await.expect("put");
        let bodies = vec!["{\"n\":1}".to_owned(), "{\"n\":2}".to_owned()];
        assert!(
            store
                .enqueue_pushes(&c, 0, 5, "TASK_STATE_WORKING", &bodies, false, 100)
                .await
                .expect("enqueue")
        );
        // A second notifier that read the same watermark writes nothing.
        assert!(
            !store
                .enqueue_pushes(&c, 0, 5, "TASK_STATE_WORKING", &bodies, false, 100)
                .await
                .expect("lost"),
            "{name}"
        );
        // In the one outbox, on the config's stream: only its oldest pending row is due.
        let claimed = store.claim_deliveries(100, 1_000, 10).await.expect("claim");
        let sent: Vec<&str> = claimed.iter().map(|d| d.body.as_str()).collect();
        assert_eq!(sent, ["{\"n\":1}"], "{name}: the first alone");
        let d = &claimed[0];
        assert_eq!(
            (
                d.channel.as_str(),
                d.stream.clone(),
                d.target.as_str(),
                d.thread,
                d.event.as_str(),
                d.notice
            ),
            (
                duet_server_store::PUSH_CHANNEL,
                duet_server_store::push_stream(t, "a"),
                "http://127.0.0.1:9/hook",
                Some(t),
                "task.update",
                None
            ),
            "{name}"
        );
        let meta: PushMeta = serde_json::from_str(d.meta.as_deref().expect("meta")).expect("meta");
        assert_eq!(
            meta,
            PushMeta {
                token: Some("tok".into()),
                auth_scheme: Some("Bearer".into()),
                auth_credentials: Some("secret".into()),
                config: Some("a".into()),
            },
            "{name}"
        );
        let none = store.claim_deliveries(500, 1_000, 10).await.expect("claim");
        assert!(
            none.is_empty(),
            "{name}: leased, and the second waits behind it"
        );
        // A failure is due again later, and still holds back the one behind it.
        store
            .delivery_failed(d.id, Some(2_000), "503", 600)
            .await
            .expect("failed");
        let early = store
            .claim_deliveries(1_999, 1_000, 10)
            .await
            .expect("claim");
        assert!(
            early.is_empty(),
            "{name}: not yet due, nothing overtakes it"
        );
        let again = store
            .claim_deliveries(2_000, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(
            (again.len(), again[0].attempts),
            (1, 1),
            "{name}: due again, one failure counted"
        );
        assert_eq!(again[0].body, "{\"n\":1}", "{name}");
        store
            .delivered(again[0].id, None, 2_100)
            .await
            .expect("sent");
        let second = store
            .claim_deliveries(3_000, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(
            second.iter().map(|d| d.body.as_str()).collect::<Vec<_>>(),
            ["{\"n\":2}"],
            "{name}"
        );
        assert_ne!(
            second[0].idempotency_key, again[0].idempotency_key,
            "{name}: a key per notification"
        );
        // Given up on, it no longer holds anything back.
        store
            .delivery_failed(second[0].id, None, "gone", 3_100)
            .await
            .expect("give up");
        let given = store
            .claim_deliveries(i64::MAX / 2, 1_000, 10)
            .await
            .expect("claim");
        assert!(given.is_empty(), "{name}: given up");
        // The task's end: the last updates go in, and the config stays for reads (a client
        // may still ask for it), marked ended and no longer watched.
        assert!(
            store
                .enqueue_pushes(&c, 5, 9, "TASK_STATE_COMPLETED", &bodies[..1], true, 4_000)
                .await
                .expect("end")
        );
        let ended = store
            .push_config(t, 1, "a")
            .await
            .expect("read")
            .expect("kept after its task ended");
        assert_eq!(
            (ended.watermark, ended.last_state.as_deref(), ended.ended_at),
            (9, Some("TASK_STATE_COMPLETED"), Some(4_000)),
            "{name}"
        );
        assert_eq!(
            store.push_configs(t, 1).await.expect("list").len(),
            1,
            "{name}: listed with its task"
        );
        assert!(
            store
                .all_push_configs()
                .await
                .expect("all")
                .iter()
                .all(|c| c.thread != t),
            "{name}: no longer watched"
        );
        let last = store
            .claim_deliveries(4_000, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(last.len(), 1, "{name}");
        // Another config's notifications are not held back by this one's.
        let other = config(t, "b", 20);
        store.put_push_config(&other).await.expect("put");
        assert!(
            store
                .enqueue_pushes(&other, 0, 9, "TASK_STATE_WORKING", &bodies, false, 4_000)
                .await
                .expect("enqueue")
        );
        let both = store
            .claim_deliveries(i64::MAX / 2, 1_000, 10)
            .await
            .expect("claim");
        assert_eq!(
            both.len(),
            2,
            "{name}: one each of `a` (its lease ran out) and `b`"
        );
        let b_first = both
            .iter()
            .find(|d| d.stream == duet_server_store::push_stream(t, "b"))
            .expect("b's first");
        store
            .delivered(b_first.id, None, 4_100)
            .await
            .expect("sent");
        // Deleting a config drops what it had not sent; what it sent stays listed.
        assert!(store.delete_push_config(t, 1, "b").await.expect("delete"));
        let after = store
            .claim_deliveries(i64::MAX / 2 + 10_000, 1_000, 10)
            .await
            .expect("claim");
        assert!(
            after
                .iter()
                .all(|d| d.stream != duet_server_store::push_stream(t, "b")),
            "{name}: `b`'s pending ones are gone"
        );
        let listed = store
            .deliveries(&DeliveryQuery {
                thread: Some(t),
                limit: 10,
                ..DeliveryQuery::default()
            })
            .await
            .expect("list");
        let of_b: Vec<DeliveryStatus> = listed
            .iter()
            .filter(|d| d.stream == duet_server_store::push_stream(t, "b"))
            .map(|d| d.status)
            .collect();
        assert_eq!(of_b, [DeliveryStatus::Delivered], "{name}");
    })
    .await;
}
