//! The leases' half of the shared store implementation (`LeaseStore`: claiming, renewing,
//! aborting, finding and claiming what needs a runner, giving a lease back), stamped out inside
//! `store_impl!` with the helpers it defines there (`take_lease`, the decoders).

/// The SQL condition that a `threads` row needs a runner at time `$1`: its lease is free or
/// expired, and it is `running` (its runner died) or has a [runnable](crate::fragments::runnable)
/// queued row. What `recoverable` lists and `claim_runnable` claims.
macro_rules! recoverable {
    () => {
        concat!(
            "(lease_owner IS NULL OR lease_expires < $1) AND (status = 'running' OR EXISTS \
             (SELECT 1 FROM queue q WHERE q.thread = threads.num AND ",
            crate::fragments::runnable!("threads.status", "threads.stop_reason"),
            "))"
        )
    };
}
pub(crate) use recoverable;

/// `impl LeaseStore for $store` (see `store_impl!`; `$begin` starts write transactions, and
/// `$skip_locked` is appended to the statement that picks the rows `claim_runnable` claims:
/// ` FOR UPDATE SKIP LOCKED` on Postgres, so concurrent callers pass over each other's rows
/// instead of waiting on them; nothing on SQLite, whose `BEGIN IMMEDIATE` serialises).
macro_rules! lease_impl {
    ($store:ident, $db:ty, $begin:literal, $skip_locked:literal) => {
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
                let rows = sqlx::query(concat!("SELECT id FROM threads WHERE ", crate::leases_sql::recoverable!(), " ORDER BY num"))
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

            async fn claim_runnable(&self, owners: &[Uuid], until: i64, now: i64) -> Result<Vec<(ThreadId, Uuid)>, StoreError> {
                if owners.is_empty() {
                    return Ok(Vec::new());
                }
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let claimed = async {
                    let picked = sqlx::query(concat!(
                        "SELECT num, id FROM threads WHERE ",
                        crate::leases_sql::recoverable!(),
                        " ORDER BY num LIMIT CAST($2 AS BIGINT)",
                        $skip_locked
                    ))
                    .bind(now)
                    .bind(i64::try_from(owners.len()).unwrap_or(i64::MAX))
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db_error)?;
                    let mut claimed = Vec::with_capacity(picked.len());
                    // The n-th row (in thread order) for the n-th owner.
                    for (row, owner) in picked.iter().zip(owners) {
                        let id: String = row.try_get("id").map_err(db_error)?;
                        let id = Uuid::parse_str(&id).map_err(|_| corrupt("thread id", &id))?;
                        let num: i64 = row.try_get("num").map_err(db_error)?;
                        take_lease(&mut tx, num, &Lease { owner: *owner, until, now }).await?;
                        claimed.push((id, *owner));
                    }
                    Ok::<_, StoreError>(claimed)
                }
                .await;
                match claimed {
                    Ok(claimed) => {
                        tx.commit().await.map_err(db_error)?;
                        Ok(claimed)
                    }
                    Err(e) => {
                        // Explicitly: SQLite's one write connection must not keep the transaction.
                        tx.rollback().await.map_err(db_error)?;
                        Err(e)
                    }
                }
            }

            async fn release(&self, id: ThreadId, owner: Uuid) -> Result<bool, StoreError> {
                let done = sqlx::query(
                    "UPDATE threads SET lease_owner = NULL, lease_expires = 0 WHERE id = $1 AND lease_owner = $2",
                )
                .bind(id.to_string())
                .bind(owner.to_string())
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }
        }
    };
}
pub(crate) use lease_impl;
