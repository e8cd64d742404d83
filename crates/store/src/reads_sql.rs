//! The reads of the shared store implementation that page: `JournalStore` (the journal whole,
//! from a cursor, a page at a time, the last message) and the thread listing `ThreadStore`'s
//! `list_threads` and `list_listed` call, stamped out inside `store_impl!` with the decoders it defines there.

use duet_runtime::{ParentFilter, ThreadQuery};

/// A run's settles below a seq, newest first (`$1` thread id, `$2` the seq, `$3` the limit),
/// through the journal named `$journal` (on SQLite, `journal j INDEXED BY journal_settles`:
/// without statistics its planner prefers the primary key, a scan of the thread's journal back
/// to its last settle). The kinds are spelled as `journal_settles`'s condition is, comparisons
/// joined by `OR` (on SQLite an `IN` list there cost a temporary b-tree for each journal row
/// inserted: `migrations/sqlite/0023_journal_conditions.sql`), and a planner matches a partial
/// index only to a condition it can prove from the query's.
macro_rules! settles_sql {
    ($journal:literal) => {
        concat!(
            "SELECT j.seq, j.kind, j.data, j.created_at FROM ",
            $journal,
            " WHERE j.thread = (SELECT num FROM threads WHERE id = $1) \
               AND (j.kind = 'stopped' OR j.kind = 'session_ended' OR j.kind = 'run_continued') \
               AND j.seq < $2 \
             ORDER BY j.seq DESC LIMIT CAST($3 AS BIGINT)"
        )
    };
}
pub(crate) use settles_sql;

/// The SQL text of a thread listing for `q`, made only of the fixed fragments below (every value
/// is a bind: `$1` agent, `$2` status, `$3` parent, `$4` principal, `$5` the cursor, `$6` the
/// limit). An absent filter's fragment still names its parameter (`$n IS NULL`, a constant the
/// planner folds), so every listing binds the same six. A filter is a plain comparison rather
/// than `($n IS NULL OR column = $n)`: through an `OR` SQLite's planner uses no index at all and
/// scans the threads in id order, where `principal = $4` seeks `threads_principal`.
pub(crate) fn list_sql(q: &ThreadQuery<'_>) -> String {
    page_sql(q, crate::fragments::thread_cols!(), None)
}

/// [`list_sql`]'s listing of columns `cols`, narrowed to one thread (`$7`) when `only` is
/// `Some(true)` (`Some(false)`: `$7` is bound and null; `None`: no `$7`).
fn page_sql(q: &ThreadQuery<'_>, cols: &str, only: Option<bool>) -> String {
    let mut sql = format!("SELECT {cols} FROM threads WHERE ($1 IS NULL OR agent = $1)");
    sql.push_str(match q.status {
        Some(_) => " AND status = $2",
        None => " AND $2 IS NULL",
    });
    sql.push_str(match q.parent {
        ParentFilter::Any => " AND $3 IS NULL",
        ParentFilter::TopLevel => " AND parent IS NULL AND $3 IS NULL",
        ParentFilter::Of(_) => " AND parent = $3",
    });
    sql.push_str(match q.principal {
        Some(_) => " AND principal = $4",
        None => " AND $4 IS NULL",
    });
    // Ids are UUID v7 as hyphenated lowercase text: text order is creation order.
    sql.push_str(match (q.after, q.newest_first) {
        (None, _) => " AND $5 IS NULL",
        (Some(_), false) => " AND id > $5",
        (Some(_), true) => " AND id < $5",
    });
    sql.push_str(match only {
        None => "",
        Some(true) => " AND id = $7",
        Some(false) => " AND $7 IS NULL",
    });
    sql.push_str(if q.newest_first {
        " ORDER BY id DESC LIMIT CAST($6 AS BIGINT)"
    } else {
        " ORDER BY id LIMIT CAST($6 AS BIGINT)"
    });
    sql
}

/// The SQL text of `list_listed`: [`list_sql`]'s page (`$1`–`$6`, and `$7` the one thread
/// `only` names) with, in the same statement, each thread's chain of parents (a recursive walk
/// up `parent`, at most `MAX_PARENTS`), its last message with text and whether a deadline
/// timer waits on the question it is parked at. One row per thread of the page (`depth` 0,
/// with `question` and `deadline`) followed by one per parent (`depth` 1, 2, … nearest
/// first), grouped by `listed` (the page thread's id) in the listing's order.
pub(crate) fn listed_sql(q: &ThreadQuery<'_>, only: bool) -> String {
    let page = page_sql(q, "num, id, parent", Some(only));
    let order = if q.newest_first { "DESC" } else { "ASC" };
    format!(
        "WITH RECURSIVE listed_page AS ({page}), \
         chain (listed, depth, up) AS ( \
           SELECT id, CAST(1 AS BIGINT), parent FROM listed_page WHERE parent IS NOT NULL \
           UNION ALL \
           SELECT c.listed, c.depth + 1, t.parent FROM chain c JOIN threads t ON t.id = c.up \
           WHERE t.parent IS NOT NULL AND c.depth < {max} \
         ), \
         listing (listed, depth, tnum) AS ( \
           SELECT id, CAST(0 AS BIGINT), num FROM listed_page \
           UNION ALL \
           SELECT c.listed, c.depth, t.num FROM chain c JOIN threads t ON t.id = c.up \
         ) \
         SELECT listing.listed, listing.depth, {cols}, \
           CASE WHEN listing.depth = 0 THEN ( \
             SELECT j.content FROM journal j WHERE j.thread = listing.tnum AND j.kind = 'message' \
             AND j.content IS NOT NULL ORDER BY j.seq DESC LIMIT 1) END AS question, \
           CASE WHEN listing.depth = 0 AND threads.status = 'awaiting_human' THEN EXISTS ( \
             SELECT 1 FROM timers tm WHERE tm.thread = listing.tnum AND tm.kind = 'deadline' \
             AND tm.status <> 'cancelled' AND tm.subject = 'question:' || CAST(threads.session AS TEXT) \
             || ':' || CAST(threads.turns_a + threads.turns_b AS TEXT)) ELSE FALSE END AS has_deadline \
         FROM listing JOIN threads ON threads.num = listing.tnum \
         ORDER BY listing.listed {order}, listing.depth",
        max = duet_runtime::MAX_PARENTS,
        cols = crate::fragments::thread_cols!(),
    )
}

/// The rows of a thread's (`$1`) session `$2` below seq `$3`: from its `session_started` record
/// to the next session's (`$session_start` as [`reads_impl`] takes it), the `WHERE` clause's
/// start included.
macro_rules! session_range {
    ($session_start:expr) => {
        concat!(
            "FROM journal j WHERE j.thread = (SELECT num FROM threads WHERE id = $1) \
             AND j.seq >= (",
            $session_start,
            " = $2) \
             AND j.seq < COALESCE((",
            $session_start,
            " = $2 + 1), $3) AND j.seq < $3"
        )
    };
}
pub(crate) use session_range;

/// `impl JournalStore for $store` and `list_threads` (see `store_impl!`: `$db` is the backend's
/// database, `self.read` its read pool; `$session_start` the backend's query of the seq of a
/// thread's `session_started` record, up to the comparison of its session number, spelled as
/// migration 0020's `journal_sessions` index spells that number, and on SQLite naming the index:
/// without statistics its planner prefers the primary key, a scan of the thread's journal);
/// `$settles` its [`settles_sql`].
macro_rules! reads_impl {
    ($store:ident, $db:ty, $session_start:expr, $settles:expr) => {
        /// One page of threads as `q` says (see `reads_sql::list_sql`).
        async fn list_threads(
            read: impl sqlx::Executor<'_, Database = $db> + Copy,
            q: &duet_runtime::ThreadQuery<'_>,
        ) -> Result<Vec<Thread>, StoreError> {
            let parent = match q.parent {
                duet_runtime::ParentFilter::Of(p) => Some(p.to_string()),
                _ => None,
            };
            let sql = crate::reads_sql::list_sql(q);
            // No value is in the text: it is one of the fixed fragments' combinations.
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(q.agent)
                .bind(q.status.map(|s| s.as_str()))
                .bind(parent)
                .bind(q.principal)
                .bind(q.after.map(|a| a.to_string()))
                .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
                .fetch_all(read)
                .await
                .map_err(db_error)?;
            rows.iter().map(thread_from_row).collect()
        }

        /// `list_listed` (see `reads_sql::listed_sql`): one statement whatever the page's size.
        async fn list_listed(
            read: impl sqlx::Executor<'_, Database = $db> + Copy,
            q: &duet_runtime::ThreadQuery<'_>,
            only: Option<ThreadId>,
        ) -> Result<Vec<duet_runtime::Listed>, StoreError> {
            let parent = match q.parent {
                duet_runtime::ParentFilter::Of(p) => Some(p.to_string()),
                _ => None,
            };
            let sql = crate::reads_sql::listed_sql(q, only.is_some());
            // No value is in the text: it is one of the fixed fragments' combinations.
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(q.agent)
                .bind(q.status.map(|s| s.as_str()))
                .bind(parent)
                .bind(q.principal)
                .bind(q.after.map(|a| a.to_string()))
                .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
                .bind(only.map(|id| id.to_string()))
                .fetch_all(read)
                .await
                .map_err(db_error)?;
            let mut out: Vec<duet_runtime::Listed> = Vec::new();
            for row in &rows {
                let depth: i64 = row.try_get("depth").map_err(db_error)?;
                let thread = thread_from_row(row)?;
                match (depth, out.last_mut()) {
                    (0, _) => out.push(duet_runtime::Listed {
                        thread,
                        question: row.try_get("question").map_err(db_error)?,
                        parents: Vec::new(),
                        deadline: row.try_get("has_deadline").map_err(db_error)?,
                    }),
                    (_, Some(listed)) => listed.parents.push(thread),
                    (_, None) => return Err(corrupt("depth", &depth.to_string())),
                }
            }
            Ok(out)
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
                messages(&rows)
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
                records(&rows)
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
                entries(&rows)
            }

            async fn journal_page(&self, id: ThreadId, seq: i64, limit: usize) -> Result<Vec<JournalEntry>, StoreError> {
                let rows = sqlx::query(
                    "SELECT j.* FROM journal j JOIN threads t ON t.num = j.thread WHERE t.id = $1 AND j.seq > $2 \
                     ORDER BY j.seq LIMIT CAST($3 AS BIGINT)",
                )
                .bind(id.to_string())
                .bind(seq)
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                entries(&rows)
            }

            async fn session_entries(
                &self,
                id: ThreadId,
                session: i64,
                below: i64,
            ) -> Result<Vec<JournalEntry>, StoreError> {
                // Where a session starts and where the next does: a seek of `journal_sessions`
                // each (the subqueries are uncorrelated: each is evaluated once).
                let rows = sqlx::query(concat!(
                    "SELECT j.* ",
                    crate::reads_sql::session_range!($session_start),
                    " ORDER BY j.seq",
                ))
                .bind(id.to_string())
                .bind(session)
                .bind(below)
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                entries(&rows)
            }

            async fn session_records(
                &self,
                id: ThreadId,
                session: i64,
                below: i64,
            ) -> Result<Vec<Record>, StoreError> {
                // `session_entries`' range, its records' columns only.
                let rows = sqlx::query(concat!(
                    "SELECT j.seq, j.kind, j.data, j.created_at ",
                    crate::reads_sql::session_range!($session_start),
                    " AND j.kind <> 'message' ORDER BY j.seq",
                ))
                .bind(id.to_string())
                .bind(session)
                .bind(below)
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                records(&rows)
            }

            async fn settles(
                &self,
                id: ThreadId,
                below: i64,
                limit: usize,
            ) -> Result<Vec<Record>, StoreError> {
                let rows = sqlx::query($settles)
                .bind(id.to_string())
                .bind(below)
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                records(&rows)
            }

            async fn last_message(&self, id: ThreadId) -> Result<Option<Message>, StoreError> {
                let row = sqlx::query(
                    "SELECT j.* FROM journal j JOIN threads t ON t.num = j.thread \
                     WHERE t.id = $1 AND j.kind = 'message' AND j.content IS NOT NULL ORDER BY j.seq DESC LIMIT 1",
                )
                .bind(id.to_string())
                .fetch_optional(&self.read)
                .await
                .map_err(db_error)?;
                row.as_ref().map(message_from_row).transpose()
            }
        }
    };
}
pub(crate) use reads_impl;
