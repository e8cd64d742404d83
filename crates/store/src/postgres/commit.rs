//! How Postgres writes a group of commits: one call of the `duet_commit_files` function
//! (`migrations/postgres/0019_files.sql`: `duet_commit` of 0010 with the queued messages'
//! attachments and the commits' file writes), so a commit is one round trip and a group one
//! transaction with one WAL flush. Its arguments are columns: the threads' new states, one
//! element per commit, and the rows of each table, each row naming its commit by index. The
//! change feed needs nothing here: the function's `pg_notify` reaches every listener.
//!
//! A group with no file writes and no attachments calls the plain `duet_commit` (what the
//! wrapper would call), without the wrapper's arguments. A group that writes to the timer table
//! calls the function inside one statement ([`with_timers`]) whose data-modifying CTEs write
//! the timers of the commits it wrote (those whose lease held): still one round trip and one
//! transaction, and a failing timer write (an id taken) fails the group like any other
//! statement, so each commit goes again alone.

use duet_runtime::{Commit, FileWrite, StoreError, Thread};
use sqlx::Row;
use sqlx::postgres::{PgArguments, PgPool, Postgres};
use uuid::Uuid;

use crate::batch::{Arg, Batch, journal_rows, queued_row};
use crate::group::{Failure, Returned, Writer};

/// A column's type.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    OptInt,
    Text,
    Bool,
}

use Kind::{Bool, Int, OptInt, Text};

/// The thread's columns (`Batch::new`'s), then settle, release and the change-feed payload.
const THREAD: &[Kind] = &[
    Text, Text, Text, Text, Text, Int, Bool, Text, Text, Int, Int, Int, Int, Int, Text, Int, Int,
    Int, Int, Bool, Bool, Text,
];
/// A drained queue row's id.
const DRAINED: &[Kind] = &[Int];
/// A journal row (`JOURNAL_COLUMNS`).
const JOURNAL: &[Kind] = &[
    Int, Text, OptInt, Text, Text, Text, Text, Text, Text, Text, Text, Bool, Text, Text, Int,
];
/// A queued message (`queued_row`).
const QUEUED: &[Kind] = &[
    Text, Text, Text, Bool, Bool, Bool, Int, Text, Text, Text, Text, Text, Text,
];
/// A durable value: its key and JSON text (`NULL` deletes).
const VALUES: &[Kind] = &[Text, Text];
/// A file write (`put`, `mkdir`, `remove`), then a row of `files` (`file_rows::file_row`; a
/// removal's are placeholders).
const FILES: &[Kind] = &[
    Text, Text, Text, Text, Int, Text, Text, Text, Text, Int, Int,
];
/// A timer named by id (to cancel, or done).
const IDS: &[Kind] = &[Text];
/// A subject whose pending timers are cancelled.
const SUBJECTS: &[Kind] = &[Text];
/// A new timer: id, kind, name, args, subject, due time, attempts allowed.
const TIMERS: &[Kind] = &[Text, Text, Text, Text, Text, Int, Int];

/// The statement that calls `function` with `args` placeholders, `$1` to `$args`.
fn call(function: &str, args: usize) -> String {
    let list: Vec<String> = (1..=args).map(|i| format!("${i}")).collect();
    format!(
        "SELECT r_at, r_owner, r_waiting FROM {function}({})",
        list.join(", ")
    )
}

/// `call` (one of [`call`]'s) with the group's timer writes (4 more tables: 2 + 2 + 2 + 8
/// placeholders from `$first`), for the commits the function wrote (`w`: each one's thread row
/// and time, `$1` and `$19` being the commits' thread ids and times): this thread's pending
/// timers named by id or subject cancelled, its running ones named done completed, the new ones
/// inserted, and one wakeup (`duet_timers`, the earliest due time written), delivered only if
/// the group commits. Each thread row is found by a subquery on its unique `id`: a probe of
/// its index once the table is more than a page or two (the join it replaces hashed a
/// sequential scan of every thread while the statistics said the table was small). The CTEs
/// run on the statement's snapshot, taken before the function locks the threads: a thread's
/// timers are written only by commits holding its lease, one at a time, so none of them is
/// missed; a timer claimed or cancelled meanwhile is seen as it is now (an update re-reads a
/// row another transaction changed) and left alone. A commit's cancellations never reach the
/// timers it inserts (CTEs do not see one another's rows), as on SQLite.
fn with_timers(call: &str, first: usize) -> String {
    const TEMPLATE: &str = "WITH r AS MATERIALIZED ({call}), \
  w AS MATERIALIZED (SELECT r.r_at AS at, \
      (SELECT th.num FROM threads th WHERE th.id = x.id) AS num, x.now FROM r \
    JOIN unnest($1::text[], $19::bigint[]) WITH ORDINALITY AS x (id, now, i) ON x.i = r.r_at), \
  named AS (SELECT tm.id, w.now FROM w \
      JOIN unnest(#0::bigint[], #1::text[]) AS c (at, id) ON c.at = w.at \
      JOIN timers tm ON tm.id = c.id AND tm.thread = w.num \
    UNION ALL SELECT tm.id, w.now FROM w \
      JOIN unnest(#2::bigint[], #3::text[]) AS s (at, subject) ON s.at = w.at \
      JOIN timers tm ON tm.thread = w.num AND tm.subject = s.subject AND tm.status = 'pending'), \
  cancelled AS (UPDATE timers tm SET status = 'cancelled', updated_at = n.now FROM named n \
    WHERE tm.id = n.id AND tm.status = 'pending'), \
  done AS (UPDATE timers tm SET status = 'completed', updated_at = w.now, claimed_by = NULL, \
      claimed_until = NULL \
    FROM w JOIN unnest(#4::bigint[], #5::text[]) AS f (at, id) ON f.at = w.at \
    WHERE tm.id = f.id AND tm.thread = w.num AND tm.status = 'processing'), \
  added AS (INSERT INTO timers (id, thread, kind, name, args, subject, due_at, created_at, \
      status, attempts, max_attempts, updated_at) \
    SELECT n.id, w.num, n.kind, n.name, n.args, n.subject, n.due_at, w.now, 'pending', 0, \
      n.max_attempts, w.now \
    FROM unnest(#6::bigint[], #7::text[], #8::text[], #9::text[], #10::text[], #11::text[], \
      #12::bigint[], #13::bigint[]) AS n (at, id, kind, name, args, subject, due_at, max_attempts) \
    JOIN w ON w.at = n.at \
    RETURNING due_at) \
SELECT r.r_at, r.r_owner, r.r_waiting, (SELECT count(*) FROM (SELECT pg_notify('duet_timers', \
  min(due_at)::text) FROM added HAVING count(*) > 0) n) AS woke \
FROM r ORDER BY r.r_at";
    // The longer markers first: `#1` is a prefix of `#10`.
    (0..14)
        .rev()
        .fold(TEMPLATE.replace("{call}", call), |sql, k| {
            sql.replace(&format!("#{k}"), &format!("${}", first + k))
        })
}

/// The four statements a group is written with, by whether it writes timers and whether it
/// writes files or attachments: `duet_commit_files` (migration 0019) with the file tables'
/// placeholders (22 + 2 + 16 + 14 + 3 + 12), or, with neither, the plain `duet_commit` (0010)
/// the wrapper would call (22 + 2 + 16 + 13 + 3: no attachments, no files), which saves a
/// plpgsql call and 14 binds of empty arrays on nearly every commit.
static CALLS: std::sync::LazyLock<[[String; 2]; 2]> = std::sync::LazyLock::new(|| {
    let plain = call("duet_commit", 56);
    let files = call("duet_commit_files", 69);
    [
        [with_timers(&plain, 57), with_timers(&files, 70)],
        [plain, files],
    ]
});

/// The statement for a group: `timers` whether it writes timers, `files` whether it writes
/// files or attachments.
fn statement(timers: bool, files: bool) -> &'static str {
    &CALLS[usize::from(!timers)][usize::from(files)]
}

#[derive(Clone)]
enum Col {
    Int(Vec<i64>),
    OptInt(Vec<Option<i64>>),
    Text(Vec<Option<String>>),
    Bool(Vec<bool>),
}

impl Col {
    fn new(kind: Kind) -> Self {
        match kind {
            Int => Col::Int(Vec::new()),
            OptInt => Col::OptInt(Vec::new()),
            Text => Col::Text(Vec::new()),
            Bool => Col::Bool(Vec::new()),
        }
    }

    fn push(&mut self, arg: Arg) -> Result<(), StoreError> {
        match (self, arg) {
            (Col::Int(c), Arg::Int(v)) => c.push(v),
            (Col::OptInt(c), Arg::OptInt(v)) => c.push(v),
            (Col::Text(c), Arg::Text(v)) => c.push(v),
            (Col::Bool(c), Arg::Bool(v)) => c.push(v),
            _ => {
                return Err(StoreError::Corrupt(
                    "a bug: a commit's value has another type than its column".into(),
                ));
            }
        }
        Ok(())
    }

    fn extend(&mut self, other: &Col) {
        match (self, other) {
            (Col::Int(c), Col::Int(o)) => c.extend_from_slice(o),
            (Col::OptInt(c), Col::OptInt(o)) => c.extend_from_slice(o),
            (Col::Text(c), Col::Text(o)) => c.extend_from_slice(o),
            (Col::Bool(c), Col::Bool(o)) => c.extend_from_slice(o),
            // Every `Rows` of one table is made from the same kinds.
            _ => {}
        }
    }

    fn len(&self) -> usize {
        match self {
            Col::Int(c) => c.len(),
            Col::OptInt(c) => c.len(),
            Col::Text(c) => c.len(),
            Col::Bool(c) => c.len(),
        }
    }

    fn bind<'q>(
        &'q self,
        query: sqlx::query::Query<'q, Postgres, PgArguments>,
    ) -> sqlx::query::Query<'q, Postgres, PgArguments> {
        match self {
            Col::Int(c) => query.bind(c.as_slice()),
            Col::OptInt(c) => query.bind(c.as_slice()),
            Col::Text(c) => query.bind(c.as_slice()),
            Col::Bool(c) => query.bind(c.as_slice()),
        }
    }
}

/// A table's rows as columns, each row naming its commit (`at`, from 1).
#[derive(Clone)]
struct Rows {
    at: Vec<i64>,
    cols: Vec<Col>,
}

impl Rows {
    fn new(kinds: &[Kind]) -> Self {
        Rows {
            at: Vec::new(),
            cols: kinds.iter().copied().map(Col::new).collect(),
        }
    }

    fn push(&mut self, at: i64, row: Vec<Arg>) -> Result<(), StoreError> {
        if row.len() != self.cols.len() {
            return Err(StoreError::Corrupt(
                "a bug: a commit's row has another number of values than its table".into(),
            ));
        }
        for (col, arg) in self.cols.iter_mut().zip(row) {
            col.push(arg)?;
        }
        self.at.push(at);
        Ok(())
    }

    /// Appends `other`'s rows as commit `at`'s.
    fn append(&mut self, other: &Rows, at: i64) {
        self.at.extend(std::iter::repeat_n(at, other.at.len()));
        for (col, o) in self.cols.iter_mut().zip(&other.cols) {
            col.extend(o);
        }
    }

    fn values(&self) -> usize {
        self.cols.iter().map(Col::len).sum()
    }
}

/// One commit, or a group of them, as `duet_commit`'s arguments.
#[derive(Clone)]
pub(crate) struct Job {
    thread: Rows,
    drained: Rows,
    journal: Rows,
    queued: Rows,
    values: Rows,
    files: Rows,
    cancel: Rows,
    subjects: Rows,
    done: Rows,
    timers: Rows,
}

impl Job {
    fn empty() -> Self {
        Job {
            thread: Rows::new(THREAD),
            drained: Rows::new(DRAINED),
            journal: Rows::new(JOURNAL),
            queued: Rows::new(QUEUED),
            values: Rows::new(VALUES),
            files: Rows::new(FILES),
            cancel: Rows::new(IDS),
            subjects: Rows::new(SUBJECTS),
            done: Rows::new(IDS),
            timers: Rows::new(TIMERS),
        }
    }

    /// Its tables, in the order they are bound.
    fn tables(&self) -> [&Rows; 10] {
        [
            &self.thread,
            &self.drained,
            &self.journal,
            &self.queued,
            &self.values,
            &self.files,
            &self.cancel,
            &self.subjects,
            &self.done,
            &self.timers,
        ]
    }

    /// Whether it writes to the timer table (and so is written [`with_timers`]).
    fn has_timers(&self) -> bool {
        [&self.cancel, &self.subjects, &self.done, &self.timers]
            .iter()
            .any(|r| !r.at.is_empty())
    }

    /// `commit` of thread `t` (its new state) by run `owner`.
    pub(crate) fn new(t: &Thread, owner: Uuid, commit: &Commit) -> Result<Self, StoreError> {
        let mut job = Job::empty();
        let mut thread = Batch::new(t, owner).args;
        thread.extend([
            Arg::Bool(commit.settle && commit.enqueue.is_empty()),
            Arg::Bool(commit.release),
            Arg::Text(Some(format!(
                "{} {} {}",
                t.id,
                t.next_seq - 1,
                t.status.as_str()
            ))),
        ]);
        job.thread.push(1, thread)?;
        for id in &commit.drained {
            job.drained.push(1, vec![Arg::Int(*id)])?;
        }
        for row in journal_rows(commit)? {
            job.journal.push(1, row)?;
        }
        for q in &commit.enqueue {
            job.queued.push(1, queued_row(q, t.updated_at))?;
        }
        // A key written more than once: its last write is the one that stands (the function
        // writes all of a commit's values in one statement, which may touch a row only once).
        for (at, (key, value)) in commit.values.iter().enumerate() {
            if commit.values[at + 1..]
                .iter()
                .any(|(later, _)| later == key)
            {
                continue;
            }
            let value = value.as_ref().map(duet_runtime::nul::json_text);
            job.values
                .push(1, vec![crate::batch::text(Some(key)), Arg::Text(value)])?;
        }
        for w in crate::file_rows::fold(commit.files.clone()) {
            let (op, row) = match &w {
                FileWrite::Put(r) => ("put", crate::file_rows::file_row(r)),
                FileWrite::Mkdir(r) => ("mkdir", crate::file_rows::file_row(r)),
                FileWrite::Remove(path) => {
                    let mut row = vec![Arg::Text(Some(path.clone()))];
                    row.extend([
                        Arg::Text(Some(String::new())),
                        Arg::Text(Some(String::new())),
                        Arg::Int(0),
                        Arg::Text(None),
                        Arg::Text(None),
                        Arg::Text(Some("[]".into())),
                        Arg::Text(Some("null".into())),
                        Arg::Int(0),
                        Arg::Int(0),
                    ]);
                    ("remove", row)
                }
            };
            let mut args = vec![Arg::Text(Some(op.to_owned()))];
            args.extend(row);
            job.files.push(1, args)?;
        }
        let id = |id: &Uuid| vec![Arg::Text(Some(id.to_string()))];
        for t in &commit.cancel_timers {
            job.cancel.push(1, id(t))?;
        }
        for subject in &commit.cancel_subjects {
            job.subjects
                .push(1, vec![Arg::Text(Some(subject.clone()))])?;
        }
        for t in &commit.timers_done {
            job.done.push(1, id(t))?;
        }
        for t in &commit.timers {
            job.timers.push(
                1,
                vec![
                    Arg::Text(Some(t.id.to_string())),
                    Arg::Text(Some(t.kind.as_str().to_owned())),
                    crate::batch::text(Some(&t.name)),
                    Arg::Text(Some(duet_runtime::nul::json_text(&t.args))),
                    crate::batch::text(t.subject.as_deref()),
                    Arg::Int(t.due_at),
                    Arg::Int(i64::from(t.max_attempts.max(1))),
                ],
            )?;
        }
        Ok(job)
    }

    /// `jobs` as one group, the first commit 1.
    fn group(jobs: &[&Job]) -> Job {
        let mut group = Job::empty();
        for (at, job) in (1..).zip(jobs) {
            group.thread.append(&job.thread, at);
            group.drained.append(&job.drained, at);
            group.journal.append(&job.journal, at);
            group.queued.append(&job.queued, at);
            group.values.append(&job.values, at);
            group.files.append(&job.files, at);
            group.cancel.append(&job.cancel, at);
            group.subjects.append(&job.subjects, at);
            group.done.append(&job.done, at);
            group.timers.append(&job.timers, at);
        }
        group
    }

    /// Whether it writes files or queues a message with attachments (and so is written with
    /// `duet_commit_files`; without, with the plain `duet_commit`).
    fn has_files(&self) -> bool {
        let attachments = match self.queued.cols.last() {
            Some(Col::Text(c)) => c.iter().any(Option::is_some),
            _ => false,
        };
        !self.files.at.is_empty() || attachments
    }

    /// The statement that writes it, with its arguments bound: [`statement`]'s, the timer
    /// tables bound only if it writes timers, the files and the queued messages' attachments
    /// only if it writes any.
    fn query(&self) -> sqlx::query::Query<'_, Postgres, PgArguments> {
        let (timers, files) = (self.has_timers(), self.has_files());
        let mut query = sqlx::query(statement(timers, files));
        for col in &self.thread.cols {
            query = col.bind(query);
        }
        let all = self.tables();
        let tables = all[1..]
            .iter()
            .enumerate()
            .filter(|(i, _)| files || *i != 4)
            .filter(|(i, _)| timers || *i < 5);
        for (i, rows) in tables {
            query = query.bind(rows.at.as_slice());
            // Queued rows' last column is their attachments.
            let cols = if i == 2 && !files {
                &rows.cols[..rows.cols.len() - 1]
            } else {
                &rows.cols[..]
            };
            for col in cols {
                query = col.bind(query);
            }
        }
        query
    }
}

/// Writes groups through the pool: each group one call on a connection of its own.
pub(crate) struct PgWriter {
    pub(crate) pool: PgPool,
}

impl Writer for PgWriter {
    type Job = Job;
    type Output = Returned;

    fn size(job: &Job) -> usize {
        job.tables().iter().map(|r| r.values()).sum()
    }

    async fn write(&self, jobs: &[&Job]) -> Result<Vec<Returned>, Failure> {
        let group;
        let args = match jobs {
            [one] => *one,
            _ => {
                group = Job::group(jobs);
                &group
            }
        };
        let rows = args
            .query()
            .fetch_all(&self.pool)
            .await
            .map_err(Failure::of)?;
        // The group has committed: a row that cannot be read is the store's own failure.
        let read = |e| Failure::store(crate::db_error(e));
        let mut returned: Vec<Returned> = vec![None; jobs.len()];
        for row in rows {
            let at: i64 = row.try_get(0).map_err(read)?;
            let slot = usize::try_from(at - 1)
                .ok()
                .and_then(|i| returned.get_mut(i))
                .ok_or_else(|| {
                    Failure::store(StoreError::Corrupt(format!(
                        "duet_commit returned commit {at}"
                    )))
                })?;
            *slot = Some((row.try_get(1).map_err(read)?, row.try_get(2).map_err(read)?));
        }
        Ok(returned)
    }
}

#[cfg(test)]
mod tests {
    use duet_runtime::{
        Commit, FileKind, FileRecord, FileWrite, Message, NewQueued, Record, RecordBody, Role,
        SideId, Thread, ToolReply, ToolStatus,
    };
    use uuid::Uuid;

    use super::{Job, statement};

    /// A commit with something of every kind: drained rows, a message and a record, a queued
    /// late tool result with an image, an attachment and a trace, a value set and one deleted,
    /// a file written, a directory made and a path removed, a timer, one cancelled by id and one
    /// by subject, one done.
    fn commit() -> Commit {
        let file = FileRecord {
            kind: FileKind::File,
            size: 3,
            mime_type: Some("text/plain".into()),
            chunks: vec!["ab".repeat(32)],
            ..FileRecord::directory("/d/a.txt".into(), 1)
        };
        let mut queued = NewQueued::new(Role::User, SideId::B, "late");
        queued.tool = Some(ToolReply {
            call_id: "call-1".into(),
            name: "lookup".into(),
            status: ToolStatus::Success,
        });
        queued.images = vec![duet_runtime::ImageRef {
            mime_type: "image/png".into(),
            data: "AAAA".into(),
        }];
        queued.trace = Some("{}".into());
        queued.attachments = vec![file.attachment()];
        Commit {
            drained: vec![7, 8],
            messages: vec![Message::text(
                4,
                1,
                Role::User,
                Some(SideId::B),
                "hi".into(),
                1,
            )],
            records: vec![Record::new(5, RecordBody::SessionStarted { session: 1 }, 1)],
            values: vec![
                ("kept".into(), Some(serde_json::json!({"n": 1}))),
                ("gone".into(), None),
            ],
            enqueue: vec![queued],
            settle: true,
            release: false,
            timers: vec![duet_runtime::NewTimer {
                id: Uuid::now_v7(),
                kind: duet_runtime::TimerKind::Effect,
                name: "remind".into(),
                args: serde_json::json!({"to": "me"}),
                subject: None,
                due_at: 60_000,
                max_attempts: 3,
            }],
            cancel_timers: vec![Uuid::now_v7()],
            cancel_subjects: vec!["park:1:4".into()],
            files: vec![
                FileWrite::Put(file),
                FileWrite::Mkdir(FileRecord::directory("/d".into(), 1)),
                FileWrite::Remove("/gone".into()),
            ],
            timers_done: vec![Uuid::now_v7()],
        }
    }

    /// The placeholders of `sql`: the highest `$N`, checked to be all of `$1..=$N`.
    fn placeholders(sql: &str) -> usize {
        let numbers: std::collections::BTreeSet<usize> = sql
            .split('$')
            .skip(1)
            .filter_map(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect();
        let n = numbers.last().copied().unwrap_or(0);
        assert_eq!(numbers.len(), n, "every placeholder of 1..={n} used");
        n
    }

    #[test]
    fn every_value_of_a_commit_fits_its_column_and_a_group_numbers_its_rows() {
        let t = Thread::new(Uuid::now_v7(), "k".into(), "agent".into(), None, 1);
        let job = Job::new(&t, Uuid::now_v7(), &commit()).expect("every value in its column");
        let group = Job::group(&[&job, &job, &job]);
        assert_eq!(group.thread.at, [1, 2, 3]);
        assert_eq!(group.drained.at, [1, 1, 2, 2, 3, 3]);
        assert_eq!(group.journal.at, [1, 1, 2, 2, 3, 3]);
        assert_eq!(group.queued.at, [1, 2, 3]);
        assert_eq!(group.values.at, [1, 1, 2, 2, 3, 3]);
        assert_eq!(group.files.at, [1, 1, 1, 2, 2, 2, 3, 3, 3]);
        for timers in [&group.cancel, &group.subjects, &group.done, &group.timers] {
            assert_eq!(timers.at, [1, 2, 3]);
        }
        let tables = group.tables();
        for rows in tables {
            for col in &rows.cols {
                assert_eq!(col.len(), rows.at.len(), "a column as long as its table");
            }
        }
        // Every value bound is a placeholder of the statement it is bound to, in each of the
        // four shapes: the timer tables bound only where timers are written, the files and the
        // attachments only where files or attachments are.
        let bound = |job: &Job| {
            let mut query = job.query();
            let args = sqlx::Execute::take_arguments(&mut query)
                .expect("arguments")
                .expect("some");
            sqlx::Arguments::len(&args)
        };
        let strip = |c: Commit| Commit {
            timers: Vec::new(),
            cancel_timers: Vec::new(),
            cancel_subjects: Vec::new(),
            timers_done: Vec::new(),
            ..c
        };
        let unfiled = |mut c: Commit| {
            c.files.clear();
            for q in &mut c.enqueue {
                q.attachments.clear();
            }
            c
        };
        for (commit, timers, files) in [
            (commit(), true, true),
            (strip(commit()), false, true),
            (unfiled(commit()), true, false),
            (unfiled(strip(commit())), false, false),
        ] {
            let one = Job::new(&t, Uuid::now_v7(), &commit).expect("every value in its column");
            for job in [Job::group(&[&one, &one]), one] {
                assert_eq!((job.has_timers(), job.has_files()), (timers, files));
                assert_eq!(
                    bound(&job),
                    placeholders(statement(timers, files)),
                    "timers {timers}, files {files}"
                );
            }
        }
        assert!(statement(false, false).contains("duet_commit("));
        assert!(statement(true, false).contains("duet_commit("));
        assert!(statement(false, true).contains("duet_commit_files("));
        // An attachment alone takes the wrapper too.
        let mut attached = unfiled(strip(commit()));
        attached.enqueue[0].attachments = commit().enqueue[0].attachments.clone();
        let attached = Job::new(&t, Uuid::now_v7(), &attached).expect("every value");
        assert!(attached.has_files());
    }
}
