//! The push notifications' part of the shared store implementation (`PushStore` on the
//! `push_configs` table, its notifications in the generic `outbox`), stamped out inside
//! `store_impl!`.

/// `impl PushStore for $store` and the decoder of its rows (see `store_impl!`; `$begin`
/// starts write transactions). Its notifications go in the outbox through `notify_impl!`'s
/// `outbox_insert`; the sender claims them through `NotifyStore`.
macro_rules! push_impl {
    ($store:ident, $db:ty, $begin:literal) => {
        fn push_config_from_row(row: &<$db as sqlx::Database>::Row) -> Result<duet_server_store::PushConfig, StoreError> {
            let thread: String = row.try_get("thread").map_err(db_error)?;
            Ok(duet_server_store::PushConfig {
                thread: thread.parse().map_err(|e| StoreError::Corrupt(format!("push config thread `{thread}`: {e}")))?,
                session: row.try_get("session").map_err(db_error)?,
                id: row.try_get("id").map_err(db_error)?,
                url: row.try_get("url").map_err(db_error)?,
                token: row.try_get("token").map_err(db_error)?,
                auth_scheme: row.try_get("auth_scheme").map_err(db_error)?,
                auth_credentials: row.try_get("auth_credentials").map_err(db_error)?,
                principal: row.try_get("principal").map_err(db_error)?,
                watermark: row.try_get("watermark").map_err(db_error)?,
                last_state: row.try_get("last_state").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
                ended_at: row.try_get("ended_at").map_err(db_error)?,
            })
        }

        #[async_trait]
        impl duet_server_store::PushStore for $store {
            async fn put_push_config(&self, c: &duet_server_store::PushConfig) -> Result<(), StoreError> {
                sqlx::query(
                    "INSERT INTO push_configs (thread, session, id, url, token, auth_scheme, auth_credentials, principal, watermark, last_state, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     ON CONFLICT (thread, session, id) DO UPDATE SET url = excluded.url, token = excluded.token, \
                     auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials",
                )
                .bind(c.thread.to_string())
                .bind(c.session)
                .bind(&c.id)
                .bind(&c.url)
                .bind(&c.token)
                .bind(&c.auth_scheme)
                .bind(&c.auth_credentials)
                .bind(&c.principal)
                .bind(c.watermark)
                .bind(&c.last_state)
                .bind(c.created_at)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            async fn push_config(&self, thread: ThreadId, session: i64, id: &str) -> Result<Option<duet_server_store::PushConfig>, StoreError> {
                let row = sqlx::query("SELECT * FROM push_configs WHERE thread = $1 AND session = $2 AND id = $3")
                    .bind(thread.to_string())
                    .bind(session)
                    .bind(id)
                    .fetch_optional(&self.read)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(push_config_from_row).transpose()
            }

            async fn push_configs(&self, thread: ThreadId, session: i64) -> Result<Vec<duet_server_store::PushConfig>, StoreError> {
                let rows = sqlx::query("SELECT * FROM push_configs WHERE thread = $1 AND session = $2 ORDER BY created_at, id")
                    .bind(thread.to_string())
                    .bind(session)
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(push_config_from_row).collect()
            }

            async fn all_push_configs(&self) -> Result<Vec<duet_server_store::PushConfig>, StoreError> {
                let rows = sqlx::query("SELECT * FROM push_configs WHERE ended_at IS NULL ORDER BY created_at, id")
                    .fetch_all(&self.read)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(push_config_from_row).collect()
            }

            async fn delete_push_config(&self, thread: ThreadId, session: i64, id: &str) -> Result<bool, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                let done = sqlx::query("DELETE FROM push_configs WHERE thread = $1 AND session = $2 AND id = $3")
                    .bind(thread.to_string())
                    .bind(session)
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                // What it had not sent yet goes with it (its stream's pending rows).
                sqlx::query("DELETE FROM outbox WHERE stream = $1 AND status = 'pending'")
                    .bind(duet_server_store::push_stream(thread, id))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
                Ok(done.rows_affected() == 1)
            }

            async fn enqueue_pushes(
                &self,
                c: &duet_server_store::PushConfig,
                from: i64,
                to: i64,
                state: &str,
                bodies: &[String],
                done: bool,
                now: i64,
            ) -> Result<bool, StoreError> {
                let mut conn = self.writer().await?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(db_error)?;
                // An ended task's config stays (the client may still read it), marked so the
                // notifier no longer looks at it.
                let moved = sqlx::query("UPDATE push_configs SET watermark = $5, last_state = $6, ended_at = $7 WHERE thread = $1 AND session = $2 AND id = $3 AND watermark = $4")
                    .bind(c.thread.to_string())
                    .bind(c.session)
                    .bind(&c.id)
                    .bind(from)
                    .bind(to)
                    .bind(state)
                    .bind(done.then_some(now))
                    .execute(&mut *tx)
                    .await
                .map_err(db_error)?;
                if moved.rows_affected() != 1 {
                    tx.rollback().await.map_err(db_error)?;
                    return Ok(false);
                }
                for delivery in duet_server_store::push_deliveries(c, bodies, now) {
                    outbox_insert(&mut tx, &delivery, now).await?;
                }
                tx.commit().await.map_err(db_error)?;
                Ok(true)
            }
        }
    };
}
pub(crate) use push_impl;
