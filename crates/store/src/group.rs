//! Group commit on SQLite: one committer task takes every commit waiting for the write
//! connection and writes them in one transaction, as one multi-statement call, so a crossing to
//! the driver's thread and a WAL append are shared by all of them. Each caller still learns its
//! own outcome: a commit whose lease check fails writes nothing and fails only its own run, and
//! should one commit's statement fail the whole transaction, each commit is written again alone
//! so that only it fails.
//!
//! A commit handed to the committer is written whatever becomes of its caller: a run dropped
//! meanwhile never leaves the write connection inside a transaction.

use std::fmt::Write as _;
use std::sync::Arc;

use duet_runtime::{Change, ChangeHub, StoreError};
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::batch::Arg;

/// The most commits written together.
const MAX_GROUP: usize = 64;

/// The most bind arguments in one group (SQLite allows 32,766).
const MAX_ARGS: usize = 30_000;

/// What a commit's thread update returned: its lease owner after the write (`None`: released)
/// and how many messages wait; `None` when the lease was lost and nothing was written.
pub(crate) type Returned = Option<(Option<String>, i64)>;

/// One commit for the committer.
pub(crate) struct Job {
    /// Its statements, numbered from `$1` as if alone; the thread update comes last and returns
    /// `run` (its `$2`, the lease owner), `lease_owner` and `waiting`.
    pub(crate) sql: String,
    pub(crate) args: Vec<Arg>,
    /// The run that commits (`$2`): tells its row from the others' in a group.
    pub(crate) run: String,
    /// Announced on the change feed once written.
    pub(crate) change: Change,
}

struct Queued {
    job: Job,
    done: oneshot::Sender<Result<Returned, StoreError>>,
}

/// The committer's mailbox. It stops when every clone is gone.
#[derive(Clone, Debug)]
pub(crate) struct Committer(mpsc::UnboundedSender<Queued>);

impl Committer {
    /// Starts the committer on `write` (the connection other writes share, taken per group),
    /// announcing each written commit on `hub`.
    pub(crate) fn start(write: Arc<Mutex<SqliteConnection>>, hub: ChangeHub) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx, write, hub));
        Committer(tx)
    }

    /// Writes `job` with whatever else is waiting; what its thread update returned.
    pub(crate) async fn commit(&self, job: Job) -> Result<Returned, StoreError> {
        let (done, outcome) = oneshot::channel();
        let gone = || StoreError::Conflict("the store's committer has stopped".into());
        self.0.send(Queued { job, done }).map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }
}

async fn run(
    mut rx: mpsc::UnboundedReceiver<Queued>,
    write: Arc<Mutex<SqliteConnection>>,
    hub: ChangeHub,
) {
    let mut held: Option<Queued> = None;
    loop {
        let first = match held.take() {
            Some(q) => q,
            None => match rx.recv().await {
                Some(q) => q,
                None => return,
            },
        };
        let mut args = first.job.args.len();
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            let Ok(next) = rx.try_recv() else { break };
            if args + next.job.args.len() > MAX_ARGS {
                held = Some(next);
                break;
            }
            args += next.job.args.len();
            group.push(next);
        }
        let mut conn = write.lock().await;
        if group.len() > 1 {
            let jobs: Vec<&Job> = group.iter().map(|q| &q.job).collect();
            if let Ok(returned) = write_group(&mut conn, &jobs).await {
                for (q, r) in group.into_iter().zip(returned) {
                    if r.is_some() {
                        hub.publish(q.job.change);
                    }
                    let _ = q.done.send(Ok(r));
                }
                continue;
            }
            // One commit failed them all (rolled back): each alone, so only it fails.
        }
        for q in group {
            let written = write_group(&mut conn, &[&q.job])
                .await
                .map(|mut r| r.pop().flatten())
                .map_err(crate::db_error);
            if let Ok(Some(_)) = &written {
                hub.publish(q.job.change);
            }
            let _ = q.done.send(written);
        }
    }
}

/// Writes `jobs` in one transaction; what each one's thread update returned, in order.
async fn write_group(
    conn: &mut SqliteConnection,
    jobs: &[&Job],
) -> Result<Vec<Returned>, sqlx::Error> {
    let mut sql = String::from("BEGIN IMMEDIATE;\n");
    let mut args: Vec<Arg> = Vec::new();
    for job in jobs {
        shift_into(&mut sql, &job.sql, args.len());
        args.extend(job.args.iter().cloned());
    }
    sql.push_str("COMMIT;");
    let query = crate::sql::bind_args!(sqlx::query(sqlx::AssertSqlSafe(sql)), args);
    let rows = match query.fetch_all(&mut *conn).await {
        Ok(rows) => rows,
        Err(e) => {
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            return Err(e);
        }
    };
    let mut returned: Vec<Returned> = vec![None; jobs.len()];
    for row in rows {
        let run: String = row.try_get("run")?;
        if let Some(at) = jobs.iter().position(|j| j.run == run) {
            returned[at] = Some((row.try_get("lease_owner")?, row.try_get("waiting")?));
        }
    }
    Ok(returned)
}

/// Appends `sql` to `out` with each placeholder `$N` renumbered `$(N + offset)`.
fn shift_into(out: &mut String, sql: &str, offset: usize) {
    if offset == 0 {
        out.push_str(sql);
        return;
    }
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if let Ok(n) = rest[..digits].parse::<usize>() {
            let _ = write!(out, "{}", n + offset);
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::shift_into;

    #[test]
    fn placeholders_are_renumbered_and_nothing_else_changes() {
        let mut out = String::new();
        shift_into(
            &mut out,
            "UPDATE t SET a = $3 WHERE id = $1 AND o = $12;",
            19,
        );
        assert_eq!(out, "UPDATE t SET a = $22 WHERE id = $20 AND o = $31;");
        let mut out = String::new();
        shift_into(&mut out, "SELECT $1, '$', $", 0);
        assert_eq!(out, "SELECT $1, '$', $");
        let mut out = String::new();
        shift_into(&mut out, "a $ b $2", 5);
        assert_eq!(out, "a $ b $7");
    }
}
