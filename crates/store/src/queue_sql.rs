//! The queue's half of the shared store implementation (`QueueStore`: enqueueing, answering a
//! park, creating a thread with its first message), stamped out inside `store_impl!` with the
//! helpers it defines there (`lease_row`, `insert_queued`, the decoders).

/// `impl QueueStore for $store` (see `store_impl!`; `$begin` starts write transactions).
macro_rules! queue_impl {
    ($store:ident, $db:ty, $begin:literal) => {
        #[async_trait]
        impl QueueStore for $store {
            async fn enqueue(&self, id: ThreadId, message: NewQueued, claim: Option<Lease>, now: i64) -> Result<bool, StoreError> {
                self.enqueue_impl(id, message, claim, now).await
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
                take_lease(&mut tx, num, &lease).await?;
                if let Err(e) = insert_queued(&mut tx, id, num, &message, lease.now, true).await {
                    tx.rollback().await.map_err(db_error)?;
                    return Err(e);
                }
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
                if let Err(e) = insert_queued(&mut tx, id, num, &message, now, true).await {
                    tx.rollback().await.map_err(db_error)?;
                    return Err(e);
                }
                tx.commit().await.map_err(db_error)?;
                self.publish(change);
                Uuid::parse_str(&run).map(Some).map_err(|_| corrupt("lease owner", &run))
            }

            async fn answer(&self, id: ThreadId, message: NewQueued, park: Park, claim: Lease) -> Result<Answer, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let LeaseRow { num, owner, expires, change } = lease_row(&mut tx, id).await?;
                let row = sqlx::query("SELECT status, session, next_seq FROM threads WHERE num = $1")
                    .bind(num)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db_error)?;
                // A message id delivered before is its first delivery's, whatever the thread's
                // state now.
                if let Some(message_id) = &message.message_id {
                    let seen = sqlx::query("SELECT 1 FROM deliveries WHERE thread = $1 AND message_id = $2")
                        .bind(num)
                        .bind(message_id)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error)?
                        .is_some();
                    if seen {
                        tx.rollback().await.map_err(db_error)?;
                        return Err(StoreError::Duplicate { thread: id, message_id: message_id.clone() });
                    }
                }
                let status: String = row.try_get("status").map_err(db_error)?;
                let at_park = status == ThreadStatus::AwaitingHuman.as_str()
                    && row.try_get::<i64, _>("session").map_err(db_error)? == park.session
                    && row.try_get::<i64, _>("next_seq").map_err(db_error)? == park.seq;
                // An answer already queued (not yet drained) has taken the park too.
                let queued = sqlx::query(
                    "SELECT content, created_at FROM queue WHERE thread = $1 AND human = TRUE AND follow_up = FALSE ORDER BY id LIMIT 1",
                )
                .bind(num)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
                if !at_park || queued.is_some() {
                    // The answer recorded for this park first (it names its author), then one
                    // queued, then the first message journaled at the park.
                    let recorded = sqlx::query(
                        "SELECT content, created_at, author, message_id FROM answers WHERE thread = $1 AND session = $2 AND seq = $3",
                    )
                    .bind(num)
                    .bind(park.session)
                    .bind(park.seq)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?;
                    let first = match (recorded, queued) {
                        (Some(r), _) => Some(FirstAnswer {
                            content: r.try_get("content").map_err(db_error)?,
                            at: r.try_get("created_at").map_err(db_error)?,
                            author: r.try_get("author").map_err(db_error)?,
                            message_id: r.try_get("message_id").map_err(db_error)?,
                        }),
                        (None, Some(r)) => Some(FirstAnswer {
                            content: r.try_get("content").map_err(db_error)?,
                            at: r.try_get("created_at").map_err(db_error)?,
                            author: None,
                            message_id: None,
                        }),
                        (None, None) => sqlx::query(
                            "SELECT content, created_at FROM journal WHERE thread = $1 AND kind = 'message' AND seq >= $2 ORDER BY seq LIMIT 1",
                        )
                        .bind(num)
                        .bind(park.seq)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error)?
                        .map(|r| -> Result<FirstAnswer, StoreError> {
                            Ok(FirstAnswer {
                                content: r.try_get::<Option<String>, _>("content").map_err(db_error)?.unwrap_or_default(),
                                at: r.try_get("created_at").map_err(db_error)?,
                                author: None,
                                message_id: None,
                            })
                        })
                        .transpose()?,
                    };
                    tx.rollback().await.map_err(db_error)?;
                    return Ok(Answer::Refused { first });
                }
                if let Err(e) = insert_queued(&mut tx, id, num, &message, claim.now, true).await {
                    tx.rollback().await.map_err(db_error)?;
                    return Err(e);
                }
                // The park's answer, by whom: what a later, refused answer is told.
                let recorded = sqlx::query(
                    "INSERT INTO answers (thread, session, seq, author, message_id, content, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (thread, session, seq) DO UPDATE SET \
                     author = excluded.author, message_id = excluded.message_id, content = excluded.content, \
                     created_at = excluded.created_at",
                )
                .bind(num)
                .bind(park.session)
                .bind(park.seq)
                .bind(&message.author)
                .bind(&message.message_id)
                .bind(&message.content)
                .bind(claim.now)
                .execute(&mut *tx)
                .await;
                if let Err(e) = recorded {
                    tx.rollback().await.map_err(db_error)?;
                    return Err(db_error(e));
                }
                let claimed = lease_free(&owner, expires, &claim);
                if claimed {
                    take_lease(&mut tx, num, &claim).await?;
                }
                tx.commit().await.map_err(db_error)?;
                self.publish(change);
                Ok(Answer::Accepted { claimed })
            }

            async fn create_with(&self, key: &str, new: NewThread<'_>, message: NewQueued, claim: Lease) -> Result<Option<Thread>, StoreError> {
                self.create_with_impl(key, new, message, claim).await
            }

            async fn delivered(&self, id: ThreadId, message_id: &str) -> Result<bool, StoreError> {
                let found = sqlx::query(
                    "SELECT 1 FROM deliveries d JOIN threads t ON t.num = d.thread WHERE t.id = $1 AND d.message_id = $2",
                )
                .bind(id.to_string())
                .bind(message_id)
                .fetch_optional(&self.read)
                .await
                .map_err(db_error)?;
                Ok(found.is_some())
            }

            async fn queue(&self, id: ThreadId) -> Result<Vec<Queued>, StoreError> {
                let rows = sqlx::query(
                    "SELECT q.id, q.role, q.side, q.content, q.human, q.silent, q.follow_up, q.tool_call_id, q.tool_name, q.tool_status, q.images, q.trace, q.created_at FROM queue q \
                     JOIN threads t ON t.num = q.thread WHERE t.id = $1 ORDER BY q.id",
                )
                .bind(id.to_string())
                .fetch_all(&self.read)
                .await
                .map_err(db_error)?;
                rows.iter().map(queued_from_row).collect()
            }

            async fn answered(&self, query: &AnsweredQuery<'_>) -> Result<Vec<Answered>, StoreError> {
                answered_rows(&self.read, query).await
            }
        }
    };
}
pub(crate) use queue_impl;
