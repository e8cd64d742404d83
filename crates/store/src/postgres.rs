//! The Postgres store: a connection pool; every write transaction locks the thread row
//! (`SELECT … FOR UPDATE`), which serialises a thread's writers across processes.

use sqlx::postgres::{PgPool, PgPoolOptions};

/// The store on a Postgres database.
#[derive(Clone, Debug)]
pub struct PgStore {
    write: PgPool,
    read: PgPool,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

impl PgStore {
    /// Connects to `url` and migrates the database.
    pub async fn connect(url: &str) -> Result<Self, duet_runtime::StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect(url)
            .await
            .map_err(crate::db_error)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| duet_runtime::StoreError::Database(e.to_string()))?;
        Ok(PgStore {
            write: pool.clone(),
            read: pool,
        })
    }

    async fn write_tx(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, duet_runtime::StoreError> {
        self.write.begin().await.map_err(crate::db_error)
    }
}

crate::sql::store_impl!(
    PgStore,
    sqlx::Postgres,
    " FOR UPDATE",
    "SELECT pg_database_size(current_database())"
);
