//! An online backup of a SQLite database: `VACUUM INTO` a new file, on a connection of its own
//! beside whatever else has the database open. It runs in one read transaction, so in WAL mode
//! writers go on meanwhile and the copy is the database as of one moment — every commit before
//! the backup began, none after. The copy is written under a temporary name in the target's
//! folder, checked (`PRAGMA quick_check`, and read as a duet database), synced, and only then
//! given the name asked for: a backup cut off midway never leaves a file under that name, and
//! an existing file is replaced only when asked (at once, by a rename).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

/// What a backup wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteBackup {
    /// The copy.
    pub path: PathBuf,
    /// Its size in bytes (`VACUUM INTO` writes it compacted: free pages are left out).
    pub bytes: u64,
    /// How many threads it holds.
    pub threads: i64,
}

/// Why a backup wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// There is no database file at the source (a backup never creates one).
    #[error("there is no SQLite database at {0}")]
    NoDatabase(PathBuf),
    /// The target exists, and replacing it was not asked for.
    #[error("{0} already exists")]
    Exists(PathBuf),
    /// The copy was made but fails SQLite's check; it was removed.
    #[error("the copy fails SQLite's check ({0}); nothing was kept")]
    Damaged(String),
    /// Reading the database, writing the copy or putting it in place failed.
    #[error("{message}")]
    Failed {
        /// What failed, for people.
        message: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl BackupError {
    fn failed(
        context: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        BackupError::Failed {
            message: format!("{context}: {source}"),
            source: Box::new(source),
        }
    }
}

/// Copies the SQLite database at `source` to a new file `to` while it stays in use (see the
/// module's description); `overwrite` replaces a file already at `to`.
pub async fn sqlite_backup(
    source: &Path,
    to: &Path,
    overwrite: bool,
) -> Result<SqliteBackup, BackupError> {
    if !source.is_file() {
        return Err(BackupError::NoDatabase(source.to_owned()));
    }
    if !overwrite && to.symlink_metadata().is_ok() {
        return Err(BackupError::Exists(to.to_owned()));
    }
    let Some(name) = to.file_name().and_then(|n| n.to_str()) else {
        return Err(BackupError::failed(
            format!("{}", to.display()),
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name in UTF-8"),
        ));
    };
    // Absolute, so the name SQLite is handed never reads as a `file:` URI.
    let folder = to.parent().filter(|d| !d.as_os_str().is_empty());
    let folder = std::fs::canonicalize(folder.unwrap_or(Path::new(".")))
        .map_err(|e| BackupError::failed(format!("the folder of {}", to.display()), e))?;
    let partial = folder.join(format!(".{name}.partial-{}", uuid::Uuid::now_v7().simple()));
    let written = copy(source, &partial).await;
    let threads = match written {
        Ok(threads) => threads,
        Err(e) => {
            remove(&partial);
            return Err(e);
        }
    };
    let target = to.to_owned();
    let placed = tokio::task::spawn_blocking(move || place(&partial, &target, &folder, overwrite))
        .await
        .map_err(|e| BackupError::failed("putting the copy in place", e))??;
    Ok(SqliteBackup {
        path: to.to_owned(),
        bytes: placed,
        threads,
    })
}

/// `VACUUM INTO partial`, then the copy checked and its threads counted.
async fn copy(source: &Path, partial: &Path) -> Result<i64, BackupError> {
    let Some(into) = partial.to_str() else {
        return Err(BackupError::failed(
            format!("{}", partial.display()),
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a path in UTF-8"),
        ));
    };
    let options = |path: &Path| {
        SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(false)
            .busy_timeout(Duration::from_secs(5))
    };
    let reading = format!("reading {}", source.display());
    let mut conn = options(source)
        .connect()
        .await
        .map_err(|e| BackupError::failed(&reading, e))?;
    sqlx::query("VACUUM INTO $1")
        .bind(into)
        .execute(&mut conn)
        .await
        .map_err(|e| BackupError::failed(format!("copying {}", source.display()), e))?;
    let _ = conn.close().await;

    let checking = "checking the copy";
    let mut copy = options(partial)
        .connect()
        .await
        .map_err(|e| BackupError::failed(checking, e))?;
    let report: Vec<String> = sqlx::query_scalar("PRAGMA quick_check")
        .fetch_all(&mut copy)
        .await
        .map_err(|e| BackupError::failed(checking, e))?;
    if report != ["ok"] {
        let _ = copy.close().await;
        return Err(BackupError::Damaged(report.join("; ")));
    }
    let threads = sqlx::query_scalar("SELECT count(*) FROM threads")
        .fetch_one(&mut copy)
        .await
        .map_err(|e| BackupError::failed("reading the copy as a duet database", e));
    let _ = copy.close().await;
    threads
}

/// Syncs the copy, gives it its name (replacing what is there only when `overwrite`), syncs
/// the folder, and returns the copy's size.
fn place(partial: &Path, to: &Path, folder: &Path, overwrite: bool) -> Result<u64, BackupError> {
    let io = |what: &str, e: std::io::Error| {
        remove(partial);
        BackupError::failed(format!("{what} {}", to.display()), e)
    };
    let file = std::fs::File::open(partial).map_err(|e| io("syncing", e))?;
    file.sync_all().map_err(|e| io("syncing", e))?;
    let bytes = file.metadata().map_err(|e| io("syncing", e))?.len();
    drop(file);
    if overwrite {
        std::fs::rename(partial, to).map_err(|e| io("writing", e))?;
    } else {
        // A link fails if the name was taken meanwhile, where a rename would replace it.
        match std::fs::hard_link(partial, to) {
            Ok(()) => remove(partial),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                remove(partial);
                return Err(BackupError::Exists(to.to_owned()));
            }
            // A file system without hard links: the name checked once more, then a rename.
            Err(_) if to.symlink_metadata().is_err() => {
                std::fs::rename(partial, to).map_err(|e| io("writing", e))?;
            }
            Err(_) => {
                remove(partial);
                return Err(BackupError::Exists(to.to_owned()));
            }
        }
    }
    if let Ok(dir) = std::fs::File::open(folder) {
        let _ = dir.sync_all();
    }
    Ok(bytes)
}

/// Removes a partial copy (and whatever SQLite left beside it).
fn remove(partial: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut path = partial.as_os_str().to_owned();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
}
