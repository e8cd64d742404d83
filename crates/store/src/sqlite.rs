//! The SQLite store: a file in WAL mode. Writes go through one connection (held behind a mutex,
//! not a pool: a pool checkout costs as much as a statement) and start with `BEGIN IMMEDIATE`, so
//! a write transaction never has to upgrade a read lock (which fails at once with `SQLITE_BUSY`
//! under WAL); reads use a small pool of their own. Commits, and the writes that deliver a
//! message, go through the committer ([`crate::group`]), which writes whatever waits in one
//! transaction.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use duet_runtime::ChangeHub;
use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteSynchronous};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// The statements of a run's first read ([`duet_runtime::Store::run_start`]) on thread `$1`:
/// the thread, its messages, its queue and its deadline override, each row tagged by the `part`
/// it belongs to (0 to 3; [`start_from`] reads them back). `$thread` and `$joined` are further
/// conditions on the thread row, unaliased and as `t` (a claiming write's: only if it took the
/// lease).
macro_rules! start_reads {
    ($thread:literal, $joined:literal) => {
        concat!(
            "SELECT 0 AS part, ",
            crate::fragments::thread_cols!(),
            " FROM threads WHERE id = $1",
            $thread,
            ";\n\
             SELECT 1 AS part, j.* FROM journal j JOIN threads t ON t.num = j.thread \
               WHERE t.id = $1",
            $joined,
            " AND j.kind = 'message' ORDER BY j.seq;\n\
             SELECT 2 AS part, q.id, q.role, q.side, q.content, q.human, q.silent, q.follow_up, q.tool_call_id, \
               q.tool_name, q.tool_status, q.images, q.attachments, q.trace, q.message_id, q.decision, q.created_at FROM queue q \
               JOIN threads t ON t.num = q.thread WHERE t.id = $1",
            $joined,
            " ORDER BY q.id;\n\
             SELECT 3 AS part, v.value AS override FROM thread_values v JOIN threads t ON t.num = v.thread \
               WHERE t.id = $1",
            $joined,
            " AND v.key = 'duet.deadline';\n"
        )
    };
}

mod backup;
mod commit;
mod flush;
mod readers;
mod settled_read;
mod writes;

pub use backup::{BackupError, SqliteBackup, sqlite_backup};

/// The store on one SQLite file. Its change feed is in process: a write publishes to it after
/// committing, while it still holds the write connection, so changes arrive in commit order.
/// (Another process writing to the same file is not seen on this feed.)
#[derive(Clone, Debug)]
pub struct SqliteStore {
    write: Arc<Mutex<SqliteConnection>>,
    read: readers::Readers,
    hub: ChangeHub,
    /// Timer wakeups, in process like the change feed.
    wakes: duet_runtime::WakeHub,
    committer: crate::group::Committer<commit::Job, commit::Written>,
}

static MIGRATOR: std::sync::LazyLock<sqlx::migrate::Migrator> =
    std::sync::LazyLock::new(|| crate::schema::tolerant(sqlx::migrate!("migrations/sqlite")));

/// What the database says of its schema before this build migrates it: `min_compatible` (none
/// before that table) and the newest migration applied (none on a new file).
async fn compat(conn: &mut SqliteConnection) -> Result<(Option<i64>, Option<i64>), sqlx::Error> {
    let exists = |table: &'static str| {
        sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
        )
        .bind(table)
    };
    let min = if exists("duet_schema").fetch_one(&mut *conn).await? > 0 {
        sqlx::query_scalar("SELECT min_compatible FROM duet_schema WHERE id = 1")
            .fetch_optional(&mut *conn)
            .await?
    } else {
        None
    };
    let applied = if exists("_sqlx_migrations").fetch_one(&mut *conn).await? > 0 {
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
            .fetch_one(&mut *conn)
            .await?
    } else {
        None
    };
    Ok((min, applied))
}

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
            Ok(mut conn) => {
                supported(&mut conn).await?;
                // A database a newer build made incompatible stops here, not after retries.
                let (min, applied) = compat(&mut conn).await.map_err(crate::db_error)?;
                crate::schema::check(min, applied, crate::schema::newest(&MIGRATOR))?;
                match MIGRATOR.run_direct(None, &mut conn, false).await {
                    Ok(()) => Ok(conn),
                    Err(e) => Err(duet_runtime::StoreError::backend_in("migrating", e)),
                }
            }
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

/// The WAL file's size once rewound (`journal_size_limit`): [`WAL_RESET_FRAMES`] frames of 4 KiB
/// pages with their headers, and the file's header. The file is kept, and written over from its
/// start, up to this size; one that grew past it (a long reader held off the rewinds) is cut back
/// to it by the first commit after a rewind.
const WAL_LIMIT_BYTES: i64 = 32 + WAL_RESET_FRAMES * (4096 + 24);

/// How long a rewinding checkpoint waits for the readers of the moment (the checkpointer's
/// busy timeout; a passive checkpoint never waits). It holds off new writers meanwhile, so it is
/// short.
const REWIND_WAIT: Duration = Duration::from_millis(100);

/// How many ticks a rewinding checkpoint that had to give up waits before the next try.
const REWIND_BACKOFF: u32 = 10;

/// The most entries a settling commit reads back (`commit_reading`): a longer session is read
/// by the caller, outside the write transaction, which a read that long would hold up.
const SESSION_READ_MAX: usize = 256;

/// The most read connections open at once (each is a worker thread of the driver's).
const READERS: usize = 4;

/// Copies the WAL back into the database every tenth of a second (`PASSIVE`: it never waits for,
/// or blocks, the writer), for as long as the store it serves exists. A passive checkpoint never
/// rewinds the WAL while readers come and go, so under steady load the file would grow without
/// end (and its index with it, in every connection's memory); once it is past
/// [`WAL_RESET_FRAMES`], a `RESTART` checkpoint waits for the readers of the moment (within
/// [`REWIND_WAIT`]) and copies the rest, and the next commit writes the file again from its
/// start (over pages the file system has already placed: cheaper than appending to a file
/// emptied by `TRUNCATE`, and no stall to cut the file off). A long reader — a backup's
/// `VACUUM INTO` of a large database — makes it give up, and it tries again only
/// [`REWIND_BACKOFF`] ticks later: waiting out the reader would hold off every commit for as
/// long as it reads (measured: a 3.6 s stall during a 4.3 s backup of 1 GB), and the writers'
/// own busy timeout would end some of them in `SQLITE_BUSY`. Meanwhile the WAL grows.
async fn checkpoint(mut conn: SqliteConnection, store: std::sync::Weak<Mutex<SqliteConnection>>) {
    let mut hold_off = 0;
    // The log's length a rewind left: the passive checkpoint reports it until the next commit
    // writes the file from its start, and nothing needs rewinding meanwhile.
    let mut rewound = None;
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
            && rewound != Some(log)
        {
            if hold_off > 0 {
                hold_off -= 1;
                continue;
            }
            // `busy` (the first column) is 1 when it gave up before the log could rewind.
            let done: Option<(i64, i64, i64)> = sqlx::query_as("PRAGMA wal_checkpoint(RESTART)")
                .fetch_optional(&mut conn)
                .await
                .ok()
                .flatten();
            match done {
                Some((0, log, _)) => rewound = Some(log),
                _ => hold_off = REWIND_BACKOFF,
            }
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
        let synchronous_full = options.synchronous_full;
        let synchronous = if synchronous_full {
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
                .pragma("journal_size_limit", WAL_LIMIT_BYTES.to_string())
                .statement_cache_capacity(256),
        )
        .await?;
        let read = readers::Readers::open(options.clone().read_only(true), READERS)
            .await
            .map_err(crate::db_error)?;
        let write = Arc::new(Mutex::new(write));
        let checkpointer = options
            .clone()
            .busy_timeout(REWIND_WAIT)
            .connect()
            .await
            .map_err(crate::db_error)?;
        tokio::spawn(checkpoint(checkpointer, Arc::downgrade(&write)));
        let hub = ChangeHub::default();
        let wakes = duet_runtime::WakeHub::default();
        // With `synchronous=FULL` every commit syncs the WAL itself.
        let flush = if synchronous_full {
            None
        } else {
            // SQLite places the WAL beside the file a link points to.
            let db = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
            let mut wal = db.into_os_string();
            wal.push("-wal");
            flush::WalFlush::start(Path::new(&wal))
        };
        let committer = crate::group::Committer::start(
            commit::SqliteWriter {
                conn: write.clone(),
                hub: hub.clone(),
                wakes: wakes.clone(),
                flush,
            },
            1,
        );
        Ok(SqliteStore {
            write,
            read,
            hub,
            wakes,
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

    /// A subscription to timer wakeups (this process's writes: another process writing to the
    /// same file is not heard, as on the change feed).
    fn wakeups(&self) -> futures::stream::BoxStream<'static, duet_runtime::TimerWake> {
        self.wakes.subscribe()
    }

    /// Announces a timer written or put back, due at `at`.
    fn wake(&self, at: i64) {
        self.wakes.due(at);
    }
}

/// The seq of thread `$1`'s `session_started` record, up to the comparison of its session
/// number: `session_range!`'s, and a settling commit's read of its session.
macro_rules! session_start {
    () => {
        "SELECT s.seq FROM journal s INDEXED BY journal_sessions \
         WHERE s.thread = (SELECT num FROM threads WHERE id = $1) AND s.kind = 'session_started' \
         AND json_extract(s.data, '$.session')"
    };
}
crate::sql::store_impl!(
    SqliteStore,
    sqlx::Sqlite,
    "BEGIN IMMEDIATE",
    "",
    "",
    "NULL",
    "NULL",
    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
    session_start!(),
    SETTLES
);

/// A run's settles, read through their partial index (named: see `reads_sql::settles_sql!`).
const SETTLES: &str = crate::reads_sql::settles_sql!("journal j INDEXED BY journal_settles");

crate::files_sql::files_impl!(
    SqliteStore,
    sqlx::Sqlite,
    "BEGIN IMMEDIATE",
    "SELECT DISTINCT c.value AS hash FROM files f, json_each(f.chunks) c \
     WHERE c.value IN (SELECT value FROM json_each($1))",
    "DELETE FROM blobs WHERE created_at < $1 \
     AND hash NOT IN (SELECT c.value FROM files f, json_each(f.chunks) c)"
);

impl SqliteStore {
    /// `run_start` in one call on a read connection: the thread, its messages, its queue and
    /// its deadline override, each statement's rows told apart by the `part` it returns (a
    /// crossing to the driver's thread costs more than all four statements).
    async fn run_start_impl(&self, id: ThreadId) -> Result<duet_runtime::RunStart, StoreError> {
        const SQL: &str = start_reads!("", "");
        let rows = sqlx::query(SQL)
            .bind(id.to_string())
            .fetch_all(&self.read)
            .await
            .map_err(db_error)?;
        Ok(start_from(&rows)?.unwrap_or_default())
    }

    /// A commit as one batch: SQLite runs several statements of one SQL text with shared
    /// numbered parameters in a single call, which is a third of the cost of one call per
    /// statement. Every write is guarded by the lease (`lease_owner = $2`), and the thread
    /// update (which releases the lease when settling) comes last, then a read of the row it
    /// changed: when the lease is gone nothing matches, nothing is written, and that read
    /// returns no row.
    async fn commit_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError> {
        Ok(self.commit_with(t, owner, commit, None).await?.0)
    }

    /// `commit_reading`: the commit's call ends with a read of session `session`'s entries,
    /// as the commit leaves them: those written before it, read back, then its own, as it
    /// wrote them (`settled_read`).
    async fn commit_reading_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
        session: i64,
    ) -> Result<(CommitOutcome, Option<Vec<duet_runtime::ReadBack>>), StoreError> {
        let (outcome, rows, commit) = self.commit_with(t, owner, commit, Some(session)).await?;
        // Only a commit that let the run go is the run's last: the others' reads are stale.
        if outcome != CommitOutcome::Settled {
            return Ok((outcome, None));
        }
        // Written whatever its rows say: one the decoder refuses leaves the reading to the
        // caller, who meets it there (as before the commit read anything).
        let read = settled_read::Before::of(&rows).and_then(|before| {
            // A session that long was cut short by the read's limit: the caller reads it.
            if before.rows().len() > SESSION_READ_MAX {
                return Ok(None);
            }
            let earlier = read_back(before.rows())?;
            Ok(Some(before.with_written(earlier, commit)))
        });
        match read {
            Ok(read) => Ok((outcome, read.filter(|e| e.len() <= SESSION_READ_MAX))),
            Err(e) => {
                tracing::warn!(thread = %t.id, error = %e, "a settled session's entries did not decode");
                Ok((outcome, None))
            }
        }
    }

    /// [`SqliteStore::commit_impl`], and with `read`, the rows of that session of the thread
    /// that were there before the commit, read after its writes in the same call (the rows are
    /// `commit::ENTRIES_OF`'s: `settled_read::Before`'s), and the commit back.
    async fn commit_with(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
        read: Option<i64>,
    ) -> Result<(CommitOutcome, Vec<sqlx::sqlite::SqliteRow>, Commit), StoreError> {
        use crate::sql::{
            Arg, Batch, JOURNAL_COLUMNS, QUEUED_COLUMNS, THREAD_SET, journal_rows, json_rows,
            queued_row,
        };
        let mut batch = Batch::new(t, owner);
        for id in &commit.drained {
            let p = batch.param(Arg::Int(*id));
            batch.sql.push_str(&format!(
                "DELETE FROM queue WHERE id = {p} AND thread = \
                 (SELECT num FROM threads WHERE id = $1 AND lease_owner = $2);\n"
            ));
        }
        // The rows as one JSON parameter: one bind, and one text whatever their number (so it
        // is found again in the statement cache). Binding them one by one cost the square of
        // their parameters (SQLite finds a named parameter's name by a scan of the statement's
        // list of them), and each number of rows was a text to prepare anew. `jsonb_each`, not
        // `json_each`: it gives each row as its binary form, which `->>` reads as it is (a row
        // as text was printed, then parsed again, by each of its 15 columns).
        let rows = journal_rows(&commit)?;
        if !rows.is_empty() {
            let p = batch.param(Arg::Text(Some(json_rows(&rows)?)));
            batch.sql.push_str(&format!(
                "INSERT INTO journal (thread, {JOURNAL_COLUMNS}) \
                 SELECT t.num, {JSON_COLUMNS} FROM threads t, jsonb_each({p}) r \
                 WHERE t.id = $1 AND t.lease_owner = $2;\n"
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
            let k = batch.param(crate::batch::text(Some(key)));
            match value {
                Some(v) => {
                    let v = batch.param(Arg::Text(Some(duet_runtime::nul::json_text(v))));
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
        let due = commit::timer_statements(&mut batch, &commit);
        crate::file_rows::file_statements(&mut batch, &commit);
        let settle = commit.settle && commit.enqueue.is_empty();
        // The thread's new status and stop reason are `$4` and `$8`.
        let release = if !settle {
            "0".to_owned()
        } else if commit.release {
            "1".to_owned()
        } else {
            format!(
                "NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = threads.num AND {})",
                crate::fragments::runnable!("$4", "$8")
            )
        };
        batch.sql.push_str(&format!(
            "UPDATE threads SET {THREAD_SET}, \
             lease_owner = CASE WHEN {release} THEN NULL ELSE lease_owner END, \
             lease_expires = CASE WHEN {release} THEN 0 ELSE lease_expires END \
             WHERE id = $1 AND lease_owner = $2;\n\
             SELECT $2 AS run, lease_owner, (SELECT COUNT(*) FROM queue q WHERE q.thread = threads.num) AS waiting \
             FROM threads WHERE id = $1 AND changes() = 1;\n"
        ));
        if let Some(session) = read {
            let session = batch.param(Arg::Int(session));
            let first = batch.param(Arg::Int(settled_read::first_written(&commit)));
            settled_read::push_statement(
                &mut batch.sql,
                session_start!(),
                &session,
                &first,
                SESSION_READ_MAX + 1,
            );
        }

        let job = commit::Job::Commit(commit::CommitJob {
            sql: batch.sql,
            args: batch.args,
            run: owner.to_string(),
            change: Change {
                thread: t.id,
                seq: t.next_seq - 1,
                status: t.status,
            },
            due,
        });
        let commit::Written::Commit(returned, entries) = self.committer.commit(job).await? else {
            return Err(StoreError::Corrupt("a commit told rows".into()));
        };
        Ok((
            crate::group::outcome(returned, t, &commit)?,
            entries,
            commit,
        ))
    }
}

/// The rows of a settling commit's read (`settled_read::Before::rows`), in their order: each
/// record decoded, each message by its seq.
fn read_back(rows: &[sqlx::sqlite::SqliteRow]) -> Result<Vec<duet_runtime::ReadBack>, StoreError> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let at = RecordAt::of(first)?;
    rows.iter()
        .map(|row| {
            let kind: String = row.try_get(at.kind).map_err(crate::db_error)?;
            if kind == "message" {
                let seq: i64 = row.try_get(at.seq).map_err(crate::db_error)?;
                return Ok(duet_runtime::ReadBack::Held(seq));
            }
            record_at(row, &at, &kind)
                .map(|r| duet_runtime::ReadBack::Entry(duet_runtime::JournalEntry::Record(r)))
        })
        .collect()
}

/// The oldest SQLite this store runs on: its journal insert reads the rows with `jsonb_each`
/// (3.45). The bundled one is newer; a build linked to the system's may not be.
const OLDEST_SQLITE: (u32, u32) = (3, 45);

/// Refuses an SQLite older than [`OLDEST_SQLITE`], saying so, before anything is written (every
/// commit would fail on it).
async fn supported(conn: &mut SqliteConnection) -> Result<(), duet_runtime::StoreError> {
    let version: String = sqlx::query_scalar("SELECT sqlite_version()")
        .fetch_one(&mut *conn)
        .await
        .map_err(crate::db_error)?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found < OLDEST_SQLITE {
        return Err(duet_runtime::StoreError::backend(std::io::Error::other(
            format!(
                "SQLite {version} is too old: duet needs {}.{} or newer (it is linked to the \
             system's SQLite; the bundled one is recent enough)",
                OLDEST_SQLITE.0, OLDEST_SQLITE.1
            ),
        )));
    }
    Ok(())
}

/// `JOURNAL_COLUMNS` read from a row of [`crate::sql::json_rows`] (`r.value`, an array).
const JSON_COLUMNS: &str = "r.value->>0, r.value->>1, r.value->>2, r.value->>3, r.value->>4, \
     r.value->>5, r.value->>6, r.value->>7, r.value->>8, r.value->>9, r.value->>10, r.value->>11, \
     r.value->>12, r.value->>13, r.value->>14";

/// The run's start among `rows` (those with a `part`, [`start_reads!`]'s), if they hold its
/// thread; the other rows are left alone.
fn start_from(
    rows: &[sqlx::sqlite::SqliteRow],
) -> Result<Option<duet_runtime::RunStart>, StoreError> {
    let mut start = duet_runtime::RunStart {
        deadline_override: Some(None),
        ..duet_runtime::RunStart::default()
    };
    // Where a message's columns are, found at the first message (the same for every row).
    let mut message = None;
    for row in rows {
        match row.try_get::<i64, _>("part") {
            Ok(0) => start.thread = Some(thread_from_row(row)?),
            Ok(1) => {
                let at = MessageAt::once(&mut message, row)?;
                start.messages.push(message_at(row, &at)?);
            }
            Ok(2) => start.queue.push(queued_from_row(row)?),
            Ok(_) => {
                let text: String = row.try_get("override").map_err(db_error)?;
                let value = serde_json::from_str(&text).map_err(|_| corrupt("value", &text))?;
                start.deadline_override = Some(Some(value));
            }
            Err(_) => {}
        }
    }
    Ok(start.thread.is_some().then_some(start))
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    /// The settles read finds its partial index (named: a condition the planner cannot match to
    /// the index's is no query plan at all), so a run's start is a seek, not a walk back
    /// through the thread's journal.
    #[tokio::test]
    async fn the_settles_read_finds_its_partial_index() {
        let path = std::env::temp_dir().join(format!("duet-plan-{}.db", uuid::Uuid::now_v7()));
        let store = super::SqliteStore::open(&path).await.expect("open");
        let plan: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {}",
            super::SETTLES
        )))
        .bind("t")
        .bind(10_i64)
        .bind(3_i64)
        .fetch_all(&store.read)
        .await
        .expect("plan")
        .iter()
        .map(|r| r.get::<String, _>("detail"))
        .collect();
        assert!(
            plan.iter()
                .any(|d| d.contains("USING INDEX journal_settles")),
            "{plan:?}"
        );
        drop(store);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[test]
    fn the_json_columns_read_every_journal_column_in_order() {
        let columns = crate::sql::JOURNAL_COLUMNS.split(',').count();
        let read: Vec<String> = super::JSON_COLUMNS
            .split(',')
            .map(|c| c.trim().to_owned())
            .collect();
        let expected: Vec<String> = (0..columns).map(|i| format!("r.value->>{i}")).collect();
        assert_eq!(read, expected);
        let row = crate::batch::journal_rows(&duet_runtime::Commit {
            records: vec![duet_runtime::Record {
                seq: 1,
                body: duet_runtime::RecordBody::TurnCompleted {
                    side: duet_runtime::SideId::A,
                },
                created_at: 2,
            }],
            ..duet_runtime::Commit::default()
        })
        .expect("rows");
        assert_eq!(row[0].len(), columns);
    }
}
