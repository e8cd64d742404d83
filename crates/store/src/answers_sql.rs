//! The inbox's history (`QueueStore::answered` on the `answers` table, and
//! `QueueStore::decisions` on the journal's `approval_decided` records), stamped out inside
//! `store_impl!`: every answered park with its thread and the question it answered, and every
//! decision on a tool call.

/// `answered_rows`, the listing `QueueStore::answered` returns (see `store_impl!`).
macro_rules! answers_impl {
    ($db:ty) => {
        /// Answered parks as `q` says, newest first. Every filter is a bind (`$1` principal, `$2`
        /// agent, `$3`–`$6` the cursor, `$7` the limit, `$8` the thread); the question is the thread's last message
        /// before the park.
        async fn answered_rows(
            read: impl sqlx::Executor<'_, Database = $db> + Copy,
            q: &duet_runtime::AnsweredQuery<'_>,
        ) -> Result<Vec<duet_runtime::Answered>, StoreError> {
            let (at, thread, session, seq) = match q.before {
                Some((at, thread, park)) => (Some(at), Some(thread.to_string()), Some(park.session), Some(park.seq)),
                None => (None, None, None, None),
            };
            let rows = sqlx::query(
                "SELECT t.id, t.key, t.agent, t.principal, a.session, a.seq, a.author, a.message_id, a.content, a.created_at, \
                 (SELECT j.content FROM journal j WHERE j.thread = a.thread AND j.kind = 'message' AND j.seq < a.seq \
                  ORDER BY j.seq DESC LIMIT 1) AS question \
                 FROM answers a JOIN threads t ON t.num = a.thread \
                 WHERE ($1 IS NULL OR t.principal = $1) AND ($2 IS NULL OR t.agent = $2) AND ($8 IS NULL OR t.id = $8) \
                 AND ($3 IS NULL OR (a.created_at, t.id, a.session, a.seq) < ($3, $4, $5, $6)) \
                 ORDER BY a.created_at DESC, t.id DESC, a.session DESC, a.seq DESC LIMIT CAST($7 AS BIGINT)",
            )
            .bind(q.principal)
            .bind(q.agent)
            .bind(at)
            .bind(thread)
            .bind(session)
            .bind(seq)
            .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
            .bind(q.thread.map(|t| t.to_string()))
            .fetch_all(read)
            .await
            .map_err(db_error)?;
            rows.iter()
                .map(|row| {
                    let id: String = row.try_get("id").map_err(db_error)?;
                    Ok(duet_runtime::Answered {
                        thread: Uuid::parse_str(&id).map_err(|_| corrupt("thread id", &id))?,
                        key: row.try_get("key").map_err(db_error)?,
                        agent: row.try_get("agent").map_err(db_error)?,
                        principal: row.try_get("principal").map_err(db_error)?,
                        park: Park {
                            session: row.try_get("session").map_err(db_error)?,
                            seq: row.try_get("seq").map_err(db_error)?,
                        },
                        question: row.try_get("question").map_err(db_error)?,
                        answer: FirstAnswer {
                            content: row.try_get("content").map_err(db_error)?,
                            at: row.try_get("created_at").map_err(db_error)?,
                            author: row.try_get("author").map_err(db_error)?,
                            message_id: row.try_get("message_id").map_err(db_error)?,
                        },
                    })
                })
                .collect()
        }

        /// `decision_rows`, the listing `QueueStore::decisions` returns: the `approval_decided`
        /// records as `q` says, newest first (`$1` principal, `$2` agent, `$3`–`$5` the cursor
        /// `(written_at, thread, seq)`, `$6` the limit, `$7` the thread); the session is the
        /// thread's last message's before the record.
        async fn decision_rows(
            read: impl sqlx::Executor<'_, Database = $db> + Copy,
            q: &duet_runtime::AnsweredQuery<'_>,
        ) -> Result<Vec<duet_runtime::DecisionEntry>, StoreError> {
            let (at, thread, seq) = match q.before {
                Some((at, thread, park)) => (Some(at), Some(thread.to_string()), Some(park.seq)),
                None => (None, None, None),
            };
            let rows = sqlx::query(
                "SELECT t.id, t.key, t.agent, t.principal, d.seq, d.data, d.created_at, \
                 (SELECT j.session FROM journal j WHERE j.thread = d.thread AND j.kind = 'message' AND j.seq < d.seq \
                  ORDER BY j.seq DESC LIMIT 1) AS session \
                 FROM journal d JOIN threads t ON t.num = d.thread \
                 WHERE d.kind = 'approval_decided' \
                 AND ($1 IS NULL OR t.principal = $1) AND ($2 IS NULL OR t.agent = $2) AND ($7 IS NULL OR t.id = $7) \
                 AND ($3 IS NULL OR (d.created_at, t.id, d.seq) < ($3, $4, $5)) \
                 ORDER BY d.created_at DESC, t.id DESC, d.seq DESC LIMIT CAST($6 AS BIGINT)",
            )
            .bind(q.principal)
            .bind(q.agent)
            .bind(at)
            .bind(thread)
            .bind(seq)
            .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
            .bind(q.thread.map(|t| t.to_string()))
            .fetch_all(read)
            .await
            .map_err(db_error)?;
            rows.iter()
                .map(|row| {
                    let id: String = row.try_get("id").map_err(db_error)?;
                    let data: Option<String> = row.try_get("data").map_err(db_error)?;
                    let data = data.unwrap_or_default();
                    let decided = serde_json::from_str(&data)
                        .map_err(|_| corrupt("approval_decided record", &data))?;
                    let session: Option<i64> = row.try_get("session").map_err(db_error)?;
                    Ok(duet_runtime::DecisionEntry {
                        thread: Uuid::parse_str(&id).map_err(|_| corrupt("thread id", &id))?,
                        key: row.try_get("key").map_err(db_error)?,
                        agent: row.try_get("agent").map_err(db_error)?,
                        principal: row.try_get("principal").map_err(db_error)?,
                        session: session.unwrap_or(0),
                        seq: row.try_get("seq").map_err(db_error)?,
                        written_at: row.try_get("created_at").map_err(db_error)?,
                        decided,
                    })
                })
                .collect()
        }
    };
}
pub(crate) use answers_impl;
