//! The check, at connect, that each connection duet opens is one server session of its own —
//! what a direct connection and a pooler in session mode give, and a pooler in transaction or
//! statement mode (PgBouncer's `pool_mode = transaction`) does not. duet relies on the session:
//! sqlx prepares named statements once per connection, the migrator holds a session advisory
//! lock across its transactions, and the change feed `LISTEN`s on one connection. Through a
//! transaction pooler those fail later and by chance (`prepared statement "sqlx_s_1" already
//! exists`, a migration lock left on a pooled server, notifications that never arrive), so the
//! store refuses it at once, in words. Only simple-protocol statements are sent here: nothing
//! is left prepared on a server that other clients will share.

use duet_runtime::StoreError;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection, Row};

/// What the refusal says (before what was observed).
pub(crate) const NOT_A_SESSION: &str = "this connection does not keep one Postgres session: a \
     pooler in transaction or statement mode (PgBouncer `pool_mode = transaction`) is between \
     duet and Postgres, and duet needs a session per connection (prepared statements, the \
     migration lock, LISTEN). Use the pooler's session mode (`pool_mode = session`) or connect \
     to Postgres directly";

/// The server process serving `conn`'s next statement.
async fn backend(conn: &mut PgConnection) -> Result<i32, sqlx::Error> {
    sqlx::raw_sql("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)
}

/// Refuses a connection whose statements may run on different server sessions. `first` asks
/// which server process serves it; a second connection opens a transaction and asks the same,
/// which pins that server for as long as it is open; then `first` asks again. On a session of
/// its own, `first` keeps its server and the second gets another. Through a transaction pooler,
/// the second is handed the server `first` just gave back (pools reuse their most recent idle
/// server), or `first` moves — either is a refusal.
pub(crate) async fn check(
    first: &mut PgConnection,
    options: &PgConnectOptions,
) -> Result<(), StoreError> {
    let refuse = |seen: String| {
        StoreError::backend_in(
            NOT_A_SESSION,
            std::io::Error::new(std::io::ErrorKind::Unsupported, seen),
        )
    };
    let before = backend(first).await.map_err(crate::db_error)?;
    let mut other = options.connect().await.map_err(crate::db_error)?;
    // A statement pooler refuses transactions (and drops the client).
    let mut tx = other
        .begin()
        .await
        .map_err(|e| refuse(format!("a transaction was refused: {e}")))?;
    let pinned = backend(&mut tx).await;
    let after = backend(first).await;
    let _ = tx.rollback().await;
    let _ = other.close().await;
    let (pinned, after) = (
        pinned.map_err(crate::db_error)?,
        after.map_err(crate::db_error)?,
    );
    if after != before {
        return Err(refuse(format!(
            "two statements of one connection ran on server processes {before} and {after}"
        )));
    }
    if pinned == before {
        return Err(refuse(format!(
            "a second connection was served by the first one's server process, {before}"
        )));
    }
    Ok(())
}
