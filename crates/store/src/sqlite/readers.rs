//! SQLite's read connections: up to [`Readers::open`]'s number of read-only connections, opened
//! as reads need them and handed out with nothing more than a lock. sqlx's pool returned each
//! connection through a task it spawned to `ping` it first — a crossing to the connection's
//! worker thread and back after every read, for nothing a file database needs (a connection to a
//! file does not go stale, and its worker runs the commands it is sent in order, so a read
//! dropped halfway ends before the next begins). `&Readers` is an `Executor` like `&Pool`.

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteQueryResult, SqliteRow};
use sqlx::{ConnectOptions, Either, Execute, Executor, Sqlite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The read connections.
#[derive(Clone)]
pub(crate) struct Readers(Arc<Inner>);

struct Inner {
    options: SqliteConnectOptions,
    /// One per connection that may be out at once.
    permits: Arc<Semaphore>,
    /// Those opened and not out.
    idle: Mutex<Vec<SqliteConnection>>,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers")
            .field("free", &self.0.permits.available_permits())
            .finish_non_exhaustive()
    }
}

/// A read connection while it is out; back among the idle ones when dropped.
struct Reader {
    conn: Option<SqliteConnection>,
    readers: Arc<Inner>,
    _permit: OwnedSemaphorePermit,
}

impl Readers {
    /// At most `max` connections of `options` (which should open them read-only), one opened
    /// now (as sqlx's pool did: a file that cannot be read says so at once, and the first reads
    /// do not wait for a connection to open).
    pub(crate) async fn open(
        options: SqliteConnectOptions,
        max: usize,
    ) -> Result<Self, sqlx::Error> {
        let first = options.connect().await?;
        let readers = Self::new(options, max);
        readers
            .0
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(first);
        Ok(readers)
    }

    /// At most `max` connections of `options` (which should open them read-only), none opened
    /// yet.
    pub(crate) fn new(options: SqliteConnectOptions, max: usize) -> Self {
        Readers(Arc::new(Inner {
            options,
            permits: Arc::new(Semaphore::new(max.max(1))),
            idle: Mutex::new(Vec::new()),
        }))
    }

    /// A connection: an idle one, or a new one while fewer than the most are open; else the
    /// first to come back.
    async fn acquire(&self) -> Result<Reader, sqlx::Error> {
        let permit = self
            .0
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = self
            .0
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.0.options.connect().await?,
        };
        Ok(Reader {
            conn: Some(conn),
            readers: self.0.clone(),
            _permit: permit,
        })
    }
}

impl Reader {
    /// Its connection (held from `acquire` until it is dropped).
    fn conn(&mut self) -> Result<&mut SqliteConnection, sqlx::Error> {
        self.conn.as_mut().ok_or(sqlx::Error::PoolClosed)
    }

    /// `result`, after dropping the connection if it says the connection is broken (its
    /// worker gone, or I/O failed): it is not handed out again, and the next read opens one.
    fn checked<T>(&mut self, result: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        if matches!(
            &result,
            Err(sqlx::Error::WorkerCrashed | sqlx::Error::Io(_))
        ) {
            self.conn = None;
        }
        result
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.readers
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
        }
    }
}

impl<'p> Executor<'p> for &'_ Readers {
    type Database = Sqlite;

    /// The statements' results, all read before the first is handed on (reads are
    /// `fetch_all`s, `fetch_optional`s and `fetch_one`s: nothing streams).
    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<SqliteQueryResult, SqliteRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Sqlite>,
    {
        let readers = self.clone();
        stream::once(async move {
            let mut reader = readers.acquire().await?;
            let all: Result<Vec<_>, _> = reader.conn()?.fetch_many(query).try_collect().await;
            let all = reader.checked(all)?;
            Ok::<_, sqlx::Error>(stream::iter(all.into_iter().map(Ok)))
        })
        .try_flatten()
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<SqliteRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Sqlite>,
    {
        let readers = self.clone();
        Box::pin(async move {
            let mut reader = readers.acquire().await?;
            let row = reader.conn()?.fetch_optional(query).await;
            reader.checked(row)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [sqlx::sqlite::SqliteTypeInfo],
    ) -> BoxFuture<'e, Result<sqlx::sqlite::SqliteStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        let readers = self.clone();
        Box::pin(async move {
            let mut reader = readers.acquire().await?;
            reader.conn()?.prepare_with(sql, parameters).await
        })
    }

    fn describe<'e>(
        self,
        sql: sqlx::SqlStr,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Sqlite>, sqlx::Error>> {
        let readers = self.clone();
        Box::pin(async move {
            let mut reader = readers.acquire().await?;
            reader.conn()?.describe(sql).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Readers;
    use futures::FutureExt;
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Executor, Row};

    /// A database file with one table of `rows` rows, and readers of it (at most `max`).
    async fn readers(max: usize, rows: i64) -> (Readers, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("duet-readers-{}.db", uuid::Uuid::now_v7()));
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
        let mut conn = options.connect().await.expect("open");
        conn.execute("CREATE TABLE t (n INTEGER)")
            .await
            .expect("create");
        sqlx::query("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < $1) INSERT INTO t SELECT n FROM c")
            .bind(rows)
            .execute(&mut conn)
            .await
            .expect("fill");
        (Readers::new(options.read_only(true), max), path)
    }

    #[tokio::test]
    async fn more_reads_than_connections_all_end_on_at_most_that_many() {
        let (readers, path) = readers(2, 100).await;
        let reads = (0..16).map(|i| {
            let r = &readers;
            async move {
                let rows = sqlx::query("SELECT n FROM t WHERE n > $1 ORDER BY n")
                    .bind(i)
                    .fetch_all(r)
                    .await
                    .expect("read");
                (
                    i,
                    rows.len(),
                    rows.first().map(|row| row.get::<i64, _>("n")),
                )
            }
        });
        for (i, len, first) in futures::future::join_all(reads).await {
            assert_eq!(len, 100 - usize::try_from(i).expect("small"));
            assert_eq!(first, Some(i + 1));
        }
        let idle = readers.0.idle.lock().expect("idle").len();
        assert!((1..=2).contains(&idle), "{idle} connections opened");
        assert_eq!(readers.0.permits.available_permits(), 2);
        let _ = std::fs::remove_file(path);
    }

    #[tokio::test]
    async fn a_read_dropped_halfway_leaves_its_connection_to_the_next() {
        let (readers, path) = readers(1, 50_000).await;
        // The one connection opened, and idle.
        sqlx::query("SELECT 1")
            .fetch_one(&readers)
            .await
            .expect("warm");
        assert_eq!(readers.0.idle.lock().expect("idle").len(), 1);
        // A long read, polled until its command is with the connection's worker, then dropped.
        let mut dropped = Box::pin(sqlx::query("SELECT n FROM t ORDER BY n").fetch_all(&readers));
        for _ in 0..8 {
            if (&mut dropped).now_or_never().is_some() {
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(dropped);
        assert_eq!(readers.0.idle.lock().expect("idle").len(), 1, "handed back");
        // Rows written since: the next read, on that same connection, sees them (a statement
        // of the dropped read left open would pin its snapshot).
        let mut writer = SqliteConnectOptions::new()
            .filename(&path)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .connect()
            .await
            .expect("writer");
        writer
            .execute("INSERT INTO t VALUES (0)")
            .await
            .expect("write");
        let row = sqlx::query("SELECT COUNT(*) AS c FROM t")
            .fetch_one(&readers)
            .await
            .expect("the next read");
        assert_eq!(row.get::<i64, _>("c"), 50_001);
        let one = sqlx::query("SELECT n FROM t WHERE n = 7")
            .fetch_optional(&readers)
            .await
            .expect("read");
        assert_eq!(one.map(|r| r.get::<i64, _>("n")), Some(7));
        assert_eq!(readers.0.idle.lock().expect("idle").len(), 1);
        let _ = std::fs::remove_file(path);
    }
}
