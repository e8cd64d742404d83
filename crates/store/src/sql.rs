//! The store implementation both backends share, stamped out per backend by `store_impl!`:
//! the SQL text is identical, the row types differ.

use duet_runtime::{Commit, Message, Record, StopReason, StoreError, Thread, side_str};
use uuid::Uuid;

/// A bind value of a batch.
#[derive(Clone)]
pub(crate) enum Arg {
    Int(i64),
    OptInt(Option<i64>),
    Text(Option<String>),
    Bool(bool),
    Ints(Vec<i64>),
}

/// SQL text and its numbered arguments; `$1` is the thread id, `$2` the lease owner, `$3..$19`
/// the thread's columns.
pub(crate) struct Batch {
    pub(crate) sql: String,
    pub(crate) args: Vec<Arg>,
}

impl Batch {
    pub(crate) fn new(t: &Thread, owner: Uuid) -> Self {
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
            Arg::Int(t.turns.a),
            Arg::Int(t.turns.b),
            Arg::Int(t.steps.a),
            Arg::Int(t.steps.b),
            Arg::Int(t.steps_total),
            text(t.acting.map(side_str)),
            Arg::Int(t.watermarks.a),
            Arg::Int(t.watermarks.b),
            Arg::Int(t.next_seq),
            Arg::Int(t.updated_at),
        ];
        Batch {
            sql: String::new(),
            args,
        }
    }

    /// Adds an argument and returns its placeholder.
    pub(crate) fn param(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }

    /// `VALUES (..), (..)` over `rows`, their arguments added.
    pub(crate) fn values(&mut self, rows: Vec<Vec<Arg>>) -> String {
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

/// The journal rows of a commit: its messages, then its records, as batch arguments in the
/// column order of `JOURNAL_COLUMNS` (after `thread`).
pub(crate) fn journal_rows(commit: &Commit) -> Result<Vec<Vec<Arg>>, StoreError> {
    let mut rows: Vec<Vec<Arg>> = Vec::new();
    for m in &commit.messages {
        rows.push(message_row(m)?);
    }
    for r in &commit.records {
        rows.push(record_row(r));
    }
    Ok(rows)
}

/// `journal`'s columns after `thread`.
pub(crate) const JOURNAL_COLUMNS: &str = "seq, kind, session, role, side, content, thinking, tool_calls, \
     tool_call_id, tool_name, tool_status, silent, model, data, created_at";

fn message_row(m: &Message) -> Result<Vec<Arg>, StoreError> {
    let calls = if m.tool_calls.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&m.tool_calls).map_err(|e| StoreError::Corrupt(e.to_string()))?)
    };
    Ok(vec![
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
    ])
}

fn record_row(r: &Record) -> Vec<Arg> {
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
    row
}

/// The `SET` list writing a thread's state from `Batch::new`'s `$3..$19`.
pub(crate) const THREAD_SET: &str = "agent = $3, status = $4, status_text = $5, session = $6, session_open = $7, \
     stop_reason = $8, result = $9, turns_a = $10, turns_b = $11, steps_a = $12, steps_b = $13, \
     steps_total = $14, acting = $15, watermark_a = $16, watermark_b = $17, next_seq = $18, updated_at = $19";

/// Binds a batch's arguments to `query`, in order. `Arg::Ints` (a Postgres array) binds only with
/// `arrays`; SQLite batches never make one.
macro_rules! bind_args {
    ($query:expr, $args:expr) => {
        crate::sql::bind_args!(@ $query, $args, |query, _ints| query)
    };
    ($query:expr, $args:expr, arrays) => {
        crate::sql::bind_args!(@ $query, $args, |query, ints| query.bind(ints))
    };
    (@ $query:expr, $args:expr, |$q:ident, $ints:ident| $bind_ints:expr) => {{
        let mut $q = $query;
        for arg in $args {
            $q = match arg {
                crate::sql::Arg::Int(v) => $q.bind(v),
                crate::sql::Arg::OptInt(v) => $q.bind(v),
                crate::sql::Arg::Text(v) => $q.bind(v),
                crate::sql::Arg::Bool(v) => $q.bind(v),
                crate::sql::Arg::Ints($ints) => $bind_ints,
            };
        }
        $q
    }};
}
pub(crate) use bind_args;

/// The thread columns, in `thread_from_row` order.
macro_rules! thread_cols {
    () => {
        "num, id, key, agent, origin, parent, principal, source, status, status_text, session, session_open, stop_reason, result, \
         turns_a, turns_b, steps_a, steps_b, steps_total, acting, watermark_a, watermark_b, next_seq, \
         lease_owner, lease_expires, created_at, updated_at"
    };
}
pub(crate) use thread_cols;

/// The store port's traits for `$store`, whose `writer()` gives the connection writes go through
/// (`$begin` starts their transactions) and whose `read` pool serves reads. `$lock` is appended
/// to the statement that reads the thread row inside a write transaction (` FOR UPDATE` on
/// Postgres; SQLite's `BEGIN IMMEDIATE` already serialises). `$notify` is an SQL expression over
/// a `threads` row that announces it on the change feed, evaluated by the statement that writes
/// it (Postgres: `pg_notify`, delivered if the transaction commits; SQLite: `NULL`, since it
/// announces in process); after committing, a write also calls the backend's `publish` (a no-op
/// on Postgres), and `changes()` is the backend's `subscribe`. Each backend writes its own
/// `commit_impl`: the shapes differ (statements vs one batch).
macro_rules! store_impl {
    ($store:ident, $db:ty, $begin:literal, $lock:literal, $notify:literal, $size_sql:literal) => {
        use async_trait::async_trait;
        use duet_runtime::{
            Change, ChangeFeed, Child, Commit, CommitOutcome, CommitStore, FeedEvent, JournalEntry, JournalStore, Lease, LeaseStore, Message, NewQueued, NewThread,
            QueueStore, Queued, Record, RecordKind, RegistryStore, Renewal, Role, StopReason, Store, StoreError, Thread, ThreadId,
            ThreadStatus, ThreadStore, ToolStatus, parse_side, side_str,
        };
        use sqlx::Row;
        use uuid::Uuid;

        use crate::db_error;
        use crate::sql::thread_cols;

        crate::rows::decoders!($db);

        /// A thread row's lease columns, and what the change feed says about it.
        struct LeaseRow {
            num: i64,
            owner: Option<String>,
            expires: i64,
            /// The thread as of this row, for the change feed.
            change: Change,
        }

        /// Locks (on Postgres) and reads the lease columns of thread `id` inside `tx`.
        async fn lease_row(tx: &mut sqlx::Transaction<'_, $db>, id: ThreadId) -> Result<LeaseRow, StoreError> {
            let row = sqlx::query(concat!(
                "SELECT num, lease_owner, lease_expires, next_seq, status FROM threads WHERE id = $1",
                $lock
            ))
            .bind(id.to_string())
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
            let status: String = row.try_get("status").map_err(db_error)?;
            Ok(LeaseRow {
                num: row.try_get("num").map_err(db_error)?,
                owner: row.try_get("lease_owner").map_err(db_error)?,
                expires: row.try_get("lease_expires").map_err(db_error)?,
                change: Change {
                    thread: id,
                    seq: row.try_get::<i64, _>("next_seq").map_err(db_error)? - 1,
                    status: ThreadStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?,
                },
            })
        }

        fn lease_free(owner: &Option<String>, expires: i64, lease: &Lease) -> bool {
            match owner {
                None => true,
                Some(o) => expires < lease.now || *o == lease.owner.to_string(),
            }
        }

        #[async_trait]
        impl ThreadStore for $store {
            async fn open_thread(&self, key: &str, new: NewThread<'_>) -> Result<Thread, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let created = sqlx::query(concat!(
                    "INSERT INTO threads (id, key, agent, origin, parent, principal, source, status, created_at, updated_at) \
                     VALUES ($1, $2, $3, $3, $4, $5, $6, 'idle', $7, $7) ON CONFLICT (key) DO NOTHING RETURNING ",
                    $notify
                ))
                .bind(new.id.to_string())
                .bind(key)
                .bind(new.agent)
                .bind(new.parent.map(|p| p.to_string()))
                .bind(new.principal)
                .bind(new.source)
                .bind(new.now)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected()
                    == 1;
                let row = sqlx::query(concat!("SELECT ", thread_cols!(), " FROM threads WHERE key = $1"))
                    .bind(key)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
                let thread = thread_from_row(&row)?;
                if created {
                    self.publish(Change { thread: thread.id, seq: thread.next_seq - 1, status: thread.status });
                }
                Ok(thread)
            }

            async fn thread(&self, key: &str) -> Result<Option<Thread>, StoreError> {
                let row = sqlx::query(concat!("SELECT ", thread_cols!(), " FROM threads WHERE key = $1"))
                    .bind(key)
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(thread_from_row).transpose()
            }

            async fn thread_by_id(&self, id: ThreadId) -> Result<Option<Thread>, StoreError> {
                let row = sqlx::query(concat!("SELECT ", thread_cols!(), " FROM threads WHERE id = $1"))
                    .bind(id.to_string())
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(thread_from_row).transpose()
            }

            async fn threads(&self, status: Option<ThreadStatus>) -> Result<Vec<Thread>, StoreError> {
                let rows = match status {
                    Some(s) => sqlx::query(concat!("SELECT ", thread_cols!(), " FROM threads WHERE status = $1 ORDER BY num"))
                        .bind(s.as_str())
                        .fetch_all(&self.read)
                        .await,
                    None => sqlx::query(concat!("SELECT ", thread_cols!(), " FROM threads ORDER BY num"))
                        .fetch_all(&self.read)
                        .await,
                }
                .map_err(db_error)?;
                rows.iter().map(thread_from_row).collect()
            }

            async fn terminate(&self, id: ThreadId, now: i64) -> Result<(), StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let LeaseRow { num, change, .. } = lease_row(&mut tx, id).await?;
                sqlx::query(concat!(
                    "UPDATE threads SET status = 'terminated', lease_owner = NULL, lease_expires = 0, \
                     abort_requested = FALSE, updated_at = $1 WHERE num = $2 RETURNING ",
                    $notify
                ))
                .bind(now)
                .bind(num)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
                sqlx::query("DELETE FROM queue WHERE thread = $1").bind(num).execute(&mut *tx).await.map_err(db_error)?;
                sqlx::query("UPDATE children SET status = 'terminated' WHERE child = $1")
                    .bind(id.to_string())
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
                self.publish(Change { status: ThreadStatus::Terminated, ..change });
                Ok(())
            }
        }

        #[async_trait]
        impl JournalStore for $store {
            async fn messages(&self, id: ThreadId) -> Result<Vec<Message>, StoreError> {
                let rows = sqlx::query(
                    "SELECT j.* FROM journal j JOIN threads t ON t.num = j.thread WHERE t.id = $1 AND j.kind = 'message' \
                     ORDER BY j.seq",
                )
                .bind(id.to_string())
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                rows.iter().map(message_from_row).collect()
            }

            async fn records(&self, id: ThreadId) -> Result<Vec<Record>, StoreError> {
                let rows = sqlx::query(
                    "SELECT j.seq, j.kind, j.data, j.created_at FROM journal j JOIN threads t ON t.num = j.thread \
                     WHERE t.id = $1 AND j.kind <> 'message' ORDER BY j.seq",
                )
                .bind(id.to_string())
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                rows.iter().map(record_from_row).collect()
            }

            async fn journal_since(&self, id: ThreadId, seq: i64) -> Result<Vec<JournalEntry>, StoreError> {
                let rows = sqlx::query(
                    "SELECT j.* FROM journal j JOIN threads t ON t.num = j.thread WHERE t.id = $1 AND j.seq > $2 ORDER BY j.seq",
                )
                .bind(id.to_string())
                .bind(seq)
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|row| {
                        let kind: String = row.try_get("kind").map_err(db_error)?;
                        if kind == "message" {
                            message_from_row(row).map(JournalEntry::Message)
                        } else {
                            record_from_row(row).map(JournalEntry::Record)
                        }
                    })
                    .collect()
            }
        }

        #[async_trait]
        impl QueueStore for $store {
            async fn enqueue(&self, id: ThreadId, message: NewQueued, claim: Option<Lease>, now: i64) -> Result<bool, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let LeaseRow { num, owner, expires, change } = lease_row(&mut tx, id).await?;
                insert_queued(&mut tx, num, &message, now, true).await?;
                let mut claimed = false;
                if let Some(lease) = claim {
                    if lease_free(&owner, expires, &lease) {
                        sqlx::query("UPDATE threads SET lease_owner = $1, lease_expires = $2, abort_requested = FALSE WHERE num = $3")
                            .bind(lease.owner.to_string())
                            .bind(lease.until)
                            .bind(num)
                            .execute(&mut *tx)
                            .await
                            .map_err(db_error)?;
                        claimed = true;
                    }
                }
                tx.commit().await.map_err(db_error)?;
                self.publish(change);
                Ok(claimed)
            }

            async fn deliver_if_free(&self, id: ThreadId, message: NewQueued, lease: Lease) -> Result<bool, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let LeaseRow { num, owner, expires, change } = lease_row(&mut tx, id).await?;
                if !lease_free(&owner, expires, &lease) {
                    // Roll back explicitly: a transaction dropped on SQLite's single write
                    // connection leaves its rollback for later, and the next user of the
                    // connection would wait on it.
                    tx.rollback().await.map_err(db_error)?;
                    return Ok(false);
                }
                sqlx::query("UPDATE threads SET lease_owner = $1, lease_expires = $2, abort_requested = FALSE WHERE num = $3")
                    .bind(lease.owner.to_string())
                    .bind(lease.until)
                    .bind(num)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                insert_queued(&mut tx, num, &message, lease.now, true).await?;
                tx.commit().await.map_err(db_error)?;
                self.publish(change);
                Ok(true)
            }

            async fn enqueue_if_running(&self, id: ThreadId, message: NewQueued, now: i64) -> Result<Option<Uuid>, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let LeaseRow { num, owner, expires, change } = lease_row(&mut tx, id).await?;
                let run = match owner {
                    Some(o) if expires >= now => o,
                    _ => {
                        tx.rollback().await.map_err(db_error)?;
                        return Ok(None);
                    }
                };
                insert_queued(&mut tx, num, &message, now, true).await?;
                tx.commit().await.map_err(db_error)?;
                self.publish(change);
                Uuid::parse_str(&run).map(Some).map_err(|_| corrupt("lease owner", &run))
            }

            async fn queue(&self, id: ThreadId) -> Result<Vec<Queued>, StoreError> {
                let rows = sqlx::query(
                    "SELECT q.id, q.role, q.side, q.content, q.human, q.silent, q.follow_up, q.created_at FROM queue q \
                     JOIN threads t ON t.num = q.thread WHERE t.id = $1 ORDER BY q.id",
                )
                .bind(id.to_string())
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|row| {
                        let role: String = row.try_get("role").map_err(db_error)?;
                        let side: String = row.try_get("side").map_err(db_error)?;
                        Ok(Queued {
                            id: row.try_get("id").map_err(db_error)?,
                            role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
                            side: parse_side(&side).ok_or_else(|| corrupt("side", &side))?,
                            content: row.try_get("content").map_err(db_error)?,
                            human: row.try_get("human").map_err(db_error)?,
                            silent: row.try_get("silent").map_err(db_error)?,
                            follow_up: row.try_get("follow_up").map_err(db_error)?,
                            created_at: row.try_get("created_at").map_err(db_error)?,
                        })
                    })
                    .collect()
            }
        }

        #[async_trait]
        impl LeaseStore for $store {
            async fn claim(&self, id: ThreadId, lease: Lease) -> Result<bool, StoreError> {
                let done = sqlx::query(
                    "UPDATE threads SET lease_owner = $1, lease_expires = $2, abort_requested = FALSE \
                     WHERE id = $3 AND (lease_owner IS NULL OR lease_expires < $4 OR lease_owner = $1)",
                )
                .bind(lease.owner.to_string())
                .bind(lease.until)
                .bind(id.to_string())
                .bind(lease.now)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn renew(&self, id: ThreadId, lease: Lease) -> Result<Renewal, StoreError> {
                let row = sqlx::query(
                    "UPDATE threads SET lease_expires = $1 WHERE id = $2 AND lease_owner = $3 RETURNING abort_requested",
                )
                .bind(lease.until)
                .bind(id.to_string())
                .bind(lease.owner.to_string())
                .fetch_optional(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(match row {
                    None => Renewal::Lost,
                    Some(row) => Renewal::Held { abort_requested: row.try_get("abort_requested").map_err(db_error)? },
                })
            }

            async fn request_abort(&self, id: ThreadId, now: i64) -> Result<Option<Uuid>, StoreError> {
                let row = sqlx::query(
                    "UPDATE threads SET abort_requested = TRUE \
                     WHERE id = $1 AND lease_owner IS NOT NULL AND lease_expires >= $2 RETURNING lease_owner",
                )
                .bind(id.to_string())
                .bind(now)
                .fetch_optional(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                match row {
                    None => Ok(None),
                    Some(row) => {
                        let owner: String = row.try_get("lease_owner").map_err(db_error)?;
                        Uuid::parse_str(&owner).map(Some).map_err(|_| corrupt("lease owner", &owner))
                    }
                }
            }

            async fn recoverable(&self, now: i64) -> Result<Vec<ThreadId>, StoreError> {
                let rows = sqlx::query(
                    "SELECT id FROM threads WHERE (lease_owner IS NULL OR lease_expires < $1) AND \
                     (status = 'running' OR EXISTS (SELECT 1 FROM queue q WHERE q.thread = threads.num)) ORDER BY num",
                )
                .bind(now)
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|row| {
                        let id: String = row.try_get("id").map_err(db_error)?;
                        Uuid::parse_str(&id).map_err(|_| corrupt("thread id", &id))
                    })
                    .collect()
            }
        }

        #[async_trait]
        impl RegistryStore for $store {
            async fn put_child(&self, c: &Child) -> Result<(), StoreError> {
                sqlx::query(
                    "INSERT INTO children (child, parent, relationship, owner, agent, name, blocking, explicit, status, created_at, arguments, env) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                     ON CONFLICT (child) DO UPDATE SET status = excluded.status",
                )
                .bind(c.child.to_string())
                .bind(c.parent.to_string())
                .bind(&c.relationship)
                .bind(side_str(c.owner))
                .bind(&c.agent)
                .bind(&c.name)
                .bind(c.blocking)
                .bind(c.explicit)
                .bind(&c.status)
                .bind(c.created_at)
                .bind(c.arguments.to_string())
                .bind(serde_json::to_string(&c.env).unwrap_or_else(|_| "{}".to_owned()))
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            async fn set_child_status(&self, child: ThreadId, status: &str) -> Result<bool, StoreError> {
                let done = sqlx::query("UPDATE children SET status = $1 WHERE child = $2")
                    .bind(status)
                    .bind(child.to_string())
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn child(&self, child: ThreadId) -> Result<Option<Child>, StoreError> {
                let row = sqlx::query("SELECT * FROM children WHERE child = $1")
                    .bind(child.to_string())
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(child_from_row).transpose()
            }

            async fn children(&self, parent: ThreadId) -> Result<Vec<Child>, StoreError> {
                let rows = sqlx::query("SELECT * FROM children WHERE parent = $1 ORDER BY created_at, child")
                    .bind(parent.to_string())
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(child_from_row).collect()
            }
        }

        #[async_trait]
        impl CommitStore for $store {
            async fn commit(&self, t: &Thread, owner: Uuid, commit: Commit) -> Result<CommitOutcome, StoreError> {
                self.commit_impl(t, owner, commit).await
            }

            async fn value(&self, id: ThreadId, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
                let row = sqlx::query(
                    "SELECT v.value FROM thread_values v JOIN threads t ON t.num = v.thread WHERE t.id = $1 AND v.key = $2",
                )
                .bind(id.to_string())
                .bind(key)
                .fetch_optional(&self.read)
                .await
                .map_err(db_error)?;
                match row {
                    None => Ok(None),
                    Some(row) => {
                        let text: String = row.try_get("value").map_err(db_error)?;
                        serde_json::from_str(&text).map(Some).map_err(|_| corrupt("value", &text))
                    }
                }
            }
        }

        impl ChangeFeed for $store {
            fn changes(&self) -> futures::stream::BoxStream<'static, FeedEvent> {
                self.subscribe()
            }
        }

        #[async_trait]
        impl Store for $store {
            async fn size_bytes(&self) -> Result<i64, StoreError> {
                let row = sqlx::query($size_sql).fetch_one(&self.read).await.map_err(db_error)?;
                row.try_get::<i64, _>(0).map_err(db_error)
            }
        }

        /// What a commit's thread update returned: no row means the lease was lost (and nothing
        /// was written); a row with no owner means the lease was released.
        fn outcome(
            row: Option<&<$db as sqlx::Database>::Row>,
            t: &Thread,
            commit: &Commit,
        ) -> Result<CommitOutcome, StoreError> {
            let Some(row) = row else {
                return Err(StoreError::LeaseLost(t.id));
            };
            let released = row.try_get::<Option<String>, _>("lease_owner").map_err(db_error)?.is_none();
            let waiting: i64 = row.try_get("waiting").map_err(db_error)?;
            Ok(if released {
                CommitOutcome::Settled
            } else {
                CommitOutcome::Committed { queued: waiting > 0 || !commit.enqueue.is_empty() }
            })
        }

        /// A queue row's values after `thread`, for a batch.
        #[allow(dead_code)]
        fn queued_row(q: &NewQueued, now: i64) -> Vec<crate::sql::Arg> {
            use crate::sql::Arg;
            vec![
                Arg::Text(Some(q.role.as_str().into())),
                Arg::Text(Some(side_str(q.side).into())),
                Arg::Text(Some(q.content.clone())),
                Arg::Bool(q.human),
                Arg::Bool(q.silent),
                Arg::Bool(q.follow_up),
                Arg::Int(now),
            ]
        }

        /// Queues `q` on thread row `num` inside `tx`; with `announce`, the insert also announces
        /// the thread on the change feed (Postgres: `pg_notify`, delivered if `tx` commits).
        async fn insert_queued(
            tx: &mut sqlx::Transaction<'_, $db>,
            num: i64,
            q: &NewQueued,
            now: i64,
            announce: bool,
        ) -> Result<(), StoreError> {
            const INSERT: &str = "INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
            const ANNOUNCED: &str = concat!(
                "INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING (SELECT ",
                $notify,
                " FROM threads WHERE num = $1)"
            );
            sqlx::query(if announce { ANNOUNCED } else { INSERT })
            .bind(num)
            .bind(q.role.as_str())
            .bind(side_str(q.side))
            .bind(&q.content)
            .bind(q.human)
            .bind(q.silent)
            .bind(q.follow_up)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
            Ok(())
        }
    };
}
pub(crate) use store_impl;
