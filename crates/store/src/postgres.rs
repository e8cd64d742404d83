//! The Postgres store: a connection pool; every write transaction locks the thread row
//! (`SELECT … FOR UPDATE`), which serialises a thread's writers across processes. A commit is
//! one call of the `duet_commit` function, grouped with the other commits waiting
//! (`postgres/commit.rs`, `group.rs`).
//!
//! The change feed crosses processes: every write that changes a thread calls
//! `pg_notify('duet_changes', 'ID SEQ STATUS')` inside its transaction (so the notification is
//! delivered only if it commits, in commit order: in the commit, one more column of the
//! statement that writes), and a store with subscribers listens for them
//! (`postgres/listen.rs`).

mod commit;
mod listen;
mod session;

use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use duet_runtime::{ChangeHub, WakeHub};
use listen::Feed;

/// The change feed's notice for the `threads` row in scope (`duet_changes`, the channel
/// `listen::Hub for ChangeHub` listens on, and the payload
/// `parse_change` reads), one literal for every statement that announces a thread.
macro_rules! notify {
    () => {
        "pg_notify('duet_changes', id || ' ' || (next_seq - 1) || ' ' || status)"
    };
}

/// The timer wakeup for the `timers` row in scope, if it is `pending` (`duet_timers`, the
/// channel `listen::Hub for WakeHub` listens on; the payload is its due time), one literal for
/// every statement that puts a timer back.
macro_rules! wake {
    () => {
        "CASE WHEN status = 'pending' THEN (SELECT 1 FROM pg_notify('duet_timers', due_at::text)) END"
    };
}

/// Why the first connection failed, said so a person can act: a database that does not exist
/// (SQLSTATE `3D000`) is named, with the commands that create it.
fn connect_error(e: sqlx::Error, options: &PgConnectOptions) -> duet_runtime::StoreError {
    let missing = e
        .as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| code == "3D000");
    if !missing {
        return crate::db_error(e);
    }
    let (host, port, user) = (
        options.get_host(),
        options.get_port(),
        options.get_username(),
    );
    let name = options.get_database().unwrap_or(user);
    duet_runtime::StoreError::Backend {
        message: format!(
            "the Postgres database `{name}` does not exist on {host}:{port}; create it with `createdb -h {host} -p {port} -U {user} {name}` (or `CREATE DATABASE \"{name}\";` in psql), then run again: duet creates its tables itself"
        ),
        source: Box::new(e),
    }
}

/// The store on a Postgres database.
#[derive(Clone, Debug)]
pub struct PgStore {
    write: PgPool,
    read: PgPool,
    feed: Arc<Feed<ChangeHub>>,
    wakes: Arc<Feed<WakeHub>>,
    committer: crate::group::Committer<commit::Job, crate::group::Returned>,
}

/// The most groups of commits written at once, each on a connection of its own (of the pool's
/// eight): while they all are, the commits that come meanwhile wait and form the next group.
const COMMITS_IN_FLIGHT: usize = 4;

static MIGRATOR: std::sync::LazyLock<sqlx::migrate::Migrator> =
    std::sync::LazyLock::new(|| crate::schema::tolerant(sqlx::migrate!("migrations/postgres")));

/// What the database says of its schema before this build migrates it: `min_compatible` (none
/// before that table) and the newest migration applied (none on a new database).
async fn compat(conn: &mut sqlx::PgConnection) -> Result<(Option<i64>, Option<i64>), sqlx::Error> {
    let min =
        match sqlx::query_scalar::<_, Option<String>>("SELECT to_regclass('duet_schema')::text")
            .fetch_one(&mut *conn)
            .await?
        {
            Some(_) => {
                sqlx::query_scalar("SELECT min_compatible FROM duet_schema WHERE id = 1")
                    .fetch_optional(&mut *conn)
                    .await?
            }
            None => None,
        };
    let applied = match sqlx::query_scalar::<_, Option<String>>(
        "SELECT to_regclass('_sqlx_migrations')::text",
    )
    .fetch_one(&mut *conn)
    .await?
    {
        Some(_) => {
            sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
                .fetch_one(&mut *conn)
                .await?
        }
        None => None,
    };
    Ok((min, applied))
}

impl PgStore {
    /// Connects to `url` and migrates the database.
    pub async fn connect(url: &str) -> Result<Self, duet_runtime::StoreError> {
        // No `extra_float_digits` in the startup packet (sqlx sends 2 by default): no column of
        // ours is a float, and poolers refuse startup parameters they do not track (PgBouncer:
        // "unsupported startup parameter").
        let options = url
            .parse::<PgConnectOptions>()
            .map_err(crate::db_error)?
            .extra_float_digits(None);
        // An unreachable server is said at once, with the driver's own error (connection
        // refused, unknown host, authentication), not as the pool's "timed out" after 30 s: one
        // connection first, given 5 s, which also checks that a connection is a session of its
        // own (no pooler in transaction mode) before anything relies on it.
        let wait = std::time::Duration::from_secs(5);
        let first = async {
            let mut first = sqlx::ConnectOptions::connect(&options)
                .await
                .map_err(|e| connect_error(e, &options))?;
            session::check(&mut first, &options).await?;
            let _ = sqlx::Connection::close(first).await;
            Ok::<_, duet_runtime::StoreError>(())
        };
        match tokio::time::timeout(wait, first).await {
            Ok(checked) => checked?,
            Err(_) => {
                return Err(duet_runtime::StoreError::backend_in(
                    format!("no answer from the server within {} s", wait.as_secs()),
                    std::io::Error::from(std::io::ErrorKind::TimedOut),
                ));
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .test_before_acquire(false)
            .acquire_timeout(wait)
            .connect_with(options.clone())
            .await
            .map_err(crate::db_error)?;
        // On a connection of its own (not `&pool`): this keeps `connect`'s future `Send` for any
        // caller, so a service can open its store inside a spawned task. sqlx's Postgres
        // migrator takes an advisory lock, so concurrent processes migrate one at a time.
        let mut conn = pool.acquire().await.map_err(crate::db_error)?;
        let (min, applied) = compat(&mut conn).await.map_err(crate::db_error)?;
        crate::schema::check(min, applied, crate::schema::newest(&MIGRATOR))?;
        MIGRATOR
            .run_direct(None, &mut *conn, false)
            .await
            .map_err(|e| duet_runtime::StoreError::backend_in("migrating", e))?;
        drop(conn);
        Ok(PgStore {
            write: pool.clone(),
            read: pool.clone(),
            feed: Arc::new(Feed::start(options.clone())),
            wakes: Arc::new(Feed::start(options)),
            committer: crate::group::Committer::start(commit::PgWriter { pool }, COMMITS_IN_FLIGHT),
        })
    }

    fn subscribe(&self) -> futures::stream::BoxStream<'static, duet_runtime::FeedEvent> {
        self.feed.subscribe()
    }

    /// Nothing to do after a commit: the write's `pg_notify` reaches this store's subscribers
    /// (and every other store's) through the listener.
    fn publish(&self, _: Change) {}

    /// A subscription to timer wakeups, from every process (`duet_timers`).
    fn wakeups(&self) -> futures::stream::BoxStream<'static, duet_runtime::TimerWake> {
        self.wakes.subscribe()
    }

    /// Nothing to do after a timer is put back: the write's `pg_notify` (`wake!`) reaches every
    /// store's subscribers through the listener.
    fn wake(&self, _: i64) {}

    async fn writer(
        &self,
    ) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, duet_runtime::StoreError> {
        self.write.acquire().await.map_err(crate::db_error)
    }
}

impl PgStore {
    /// A commit in one round trip: `duet_commit` called for it, alone or with the other commits
    /// waiting for the committer (see `postgres/commit.rs`).
    async fn commit_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
    ) -> Result<CommitOutcome, StoreError> {
        let job = commit::Job::new(t, owner, &commit)?;
        crate::group::outcome(self.committer.commit(job).await?, t, &commit)
    }

    /// `commit_reading`: the commit alone. Reading the session in the same round trip would be
    /// a second statement after `duet_commit`'s call; the caller reads it instead, as it would
    /// without asking.
    async fn commit_reading_impl(
        &self,
        t: &Thread,
        owner: Uuid,
        commit: Commit,
        _session: i64,
    ) -> Result<(CommitOutcome, Option<Vec<duet_runtime::ReadBack>>), StoreError> {
        Ok((self.commit_impl(t, owner, commit).await?, None))
    }
}

impl PgStore {
    /// `enqueue` in one statement (one round trip): the thread row locked and read as it
    /// stands (a row locked `FOR UPDATE` is read in its newest version), the message id, the
    /// message, the lease taken if free, and the change feed's notice.
    async fn enqueue_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Option<Lease>,
        now: i64,
    ) -> Result<bool, StoreError> {
        const SQL: &str = concat!(
            "WITH t AS (SELECT num, id, next_seq, status, lease_owner, lease_expires FROM threads WHERE id = $1 FOR UPDATE), \
             d AS (INSERT INTO deliveries (thread, message_id, created_at) SELECT num, $2, $3 FROM t WHERE $2::text IS NOT NULL \
               ON CONFLICT (thread, message_id) DO NOTHING RETURNING thread), \
             q AS (INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace, attachments, message_id) \
               SELECT num, $4, $5, $6, $7, $8, $9, $3, $10, $11, $12, $13, $14, $15, $2 FROM t WHERE $2::text IS NULL OR EXISTS (SELECT 1 FROM d) \
               RETURNING thread), \
             l AS (UPDATE threads SET lease_owner = $16, lease_expires = $17, abort_requested = FALSE FROM t \
               WHERE threads.num = t.num AND $16::text IS NOT NULL AND EXISTS (SELECT 1 FROM q) \
                 AND (t.lease_owner IS NULL OR t.lease_expires < $18 OR t.lease_owner = $16) \
               RETURNING threads.num) \
             SELECT (SELECT count(*) FROM l) AS claimed, ",
            notify!(),
            " FROM t WHERE EXISTS (SELECT 1 FROM q)"
        );
        let row = crate::fragments::bind_enqueue!(sqlx::query(SQL), id, &message, &claim, now)
            .fetch_optional(&self.write)
            .await
            .map_err(db_error)?;
        match row {
            Some(row) => Ok(row.try_get::<i64, _>("claimed").map_err(db_error)? > 0),
            None => match &message.message_id {
                // The thread is there and the message is not queued: its id was delivered
                // before.
                Some(message_id) if self.thread_by_id(id).await?.is_some() => {
                    Err(StoreError::Duplicate {
                        thread: id,
                        message_id: message_id.clone(),
                    })
                }
                _ => Err(StoreError::NotFound(id.to_string())),
            },
        }
    }

    /// `run_start`: the three reads at once, each on a pooled connection (Postgres takes
    /// one statement with parameters per round trip).
    async fn run_start_impl(&self, id: ThreadId) -> Result<duet_runtime::RunStart, StoreError> {
        let (thread, messages, queue) =
            tokio::try_join!(self.thread_by_id(id), self.messages(id), self.queue(id))?;
        Ok(duet_runtime::RunStart {
            thread,
            messages,
            queue,
            deadline_override: None,
        })
    }

    /// The claiming writes with the run's start: Postgres does not read it with them (the run
    /// reads it in three statements at once, as [`Self::run_start_impl`]).
    async fn enqueue_starting_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Lease,
        now: i64,
    ) -> Result<duet_runtime::Starting<bool>, StoreError> {
        let claimed = self.enqueue_impl(id, message, Some(claim), now).await?;
        Ok(duet_runtime::Starting::of(claimed))
    }

    async fn create_starting_impl(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<duet_runtime::Starting<Option<Thread>>, StoreError> {
        let made = self.create_with_impl(key, new, message, claim).await?;
        Ok(duet_runtime::Starting::of(made))
    }

    async fn answer_starting_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
    ) -> Result<duet_runtime::Starting<AnswerOutcome>, StoreError> {
        let outcome = self.answer_impl(id, message, park, claim).await?;
        Ok(duet_runtime::Starting::of(outcome))
    }

    /// `answer` in one round trip: one call of `duet_answer` (migration 0022), which locks the
    /// thread row, then queues the park's answer (with the change feed's notice), records it and
    /// takes the lease if free, or reads back the answer that came first.
    async fn answer_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
    ) -> Result<AnswerOutcome, StoreError> {
        const SQL: &str = "SELECT r_outcome, r_claimed, r_content, r_at, r_author, r_message_id \
             FROM duet_answer($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
             $16, $17, $18, $19, $20)";
        let query = sqlx::query(SQL)
            .bind(id.to_string())
            .bind(park.session)
            .bind(park.seq)
            .bind(claim.owner.to_string())
            .bind(claim.until)
            .bind(claim.now)
            .bind(message.message_id.as_deref())
            .bind(message.author.as_deref());
        let row = crate::fragments::bind_message!(query, &message)
            .fetch_one(&self.write)
            .await
            .map_err(db_error)?;
        let outcome: String = row.try_get("r_outcome").map_err(db_error)?;
        match outcome.as_str() {
            "accepted" => Ok(AnswerOutcome::Accepted {
                claimed: row.try_get("r_claimed").map_err(db_error)?,
            }),
            "refused" => {
                // `r_at` is set whenever a first answer was found.
                let first = match row.try_get::<Option<i64>, _>("r_at").map_err(db_error)? {
                    Some(at) => Some(FirstAnswer {
                        content: row
                            .try_get::<Option<String>, _>("r_content")
                            .map_err(db_error)?
                            .unwrap_or_default(),
                        at,
                        author: row.try_get("r_author").map_err(db_error)?,
                        message_id: row.try_get("r_message_id").map_err(db_error)?,
                    }),
                    None => None,
                };
                Ok(AnswerOutcome::Refused { first })
            }
            "duplicate" => Err(StoreError::Duplicate {
                thread: id,
                message_id: message.message_id.unwrap_or_default(),
            }),
            "not_found" => Err(StoreError::NotFound(id.to_string())),
            other => Err(corrupt("duet_answer's outcome", other)),
        }
    }

    /// `create_with` in one statement (one round trip): the thread, unless its key is taken,
    /// its message id, its first message and the change feed's notice, all from the thread row
    /// the statement inserts. Nothing else can see the new row before it commits, so there is
    /// nothing to lock.
    async fn create_with_impl(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<Option<Thread>, StoreError> {
        const SQL: &str = concat!(
            "WITH t AS (INSERT INTO threads (id, key, agent, origin, parent, principal, source, status, created_at, updated_at, lease_owner, lease_expires) \
               VALUES ($1, $2, $3, $3, $4, $5, $6, 'idle', $7, $7, $8, $9) ON CONFLICT (key) DO NOTHING RETURNING ",
            thread_cols!(),
            "), d AS (INSERT INTO deliveries (thread, message_id, created_at) \
               SELECT num, $10, $11 FROM t WHERE $10::text IS NOT NULL), \
             q AS (INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace, attachments, message_id) \
               SELECT num, $12, $13, $14, $15, $16, $17, $11, $18, $19, $20, $21, $22, $23, $10 FROM t) \
             SELECT t.*, ",
            notify!(),
            " FROM t"
        );
        let query = crate::fragments::bind_new_thread!(sqlx::query(SQL), key, new)
            .bind(claim.owner.to_string())
            .bind(claim.until)
            .bind(message.message_id.as_deref())
            .bind(claim.now);
        let row = crate::fragments::bind_message!(query, &message)
            .fetch_optional(&self.write)
            .await
            .map_err(db_error)?;
        row.as_ref().map(thread_from_row).transpose()
    }
}

crate::sql::store_impl!(
    PgStore,
    sqlx::Postgres,
    "BEGIN",
    " FOR UPDATE",
    " FOR UPDATE SKIP LOCKED",
    notify!(),
    wake!(),
    "SELECT pg_database_size(current_database())",
    "SELECT s.seq FROM journal s WHERE s.thread = (SELECT num FROM threads WHERE id = $1) \
     AND s.kind = 'session_started' AND (s.data::jsonb ->> 'session')::bigint",
    crate::reads_sql::settles_sql!("journal j")
);

crate::files_sql::files_impl!(
    PgStore,
    sqlx::Postgres,
    "BEGIN",
    "SELECT DISTINCT c.hash FROM files f \
     CROSS JOIN LATERAL jsonb_array_elements_text(f.chunks::jsonb) AS c (hash) \
     WHERE c.hash IN (SELECT jsonb_array_elements_text($1::jsonb))",
    "DELETE FROM blobs WHERE created_at < $1 \
     AND hash NOT IN (SELECT jsonb_array_elements_text(f.chunks::jsonb) FROM files f)"
);
