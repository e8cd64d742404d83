//! The SQLite store: a file in WAL mode. Writes go through one connection (held behind a mutex,
//! not a pool: a pool checkout costs as much as a statement) and start with `BEGIN IMMEDIATE`, so
//! a write transaction never has to upgrade a read lock (which fails at once with `SQLITE_BUSY`
//! under WAL); reads use a small pool of their own. Commits go through the committer
//! ([`crate::group`]), which writes whatever commits wait in one transaction.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use duet_runtime::ChangeHub;
use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// The store on one SQLite file. Its change feed is in process: a write publishes to it after
/// committing, while it still holds the write connection, so changes arrive in commit order.
/// (Another process writing to the same file is not seen on this feed.)
#[derive(Clone, Debug)]
pub struct SqliteStore {
    write: Arc<Mutex<SqliteConnection>>,
    read: SqlitePool,
    hub: ChangeHub,
    committer: crate::group::Committer<crate::sqlite_commit::Job>,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// Connects the write connection and applies pending migrations. Processes opening a new
/// database at once race: switching it to WAL needs a moment alone with the file, and SQLite has
/// no migration lock, so the loser's migration fails on what the winner just created (and rolls
/// back). Trying again a little later finds the file in WAL mode and the winner's migrations
/// recorded, and applies only what is left.
async fn open_writer(
    options: &SqliteConnectOptions,
) -> Result<SqliteConnection, duet_runtime::StoreError> {
    let mut attempt = 0;
    loop {
        let opened = match options.connect().await {
            Ok(mut conn) => match MIGRATOR.run_direct(None, &mut conn, false).await {
                Ok(()) => Ok(conn),
                Err(e) => Err(duet_runtime::StoreError::backend_in("migrating", e)),
            },
            Err(e) => Err(crate::db_error(e)),
        };
        match opened {
            Ok(conn) => return Ok(conn),
            Err(_) if attempt < 8 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(25 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The WAL length (in frames, pages) past which a checkpoint also rewinds it: about 64 MiB.
const WAL_RESET_FRAMES: i64 = 16_384;

/// Copies the WAL back into the database every tenth of a second (`PASSIVE`: it never waits for,
/// or blocks, the writer), for as long as the store it serves exists. A passive checkpoint never
/// rewinds the WAL while readers come and go, so under steady load the file would grow without
/// end (and its index with it, in every connection's memory); once it is past
/// [`WAL_RESET_FRAMES`], a `TRUNCATE` checkpoint waits for the readers of the moment (within the
/// busy timeout), copies the rest and empties the file.
async fn checkpoint(mut conn: SqliteConnection, store: std::sync::Weak<Mutex<SqliteConnection>>) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if store.upgrade().is_none() {
            return;
        }
        let frames: Option<(i64, i64, i64)> = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_optional(&mut conn)
            .await
            .ok()
            .flatten();
        if let Some((_, log, _)) = frames
            && log > WAL_RESET_FRAMES
        {
            let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&mut conn)
                .await;
        }
    }
}

/// How a SQLite store is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// `synchronous=FULL`: each commit reaches the disk before it returns (durable across a
    /// power loss). Off: `NORMAL`, durable across a crash of the process, synced at checkpoints.
    pub synchronous_full: bool,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` and migrates it.
    pub async fn open(path: &Path) -> Result<Self, duet_runtime::StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// [`SqliteStore::open`] with `options`.
    pub async fn open_with(
        path: &Path,
        options: SqliteOptions,
    ) -> Result<Self, duet_runtime::StoreError> {
        let synchronous = if options.synchronous_full {
            SqliteSynchronous::Full
        } else {
            SqliteSynchronous::Normal
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                duet_runtime::StoreError::backend_in(format!("cannot create {}", dir.display()), e)
            })?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        // The writer never checkpoints the WAL itself (a checkpoint inside a commit was the
        // whole p99 of a park or a resume); a connection of its own does it in the background.
        // Its statement cache keeps more than the default 100: a commit group's text differs
        // with its size and its commits' shapes.
        let write = open_writer(
            &options
                .clone()
                .pragma("wal_autocheckpoint", "0")
                .statement_cache_capacity(256),
        )
        .await?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options.clone().read_only(true))
            .await
            .map_err(crate::db_error)?;
        let write = Arc::new(Mutex::new(write));
        let checkpointer = options.connect().await.map_err(crate::db_error)?;
        tokio::spawn(checkpoint(checkpointer, Arc::downgrade(&write)));
        let hub = ChangeHub::default();
        let committer = crate::group::Committer::start(
            crate::sqlite_commit::SqliteWriter {
                conn: write.clone(),
                hub: hub.clone(),
            },
            1,
        );
        Ok(SqliteStore {
            write,
            read,
            hub,
            committer,
        })
    }

    async fn writer(&self) -> Result<OwnedMutexGuard<SqliteConnection>, duet_runtime::StoreError> {
        Ok(self.write.clone().lock_owned().await)
    }

    fn subscribe(&self) -> futures::stream::BoxStream<'static, duet_runtime::FeedEvent> {
        self.hub.subscribe()
    }

    /// Announces a committed write (called while the write connection is still held).
    fn publish(&self, change: Change) {
        self.hub.publish(change);
    }
}

/// A [`NewThread`] that owns its strings, for a write on a task of its own.
struct OwnedNewThread {
    id: ThreadId,
    agent: String,
    parent: Option<ThreadId>,
    principal: Option<String>,
    source: Option<String>,
    now: i64,
}

impl OwnedNewThread {
    fn from(new: &NewThread<'_>) -> Self {
        OwnedNewThread {
            id: new.id,
            agent: new.agent.to_owned(),
            parent: new.parent,
            principal: new.principal.map(str::to_owned),
            source: new.source.map(str::to_owned),
            now: new.now,
        }
    }
}

/// Whether `e` is a key the write broke (on the one-call writes: a message id delivered
/// before).
fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

crate::sql::store_impl!(
    SqliteStore,
    sqlx::Sqlite,
    "BEGIN IMMEDIATE",
    "",
    "",
    "NULL",
    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
);

impl SqliteStore {
    /// `enqueue` in one call (one crossing to the driver's thread): the message id, the
    /// message and the lease taken if free, in one transaction (`BEGIN IMMEDIATE` serialises
    /// it, so the lease it judges is the lease as it stands). A message id delivered before
    /// breaks the deliveries key and the call rolls back; a missing thread queues nothing.
    async fn enqueue_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Option<Lease>,
        now: i64,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "BEGIN IMMEDIATE;\n\
             INSERT INTO deliveries (thread, message_id, created_at) SELECT num, $2, $3 FROM threads WHERE id = $1 AND $2 IS NOT NULL;\n\
             INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace) \
               SELECT num, $4, $5, $6, $7, $8, $9, $3, $10, $11, $12, $13, $14 FROM threads WHERE id = $1 \
               RETURNING (SELECT next_seq - 1 FROM threads WHERE num = queue.thread) AS seq, \
                 (SELECT status FROM threads WHERE num = queue.thread) AS status;\n\
             UPDATE threads SET lease_owner = $15, lease_expires = $16, abort_requested = FALSE \
               WHERE id = $1 AND $15 IS NOT NULL AND (lease_owner IS NULL OR lease_expires < $17 OR lease_owner = $15) \
               RETURNING 1 AS claimed;\n\
             COMMIT;";
        let hub = self.hub.clone();
        let rows = self
            .write_once(move |conn: &mut SqliteConnection| {
                Box::pin(async move {
                    let query = sqlx::query(SQL)
                        .bind(id.to_string())
                        .bind(message.message_id.as_deref())
                        .bind(now);
                    let rows = crate::sql::bind_message!(query, &message)
                        .bind(claim.as_ref().map(|l| l.owner.to_string()))
                        .bind(claim.as_ref().map(|l| l.until))
                        .bind(claim.as_ref().map(|l| l.now))
                        .fetch_all(conn)
                        .await;
                    let rows = match (rows, &message.message_id) {
                        (Err(e), Some(message_id)) if is_unique_violation(&e) => {
                            return Err(StoreError::Duplicate {
                                thread: id,
                                message_id: message_id.clone(),
                            });
                        }
                        (rows, _) => rows.map_err(db_error)?,
                    };
                    if let Some(row) = rows.iter().find(|r| r.try_get::<i64, _>("seq").is_ok()) {
                        let status: String = row.try_get("status").map_err(db_error)?;
                        hub.publish(Change {
                            thread: id,
                            seq: row.try_get("seq").map_err(db_error)?,
                            status: ThreadStatus::parse(&status)
                                .ok_or_else(|| corrupt("status", &status))?,
                        });
                    }
                    Ok(rows)
                })
            })
            .await?;
        if !rows.iter().any(|r| r.try_get::<i64, _>("seq").is_ok()) {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(rows.iter().any(|r| r.try_get::<i64, _>("claimed").is_ok()))
    }

    /// `create_with` in one call (one crossing to the driver's thread): the thread, unless its
    /// key is taken, read back from its insert, then its message id and first message, written
    /// only when the thread row is the new one.
    async fn create_with_impl(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<Option<Thread>, StoreError> {
        const SQL: &str = concat!(
            "BEGIN IMMEDIATE;\n\
             INSERT INTO threads (id, key, agent, origin, parent, principal, source, status, created_at, updated_at, lease_owner, lease_expires) \
               VALUES ($1, $2, $3, $3, $4, $5, $6, 'idle', $7, $7, $8, $9) ON CONFLICT (key) DO NOTHING RETURNING ",
            thread_cols!(),
            ";\n\
             INSERT INTO deliveries (thread, message_id, created_at) SELECT num, $10, $11 FROM threads WHERE id = $1 AND $10 IS NOT NULL;\n\
             INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace) \
               SELECT num, $12, $13, $14, $15, $16, $17, $11, $18, $19, $20, $21, $22 FROM threads WHERE id = $1;\n\
             COMMIT;"
        );
        let key = key.to_owned();
        let new = OwnedNewThread::from(&new);
        let hub = self.hub.clone();
        self.write_once(move |conn: &mut SqliteConnection| {
            Box::pin(async move {
                let query = crate::sql::bind_new_thread!(sqlx::query(SQL), key, new)
                    .bind(claim.owner.to_string())
                    .bind(claim.until)
                    .bind(message.message_id.as_deref())
                    .bind(claim.now);
                let rows = crate::sql::bind_message!(query, &message)
                    .fetch_all(conn)
                    .await
                    .map_err(db_error)?;
                let Some(row) = rows.first() else {
                    return Ok(None);
                };
                let thread = thread_from_row(row)?;
                hub.publish(Change {
                    thread: thread.id,
                    seq: thread.next_seq - 1,
                    status: thread.status,
                });
                Ok(Some(thread))
            })
        })
        .await
    }

    /// `run_start` in one call on a read connection: the thread, its messages and its queue,
    /// each statement's rows told apart by the `part` it returns (a crossing to the driver's
    /// thread costs more than all three statements).
    async fn run_start_impl(&self, id: ThreadId) -> Result<duet_runtime::RunStart, StoreError> {
        const SQL: &str = concat!(
            "SELECT 0 AS part, ",
            thread_cols!(),
            " FROM threads WHERE id = $1;\n\
             SELECT 1 AS part, j.* FROM journal j JOIN threads t ON t.num = j.thread \
               WHERE t.id = $1 AND j.kind = 'message' ORDER BY j.seq;\n\
             SELECT 2 AS part, q.id, q.role, q.side, q.content, q.human, q.silent, q.follow_up, q.tool_call_id, \
               q.tool_name, q.tool_status, q.images, q.trace, q.created_at FROM queue q \
               JOIN threads t ON t.num = q.thread WHERE t.id = $1 ORDER BY q.id;"
        );
        let rows = sqlx::query(SQL)
            .bind(id.to_string())
            .fetch_all(&self.read)
            .await
            .map_err(db_error)?;
        let mut start = duet_runtime::RunStart::default();
        for row in &rows {
            match row.try_get::<i64, _>("part").map_err(db_error)? {
                0 => start.thread = Some(thread_from_row(row)?),
                1 => start.messages.push(message_from_row(row)?),
                _ => start.queue.push(queued_from_row(row)?),
            }
        }
        Ok(start)
    }

    /// Runs `write`, one call of a whole write transaction (`BEGIN IMMEDIATE` … `COMMIT`) on the
    /// write connection, from a task of its own: a caller dropped halfway never leaves the
    /// connection inside a transaction. When `write` fails, the transaction is rolled back
    /// (should it have committed, the rollback finds none and does nothing).
    async fn write_once<T: Send + 'static>(
        &self,
        write: impl for<'c> FnOnce(
            &'c mut SqliteConnection,
        ) -> futures::future::BoxFuture<'c, Result<T, StoreError>>
        + Send
        + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.write.clone();
        tokio::spawn(async move {
            let mut conn = conn.lock_owned().await;
            let result = write(&mut conn).await;
            if result.is_err() {
                let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            }
            result
        })
        .await
        .map_err(|e| StoreError::backend_in("a write's task", e))?
    }

    /// A commit as one batch: SQLite runs several statements of one SQL text with shared
    /// numbered parameters in a single call, which is a third of the cost of one call per
    /// statement. Every write is guarded by the lease (`lease_owner = $2`), and the thread
    /// update (which releases the lease when settling) comes last: when the lease is gone
    /// nothing matches, nothing is written, and the update returns no row.
    async fn commit_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError> {
        use crate::sql::{
            Arg, Batch, JOURNAL_COLUMNS, QUEUED_COLUMNS, THREAD_SET, journal_rows, queued_row,
        };
        let mut batch = Batch::new(t, owner);
        for id in &commit.drained {
            let p = batch.param(Arg::Int(*id));
            batch.sql.push_str(&format!(
                "DELETE FROM queue WHERE id = {p} AND thread = \
                 (SELECT num FROM threads WHERE id = $1 AND lease_owner = $2);\n"
            ));
        }
        for chunk in journal_rows(&commit)?.chunks(500) {
            let values = batch.values(chunk.to_vec());
            batch.sql.push_str(&format!(
                "INSERT INTO journal (thread, {JOURNAL_COLUMNS}) \
                 SELECT t.num, v.* FROM threads t, ({values}) v WHERE t.id = $1 AND t.lease_owner = $2;\n"
            ));
        }
        for q in &commit.enqueue {
            let values = batch.values(vec![queued_row(q, t.updated_at)]);
            batch.sql.push_str(&format!(
                "INSERT INTO queue (thread, {QUEUED_COLUMNS}) \
                 SELECT t.num, v.* FROM threads t, ({values}) v WHERE t.id = $1 AND t.lease_owner = $2;\n"
            ));
        }
        for (key, value) in &commit.values {
            let k = batch.param(Arg::Text(Some(key.clone())));
            match value {
                Some(v) => {
                    let v = batch.param(Arg::Text(Some(v.to_string())));
                    batch.sql.push_str(&format!(
                        "INSERT INTO thread_values (thread, key, value) SELECT num, {k}, {v} FROM threads \
                         WHERE id = $1 AND lease_owner = $2 \
                         ON CONFLICT (thread, key) DO UPDATE SET value = excluded.value;\n"
                    ));
                }
                None => batch.sql.push_str(&format!(
                    "DELETE FROM thread_values WHERE key = {k} AND thread = \
                     (SELECT num FROM threads WHERE id = $1 AND lease_owner = $2);\n"
                )),
            }
        }
        let settle = commit.settle && commit.enqueue.is_empty();
        // The thread's new status and stop reason are `$4` and `$8`.
        let release = if !settle {
            "0".to_owned()
        } else if commit.release {
            "1".to_owned()
        } else {
            format!(
                "NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = threads.num AND {})",
                crate::sql::runnable!("$4", "$8")
            )
        };
        batch.sql.push_str(&format!(
            "UPDATE threads SET {THREAD_SET}, \
             lease_owner = CASE WHEN {release} THEN NULL ELSE lease_owner END, \
             lease_expires = CASE WHEN {release} THEN 0 ELSE lease_expires END \
             WHERE id = $1 AND lease_owner = $2 \
             RETURNING $2 AS run, lease_owner, (SELECT COUNT(*) FROM queue q WHERE q.thread = threads.num) AS waiting;\n"
        ));

        let job = crate::sqlite_commit::Job {
            sql: batch.sql,
            args: batch.args,
            run: owner.to_string(),
            change: Change {
                thread: t.id,
                seq: t.next_seq - 1,
                status: t.status,
            },
        };
        crate::group::outcome(self.committer.commit(job).await?, t, &commit)
    }
}
