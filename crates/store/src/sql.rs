//! The store implementation both backends share, stamped out per backend by `store_impl!`:
//! the SQL text is identical, the row types differ.

pub(crate) use crate::batch::{
    Arg, Batch, JOURNAL_COLUMNS, QUEUED_COLUMNS, THREAD_SET, journal_rows, json_rows, queued_row,
};

/// The store port's traits for `$store`, whose `writer()` gives the connection writes go through
/// (`$begin` starts their transactions) and whose `read` pool serves reads. `$lock` is appended
/// to the statement that reads the thread row inside a write transaction (` FOR UPDATE` on
/// Postgres; SQLite's `BEGIN IMMEDIATE` already serialises), and `$skip_locked` to the one that
/// picks the threads `claim_runnable` claims (` FOR UPDATE SKIP LOCKED` on Postgres, so
/// concurrent claimers split the work; nothing on SQLite). `$notify` is an SQL expression over
/// a `threads` row that announces it on the change feed, evaluated by the statement that writes
/// it (Postgres: `pg_notify`, delivered if the transaction commits; SQLite: `NULL`, since it
/// announces in process); after committing, a write also calls the backend's `publish` (a no-op
/// on Postgres), and `changes()` is the backend's `subscribe`. `$wake` does for the timer table
/// what `$notify` does for threads (see `timers_sql::timers_impl!`). Each backend writes its own
/// `commit_impl`: the shapes differ (statements vs one batch), and so do the timers it writes.
/// `$session_start` is the backend's query of where a session starts, `$settles` its read of a
/// run's settles (see `reads_sql::reads_impl!`).
macro_rules! store_impl {
    ($store:ident, $db:ty, $begin:literal, $lock:literal, $skip_locked:literal, $notify:expr, $wake:expr, $size_sql:literal, $session_start:expr, $settles:expr) => {
        use async_trait::async_trait;
        use duet_runtime::{
            Change, ChangeFeed, Child, Commit, CommitOutcome, CommitStore, FeedEvent, JournalEntry, JournalStore, Lease, LeaseStore, Message, NewQueued, NewThread,
            AnswerOutcome, Answered, AnsweredQuery, FirstAnswer, Park, QueueStore, Queued, Record, RecordBody, RegistryStore, ChildStatus, ToolReply, Renewal, Role, StopReason, Store, StoreError, Thread, ThreadId,
            ThreadQuery, ThreadStatus, ThreadStore, ToolStatus, parse_side, side_str,
        };
        use duet_server_store::{ApiKey, KeyStore};
        use sqlx::Row;
        use uuid::Uuid;

        use crate::db_error;
        use crate::fragments::thread_cols;

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

        /// Gives thread row `num`'s lease to `lease` inside `tx` (a fresh claim clears any abort
        /// request).
        async fn take_lease(tx: &mut sqlx::Transaction<'_, $db>, num: i64, lease: &Lease) -> Result<(), StoreError> {
            sqlx::query("UPDATE threads SET lease_owner = $1, lease_expires = $2, abort_requested = FALSE WHERE num = $3")
                .bind(lease.owner.to_string())
                .bind(lease.until)
                .bind(num)
                .execute(&mut **tx)
                .await
                .map_err(db_error)?;
            Ok(())
        }

        /// Takes row `num`'s lease for `claim` if it is free as read (`owner`, `expires`), then
        /// commits `tx`: whether the lease was taken. The caller announces the change.
        async fn commit_claiming(
            mut tx: sqlx::Transaction<'_, $db>,
            num: i64,
            owner: &Option<String>,
            expires: i64,
            claim: &Lease,
        ) -> Result<bool, StoreError> {
            let claimed = lease_free(owner, expires, claim);
            if claimed {
                take_lease(&mut tx, num, claim).await?;
            }
            tx.commit().await.map_err(db_error)?;
            Ok(claimed)
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
                ));
                let created = crate::fragments::bind_new_thread!(created, key, new)
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

            async fn list_threads(&self, query: &ThreadQuery<'_>) -> Result<Vec<Thread>, StoreError> {
                list_threads(&self.read, query).await
            }

            async fn list_listed(&self, query: &ThreadQuery<'_>, only: Option<ThreadId>) -> Result<Vec<duet_runtime::Listed>, StoreError> {
                list_listed(&self.read, query, only).await
            }

            async fn status_counts(&self) -> Result<duet_runtime::StatusCounts, StoreError> {
                // Both read `threads_status_id`: a count per status, the oldest park's time.
                let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM threads GROUP BY status ORDER BY status")
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                let mut by_status = Vec::with_capacity(rows.len());
                for row in &rows {
                    let status: String = row.try_get("status").map_err(db_error)?;
                    let n: i64 = row.try_get("n").map_err(db_error)?;
                    let status = ThreadStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?;
                    by_status.push((status, u64::try_from(n).unwrap_or_default()));
                }
                let oldest_awaiting: Option<i64> = sqlx::query_scalar("SELECT MIN(updated_at) FROM threads WHERE status = 'awaiting_human'")
                    .fetch_one(&self.read)
                    .await
                    .map_err(db_error)?;
                Ok(duet_runtime::StatusCounts { by_status, oldest_awaiting })
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
                // Its pending timers will never run: cancelled with it (one being fired finds
                // the thread terminated and fails).
                sqlx::query("UPDATE timers SET status = 'cancelled', updated_at = $1 WHERE thread = $2 AND status = 'pending'")
                    .bind(now)
                    .bind(num)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
                self.publish(Change { status: ThreadStatus::Terminated, ..change });
                Ok(())
            }
        }

        crate::reads_sql::reads_impl!($store, $db, $session_start, $settles);

        crate::answers_sql::answers_impl!($db);

        crate::queue_sql::queue_impl!($store, $db, $begin);

        crate::leases_sql::lease_impl!($store, $db, $begin, $skip_locked);

        crate::keys_sql::keys_impl!($store, $db);

        crate::push_sql::push_impl!($store, $db, $begin);

        crate::notify_sql::notify_impl!($store, $db, $begin, $skip_locked);

        crate::health_sql::health_impl!($store);

        crate::timers_sql::timers_impl!($store, $db, $begin, $lock, $skip_locked, $wake);

        #[async_trait]
        impl RegistryStore for $store {
            async fn put_child(&self, c: &Child) -> Result<(), StoreError> {
                sqlx::query(
                    "INSERT INTO children (child, parent, relationship, owner, agent, name, blocking, explicit, status, created_at, arguments, env, status_text, awaiting) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
                     ON CONFLICT (child) DO UPDATE SET status = excluded.status, awaiting = excluded.awaiting",
                )
                .bind(c.child.to_string())
                .bind(c.parent.to_string())
                .bind(&c.relationship)
                .bind(side_str(c.owner))
                .bind(&c.agent)
                .bind(&c.name)
                .bind(c.blocking)
                .bind(c.explicit)
                .bind(c.status.as_str())
                .bind(c.created_at)
                .bind(c.arguments.to_string())
                .bind(serde_json::to_string(&c.env).unwrap_or_else(|_| "{}".to_owned()))
                .bind(&c.status_text)
                .bind(&c.awaiting)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            async fn set_child_status(&self, child: ThreadId, status: ChildStatus) -> Result<bool, StoreError> {
                let done = sqlx::query("UPDATE children SET status = $1 WHERE child = $2")
                    .bind(status.as_str())
                    .bind(child.to_string())
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn set_child_status_text(&self, child: ThreadId, text: &str) -> Result<bool, StoreError> {
                let done = sqlx::query("UPDATE children SET status_text = $1 WHERE child = $2")
                    .bind(text)
                    .bind(child.to_string())
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn set_awaiting(&self, child: ThreadId, call: Option<&str>) -> Result<bool, StoreError> {
                let done = sqlx::query("UPDATE children SET awaiting = $1 WHERE child = $2")
                    .bind(call)
                    .bind(child.to_string())
                    .execute(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn resolve_await(
                &self,
                child: ThreadId,
                call: &str,
                parent: ThreadId,
                reply: NewQueued,
                claim: Lease,
            ) -> Result<Option<bool>, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                // The parent's row first: the lock order of every other write (enqueue, commit).
                let LeaseRow { num, owner, expires, change } = lease_row(&mut tx, parent).await?;
                let cleared = sqlx::query("UPDATE children SET awaiting = NULL WHERE child = $1 AND awaiting = $2")
                    .bind(child.to_string())
                    .bind(call)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if cleared.rows_affected() == 0 {
                    tx.rollback().await.map_err(db_error)?;
                    return Ok(None);
                }
                if let Err(e) = insert_queued(&mut tx, parent, num, &reply, claim.now, true).await {
                    tx.rollback().await.map_err(db_error)?;
                    return Err(e);
                }
                let claimed = commit_claiming(tx, num, &owner, expires, &claim).await?;
                self.publish(change);
                Ok(Some(claimed))
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

            async fn commit_reading(
                &self,
                t: &Thread,
                owner: Uuid,
                commit: Commit,
                session: i64,
            ) -> Result<(CommitOutcome, Option<Vec<duet_runtime::ReadBack>>), StoreError> {
                self.commit_reading_impl(t, owner, commit, session).await
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

            async fn run_start(&self, id: ThreadId) -> Result<duet_runtime::RunStart, StoreError> {
                self.run_start_impl(id).await
            }
        }

        /// Queues `q` on thread row `num` inside `tx`; with `announce`, the insert also announces
        /// the thread on the change feed (Postgres: `pg_notify`, delivered if `tx` commits).
        async fn insert_queued(
            tx: &mut sqlx::Transaction<'_, $db>,
            id: ThreadId,
            num: i64,
            q: &NewQueued,
            now: i64,
            announce: bool,
        ) -> Result<(), StoreError> {
            // A caller-chosen message id is a key of its own: a second delivery with it finds
            // the key taken and nothing is queued (the caller rolls the transaction back).
            if let Some(message_id) = &q.message_id {
                let taken = sqlx::query(
                    "INSERT INTO deliveries (thread, message_id, created_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (thread, message_id) DO NOTHING",
                )
                .bind(num)
                .bind(message_id)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map_err(db_error)?
                .rows_affected()
                    == 0;
                if taken {
                    return Err(StoreError::Duplicate {
                        thread: id,
                        message_id: message_id.clone(),
                    });
                }
            }
            const INSERT: &str = "INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace, message_id, attachments) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";
            const ANNOUNCED: &str = concat!(
                "INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace, message_id, attachments) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING (SELECT ",
                $notify,
                " FROM threads WHERE num = $1)"
            );
            sqlx::query(if announce { ANNOUNCED } else { INSERT })
            .bind(num)
            .bind(q.role.as_str())
            .bind(side_str(q.side))
            // No NUL is stored (`duet_runtime::nul`).
            .bind(duet_runtime::nul::cleaned(&q.content))
            .bind(q.human)
            .bind(q.silent)
            .bind(q.follow_up)
            .bind(now)
            .bind(q.tool.as_ref().map(|r| duet_runtime::nul::cleaned(&r.call_id)))
            .bind(q.tool.as_ref().map(|r| duet_runtime::nul::cleaned(&r.name)))
            .bind(q.tool.as_ref().map(|r| r.status.as_str()))
            .bind(if q.images.is_empty() { None } else { Some(serde_json::json!(q.images).to_string()) })
            .bind(q.trace.as_deref())
            .bind(q.message_id.as_deref())
            .bind(crate::fragments::attachments_json(&q.attachments))
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
            Ok(())
        }
    };
}
pub(crate) use store_impl;
