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

            async fn deliver_if_free(&self, id: ThreadId, message: NewQueued, lease: Lease, read_at: Option<i64>) -> Result<bool, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let LeaseRow { num, owner, expires, change } = lease_row(&mut tx, id).await?;
                let moved = read_at.is_some_and(|n| change.seq + 1 != n);
                if moved || !lease_free(&owner, expires, &lease) {
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

            async fn answer(&self, id: ThreadId, message: NewQueued, park: Park, claim: Lease) -> Result<AnswerOutcome, StoreError> {
                self.answer_impl(id, message, park, claim).await
            }

            async fn decide(&self, id: ThreadId, decided: duet_runtime::approval::Decided, side: duet_runtime::SideId, claim: Lease) -> Result<duet_runtime::DecideOutcome, StoreError> {
                use duet_runtime::{DecideOutcome, RecordBody};
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let LeaseRow { num, owner, expires, change } = lease_row(&mut tx, id).await?;
                // The pending call: its `approval_requested` record at the approval's seq.
                let asked: Option<String> = sqlx::query_scalar(
                    "SELECT data FROM journal WHERE thread = $1 AND seq = $2 AND kind = 'approval_requested'",
                )
                .bind(num)
                .bind(decided.approval)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?
                .flatten();
                let pending = asked.is_some_and(|data| {
                    matches!(RecordBody::from_parts("approval_requested", serde_json::from_str(&data).unwrap_or_default()),
                        RecordBody::ApprovalRequested(a) if a.call == decided.call)
                });
                if !pending {
                    tx.rollback().await.map_err(db_error)?;
                    return Ok(DecideOutcome::NotPending);
                }
                // A retried decision (its message id delivered before) is a replay, never "another
                // decision came first": checked before the first decision is looked for.
                if let Some(message_id) = &decided.message_id {
                    let taken = sqlx::query(
                        "INSERT INTO deliveries (thread, message_id, created_at) VALUES ($1, $2, $3) \
                         ON CONFLICT (thread, message_id) DO NOTHING",
                    )
                    .bind(num)
                    .bind(message_id)
                    .bind(claim.now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .rows_affected()
                        == 0;
                    if taken {
                        tx.rollback().await.map_err(db_error)?;
                        return Ok(DecideOutcome::Duplicate);
                    }
                }
                // A decision first: queued (not yet drained), or written by the run.
                let queued: Vec<Option<String>> = sqlx::query_scalar(
                    "SELECT decision FROM queue WHERE thread = $1 AND tool_call_id = $2 AND decision IS NOT NULL",
                )
                .bind(num)
                .bind(&decided.call)
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error)?;
                let written: Vec<Option<String>> = sqlx::query_scalar(
                    "SELECT data FROM journal WHERE thread = $1 AND seq > $2 AND kind = 'approval_decided' ORDER BY seq",
                )
                .bind(num)
                .bind(decided.approval)
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error)?;
                let first = queued
                    .into_iter()
                    .chain(written)
                    .flatten()
                    .filter_map(|d| serde_json::from_str::<duet_runtime::approval::Decided>(&d).ok())
                    .find(|d| d.approval == decided.approval);
                if let Some(first) = first {
                    tx.rollback().await.map_err(db_error)?;
                    return Ok(DecideOutcome::Refused { first: Box::new(first) });
                }
                let data = serde_json::to_string(&decided).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let inserted = sqlx::query(
                    "INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, decision) \
                     VALUES ($1, 'tool', $2, '', FALSE, FALSE, FALSE, $3, $4, $5, 'success', $6)",
                )
                .bind(num)
                .bind(side_str(side))
                .bind(claim.now)
                .bind(&decided.call)
                .bind(&decided.tool)
                .bind(data)
                .execute(&mut *tx)
                .await;
                if let Err(e) = inserted {
                    tx.rollback().await.map_err(db_error)?;
                    return Err(db_error(e));
                }
                let claimed = commit_claiming(tx, num, &owner, expires, &claim).await?;
                self.publish(change);
                Ok(DecideOutcome::Accepted { claimed })
            }

            async fn create_with(&self, key: &str, new: NewThread<'_>, message: NewQueued, claim: Lease) -> Result<Option<Thread>, StoreError> {
                self.create_with_impl(key, new, message, claim).await
            }

            async fn enqueue_starting(&self, id: ThreadId, message: NewQueued, claim: Lease, now: i64) -> Result<duet_runtime::Starting<bool>, StoreError> {
                self.enqueue_starting_impl(id, message, claim, now).await
            }

            async fn create_starting(&self, key: &str, new: NewThread<'_>, message: NewQueued, claim: Lease) -> Result<duet_runtime::Starting<Option<Thread>>, StoreError> {
                self.create_starting_impl(key, new, message, claim).await
            }

            async fn answer_starting(&self, id: ThreadId, message: NewQueued, park: Park, claim: Lease) -> Result<duet_runtime::Starting<AnswerOutcome>, StoreError> {
                self.answer_starting_impl(id, message, park, claim).await
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
                    "SELECT q.id, q.role, q.side, q.content, q.human, q.silent, q.follow_up, q.tool_call_id, q.tool_name, q.tool_status, q.images, q.attachments, q.trace, q.message_id, q.decision, q.created_at FROM queue q \
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

            async fn decisions(&self, query: &AnsweredQuery<'_>) -> Result<Vec<duet_runtime::DecisionEntry>, StoreError> {
                decision_rows(&self.read, query).await
            }
        }
    };
}
pub(crate) use queue_impl;
