//! How SQLite writes a group of commits: one multi-statement call (`BEGIN IMMEDIATE`, each
//! commit's statements with its placeholders renumbered, `COMMIT`) on the write connection,
//! and each written commit announced on the in-process change feed while that connection is
//! still held, so changes arrive in commit order.

use std::fmt::Write as _;
use std::sync::Arc;

use duet_runtime::{Change, ChangeHub};
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::Mutex;

use crate::batch::Arg;
use crate::group::{Failure, Returned, Writer};

/// One commit as SQLite writes it.
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

/// The write connection (shared with the store's other writes, taken per group) and the feed.
pub(crate) struct SqliteWriter {
    pub(crate) conn: Arc<Mutex<SqliteConnection>>,
    pub(crate) hub: ChangeHub,
}

impl Writer for SqliteWriter {
    type Job = Job;

    fn size(job: &Job) -> usize {
        job.args.len()
    }

    async fn write(&self, jobs: &[&Job]) -> Result<Vec<Returned>, Failure> {
        let mut conn = self.conn.lock().await;
        let returned = write_group(&mut conn, jobs).await.map_err(Failure::of)?;
        for (job, r) in jobs.iter().zip(&returned) {
            if r.is_some() {
                self.hub.publish(job.change);
            }
        }
        Ok(returned)
    }
}

/// Writes `jobs` in one transaction; what each one's thread update returned, in order.
async fn write_group(
    conn: &mut SqliteConnection,
    jobs: &[&Job],
) -> Result<Vec<Returned>, sqlx::Error> {
    let sql = match jobs {
        [one] => format!("BEGIN IMMEDIATE;\n{}COMMIT;", one.sql),
        _ => {
            let mut sql = String::from("BEGIN IMMEDIATE;\n");
            let mut offset = 0;
            for job in jobs {
                shift_into(&mut sql, &job.sql, offset);
                offset += job.args.len();
            }
            sql.push_str("COMMIT;");
            sql
        }
    };
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for arg in jobs.iter().flat_map(|j| &j.args) {
        query = match arg {
            Arg::Int(v) => query.bind(*v),
            Arg::OptInt(v) => query.bind(*v),
            Arg::Text(v) => query.bind(v.as_deref()),
            Arg::Bool(v) => query.bind(*v),
        };
    }
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
