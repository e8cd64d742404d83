//! How SQLite writes a group of commits: one multi-statement call (`BEGIN IMMEDIATE`, each
//! commit's statements with its placeholders renumbered, `COMMIT`) on the write connection,
//! and each written commit announced on the in-process change feed while that connection is
//! still held, so changes arrive in commit order (and the timers it wrote, on the wakeups).

use std::fmt::Write as _;
use std::sync::Arc;

use duet_runtime::{Change, ChangeHub, Commit, WakeHub};
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::batch::{Arg, Batch};
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
    /// The earliest due time of the timers it writes, announced on the wakeups once written.
    pub(crate) due: Option<i64>,
}

/// The write connection (shared with the store's other writes, taken per group), the feed and
/// the timer wakeups.
pub(crate) struct SqliteWriter {
    pub(crate) conn: Arc<Mutex<SqliteConnection>>,
    pub(crate) hub: ChangeHub,
    pub(crate) wakes: WakeHub,
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
                if let Some(at) = job.due {
                    self.wakes.due(at);
                }
            }
        }
        Ok(returned)
    }
}

/// Appends to `batch` (a commit's, `Batch::new`'s `$1` thread id, `$2` lease owner, `$19` its
/// time) what `commit` writes to the timer table, each statement fenced by the lease like the
/// rest: this thread's pending timers named by id or subject cancelled, its running ones named
/// done completed, then the new ones (after, so a commit's cancellations never reach its own
/// new timers). Returns the earliest due time written. A new timer's id already taken breaks the
/// table's key, and the whole commit fails.
pub(crate) fn timer_statements(batch: &mut Batch, commit: &Commit) -> Option<i64> {
    const MINE: &str = "thread = (SELECT num FROM threads WHERE id = $1 AND lease_owner = $2)";
    let list = |batch: &mut Batch, values: Vec<String>| {
        let params: Vec<String> = values
            .into_iter()
            .map(|v| batch.param(Arg::Text(Some(v))))
            .collect();
        params.join(", ")
    };
    for ids in commit.cancel_timers.chunks(500) {
        let ids = list(batch, ids.iter().map(Uuid::to_string).collect());
        batch.sql.push_str(&format!(
            "UPDATE timers SET status = 'cancelled', updated_at = $19 \
             WHERE {MINE} AND status = 'pending' AND id IN ({ids});\n"
        ));
    }
    for subjects in commit.cancel_subjects.chunks(500) {
        let subjects = list(batch, subjects.to_vec());
        batch.sql.push_str(&format!(
            "UPDATE timers SET status = 'cancelled', updated_at = $19 \
             WHERE {MINE} AND status = 'pending' AND subject IN ({subjects});\n"
        ));
    }
    for ids in commit.timers_done.chunks(500) {
        let ids = list(batch, ids.iter().map(Uuid::to_string).collect());
        batch.sql.push_str(&format!(
            "UPDATE timers SET status = 'completed', updated_at = $19, claimed_by = NULL, \
             claimed_until = NULL WHERE {MINE} AND status = 'processing' AND id IN ({ids});\n"
        ));
    }
    for chunk in commit.timers.chunks(500) {
        let rows = chunk
            .iter()
            .map(|t| {
                vec![
                    Arg::Text(Some(t.id.to_string())),
                    Arg::Text(Some(t.kind.as_str().to_owned())),
                    Arg::Text(Some(t.name.clone())),
                    Arg::Text(Some(t.args.to_string())),
                    Arg::Text(t.subject.clone()),
                    Arg::Int(t.due_at),
                    Arg::Int(i64::from(t.max_attempts.max(1))),
                ]
            })
            .collect();
        let values = batch.values(rows);
        batch.sql.push_str(&format!(
            "INSERT INTO timers (thread, id, kind, name, args, subject, due_at, max_attempts, \
             created_at, updated_at, status, attempts) \
             SELECT t.num, v.*, $19, $19, 'pending', 0 FROM threads t, ({values}) v \
             WHERE t.id = $1 AND t.lease_owner = $2;\n"
        ));
    }
    commit.timers.iter().map(|t| t.due_at).min()
}

/// Writes `jobs` in one transaction; what each one's thread update returned, in order.
///
/// A group's text would be new each time (its commits, their order and their number vary),
/// and preparing it — every statement parsed, the triggers compiled into each insert — was a
/// quarter of the write connection's time under load. So a group is written as chunks whose
/// texts come back: its commits of one shape (the same statements, a turn's or a drain's) in
/// runs of 1, 2, 4, 8… (the first chunk opens the transaction, the last commits it), each text
/// prepared once and found again in the connection's statement cache. The commits were made at
/// once, so any order among them is one they could have landed in. A group of up to
/// [`ONE_CALL`] commits is one call, as before; a larger one a call per chunk (a few).
async fn write_group(
    conn: &mut SqliteConnection,
    jobs: &[&Job],
) -> Result<Vec<Returned>, sqlx::Error> {
    let chunks = chunks(jobs);
    let last = chunks.len().saturating_sub(1);
    let mut rows = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let mut sql = String::new();
        if i == 0 {
            sql.push_str("BEGIN IMMEDIATE;\n");
        }
        let mut offset = 0;
        for job in chunk {
            shift_into(&mut sql, &job.sql, offset);
            offset += job.args.len();
        }
        if i == last {
            sql.push_str("COMMIT;");
        }
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for arg in chunk.iter().flat_map(|j| &j.args) {
            query = match arg {
                Arg::Int(v) => query.bind(*v),
                Arg::OptInt(v) => query.bind(*v),
                Arg::Text(v) => query.bind(v.as_deref()),
                Arg::Bool(v) => query.bind(*v),
            };
        }
        match query.fetch_all(&mut *conn).await {
            Ok(more) => rows.extend(more),
            Err(e) => {
                let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
                return Err(e);
            }
        }
    }
    let mut returned: Vec<Returned> = vec![None; jobs.len()];
    for row in rows {
        let run: String = row.try_get("run")?;
        if let Some(at) = jobs.iter().position(|j| j.run == run) {
            returned[at] = Some((row.try_get("lease_owner")?, row.try_get("waiting")?));
        }
    }
    Ok(returned)
}

/// The most commits a group writes in one call whatever their shapes: the few mixes of so
/// few (ordered by shape) come back often enough to stay in the statement cache, and a call
/// less matters more than a parse to a small group.
const ONE_CALL: usize = 3;

/// The most chunks a group is cut into: past it, its commits' shapes are too many for their
/// texts to come back (a mixed load), and the group is one call again.
const MAX_CHUNKS: usize = 8;

/// `jobs` cut into the chunks [`write_group`] writes: a small group in one, ordered by shape
/// (their statements' text); a larger one by shape, each shape's run in powers of two, largest
/// first — or in one if that takes more than [`MAX_CHUNKS`].
fn chunks<'a>(jobs: &[&'a Job]) -> Vec<Vec<&'a Job>> {
    if jobs.len() <= ONE_CALL {
        let mut one = jobs.to_vec();
        one.sort_by(|a, b| a.sql.cmp(&b.sql));
        return vec![one];
    }
    let mut by_shape: std::collections::BTreeMap<&str, Vec<&'a Job>> = Default::default();
    for job in jobs {
        by_shape.entry(job.sql.as_str()).or_default().push(job);
    }
    let mut out = Vec::new();
    for (_, mut run) in by_shape {
        while !run.is_empty() {
            let size = 1 << run.len().ilog2();
            let rest = run.split_off(size);
            out.push(run);
            run = rest;
        }
    }
    if out.len() > MAX_CHUNKS {
        // Too many shapes for their texts to come back: one call, as a new text.
        return vec![out.into_iter().flatten().collect()];
    }
    out
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
    use super::{Job, chunks, shift_into};

    fn job(sql: &str, run: usize) -> Job {
        Job {
            sql: sql.to_owned(),
            args: Vec::new(),
            run: run.to_string(),
            change: duet_runtime::Change {
                thread: uuid::Uuid::nil(),
                seq: 0,
                status: duet_runtime::ThreadStatus::Running,
            },
            due: None,
        }
    }

    #[test]
    fn a_group_is_cut_by_shape_into_runs_of_powers_of_two_each_commit_once() {
        let sizes = |jobs: &[Job]| {
            let refs: Vec<&Job> = jobs.iter().collect();
            let cut = chunks(&refs);
            let mut runs: Vec<usize> = cut
                .iter()
                .flatten()
                .map(|j| j.run.parse().unwrap_or(0))
                .collect();
            runs.sort_unstable();
            assert_eq!(
                runs,
                (0..jobs.len()).collect::<Vec<_>>(),
                "each commit once"
            );
            cut.iter()
                .map(|c| {
                    assert!(c.iter().all(|j| j.sql == c[0].sql) || c.len() == jobs.len());
                    (c[0].sql.clone(), c.len())
                })
                .collect::<Vec<_>>()
        };
        // A small group: one call, ordered by shape.
        let small = [job("b", 0), job("a", 1), job("b", 2)];
        let refs: Vec<&Job> = small.iter().collect();
        let one = chunks(&refs);
        assert_eq!(one.len(), 1);
        assert_eq!(
            one[0].iter().map(|j| j.sql.as_str()).collect::<Vec<_>>(),
            ["a", "b", "b"]
        );
        // Thirteen of one shape and two of another.
        let mut big: Vec<Job> = (0..13).map(|i| job("a", i)).collect();
        big.extend([job("b", 13), job("b", 14)]);
        assert_eq!(
            sizes(&big),
            [
                ("a".into(), 8),
                ("a".into(), 4),
                ("a".into(), 1),
                ("b".into(), 2)
            ]
        );
        let four: Vec<Job> = (0..4).map(|i| job("a", i)).collect();
        assert_eq!(sizes(&four), [("a".into(), 4)]);
        // Nine shapes: one call again.
        let mixed: Vec<Job> = (0..9).map(|i| job(&format!("s{i}"), i)).collect();
        let refs: Vec<&Job> = mixed.iter().collect();
        assert_eq!(chunks(&refs).len(), 1);
        assert_eq!(chunks(&refs)[0].len(), 9);
    }

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
