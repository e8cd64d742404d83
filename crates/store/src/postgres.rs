//! The Postgres store: a connection pool; every write transaction locks the thread row
//! (`SELECT … FOR UPDATE`), which serialises a thread's writers across processes.

use sqlx::postgres::{PgPool, PgPoolOptions};

/// The store on a Postgres database.
#[derive(Clone, Debug)]
pub struct PgStore {
    write: PgPool,
    read: PgPool,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

impl PgStore {
    /// Connects to `url` and migrates the database.
    pub async fn connect(url: &str) -> Result<Self, duet_runtime::StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect(url)
            .await
            .map_err(crate::db_error)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| duet_runtime::StoreError::Database(e.to_string()))?;
        Ok(PgStore {
            write: pool.clone(),
            read: pool,
        })
    }

    async fn writer(
        &self,
    ) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, duet_runtime::StoreError> {
        self.write.acquire().await.map_err(crate::db_error)
    }
}

impl PgStore {
    /// A commit as a sequence of statements in one transaction. The row lock comes first, in a
    /// statement of its own, so the statements after it see every enqueue that committed while
    /// this one waited for the lock (each statement of a READ COMMITTED transaction takes a new
    /// snapshot).
    async fn commit_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError> {
        let mut conn = self.writer().await?;
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(db_error)?;
        lease_row(&mut tx, t.id).await?;
        for id in &commit.drained {
            sqlx::query("DELETE FROM queue WHERE id = $1 AND thread = (SELECT num FROM threads WHERE id = $2)")
                .bind(*id)
                .bind(t.id.to_string())
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
        }
        // The thread's new state, fenced by the lease, releasing it when settling with an
        // empty queue, and reporting what waits in the queue: one statement.
        let row = sqlx::query(
            "UPDATE threads SET agent = $1, status = $2, status_text = $3, session = $4, session_open = $5, \
             stop_reason = $6, result = $7, turns_a = $8, turns_b = $9, steps_a = $10, steps_b = $11, \
             steps_total = $12, acting = $13, watermark_a = $14, watermark_b = $15, next_seq = $16, \
             updated_at = $17, \
             lease_owner = CASE WHEN $20 AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = threads.num) \
                           THEN NULL ELSE lease_owner END, \
             lease_expires = CASE WHEN $20 AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = threads.num) \
                           THEN 0 ELSE lease_expires END \
             WHERE id = $18 AND lease_owner = $19 \
             RETURNING num, lease_owner, (SELECT COUNT(*) FROM queue q WHERE q.thread = threads.num) AS waiting",
        )
        .bind(&t.agent)
        .bind(t.status.as_str())
        .bind(&t.status_text)
        .bind(t.session)
        .bind(t.session_open)
        .bind(t.stop_reason.map(StopReason::as_str))
        .bind(&t.result)
        .bind(t.turns_a)
        .bind(t.turns_b)
        .bind(t.steps_a)
        .bind(t.steps_b)
        .bind(t.steps_total)
        .bind(t.acting.map(side_str))
        .bind(t.watermark_a)
        .bind(t.watermark_b)
        .bind(t.next_seq)
        .bind(t.updated_at)
        .bind(t.id.to_string())
        .bind(owner.to_string())
        .bind(commit.settle && commit.enqueue.is_empty())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let Some(row) = row else {
            return Err(StoreError::LeaseLost(t.id));
        };
        let num: i64 = row.try_get("num").map_err(db_error)?;
        let released = row
            .try_get::<Option<String>, _>("lease_owner")
            .map_err(db_error)?
            .is_none();
        let waiting: i64 = row.try_get("waiting").map_err(db_error)?;
        insert_journal(&mut tx, num, &commit.messages, &commit.records).await?;
        for q in &commit.enqueue {
            insert_queued(&mut tx, num, q, t.updated_at).await?;
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
        tx.commit().await.map_err(db_error)?;
        Ok(if released {
            CommitOutcome::Settled
        } else {
            CommitOutcome::Committed {
                queued: waiting > 0 || !commit.enqueue.is_empty(),
            }
        })
    }
}

/// Rows per multi-row INSERT: far below both backends' bind-parameter limits.
const CHUNK: usize = 200;

/// `INSERT INTO table (cols) VALUES ($1, ..), ..` for `rows` rows of `width` columns.
fn insert_sql(head: &str, width: usize, rows: usize) -> String {
    let mut sql = String::from(head);
    for r in 0..rows {
        sql.push_str(if r == 0 { " VALUES (" } else { ", (" });
        for c in 0..width {
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("${}", r * width + c + 1));
        }
        sql.push(')');
    }
    sql
}

/// Writes messages and records into the journal, in as few statements as possible (one
/// for a typical step).
async fn insert_journal(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    num: i64,
    messages: &[Message],
    records: &[Record],
) -> Result<(), StoreError> {
    enum Row<'a> {
        Message(&'a Message),
        Record(&'a Record),
    }
    let rows: Vec<Row<'_>> = messages
        .iter()
        .map(Row::Message)
        .chain(records.iter().map(Row::Record))
        .collect();
    for chunk in rows.chunks(CHUNK) {
        let sql = insert_sql(
            "INSERT INTO journal (thread, seq, kind, session, role, side, content, thinking, tool_calls, \
             tool_call_id, tool_name, tool_status, silent, model, data, created_at)",
            16,
            chunk.len(),
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for row in chunk {
            query = match row {
                Row::Message(m) => {
                    let calls = if m.tool_calls.is_empty() {
                        None
                    } else {
                        Some(
                            serde_json::to_string(&m.tool_calls)
                                .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                        )
                    };
                    query
                        .bind(num)
                        .bind(m.seq)
                        .bind("message")
                        .bind(Some(m.session))
                        .bind(Some(m.role.as_str()))
                        .bind(m.side.map(side_str))
                        .bind(m.content.clone())
                        .bind(m.thinking.clone())
                        .bind(calls)
                        .bind(m.tool_call_id.clone())
                        .bind(m.tool_name.clone())
                        .bind(m.tool_status.map(ToolStatus::as_str))
                        .bind(m.silent)
                        .bind(m.model.clone())
                        .bind(None::<String>)
                        .bind(m.created_at)
                }
                Row::Record(r) => query
                    .bind(num)
                    .bind(r.seq)
                    .bind(r.kind.as_str())
                    .bind(None::<i64>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(false)
                    .bind(None::<String>)
                    .bind(Some(r.data.to_string()))
                    .bind(r.created_at),
            };
        }
        query.execute(&mut **tx).await.map_err(db_error)?;
    }
    Ok(())
}

crate::sql::store_impl!(
    PgStore,
    sqlx::Postgres,
    "BEGIN",
    " FOR UPDATE",
    "SELECT pg_database_size(current_database())"
);
