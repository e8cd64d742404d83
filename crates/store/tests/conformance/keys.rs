//! API keys: stored by hash, found by hash, listed oldest first, revoked once; browser sign-ins
//! that stand for a key until they expire or end.

use super::*;
use duet_server_store::ApiKey;

fn key(id: &str, principal: &str, created_at: i64) -> ApiKey {
    ApiKey {
        id: id.into(),
        principal: principal.into(),
        admin: false,
        roles: Vec::new(),
        label: None,
        created_at,
        revoked_at: None,
    }
}

#[tokio::test]
async fn keys_are_found_by_hash_listed_oldest_first_and_revoked() {
    each_server(async |store, name| {
        assert!(store.keys().await.expect("keys").is_empty(), "{name}");
        let admin = ApiKey {
            admin: true,
            label: Some("ops".into()),
            ..key("k-admin", r#"{"sub":"ops"}"#, 20)
        };
        let alice = key("k-alice", r#"{"sub":"alice"}"#, 10);
        store
            .create_key(&admin, "hash-admin")
            .await
            .expect("create");
        store
            .create_key(&alice, "hash-alice")
            .await
            .expect("create");
        assert_eq!(
            store.key_by_hash("hash-admin").await.expect("read"),
            Some(admin.clone()),
            "{name}: every field back"
        );
        assert_eq!(
            store.key_by_hash("hash-alice").await.expect("read"),
            Some(alice.clone()),
            "{name}"
        );
        assert_eq!(
            store.key_by_hash("k-alice").await.expect("read"),
            None,
            "{name}: found by hash, not by id"
        );
        assert_eq!(
            store.keys().await.expect("keys"),
            [alice.clone(), admin.clone()],
            "{name}: oldest first"
        );

        assert!(
            store.revoke_key("k-alice", 30).await.expect("revoke"),
            "{name}"
        );
        assert!(
            !store.revoke_key("k-alice", 40).await.expect("revoke"),
            "{name}: revoked already"
        );
        assert!(
            !store.revoke_key("k-nobody", 40).await.expect("revoke"),
            "{name}: no such key"
        );
        // A revoked key is still found (so it can be refused by name), revoked as of 30.
        let revoked = ApiKey {
            revoked_at: Some(30),
            ..alice.clone()
        };
        assert_eq!(
            store.key_by_hash("hash-alice").await.expect("read"),
            Some(revoked.clone()),
            "{name}"
        );
        assert_eq!(
            store.keys().await.expect("keys"),
            [revoked, admin.clone()],
            "{name}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_keys_roles_come_back_as_given_by_hash_by_sign_in_and_listed() {
    each_server(async |store, name| {
        let approver = ApiKey {
            roles: vec!["refunds".into(), "ops.eu-1".into()],
            ..key("k-bob", r#"{"sub":"bob"}"#, 10)
        };
        let plain = key("k-carol", r#"{"sub":"carol"}"#, 20);
        store
            .create_key(&approver, "hash-bob")
            .await
            .expect("create");
        store
            .create_key(&plain, "hash-carol")
            .await
            .expect("create");
        store
            .create_sign_in("cookie-bob", "hash-bob", 100, 1_000)
            .await
            .expect("sign in");
        for found in [
            store.key_by_hash("hash-bob").await.expect("read"),
            store.sign_in_key("cookie-bob", 500).await.expect("read"),
        ] {
            assert_eq!(
                found.map(|k| k.roles),
                Some(approver.roles.clone()),
                "{name}: in order"
            );
        }
        assert_eq!(
            store.keys().await.expect("keys"),
            [approver, plain.clone()],
            "{name}: with and without roles"
        );
        assert_eq!(
            store.key_by_hash("hash-carol").await.expect("read"),
            Some(plain),
            "{name}: no roles"
        );
    })
    .await;
}

#[tokio::test]
async fn a_taken_key_id_or_hash_is_a_conflict_and_writes_nothing() {
    each_server(async |store, name| {
        let first = key("k-1", "p", 10);
        store.create_key(&first, "h-1").await.expect("create");
        let same_id = key("k-1", "other", 11);
        let err = store.create_key(&same_id, "h-2").await;
        assert!(
            matches!(err, Err(StoreError::Conflict(_))),
            "{name}: {err:?}"
        );
        let same_hash = key("k-2", "other", 12);
        let err = store.create_key(&same_hash, "h-1").await;
        assert!(
            matches!(err, Err(StoreError::Conflict(_))),
            "{name}: {err:?}"
        );
        assert_eq!(
            store.keys().await.expect("keys"),
            std::slice::from_ref(&first),
            "{name}"
        );
        assert_eq!(
            store.key_by_hash("h-2").await.expect("read"),
            None,
            "{name}"
        );
        assert_eq!(
            store.key_by_hash("h-1").await.expect("read"),
            Some(first),
            "{name}: the first one kept"
        );
        // The writer is still usable after the refusal.
        store
            .create_key(&key("k-3", "p", 13), "h-3")
            .await
            .expect("create");
        assert_eq!(store.keys().await.expect("keys").len(), 2, "{name}");
    })
    .await;
}

#[tokio::test]
async fn a_sign_in_stands_for_its_key_until_it_expires_or_ends() {
    each_server(async |store, name| {
        let alice = key("k-alice", r#"{"sub":"alice"}"#, 10);
        store
            .create_key(&alice, "hash-alice")
            .await
            .expect("create");
        store
            .create_sign_in("cookie-1", "hash-alice", 100, 1_000)
            .await
            .expect("sign in");
        store
            .create_sign_in("cookie-2", "hash-alice", 100, 200)
            .await
            .expect("sign in");
        assert_eq!(
            store.sign_in_key("cookie-1", 500).await.expect("read"),
            Some(alice.clone()),
            "{name}: the key it stands for"
        );
        assert_eq!(
            store.sign_in_key("cookie-2", 200).await.expect("read"),
            None,
            "{name}: expired"
        );
        assert_eq!(
            store.sign_in_key("hash-alice", 500).await.expect("read"),
            None,
            "{name}: by the cookie's hash only"
        );
        assert!(
            matches!(
                store
                    .create_sign_in("cookie-1", "hash-alice", 300, 2_000)
                    .await,
                Err(StoreError::Conflict(_))
            ),
            "{name}: a taken hash"
        );
        // A revoked key's sign-in still finds the key (the server checks), marked revoked.
        assert!(
            store.revoke_key("k-alice", 600).await.expect("revoke"),
            "{name}"
        );
        assert_eq!(
            store
                .sign_in_key("cookie-1", 700)
                .await
                .expect("read")
                .and_then(|k| k.revoked_at),
            Some(600),
            "{name}"
        );
        assert!(store.end_sign_in("cookie-1").await.expect("end"), "{name}");
        assert!(
            !store.end_sign_in("cookie-1").await.expect("end"),
            "{name}: once"
        );
        assert_eq!(
            store.sign_in_key("cookie-1", 700).await.expect("read"),
            None,
            "{name}: signed out"
        );
        // A new sign-in sweeps the expired ones: an expired hash can be taken again.
        store
            .create_sign_in("cookie-2", "hash-alice", 900, 2_000)
            .await
            .expect("the expired one was dropped");
    })
    .await;
}

#[tokio::test]
async fn the_heartbeat_row_is_written_again_and_again() {
    each_server(async |store, name| {
        // The first write makes the row, every later one rewrites it: never a conflict.
        for at in [10, 20, 20, 5] {
            store.heartbeat(at).await.expect(name);
        }
    })
    .await;
}
