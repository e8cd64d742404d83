//! One conformance suite for every store implementation: SQLite and the in-memory store always,
//! Postgres when `DATABASE_URL` is set (`scripts/test` sets it). Each check runs on a fresh
//! database of each. `commits.rs`: commits and the journal; `queue.rs`: the queue, leases, the
//! registry and termination; `feed.rs`: the change feed; `listing.rs`: threads and the journal a
//! page at a time; `listed.rs`: the approvals queue's page with its questions and parents; `claims.rs`: claiming what needs a runner, giving a lease back; `keys.rs`:
//! API keys and sign-ins and the heartbeat row (the server's tables, `duet_server_store`); `answers.rs`: who answered a park; `push.rs`: push configs and the outbox;
//! `backup.rs` (SQLite only): an online backup taken while a writer commits; `roots.rs`: each
//! thread's tree (`threads.root`); `schema.rs`: rolling upgrades (a newer schema, additive or not); `timers.rs`: the timer table as commits write it
//! (and cancel_timer, the listing); `timer_claims.rs`: claiming, finishing, counting, wakeups;
//! `notify.rs`: notices as commits write them, routing, the push outbox's migration;
//! `notify_outbox.rs`: the outbox, one-time links, subscriptions, shared secrets; `files.rs`: the
//! thread filesystem (file rows, listings, commits' files, queued attachments, chunks in the
//! database and in a directory); `ranges.rs`: a session's range of the journal, settle records
//! newest first; `starting.rs`: the claiming writes that read the run's start with them; `groups.rs`: deliveries,
//! answers, creations and commits at once, each with its own outcome.

use duet_store::testing as support;

mod answers;
mod approvals;
mod awaits;
mod backup;
mod claims;
mod commits;
mod feed;
mod files;
mod groups;
mod keys;
mod listed;
mod listing;
mod notify;
mod notify_outbox;
mod nul;
mod push;
mod queue;
mod ranges;
mod roots;
mod schema;
mod starting;
mod timer_claims;
mod timers;

use std::sync::Arc;

use duet_runtime::{
    Lease, NewQueued, NewThread, Role, SideId, Store, StoreError, Thread, ThreadStatus,
};
use uuid::Uuid;

pub(crate) fn new(agent: &str, now: i64) -> NewThread<'_> {
    NewThread {
        id: Uuid::now_v7(),
        agent,
        parent: None,
        principal: None,
        source: None,
        now,
    }
}

pub(crate) fn lease(owner: Uuid, now: i64) -> Lease {
    Lease {
        owner,
        until: now + 1_000,
        now,
    }
}

pub(crate) fn human(text: &str) -> NewQueued {
    NewQueued {
        attachments: Vec::new(),
        role: Role::User,
        side: SideId::B,
        content: text.into(),
        human: true,
        silent: false,
        follow_up: false,
        tool: None,
        message_id: None,
        author: None,
        images: Vec::new(),
        trace: None,
    }
}

pub(crate) async fn each(check: impl AsyncFn(Arc<dyn Store>, &'static str)) {
    for backend in support::store_backends().await {
        let store = backend.open().await;
        check(store, backend.name()).await;
    }
}

/// Runs `check` on the server's tables of a fresh database of every backend.
pub(crate) async fn each_server(
    check: impl AsyncFn(Arc<dyn duet_server_store::ServerStore>, &'static str),
) {
    for backend in support::store_backends().await {
        let store = backend.open_both().await.server;
        check(store, backend.name()).await;
    }
}

pub(crate) async fn thread(store: &Arc<dyn Store>, key: &str) -> Thread {
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
