//! The Postgres store: a connection pool; every write transaction locks the thread row
//! (`SELECT … FOR UPDATE`), which serialises a thread's writers across processes. A commit is
//! one call of the `duet_commit` function, grouped with the other commits waiting
//! (`pg_commit.rs`, `group.rs`).
//!
//! The change feed crosses processes: every write that changes a thread calls
//! `pg_notify('duet_changes', 'ID SEQ STATUS')` inside its transaction (so the notification is
//! delivered only if it commits, in commit order: in the commit, one more column of the
//! statement that writes), and a store with subscribers listens for them (`listen.rs`).

use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::listen::Feed;

/// The store on a Postgres database.
#[derive(Clone, Debug)]
pub struct PgStore {
    write: PgPool,
    read: PgPool,
    feed: Arc<Feed>,
    committer: crate::group::Committer<crate::pg_commit::Job>,
}

/// The most groups of commits written at once, each on a connection of its own (of the pool's
/// eight): while they all are, the commits that come meanwhile wait and form the next group.
const COMMITS_IN_FLIGHT: usize = 4;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

impl PgStore {
    /// Connects to `url` and migrates the database.
    pub async fn connect(url: &str) -> Result<Self, duet_runtime::StoreError> {
        // An unreachable server is said at once, with the driver's own error (connection
        // refused, unknown host, authentication), not as the pool's "timed out" after 30 s: one
        // connection first, given 5 s.
        let options: PgConnectOptions = url.parse().map_err(crate::db_error)?;
        let wait = std::time::Duration::from_secs(5);
        match tokio::time::timeout(wait, sqlx::ConnectOptions::connect(&options)).await {
            Ok(Ok(first)) => drop(first),
            Ok(Err(e)) => return Err(crate::db_error(e)),
            Err(_) => {
                return Err(duet_runtime::StoreError::backend_in(
                    format!("no answer from the server within {} s", wait.as_secs()),
                    std::io::Error::from(std::io::ErrorKind::TimedOut),
                ));
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .test_before_acquire(false)
            .acquire_timeout(wait)
            .connect_with(options)
            .await
            .map_err(crate::db_error)?;
        // On a connection of its own (not `&pool`): this keeps `connect`'s future `Send` for any
        // caller, so a service can open its store inside a spawned task. sqlx's Postgres
        // migrator takes an advisory lock, so concurrent processes migrate one at a time.
        let mut conn = pool.acquire().await.map_err(crate::db_error)?;
        MIGRATOR
            .run_direct(None, &mut *conn, false)
            .await
            .map_err(|e| duet_runtime::StoreError::backend_in("migrating", e))?;
        drop(conn);
        Ok(PgStore {
            write: pool.clone(),
            read: pool.clone(),
            feed: Arc::new(Feed::start(url)),
            committer: crate::group::Committer::start(
                crate::pg_commit::PgWriter { pool },
                COMMITS_IN_FLIGHT,
            ),
        })
    }

    fn subscribe(&self) -> futures::stream::BoxStream<'static, duet_runtime::FeedEvent> {
        self.feed.subscribe()
    }

    /// Nothing to do after a commit: the write's `pg_notify` reaches this store's subscribers
    /// (and every other store's) through the listener.
    fn publish(&self, _: Change) {}

    async fn writer(
        &self,
    ) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, duet_runtime::StoreError> {
        self.write.acquire().await.map_err(crate::db_error)
    }
}

impl PgStore {
    /// A commit in one round trip: `duet_commit` called for it, alone or with the other commits
    /// waiting for the committer (see `pg_commit.rs`).
    async fn commit_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError> {
        let job = crate::pg_commit::Job::new(t, owner, &commit)?;
        crate::group::outcome(self.committer.commit(job).await?, t, &commit)
    }
}

crate::sql::store_impl!(
    PgStore,
    sqlx::Postgres,
    "BEGIN",
    " FOR UPDATE",
    " FOR UPDATE SKIP LOCKED",
    // `listen::CHANNEL`, and the payload `parse_change` reads (a literal: `concat!` needs one).
    "pg_notify('duet_changes', id || ' ' || (next_seq - 1) || ' ' || status)",
    "SELECT pg_database_size(current_database())"
);
