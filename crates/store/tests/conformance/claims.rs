//! Claiming what needs a runner in one go (`claim_runnable`), from many processes at once, and
//! giving a lease back (`release`).

use std::collections::BTreeSet;
use std::time::Duration;

use super::*;
use duet_runtime::{Renewal, ThreadId};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// `n` threads with a message queued and no runner (its sender died before running it).
async fn orphans(store: &Arc<dyn Store>, tag: &str, n: usize) -> Vec<ThreadId> {
    let mut out = Vec::new();
    for i in 0..n {
        let t = thread(store, &format!("{tag}-{i}")).await;
        store
            .enqueue(t.id, human("hi"), None, 1_000)
            .await
            .expect("enqueue");
        out.push(t.id);
    }
    out
}

#[tokio::test]
async fn claim_runnable_claims_what_recoverable_lists_one_owner_each() {
    each(async |store, name| {
        let waiting = orphans(&store, "orphan", 4).await;
        let _idle = thread(&store, "idle").await;
        // Held by a live run: not runnable until its lease expires.
        let held = thread(&store, "held").await;
        let live = Uuid::now_v7();
        assert!(
            store
                .enqueue(held.id, human("x"), Some(lease(live, 1_000)), 1_000)
                .await
                .expect("enqueue")
        );
        assert_eq!(
            store.recoverable(1_500).await.expect("recoverable"),
            waiting,
            "{name}"
        );
        assert!(
            store
                .claim_runnable(&[], 9_000, 1_500)
                .await
                .expect("claim")
                .is_empty(),
            "{name}: no owners, no claims"
        );
        let owners = [Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7()];
        let claimed = store
            .claim_runnable(&owners, 9_000, 1_500)
            .await
            .expect("claim");
        assert_eq!(
            claimed,
            waiting[..3].iter().copied().zip(owners).collect::<Vec<_>>(),
            "{name}: the n-th in thread order for the n-th owner"
        );
        for (id, owner) in &claimed {
            let t = store
                .thread_by_id(*id)
                .await
                .expect("read")
                .expect("thread");
            assert_eq!(
                (t.lease_owner, t.lease_expires),
                (Some(*owner), 9_000),
                "{name}"
            );
        }
        // More owners than work: the rest is claimed, the held thread is not.
        let more = [Uuid::now_v7(), Uuid::now_v7()];
        assert_eq!(
            store
                .claim_runnable(&more, 9_000, 1_500)
                .await
                .expect("claim"),
            vec![(waiting[3], more[0])],
            "{name}"
        );
        assert!(
            store
                .claim_runnable(&more, 9_000, 1_500)
                .await
                .expect("claim")
                .is_empty(),
            "{name}: nothing left"
        );
        // Once its lease expires, the held thread is claimed, without its old abort request.
        assert_eq!(
            store.request_abort(held.id, 1_500).await.expect("abort"),
            Some(live)
        );
        let next = Uuid::now_v7();
        assert_eq!(
            store
                .claim_runnable(&[next], 9_000, 2_001)
                .await
                .expect("claim"),
            vec![(held.id, next)],
            "{name}: expired"
        );
        assert_eq!(
            store
                .renew(held.id, lease(next, 2_100))
                .await
                .expect("renew"),
            Renewal::Held {
                abort_requested: false
            },
            "{name}"
        );
        assert_eq!(
            store
                .renew(held.id, lease(live, 2_100))
                .await
                .expect("renew"),
            Renewal::Lost,
            "{name}: the old run lost it"
        );
    })
    .await;
}

#[tokio::test]
async fn a_released_lease_is_claimable_at_once() {
    each(async |store, name| {
        let ids = orphans(&store, "t", 1).await;
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(
            store
                .claim_runnable(&[a], 9_000, 1_000)
                .await
                .expect("claim"),
            vec![(ids[0], a)],
            "{name}"
        );
        assert!(
            store
                .recoverable(1_000)
                .await
                .expect("recoverable")
                .is_empty(),
            "{name}: held"
        );
        assert!(
            !store.release(ids[0], b).await.expect("release"),
            "{name}: not b's to give back"
        );
        assert_eq!(
            store
                .thread_by_id(ids[0])
                .await
                .expect("read")
                .and_then(|t| t.lease_owner),
            Some(a),
            "{name}: still a's"
        );
        assert!(store.release(ids[0], a).await.expect("release"), "{name}");
        let t = store
            .thread_by_id(ids[0])
            .await
            .expect("read")
            .expect("thread");
        assert_eq!((t.lease_owner, t.lease_expires), (None, 0), "{name}");
        assert!(
            !store.release(ids[0], a).await.expect("release"),
            "{name}: given back already"
        );
        assert!(
            !store.release(Uuid::now_v7(), a).await.expect("release"),
            "{name}: no such thread"
        );
        // Recoverable at once, long before the old lease would have expired.
        assert_eq!(
            store.recoverable(1_001).await.expect("recoverable"),
            ids,
            "{name}"
        );
        assert_eq!(
            store
                .claim_runnable(&[b], 9_000, 1_001)
                .await
                .expect("claim"),
            vec![(ids[0], b)],
            "{name}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_split_the_work_and_never_claim_a_thread_twice() {
    for backend in support::store_backends().await {
        let name = backend.name();
        // Two stores on one database: two processes.
        let (one, two) = (backend.open().await, backend.open().await);
        for round in 0..5 {
            let work: BTreeSet<ThreadId> = orphans(&one, &format!("r{round}"), 12)
                .await
                .into_iter()
                .collect();
            let claimer = |store: Arc<dyn Store>| {
                tokio::spawn(async move {
                    let owners: Vec<Uuid> = (0..8).map(|_| Uuid::now_v7()).collect();
                    store
                        .claim_runnable(&owners, 9_000, 1_000)
                        .await
                        .expect("claim")
                })
            };
            let (a, b) = (claimer(one.clone()), claimer(two.clone()));
            let (a, b) = (a.await.expect("joins"), b.await.expect("joins"));
            let a: BTreeSet<ThreadId> = a.into_iter().map(|(id, _)| id).collect();
            let b: BTreeSet<ThreadId> = b.into_iter().map(|(id, _)| id).collect();
            assert!(a.is_disjoint(&b), "{name}: claimed twice: {a:?} {b:?}");
            assert_eq!(
                a.union(&b).copied().collect::<BTreeSet<_>>(),
                work,
                "{name}: between them, everything (16 owners for 12 threads)"
            );
            assert!(a.len() <= 8 && b.len() <= 8, "{name}");
        }
    }
}

/// A `psql` session holding thread `id`'s row locked (`FOR UPDATE`) until it is dropped.
struct RowLock {
    stdin: tokio::process::ChildStdin,
    child: tokio::process::Child,
}

impl RowLock {
    async fn take(url: &str, id: ThreadId) -> RowLock {
        RowLock::take_then(url, id, "").await
    }

    /// Locks thread `id`'s row, then runs `sql` in the same transaction.
    async fn take_then(url: &str, id: ThreadId, sql: &str) -> RowLock {
        let mut child = tokio::process::Command::new("psql")
            .args(["-qtA", "-v", "ON_ERROR_STOP=1", url])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("psql runs");
        let mut stdin = child.stdin.take().expect("stdin");
        let sql = format!(
            "BEGIN;\nSELECT num FROM threads WHERE id = '{id}' FOR UPDATE;\n{sql}\n\\echo locked\n"
        );
        stdin.write_all(sql.as_bytes()).await.expect("write");
        stdin.flush().await.expect("flush");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        while let Some(line) = lines.next_line().await.expect("read") {
            if line == "locked" {
                return RowLock { stdin, child };
            }
        }
        panic!("psql stopped before locking {id}");
    }

    async fn let_go(mut self) {
        self.stdin.write_all(b"COMMIT;\n").await.expect("write");
        drop(self.stdin);
        assert!(self.child.wait().await.expect("psql ends").success());
    }
}

#[tokio::test]
async fn on_postgres_a_claimer_passes_over_a_locked_row_without_waiting() {
    for backend in support::backends().await {
        let support::Backend::Postgres(url) = &backend else {
            continue;
        };
        let store = backend.open().await;
        let ids = orphans(&store, "t", 3).await;
        // Another process is in the middle of a write to the first thread.
        let lock = RowLock::take(url, ids[0]).await;
        let owners = [Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7()];
        let claimed = tokio::time::timeout(
            Duration::from_secs(5),
            store.claim_runnable(&owners, 9_000, 1_000),
        )
        .await
        .expect("not blocked by the locked row")
        .expect("claim");
        assert_eq!(
            claimed,
            vec![(ids[1], owners[0]), (ids[2], owners[1])],
            "the locked row is skipped, the others claimed"
        );
        lock.let_go().await;
        assert_eq!(
            store
                .claim_runnable(&owners[2..], 9_000, 1_000)
                .await
                .expect("claim"),
            vec![(ids[0], owners[2])],
            "claimed once it is free"
        );
    }
}

/// Waits until a session of `url`'s database waits for a row lock.
async fn someone_waits_for_a_lock(url: &str) {
    loop {
        let out = tokio::process::Command::new("psql")
            .args(["-qtAc", "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()", url])
            .output()
            .await
            .expect("psql runs");
        if String::from_utf8_lossy(&out.stdout).trim() != "0" {
            return;
        }
        // tidy:allow-sleep — Postgres announces no lock wait to anyone: the only way to see
        // one is to read `pg_stat_activity` again.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn on_postgres_a_settling_commit_sees_a_message_queued_while_it_waited_for_the_row() {
    for backend in support::backends().await {
        let support::Backend::Postgres(url) = &backend else {
            continue;
        };
        let store = backend.open().await;
        let t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        // Another process is queueing a message for the thread: its row is locked, the message
        // inserted but not yet committed.
        let queueing = RowLock::take_then(
            url,
            t.id,
            &format!(
                "INSERT INTO queue (thread, role, side, content, human, silent, created_at) \
                 SELECT num, 'user', 'b', 'late', TRUE, FALSE, 1000 FROM threads WHERE id = '{}';",
                t.id
            ),
        )
        .await;
        // The runner settles meanwhile: its commit waits for the row.
        let settling = {
            let (store, t) = (store.clone(), t.clone());
            tokio::spawn(async move {
                let settle = duet_runtime::Commit {
                    settle: true,
                    ..Default::default()
                };
                store.commit(&t, owner, settle).await
            })
        };
        tokio::time::timeout(Duration::from_secs(10), someone_waits_for_a_lock(url))
            .await
            .expect("the commit waits for the locked row");
        queueing.let_go().await;
        assert_eq!(
            settling.await.expect("the commit's task").expect("commit"),
            duet_runtime::CommitOutcome::Committed { queued: true },
            "the message queued while the commit waited keeps the lease"
        );
        let after = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("the thread");
        assert_eq!(
            after.lease_owner,
            Some(owner),
            "the runner still holds the lease"
        );
    }
}
