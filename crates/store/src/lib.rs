//! Persistence for duet: the runtime's [`Store`] on SQLite (the embedded default: a file in WAL
//! mode, one writer connection, `BEGIN IMMEDIATE` for every write) and on Postgres (a pool; the
//! thread row locked `FOR UPDATE` for every write). This is the only crate that names sqlx.
//!
//! Both backends share their SQL text (sqlx's SQLite driver accepts `$1` placeholders); the few
//! differences are in how a write transaction starts and locks the thread row. The schema lives
//! in `migrations/sqlite/` and `migrations/postgres/`, embedded and applied by [`connect`].

use std::sync::Arc;

use duet_runtime::{Store, StoreError};
use duet_server_store::ServerStore;

mod answers_sql;
mod batch;
mod dir_blobs;
mod file_rows;
mod files_sql;
mod fragments;
mod group;
mod health_sql;
mod keys_sql;
mod leases_sql;
mod message_data;
mod notify_sql;
mod postgres;
mod push_sql;
mod queue_sql;
mod reads_sql;
mod rows;
mod schema;
mod sql;
mod sqlite;
#[cfg(feature = "test-util")]
pub mod testing;
mod timers_sql;

pub use dir_blobs::DirBlobs;
pub use postgres::PgStore;
pub use sqlite::{BackupError, SqliteBackup, SqliteOptions, SqliteStore, sqlite_backup};

/// Opens the store at `url` and applies pending migrations: `postgres://…` (or
/// `postgresql://…`) selects Postgres; `sqlite:PATH` or a plain path selects SQLite (the file
/// and its folder are created if missing; see [`sqlite_location`] for its options). What the
/// engine needs; [`open`] gives the server's tables too.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    Ok(open(url).await?.engine)
}

/// One database's two ports: the engine's tables and the server's own (API keys, sign-ins,
/// A2A push), sharing one connection pool.
#[derive(Clone)]
pub struct Stores {
    /// What the runtime holds.
    pub engine: Arc<dyn Store>,
    /// What `duet serve` holds.
    pub server: Arc<dyn ServerStore>,
}

/// Opens the database at `url` (as [`connect`] does) with both of its ports.
pub async fn open(url: &str) -> Result<Stores, StoreError> {
    fn both<S: Store + ServerStore>(store: S) -> Stores {
        let store = Arc::new(store);
        Stores {
            engine: store.clone(),
            server: store,
        }
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(both(PgStore::connect(url).await?))
    } else {
        let (path, options) = sqlite_location(url).map_err(|e| {
            StoreError::backend(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        })?;
        Ok(both(SqliteStore::open_with(&path, options).await?))
    }
}

/// The file and options a SQLite location names: a plain path as it is, or
/// `sqlite:PATH[?synchronous=normal|full]` (`full`: every commit is synced to disk before it
/// returns, so it survives a power loss, not only a crash; `normal`, the default, syncs at
/// checkpoints). An option this build does not know is refused, with the ones it does, and so is
/// any other `SCHEME://` (a misspelled `postgres://` is no file name).
pub fn sqlite_location(url: &str) -> Result<(std::path::PathBuf, SqliteOptions), String> {
    check_scheme(url)?;
    let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    else {
        return Ok((url.into(), SqliteOptions::default()));
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut options = SqliteOptions::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("synchronous", "normal")) => options.synchronous_full = false,
            Some(("synchronous", "full")) => options.synchronous_full = true,
            _ => {
                return Err(format!(
                    "`{pair}` in {url} is not a SQLite option duet knows (synchronous=normal|full)"
                ));
            }
        }
    }
    Ok((path.into(), options))
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
    // The server's own message: sqlx's text of a Postgres error ends in ` at line N`, a line
    // of Postgres's C source, which reads as if it were one of the user's.
    let message = e
        .as_database_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_owned());
    if constraint {
        StoreError::Conflict(message)
    } else {
        StoreError::Backend {
            message,
            source: Box::new(e),
        }
    }
}

/// The URL schemes `open` takes, and the backend each names.
const SCHEMES: [&str; 3] = ["postgres", "postgresql", "sqlite"];

/// Refuses a location that names a scheme duet does not know (`postgress://…`, `mysql://…`),
/// which would otherwise be taken for the name of a SQLite file, naming the nearest it knows.
fn check_scheme(url: &str) -> Result<(), String> {
    let Some((scheme, _)) = url.split_once("://") else {
        return Ok(());
    };
    let is_scheme = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let lower = scheme.to_ascii_lowercase();
    if !is_scheme || SCHEMES.contains(&lower.as_str()) {
        return Ok(());
    }
    let nearest = duet_runtime::nearest(&lower, &SCHEMES);
    let hint = nearest.map_or_else(String::new, |n| format!("; did you mean `{n}://`?"));
    Err(format!(
        "`{scheme}://` is not a database duet knows (postgres://, postgresql://, or a SQLite file: a path or sqlite:PATH){hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::{SqliteOptions, sqlite_location};

    #[test]
    fn a_sqlite_location_names_a_file_and_its_options() {
        let full = SqliteOptions {
            synchronous_full: true,
        };
        for (url, path, options) in [
            ("data/duet.db", "data/duet.db", SqliteOptions::default()),
            ("odd?name.db", "odd?name.db", SqliteOptions::default()),
            (
                "sqlite:data/duet.db",
                "data/duet.db",
                SqliteOptions::default(),
            ),
            (
                "sqlite://data/duet.db?synchronous=full",
                "data/duet.db",
                full,
            ),
            (
                "sqlite:/var/duet.db?synchronous=normal",
                "/var/duet.db",
                SqliteOptions::default(),
            ),
        ] {
            assert_eq!(sqlite_location(url), Ok((path.into(), options)), "{url}");
        }
        for url in ["sqlite:x.db?synchronous=off", "sqlite:x.db?cache=shared"] {
            let refused = sqlite_location(url).expect_err(url);
            assert!(refused.contains("synchronous=normal|full"), "{refused}");
        }
    }

    #[test]
    fn a_scheme_duet_does_not_know_is_no_file_name() {
        for (url, said) in [
            ("postgress://root@db/x", Some("did you mean `postgres://`?")),
            (
                "postgresqll://root@db/x",
                Some("did you mean `postgresql://`?"),
            ),
            ("sqlit://x.db", Some("did you mean `sqlite://`?")),
            ("mysql://root@db/x", None),
        ] {
            let refused = sqlite_location(url).expect_err(url);
            assert!(refused.contains("not a database duet knows"), "{refused}");
            if let Some(said) = said {
                assert!(refused.contains(said), "{refused}");
            }
        }
        // A file whose name merely holds `://` after something no scheme has is still a file.
        assert!(sqlite_location("./data://x.db").is_ok());
    }
}
