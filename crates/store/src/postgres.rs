//! The Postgres store: a connection pool; every write transaction locks the thread row
//! (`SELECT … FOR UPDATE`), which serialises a thread's writers across processes.
//!
//! The change feed crosses processes: every write that changes a thread calls
//! `pg_notify('duet_changes', 'ID SEQ STATUS')` inside its transaction (so the notification is
//! delivered only if it commits, in commit order: in the commit, one more column of the
//! statement that writes), and a store with subscribers listens for them (`listen.rs`).

use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::listen::{CHANNEL, Feed};

/// The store on a Postgres database.
#[derive(Clone, Debug)]
pub struct PgStore {
    write: PgPool,
    read: PgPool,
    feed: Arc<Feed>,
}

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
            read: pool,
            feed: Arc::new(Feed::start(url)),
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
    /// A commit in four round trips: `BEGIN`; the thread row locked `FOR UPDATE` in a statement
    /// of its own, so what follows sees every enqueue that committed while this waited for the
    /// lock (each statement of a READ COMMITTED transaction takes a new snapshot); one statement
    /// whose data-modifying CTEs write the thread (fenced by the lease, releasing it when
    /// settling with an empty queue), the journal and the drained queue rows; `COMMIT`.
    async fn commit_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError> {
        use crate::sql::{Arg, Batch, JOURNAL_COLUMNS, THREAD_SET, journal_rows};
        let mut conn = self.writer().await?;
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(db_error)?;
        let num = lease_row(&mut tx, t.id).await?.num;
        // Rare writes (a handler's queued messages and values) go first, on their own.
        for q in &commit.enqueue {
            insert_queued(&mut tx, t.id, num, q, t.updated_at, false).await?;
        }
        for (key, value) in &commit.values {
            match value {
                Some(v) => {
                    sqlx::query(
                        "INSERT INTO thread_values (thread, key, value) VALUES ($1, $2, $3) \
                     ON CONFLICT (thread, key) DO UPDATE SET value = excluded.value",
                    )
                    .bind(num)
                    .bind(key)
                    .bind(v.to_string())
                    .execute(&mut *tx)
                    .await
                }
                None => {
                    sqlx::query("DELETE FROM thread_values WHERE thread = $1 AND key = $2")
                        .bind(num)
                        .bind(key)
                        .execute(&mut *tx)
                        .await
                }
            }
            .map_err(db_error)?;
        }
        let mut batch = Batch::new(t, owner);
        let drained = batch.param(Arg::Ints(commit.drained.clone()));
        let settle = batch.param(Arg::Bool(commit.settle && commit.enqueue.is_empty()));
        let release = batch.param(Arg::Bool(commit.release));
        // The CTEs share one snapshot, so the queue rows this commit deletes are excluded by id.
        let waiting = format!(
            "SELECT 1 FROM queue q WHERE q.thread = threads.num AND NOT (q.id = ANY({drained}))"
        );
        // What keeps the lease: a runnable row, for the thread's new status (`$4`) and stop
        // reason (`$8`).
        let runnable = format!(
            "{waiting} AND {}",
            crate::sql::runnable!("$4::text", "$8::text")
        );
        let free = format!("{settle} AND ({release} OR NOT EXISTS ({runnable}))");
        let mut sql = format!(
            "WITH del AS (DELETE FROM queue WHERE thread = (SELECT num FROM threads WHERE id = $1) AND id = ANY({drained})), \
             upd AS (UPDATE threads SET {THREAD_SET}, \
                 lease_owner = CASE WHEN {free} THEN NULL ELSE lease_owner END, \
                 lease_expires = CASE WHEN {free} THEN 0 ELSE lease_expires END \
                 WHERE id = $1 AND lease_owner = $2 \
                 RETURNING num, lease_owner, (SELECT COUNT(*) FROM ({waiting}) w) AS waiting)"
        );
        let rows = journal_rows(&commit)?;
        if !rows.is_empty() {
            let values = batch.values(rows);
            sql.push_str(&format!(
                ", ins AS (INSERT INTO journal (thread, {JOURNAL_COLUMNS}) SELECT upd.num, v.* FROM upd, ({values}) v)"
            ));
        }
        // The change feed's notification, sent only if the thread row was written (and delivered
        // only if the transaction commits).
        let change = batch.param(Arg::Text(Some(format!(
            "{} {} {}",
            t.id,
            t.next_seq - 1,
            t.status.as_str()
        ))));
        sql.push_str(&format!(
            " SELECT lease_owner, waiting, pg_notify('{CHANNEL}', {change}) FROM upd"
        ));
        let query =
            crate::sql::bind_args!(sqlx::query(sqlx::AssertSqlSafe(sql)), batch.args, arrays);
        let row = query.fetch_optional(&mut *tx).await.map_err(db_error)?;
        let result = outcome(row.as_ref(), t, &commit);
        if result.is_ok() {
            tx.commit().await.map_err(db_error)?;
        }
        result
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
