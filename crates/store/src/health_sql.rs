//! The heartbeat's part of the shared store implementation (`HealthStore` on the `heartbeat`
//! table), stamped out inside `store_impl!`.

/// `impl HealthStore for $store` (see `store_impl!`).
macro_rules! health_impl {
    ($store:ident) => {
        #[async_trait]
        impl duet_server_store::HealthStore for $store {
            async fn heartbeat(&self, at: i64) -> Result<(), StoreError> {
                // One statement, committed on its own: on SQLite through the write connection
                // (the one every commit takes), on Postgres on a pooled connection.
                sqlx::query(
                    "INSERT INTO heartbeat (id, at) VALUES (1, $1) \
                     ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                )
                .bind(at)
                .execute(&mut *self.writer().await?)
                .await
                .map_err(db_error)?;
                Ok(())
            }
        }
    };
}

pub(crate) use health_impl;
