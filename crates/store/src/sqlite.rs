//! The SQLite store: a file in WAL mode. Writes go through one connection (held behind a mutex,
//! not a pool: a pool checkout costs as much as a statement) and start with `BEGIN IMMEDIATE`, so
//! a write transaction never has to upgrade a read lock (which fails at once with `SQLITE_BUSY`
//! under WAL); reads use a small pool of their own.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// The store on one SQLite file.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    write: Arc<Mutex<SqliteConnection>>,
    read: SqlitePool,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` and migrates it.
    pub async fn open(path: &Path) -> Result<Self, duet_runtime::StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                duet_runtime::StoreError::Database(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let mut write = options.connect().await.map_err(crate::db_error)?;
        MIGRATOR
            .run(&mut write)
            .await
            .map_err(|e| duet_runtime::StoreError::Database(e.to_string()))?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await
            .map_err(crate::db_error)?;
        Ok(SqliteStore {
            write: Arc::new(Mutex::new(write)),
            read,
        })
    }

    async fn writer(&self) -> Result<OwnedMutexGuard<SqliteConnection>, duet_runtime::StoreError> {
        Ok(self.write.clone().lock_owned().await)
    }
}

crate::sql::store_impl!(
    SqliteStore,
    sqlx::Sqlite,
    "BEGIN IMMEDIATE",
    "",
    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
);

impl SqliteStore {
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
        let mut batch = Batch::new(t, owner);
        batch.sql.push_str("BEGIN IMMEDIATE;\n");
        for id in &commit.drained {
            let p = batch.param(Arg::Int(*id));
            batch.sql.push_str(&format!(
                "DELETE FROM queue WHERE id = {p} AND thread = (SELECT num FROM threads WHERE id = $1 AND lease_owner = $2);\n"
            ));
        }
        let mut rows: Vec<Vec<Arg>> = Vec::new();
        for m in &commit.messages {
            let calls = if m.tool_calls.is_empty() {
                None
            } else {
                Some(
                    serde_json::to_string(&m.tool_calls)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                )
            };
            rows.push(vec![
                Arg::Int(m.seq),
                Arg::Text(Some("message".into())),
                Arg::OptInt(Some(m.session)),
                Arg::Text(Some(m.role.as_str().into())),
                Arg::Text(m.side.map(|s| side_str(s).into())),
                Arg::Text(m.content.clone()),
                Arg::Text(m.thinking.clone()),
                Arg::Text(calls),
                Arg::Text(m.tool_call_id.clone()),
                Arg::Text(m.tool_name.clone()),
                Arg::Text(m.tool_status.map(|s| s.as_str().into())),
                Arg::Bool(m.silent),
                Arg::Text(m.model.clone()),
                Arg::Text(None),
                Arg::Int(m.created_at),
            ]);
        }
        for r in &commit.records {
            let mut row = vec![
                Arg::Int(r.seq),
                Arg::Text(Some(r.kind.as_str().into())),
                Arg::OptInt(None),
            ];
            row.extend((0..8).map(|_| Arg::Text(None)));
            row.extend([
                Arg::Bool(false),
                Arg::Text(None),
                Arg::Text(Some(r.data.to_string())),
                Arg::Int(r.created_at),
            ]);
            rows.push(row);
        }
        for chunk in rows.chunks(500) {
            let values = batch.values(chunk.to_vec());
            batch.sql.push_str(&format!(
                "INSERT INTO journal (thread, seq, kind, session, role, side, content, thinking, tool_calls, \
                 tool_call_id, tool_name, tool_status, silent, model, data, created_at) \
                 SELECT t.num, v.* FROM threads t, ({values}) v WHERE t.id = $1 AND t.lease_owner = $2;\n"
            ));
        }
        for q in &commit.enqueue {
            let values = batch.values(vec![vec![
                Arg::Text(Some(q.role.as_str().into())),
                Arg::Text(Some(side_str(q.side).into())),
                Arg::Text(Some(q.content.clone())),
                Arg::Bool(q.human),
                Arg::Bool(q.silent),
                Arg::Int(t.updated_at),
            ]]);
            batch.sql.push_str(&format!(
                "INSERT INTO queue (thread, role, side, content, human, silent, created_at) \
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
                         WHERE id = $1 AND lease_owner = $2 ON CONFLICT (thread, key) DO UPDATE SET value = excluded.value;\n"
                    ));
                }
                None => batch.sql.push_str(&format!(
                    "DELETE FROM thread_values WHERE key = {k} AND thread = (SELECT num FROM threads WHERE id = $1 AND lease_owner = $2);\n"
                )),
            }
        }
        let settle = commit.settle && commit.enqueue.is_empty();
        batch.sql.push_str(&format!(
            "UPDATE threads SET agent = $3, status = $4, status_text = $5, session = $6, session_open = $7, \
             stop_reason = $8, result = $9, turns_a = $10, turns_b = $11, steps_a = $12, steps_b = $13, \
             steps_total = $14, acting = $15, watermark_a = $16, watermark_b = $17, next_seq = $18, updated_at = $19, \
             lease_owner = CASE WHEN {settle} AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = threads.num) \
                           THEN NULL ELSE lease_owner END, \
             lease_expires = CASE WHEN {settle} AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = threads.num) \
                           THEN 0 ELSE lease_expires END \
             WHERE id = $1 AND lease_owner = $2 \
             RETURNING lease_owner, (SELECT COUNT(*) FROM queue q WHERE q.thread = threads.num) AS waiting;\n\
             COMMIT;",
            settle = i32::from(settle),
        ));

        let mut conn = self.writer().await?;
        let mut query = sqlx::query(sqlx::AssertSqlSafe(batch.sql));
        for arg in batch.args {
            query = match arg {
                Arg::Int(v) => query.bind(v),
                Arg::OptInt(v) => query.bind(v),
                Arg::Text(v) => query.bind(v),
                Arg::Bool(v) => query.bind(v),
            };
        }
        let rows = match query.fetch_all(&mut *conn).await {
            Ok(rows) => rows,
            Err(e) => {
                // A statement failed mid-batch: the transaction is still open. Undo it.
                let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
                return Err(db_error(e));
            }
        };
        let Some(row) = rows.first() else {
            return Err(StoreError::LeaseLost(t.id));
        };
        let released = row
            .try_get::<Option<String>, _>("lease_owner")
            .map_err(db_error)?
            .is_none();
        let waiting: i64 = row.try_get("waiting").map_err(db_error)?;
        Ok(if released {
            CommitOutcome::Settled
        } else {
            CommitOutcome::Committed {
                queued: waiting > 0 || !commit.enqueue.is_empty(),
            }
        })
    }
}

/// A bind value of a batch.
#[derive(Clone)]
enum Arg {
    Int(i64),
    OptInt(Option<i64>),
    Text(Option<String>),
    Bool(bool),
}

/// SQL text and its numbered arguments; `$1` is the thread id, `$2` the lease owner, `$3..$19`
/// the thread's columns.
struct Batch {
    sql: String,
    args: Vec<Arg>,
}

impl Batch {
    fn new(t: &Thread, owner: Uuid) -> Self {
        let text = |s: Option<&str>| Arg::Text(s.map(str::to_owned));
        let args = vec![
            text(Some(&t.id.to_string())),
            text(Some(&owner.to_string())),
            text(Some(&t.agent)),
            text(Some(t.status.as_str())),
            text(t.status_text.as_deref()),
            Arg::Int(t.session),
            Arg::Bool(t.session_open),
            text(t.stop_reason.map(StopReason::as_str)),
            text(t.result.as_deref()),
            Arg::Int(t.turns_a),
            Arg::Int(t.turns_b),
            Arg::Int(t.steps_a),
            Arg::Int(t.steps_b),
            Arg::Int(t.steps_total),
            text(t.acting.map(side_str)),
            Arg::Int(t.watermark_a),
            Arg::Int(t.watermark_b),
            Arg::Int(t.next_seq),
            Arg::Int(t.updated_at),
        ];
        Batch {
            sql: String::new(),
            args,
        }
    }

    /// Adds an argument and returns its placeholder.
    fn param(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }

    /// `VALUES (..), (..)` over `rows`, their arguments added.
    fn values(&mut self, rows: Vec<Vec<Arg>>) -> String {
        let mut out = String::from("VALUES ");
        for (i, row) in rows.into_iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push('(');
            for (j, arg) in row.into_iter().enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                out.push_str(&self.param(arg));
            }
            out.push(')');
        }
        out
    }
}
