//! How SQLite writes a group: one multi-statement call (`BEGIN IMMEDIATE`, each job's
//! statements with its placeholders renumbered, `COMMIT`) on the write connection, and each
//! written job announced on the in-process change feed while that connection is still held, so
//! changes arrive in commit order (and the timers a commit wrote, on the wakeups). A job is a
//! run's commit or a write that delivers a message (`enqueue`, `create_with`, `answer`): every
//! write on a park's or a resume's path shares the group's crossing and its WAL append.

use std::fmt::Write as _;
use std::sync::Arc;

use duet_runtime::{Change, ChangeHub, Commit, WakeHub};
use futures::StreamExt;
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use sqlx::{Column, Either, Executor, Row};
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::batch::{Arg, Batch};
use crate::group::{Failure, Returned, Writer};

/// One job of a group.
pub(crate) enum Job {
    Commit(CommitJob),
    Write(WriteJob),
}

/// What a job told: a commit, what its thread update reported and the rows of the read that
/// ends it, if any; a write, its rows.
pub(crate) enum Written {
    Commit(Returned, Vec<SqliteRow>),
    Rows(Vec<SqliteRow>),
}

/// The first column of each row a commit's closing read returns (a settling commit that reads
/// its session back), naming the commit's run: a commit's rows are told apart by their run,
/// and its read's from its thread update's by this column.
pub(crate) const ENTRIES_OF: &str = "entries_of";

/// One commit as SQLite writes it.
pub(crate) struct CommitJob {
    /// Its statements, numbered from `$1` as if alone; the thread update comes last, then a read
    /// of the row it changed: `run` (its `$2`, the lease owner), `lease_owner` and `waiting`.
    pub(crate) sql: String,
    pub(crate) args: Vec<Arg>,
    /// The run that commits (`$2`): tells its row from the others' in a group.
    pub(crate) run: String,
    /// Announced on the change feed once written.
    pub(crate) change: Change,
    /// The earliest due time of the timers it writes, announced on the wakeups once written.
    pub(crate) due: Option<i64>,
}

/// A write that delivers a message: its statements, numbered from `$1` as if alone, each
/// ending in `;` and a newline, whose every row goes back to its caller. It must fail no
/// statement on a path a caller can take (a retried message id is found by a read, not by a
/// broken key): a failed statement rolls back the whole group.
pub(crate) struct WriteJob {
    sql: &'static str,
    args: Vec<Arg>,
    /// How many statements `sql` holds: its rows are those of its statements.
    statements: usize,
    thread: duet_runtime::ThreadId,
    /// What its rows say to announce, once the group is written.
    announce: fn(duet_runtime::ThreadId, &[SqliteRow]) -> Option<Change>,
}

impl WriteJob {
    pub(crate) fn new(
        text: WriteText,
        args: Vec<Arg>,
        thread: duet_runtime::ThreadId,
        announce: fn(duet_runtime::ThreadId, &[SqliteRow]) -> Option<Change>,
    ) -> Self {
        WriteJob {
            sql: text.sql,
            args,
            statements: text.statements,
            thread,
            announce,
        }
    }
}

/// A write's text and how many statements it holds, counted as the text is made: a constant's
/// when the crate is compiled (a count made at each write was a string search of the whole text,
/// ~22,000 instructions of an answer's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteText {
    sql: &'static str,
    statements: usize,
}

impl WriteText {
    pub(crate) const fn of(sql: &'static str) -> Self {
        WriteText {
            sql,
            statements: statements(sql),
        }
    }
}

/// How many statements `sql` holds, each ending in `;` and a newline (no text of ours holds
/// one elsewhere).
const fn statements(sql: &str) -> usize {
    let bytes = sql.as_bytes();
    let (mut at, mut count) = (1, 0);
    while at < bytes.len() {
        if bytes[at] == b'\n' && bytes[at - 1] == b';' {
            count += 1;
        }
        at += 1;
    }
    count
}

impl Job {
    fn sql(&self) -> &str {
        match self {
            Job::Commit(c) => &c.sql,
            Job::Write(w) => w.sql,
        }
    }

    fn args(&self) -> &[Arg] {
        match self {
            Job::Commit(c) => &c.args,
            Job::Write(w) => &w.args,
        }
    }

    /// How a group orders its jobs: writes first (their rows are told apart by counting
    /// statements, which a commit's varying text would upset), then by text.
    fn shape(&self) -> (bool, &str) {
        (matches!(self, Job::Commit(_)), self.sql())
    }
}

/// The write connection (shared with the store's other writes, taken per group), the feed and
/// the timer wakeups.
pub(crate) struct SqliteWriter {
    pub(crate) conn: Arc<Mutex<SqliteConnection>>,
    pub(crate) hub: ChangeHub,
    pub(crate) wakes: WakeHub,
    /// Told of each group written, so the WAL reaches the disk soon after (`None`: left to the
    /// checkpoint).
    pub(crate) flush: Option<super::flush::WalFlush>,
}

impl Writer for SqliteWriter {
    type Job = Job;
    type Output = Written;

    fn size(job: &Job) -> usize {
        job.args().len()
    }

    async fn write(&self, jobs: &[&Job]) -> Result<Vec<Written>, Failure> {
        let mut conn = self.conn.lock().await;
        let (written, order) = write_group(&mut conn, jobs).await.map_err(Failure::of)?;
        if let Some(flush) = &self.flush {
            flush.committed();
        }
        // In the order the jobs were written: a delivery written before a commit of its thread
        // read the thread as it was before that commit.
        for at in order {
            match (jobs[at], &written[at]) {
                (Job::Commit(c), Written::Commit(Some(_), _)) => {
                    self.hub.publish(c.change);
                    if let Some(at) = c.due {
                        self.wakes.due(at);
                    }
                }
                (Job::Write(w), Written::Rows(rows)) => {
                    if let Some(change) = (w.announce)(w.thread, rows) {
                        self.hub.publish(change);
                    }
                }
                _ => {}
            }
        }
        Ok(written)
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
                    crate::batch::text(Some(&t.name)),
                    Arg::Text(Some(duet_runtime::nul::json_text(&t.args))),
                    crate::batch::text(t.subject.as_deref()),
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

/// Writes `jobs` in one transaction; what each one told, in order, and the order they were
/// written in (as indices into `jobs`).
///
/// A group's text would be new each time (its jobs, their order and their number vary), and
/// preparing it — every statement parsed, the triggers compiled into each insert — was a
/// quarter of the write connection's time under load. So a group is written as chunks whose
/// texts come back: its jobs of one shape (the same statements, a turn's or a drain's, an
/// answer's) in runs of 1, 2, 4, 8… (the first chunk opens the transaction, the last commits
/// it), each text prepared once and found again in the connection's statement cache. The jobs
/// were made at once, so any order among them is one they could have landed in. A group of up
/// to [`ONE_CALL`] jobs is one call, as before; a larger one a call per chunk (a few).
///
/// A write's rows are those of its statements (each statement's end is reported); a commit's
/// row is told apart by its run.
async fn write_group(
    conn: &mut SqliteConnection,
    jobs: &[&Job],
) -> Result<(Vec<Written>, Vec<usize>), sqlx::Error> {
    let chunks = chunks(jobs);
    let last = chunks.len().saturating_sub(1);
    let mut written: Vec<Written> = jobs
        .iter()
        .map(|j| match j {
            Job::Commit(_) => Written::Commit(None, Vec::new()),
            Job::Write(_) => Written::Rows(Vec::new()),
        })
        .collect();
    let mut commit_rows = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let mut sql = String::new();
        // Each write's statements, by their place in the chunk's text: [from, to) and its job.
        let mut writes = Vec::new();
        let mut statement = 0;
        if i == 0 {
            sql.push_str("BEGIN IMMEDIATE;\n");
            statement = 1;
        }
        let mut offset = 0;
        for &at in chunk {
            let job = jobs[at];
            shift_into(&mut sql, job.sql(), offset);
            offset += job.args().len();
            if let Job::Write(w) = job {
                writes.push((statement, statement + w.statements, at));
                statement += w.statements;
            }
        }
        if i == last {
            sql.push_str("COMMIT;");
        }
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for arg in chunk.iter().flat_map(|&at| jobs[at].args()) {
            query = match arg {
                Arg::Int(v) => query.bind(*v),
                Arg::OptInt(v) => query.bind(*v),
                Arg::Text(v) => query.bind(v.as_deref()),
                Arg::Bool(v) => query.bind(*v),
            };
        }
        if let Err(e) = route_rows(&mut *conn, query, &writes, &mut written, &mut commit_rows).await
        {
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            return Err(e);
        }
    }
    for row in commit_rows {
        let read = row
            .columns()
            .first()
            .is_some_and(|c| c.name() == ENTRIES_OF);
        let run: String = row.try_get(if read { ENTRIES_OF } else { "run" })?;
        let at = jobs
            .iter()
            .position(|j| matches!(j, Job::Commit(c) if c.run == run));
        if let Some(Written::Commit(returned, entries)) = at.map(|at| &mut written[at]) {
            if read {
                entries.push(row);
            } else {
                *returned = Some((row.try_get("lease_owner")?, row.try_get("waiting")?));
            }
        }
    }
    Ok((written, chunks.into_iter().flatten().collect()))
}

/// Runs one call of a group, each row to the write whose statements returned it (`writes`:
/// each write's statements in the call, `[from, to)`, and its job), the others to
/// `commit_rows`.
async fn route_rows<'q>(
    conn: &mut SqliteConnection,
    query: impl sqlx::Execute<'q, sqlx::Sqlite> + 'q,
    writes: &[(usize, usize, usize)],
    written: &mut [Written],
    commit_rows: &mut Vec<SqliteRow>,
) -> Result<(), sqlx::Error> {
    let mut results = conn.fetch_many(query);
    let mut statement = 0;
    while let Some(result) = results.next().await {
        match result? {
            Either::Left(_) => statement += 1,
            Either::Right(row) => match writes.iter().find(|w| (w.0..w.1).contains(&statement)) {
                Some(&(_, _, at)) => {
                    if let Written::Rows(rows) = &mut written[at] {
                        rows.push(row);
                    }
                }
                None => commit_rows.push(row),
            },
        }
    }
    Ok(())
}

/// The most commits a group writes in one call whatever their shapes: the few mixes of so
/// few (ordered by shape) come back often enough to stay in the statement cache, and a call
/// less matters more than a parse to a small group.
const ONE_CALL: usize = 3;

/// The most chunks a group is cut into: past it, its commits' shapes are too many for their
/// texts to come back (a mixed load), and the group is one call again.
const MAX_CHUNKS: usize = 8;

/// `jobs` cut into the chunks [`write_group`] writes, as indices into `jobs`: a small group in
/// one, ordered by shape ([`Job::shape`]); a larger one by shape, each shape's run in powers of
/// two, largest first — or in one if that takes more than [`MAX_CHUNKS`]. Within a chunk, the
/// writes come before the commits.
fn chunks(jobs: &[&Job]) -> Vec<Vec<usize>> {
    if jobs.len() <= ONE_CALL {
        let mut one: Vec<usize> = (0..jobs.len()).collect();
        one.sort_by(|&a, &b| jobs[a].shape().cmp(&jobs[b].shape()));
        return vec![one];
    }
    let mut by_shape: std::collections::BTreeMap<(bool, &str), Vec<usize>> = Default::default();
    for (at, job) in jobs.iter().enumerate() {
        by_shape.entry(job.shape()).or_default().push(at);
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
        // Too many shapes for their texts to come back: one call, as a new text (in shape
        // order still, the writes first).
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
    use super::{CommitJob, Job, WriteJob, WriteText, chunks, shift_into, statements};

    fn job(sql: &str, run: usize) -> Job {
        Job::Commit(CommitJob {
            sql: sql.to_owned(),
            args: Vec::new(),
            run: run.to_string(),
            change: duet_runtime::Change {
                thread: uuid::Uuid::nil(),
                seq: 0,
                status: duet_runtime::ThreadStatus::Running,
            },
            due: None,
        })
    }

    fn write(sql: &'static str) -> Job {
        Job::Write(WriteJob::new(
            WriteText::of(sql),
            Vec::new(),
            uuid::Uuid::nil(),
            |_, _| None,
        ))
    }

    /// Each chunk's jobs as (their index, their text), in the order the chunk writes them.
    fn cut(jobs: &[Job]) -> Vec<Vec<(usize, String)>> {
        let refs: Vec<&Job> = jobs.iter().collect();
        let cut = chunks(&refs);
        let mut each: Vec<usize> = cut.iter().flatten().copied().collect();
        each.sort_unstable();
        assert_eq!(each, (0..jobs.len()).collect::<Vec<_>>(), "each job once");
        cut.iter()
            .map(|c| {
                c.iter()
                    .map(|&at| (at, jobs[at].sql().to_owned()))
                    .collect()
            })
            .collect()
    }

    fn sizes(jobs: &[Job]) -> Vec<(String, usize)> {
        cut(jobs)
            .into_iter()
            .map(|c| {
                assert!(c.iter().all(|j| j.1 == c[0].1) || c.len() == jobs.len());
                (c[0].1.clone(), c.len())
            })
            .collect()
    }

    #[test]
    fn a_group_is_cut_by_shape_into_runs_of_powers_of_two_each_job_once() {
        // A small group: one call, ordered by shape.
        let small = [job("b", 0), job("a", 1), job("b", 2)];
        let one = cut(&small);
        assert_eq!(one.len(), 1);
        assert_eq!(
            one[0].iter().map(|j| j.1.as_str()).collect::<Vec<_>>(),
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
        assert_eq!(cut(&mixed).len(), 1);
        assert_eq!(cut(&mixed)[0].len(), 9);
    }

    #[test]
    fn a_chunk_writes_its_writes_before_its_commits_whatever_their_texts() {
        // A commit's text sorts before the writes' and comes after them all the same: a
        // write's rows are counted from the chunk's first statement.
        let small = [job("a", 0), write("z;\n"), job("a", 2)];
        assert_eq!(
            cut(&small)[0].iter().map(|j| j.0).collect::<Vec<_>>(),
            [1, 0, 2]
        );
        let mut mixed: Vec<Job> = (0..9).map(|i| job(&format!("s{i}"), i)).collect();
        mixed.push(write("z;\n"));
        let one = cut(&mixed);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0][0].0, 9);
        let mut runs: Vec<Job> = (0..5).map(|i| job("a", i)).collect();
        runs.extend([write("y;\n"), write("y;\n")]);
        assert_eq!(
            cut(&runs)[0],
            [(5, "y;\n".to_owned()), (6, "y;\n".to_owned())]
        );
    }

    #[test]
    fn a_write_counts_its_statements_by_their_ends() {
        assert_eq!(
            statements("SELECT 1;\nUPDATE t SET a = ';' WHERE b = 2;\n"),
            2
        );
        assert_eq!(statements(""), 0);
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
