//! Persistence for duet: the runtime's [`Store`] on SQLite (the embedded default: a file in WAL
//! mode, one writer connection, `BEGIN IMMEDIATE` for every write) and on Postgres (a pool; the
//! thread row locked `FOR UPDATE` for every write). This is the only crate that names sqlx.
//!
//! Both backends share their SQL text (sqlx's SQLite driver accepts `$1` placeholders); the few
//! differences are in how a write transaction starts and locks the thread row. The schema lives
//! in `migrations/sqlite/` and `migrations/postgres/`, embedded and applied by [`connect`].

use std::sync::Arc;

use duet_runtime::{Store, StoreError};

mod answers_sql;
mod batch;
mod group;
mod keys_sql;
mod leases_sql;
mod listen;
mod postgres;
mod push_sql;
mod queue_sql;
mod reads_sql;
mod rows;
mod sql;
mod sqlite;

pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// Opens the store at `url` and applies pending migrations: `postgres://…` (or
/// `postgresql://…`) selects Postgres; `sqlite:PATH` or a plain path selects SQLite (the file
/// and its folder are created if missing).
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url).await?))
    } else {
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        Ok(Arc::new(
            SqliteStore::open(std::path::Path::new(path)).await?,
        ))
    }
}

/// A sqlx error as a [`StoreError`] of its kind: a constraint the write broke (by the database's
/// own classification, never by its message) is a [`StoreError::Conflict`]; anything else is a
/// [`StoreError::Backend`] that keeps the sqlx error as its source.
pub(crate) fn db_error(e: sqlx::Error) -> StoreError {
    use sqlx::error::ErrorKind;
    let constraint = e.as_database_error().is_some_and(|d| {
        matches!(
            d.kind(),
            ErrorKind::UniqueViolation
                | ErrorKind::ForeignKeyViolation
                | ErrorKind::NotNullViolation
                | ErrorKind::CheckViolation
                | ErrorKind::ExclusionViolation
        )
    });
    if constraint {
        StoreError::Conflict(e.to_string())
    } else {
        StoreError::backend(e)
    }
}
