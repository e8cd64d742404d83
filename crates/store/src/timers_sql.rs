//! The timers' half of the shared store implementation (`TimerStore` on the `timers` table,
//! migration 0017), stamped out inside `store_impl!`. Commits write timers in their own
//! transaction (`sqlite/commit.rs`, `postgres/commit.rs`); this finds, claims, finishes and
//! cancels them. Ids are UUIDs as hyphenated lowercase text, whose text order (byte by byte;
//! `COLLATE "C"` on Postgres) is the UUIDs' order, so `(due_at, id)` sorts as the memory store's.

use duet_runtime::TimerQuery;

/// A timer row's columns, each qualified (they are read from `timers` alone and from an
/// update's `RETURNING`), its thread's id as `thread_id`.
macro_rules! timer_cols {
    () => {
        "timers.id, (SELECT th.id FROM threads th WHERE th.num = timers.thread) AS thread_id, \
         timers.kind, timers.name, timers.args, timers.subject, timers.due_at, timers.created_at, \
         timers.status, timers.attempts, timers.max_attempts, timers.last_error, timers.updated_at, \
         timers.claimed_by, timers.claimed_until"
    };
}
pub(crate) use timer_cols;

/// The SQL text of a timer listing for `q`, made only of fixed fragments (every value is a
/// bind: `$1` thread, `$2` status, `$3` kind, `$4` name, `$5`/`$6` the cursor's due time and
/// id, `$7` the limit; `newest_first` turns the cursor and the order around). An absent filter's
/// fragment still names its parameter (`$n IS NULL`, a constant the planner folds), so every
/// listing binds the same seven; a present one is a plain comparison the planner can seek an
/// index with (see `reads_sql::list_sql`), the status a constant.
pub(crate) fn list_sql(q: &TimerQuery<'_>) -> String {
    let mut sql = String::from(concat!("SELECT ", timer_cols!(), " FROM timers WHERE "));
    sql.push_str(match q.thread {
        Some(_) => "thread = (SELECT num FROM threads WHERE id = $1)",
        None => "$1 IS NULL",
    });
    // A status as a constant (its stored name, one of five): SQLite matches a partial index's
    // `status = 'pending'` to a bound status only by reading the bind, which marks the
    // statement to be compiled again each time it is bound (`$2` is still named and bound).
    match q.status {
        Some(status) => {
            sql.push_str(" AND $2 IS NOT NULL AND status = '");
            sql.push_str(status.as_str());
            sql.push('\'');
        }
        None => sql.push_str(" AND $2 IS NULL"),
    }
    sql.push_str(match q.kind {
        Some(_) => " AND kind = $3",
        None => " AND $3 IS NULL",
    });
    sql.push_str(match q.name {
        Some(_) => " AND name = $4",
        None => " AND $4 IS NULL",
    });
    sql.push_str(match (q.after, q.newest_first) {
        (Some(_), false) => " AND (due_at, id) > ($5, $6)",
        (Some(_), true) => " AND (due_at, id) < ($5, $6)",
        (None, _) => " AND $5 IS NULL AND $6 IS NULL",
    });
    sql.push_str(if q.newest_first {
        " ORDER BY due_at DESC, id DESC LIMIT CAST($7 AS BIGINT)"
    } else {
        " ORDER BY due_at, id LIMIT CAST($7 AS BIGINT)"
    });
    sql
}

/// `impl TimerStore for $store` (see `store_impl!`: `$begin` starts write transactions, `$lock`
/// locks a row read in one, `$skip_locked` ends the selects a claim picks rows with). `$wake` is
/// an SQL expression over a `timers` row just written that announces it to other processes when
/// it is `pending` (Postgres: `pg_notify` on `duet_timers`, delivered if the write commits;
/// SQLite: `NULL`); after writing one, a store also calls its backend's `wake` (a no-op on
/// Postgres), and `timer_wakeups` is its backend's `wakeups`.
macro_rules! timers_impl {
    ($store:ident, $db:ty, $begin:literal, $lock:literal, $skip_locked:literal, $wake:expr) => {
        fn timer_from_row(
            row: &<$db as sqlx::Database>::Row,
        ) -> Result<duet_runtime::Timer, StoreError> {
            let uuid = |column: &str| -> Result<Uuid, StoreError> {
                let text: String = row.try_get(column).map_err(db_error)?;
                Uuid::parse_str(&text).map_err(|_| corrupt(column, &text))
            };
            let count = |column: &str| -> Result<u32, StoreError> {
                let n: i64 = row.try_get(column).map_err(db_error)?;
                u32::try_from(n).map_err(|_| corrupt(column, &n.to_string()))
            };
            let kind: String = row.try_get("kind").map_err(db_error)?;
            let status: String = row.try_get("status").map_err(db_error)?;
            let args: String = row.try_get("args").map_err(db_error)?;
            let claimed_by: Option<String> = row.try_get("claimed_by").map_err(db_error)?;
            Ok(duet_runtime::Timer {
                id: uuid("id")?,
                thread: uuid("thread_id")?,
                kind: duet_runtime::TimerKind::parse(&kind)
                    .ok_or_else(|| corrupt("timer kind", &kind))?,
                name: row.try_get("name").map_err(db_error)?,
                args: serde_json::from_str(&args).map_err(|_| corrupt("timer args", &args))?,
                subject: row.try_get("subject").map_err(db_error)?,
                due_at: row.try_get("due_at").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
                status: duet_runtime::TimerStatus::parse(&status)
                    .ok_or_else(|| corrupt("timer status", &status))?,
                attempts: count("attempts")?,
                max_attempts: count("max_attempts")?,
                last_error: row.try_get("last_error").map_err(db_error)?,
                updated_at: row.try_get("updated_at").map_err(db_error)?,
                claimed_by: claimed_by
                    .map(|o| Uuid::parse_str(&o).map_err(|_| corrupt("timer claimed_by", &o)))
                    .transpose()?,
                claimed_until: row.try_get("claimed_until").map_err(db_error)?,
            })
        }

        #[async_trait]
        impl duet_runtime::TimerStore for $store {
            async fn timers(
                &self,
                q: &duet_runtime::TimerQuery<'_>,
            ) -> Result<Vec<duet_runtime::Timer>, StoreError> {
                let sql = crate::timers_sql::list_sql(q);
                // No value is in the text: it is one of the fixed fragments' combinations.
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(q.thread.map(|t| t.to_string()))
                    .bind(q.status.map(|s| s.as_str()))
                    .bind(q.kind.map(|k| k.as_str()))
                    .bind(q.name)
                    .bind(q.after.map(|(at, _)| at))
                    .bind(q.after.map(|(_, id)| id.to_string()))
                    .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(timer_from_row).collect()
            }

            async fn timer(&self, id: Uuid) -> Result<Option<duet_runtime::Timer>, StoreError> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    crate::timers_sql::timer_cols!(),
                    " FROM timers WHERE id = $1"
                ))
                .bind(id.to_string())
                .fetch_optional(&self.read)
                .await
                .map_err(db_error)?;
                row.as_ref().map(timer_from_row).transpose()
            }

            async fn cancel_timer(
                &self,
                id: Uuid,
                now: i64,
            ) -> Result<duet_runtime::CancelOutcome, StoreError> {
                use duet_runtime::{CancelOutcome, TimerStatus};
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin)
                    .await
                    .map_err(db_error)?;
                let cancelled = async {
                    let row = sqlx::query(concat!(
                        "SELECT ",
                        crate::timers_sql::timer_cols!(),
                        " FROM timers WHERE id = $1",
                        $lock
                    ))
                    .bind(id.to_string())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?;
                    let Some(mut timer) = row.as_ref().map(timer_from_row).transpose()? else {
                        return Ok(CancelOutcome::NotFound);
                    };
                    if timer.status != TimerStatus::Pending {
                        return Ok(CancelOutcome::NotPending(timer));
                    }
                    sqlx::query("UPDATE timers SET status = 'cancelled', updated_at = $2 WHERE id = $1")
                        .bind(id.to_string())
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    timer.status = TimerStatus::Cancelled;
                    timer.updated_at = now;
                    Ok::<_, StoreError>(CancelOutcome::Cancelled(timer))
                }
                .await;
                match cancelled {
                    Ok(outcome) => {
                        tx.commit().await.map_err(db_error)?;
                        Ok(outcome)
                    }
                    Err(e) => {
                        // Explicitly: SQLite's one write connection must not keep the transaction.
                        tx.rollback().await.map_err(db_error)?;
                        Err(e)
                    }
                }
            }

            async fn next_due(&self) -> Result<Option<i64>, StoreError> {
                // Each half one read of its partial index's first entry.
                let row = sqlx::query(
                    "SELECT (SELECT due_at FROM timers WHERE status = 'pending' ORDER BY due_at LIMIT 1) AS pending, \
                     (SELECT claimed_until FROM timers WHERE status = 'processing' ORDER BY claimed_until LIMIT 1) AS claimed",
                )
                .fetch_one(&self.read)
                .await
                .map_err(db_error)?;
                let pending: Option<i64> = row.try_get("pending").map_err(db_error)?;
                let claimed: Option<i64> = row.try_get("claimed").map_err(db_error)?;
                Ok(pending.into_iter().chain(claimed).min())
            }

            async fn claim_due(
                &self,
                owner: Uuid,
                until: i64,
                now: i64,
                limit: usize,
            ) -> Result<Vec<duet_runtime::Timer>, StoreError> {
                if limit == 0 {
                    return Ok(Vec::new());
                }
                // The first `limit` of each kind that needs a process (each an index read, rows
                // another claimer holds passed over on Postgres), then the first `limit` of both;
                // one statement, so one round trip and no transaction left open.
                const SQL: &str = concat!(
                    "WITH a AS (SELECT timers.id, timers.due_at FROM timers WHERE status = 'pending' AND due_at <= $1 \
                       ORDER BY due_at, id LIMIT CAST($2 AS BIGINT)",
                    $skip_locked,
                    "), b AS (SELECT timers.id, timers.due_at FROM timers WHERE status = 'processing' AND claimed_until < $1 \
                       ORDER BY due_at, id LIMIT CAST($2 AS BIGINT)",
                    $skip_locked,
                    "), pick AS (SELECT u.id FROM (SELECT * FROM a UNION ALL SELECT * FROM b) u ORDER BY u.due_at, u.id LIMIT CAST($2 AS BIGINT)) \
                     UPDATE timers SET status = 'processing', attempts = attempts + 1, claimed_by = $3, claimed_until = $4, \
                       updated_at = $1 WHERE id IN (SELECT pick.id FROM pick) RETURNING ",
                    crate::timers_sql::timer_cols!()
                );
                let rows = sqlx::query(SQL)
                    .bind(now)
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                    .bind(owner.to_string())
                    .bind(until)
                    .fetch_all(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                let mut claimed = rows.iter().map(timer_from_row).collect::<Result<Vec<_>, _>>()?;
                claimed.sort_by_key(|t| (t.due_at, t.id));
                Ok(claimed)
            }

            async fn finish_timer(
                &self,
                id: Uuid,
                owner: Uuid,
                outcome: duet_runtime::TimerOutcome,
                now: i64,
            ) -> Result<bool, StoreError> {
                use duet_runtime::TimerOutcome;
                /// Outcome `$set`'s update of the timer `$1` that `$2` holds, at `$3` (`$4`, `$5`:
                /// the outcome's own values). Returns its status and due time after, and
                /// announces it if it is pending again.
                macro_rules! finish {
                    ($set:literal) => {
                        concat!(
                            "UPDATE timers SET ",
                            $set,
                            ", claimed_by = NULL, claimed_until = NULL, updated_at = $3 \
                             WHERE id = $1 AND claimed_by = $2 AND status = 'processing' \
                             RETURNING status, due_at, ",
                            $wake,
                            " AS woke"
                        )
                    };
                }
                let base = |sql| sqlx::query(sql).bind(id.to_string()).bind(owner.to_string()).bind(now);
                let query = match outcome {
                    TimerOutcome::Completed => base(finish!("status = 'completed'")),
                    TimerOutcome::Failed { error } => {
                        base(finish!("status = 'failed', last_error = $4")).bind(error)
                    }
                    // A retry past the last attempt is final; its due time stays the last one's.
                    TimerOutcome::Retry { at, error } => base(finish!(
                        "status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END, \
                         due_at = CASE WHEN attempts >= max_attempts THEN due_at ELSE $5 END, last_error = $4"
                    ))
                    .bind(error)
                    .bind(at),
                    // The attempt is given back: it could not run.
                    TimerOutcome::Defer { at } => base(finish!(
                        "status = 'pending', attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, due_at = $4"
                    ))
                    .bind(at),
                };
                let row = query
                    .fetch_optional(&mut *self.writer().await?)
                    .await
                    .map_err(db_error)?;
                let Some(row) = row else {
                    return Ok(false);
                };
                let status: String = row.try_get("status").map_err(db_error)?;
                if status == duet_runtime::TimerStatus::Pending.as_str() {
                    self.wake(row.try_get("due_at").map_err(db_error)?);
                }
                Ok(true)
            }

            async fn timer_counts(
                &self,
                now: i64,
            ) -> Result<duet_runtime::TimerCounts, StoreError> {
                // Each count a range of its partial index.
                let row = sqlx::query(
                    "SELECT (SELECT COUNT(*) FROM timers WHERE status = 'pending' AND due_at > $1) AS pending, \
                     (SELECT COUNT(*) FROM timers WHERE status = 'pending' AND due_at <= $1) AS due, \
                     (SELECT COUNT(*) FROM timers WHERE status = 'processing') AS processing, \
                     (SELECT COUNT(*) FROM timers WHERE status = 'failed') AS failed",
                )
                .bind(now)
                .fetch_one(&self.read)
                .await
                .map_err(db_error)?;
                let n = |column: &str| -> Result<u64, StoreError> {
                    let n: i64 = row.try_get(column).map_err(db_error)?;
                    Ok(u64::try_from(n).unwrap_or_default())
                };
                Ok(duet_runtime::TimerCounts {
                    pending: n("pending")?,
                    due: n("due")?,
                    processing: n("processing")?,
                    failed: n("failed")?,
                })
            }

            fn timer_wakeups(
                &self,
            ) -> futures::stream::BoxStream<'static, duet_runtime::TimerWake> {
                self.wakeups()
            }
        }
    };
}
pub(crate) use timers_impl;

#[cfg(test)]
mod tests {
    use duet_runtime::{TimerKind, TimerQuery, TimerStatus};
    use uuid::Uuid;

    use super::list_sql;

    #[test]
    fn every_listing_binds_the_same_seven_and_names_no_value() {
        let id = Uuid::now_v7();
        let all = TimerQuery {
            thread: Some(id),
            status: Some(TimerStatus::Pending),
            kind: Some(TimerKind::Effect),
            name: Some("x'; DROP TABLE timers"),
            after: Some((5, id)),
            newest_first: true,
            limit: 10,
        };
        for q in [TimerQuery::default(), all] {
            let sql = list_sql(&q);
            for n in 1..=7 {
                assert!(sql.contains(&format!("${n}")), "${n} in {sql}");
            }
            assert!(!sql.contains("$8") && !sql.contains("DROP") && !sql.contains(&id.to_string()));
        }
    }
}
