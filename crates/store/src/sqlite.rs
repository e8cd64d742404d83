//! The SQLite store: a file in WAL mode. Writes go through one connection and start with
//! `BEGIN IMMEDIATE`, so a write transaction never has to upgrade a read lock (which fails at once
//! with `SQLITE_BUSY` under WAL); reads use a small pool of their own.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// The store on one SQLite file.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    write: SqlitePool,
    read: SqlitePool,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` and migrates it.
    pub async fn open(path: &Path) -> Result<Self, duet_runtime::StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                duet_runtime::StoreError::Database(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(crate::db_error)?;
        MIGRATOR
            .run(&write)
            .await
            .map_err(|e| duet_runtime::StoreError::Database(e.to_string()))?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await
            .map_err(crate::db_error)?;
        Ok(SqliteStore { write, read })
    }

    async fn write_tx(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, duet_runtime::StoreError> {
        self.write
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(crate::db_error)
    }
}

crate::sql::store_impl!(
    SqliteStore,
    sqlx::Sqlite,
    "",
    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
);
