//! A settling commit's read of its session (`commit_reading`): the session's entries written
//! before the commit are read back in the commit's call — its records whole, its messages by
//! seq alone (the run that commits holds them: `ReadBack::Held`); the commit's own are taken as
//! the commit holds them, not read back and decoded again. What the two make, the messages
//! filled in, is what `session_entries` reads after the commit (the store conformance suite
//! holds them equal).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use duet_runtime::{Commit, JournalEntry, ReadBack};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::commit::ENTRIES_OF;
use duet_runtime::StoreError;

/// The statements that end a settling commit's call: one row of session `$session` of thread
/// `$1`'s bounds (its `session_started` record's seq, and the next session's: `start` is the
/// text that finds one, up to the comparison of its session number), then its entries below
/// seq `$first` (the commit's first, see [`first_written`]), at most `limit`, read in the
/// journal key's order (a range of its primary key: no sort, and the limit stops the read):
/// of each its seq, kind and time, and a record's data (a message's is not needed).
/// Appended to `sql`; each text is made once per `start`, `limit` and pair of parameter numbers
/// (a commit's shape decides them) and kept, up to [`KEPT`] texts: made anew, it cost as much as
/// a tenth of the read.
pub(super) fn push_statement(
    sql: &mut String,
    start: &'static str,
    session: &str,
    first: &str,
    limit: usize,
) {
    /// By `start` (where it is and its length: the same text), `limit`, and the numbers of
    /// `session` and `first`.
    type Made = HashMap<((usize, usize), usize, usize, usize), Box<str>>;
    static MADE: OnceLock<Mutex<Made>> = OnceLock::new();
    let number = |p: &str| p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
    let (Some(s), Some(f)) = (number(session), number(first)) else {
        sql.push_str(&statement(start, session, first, limit));
        return;
    };
    let key = ((start.as_ptr() as usize, start.len()), limit, s, f);
    let mut made = MADE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(text) = made.get(&key) {
        sql.push_str(text);
        return;
    }
    let text = statement(start, session, first, limit);
    sql.push_str(&text);
    if made.len() < KEPT {
        made.insert(key, text.into_boxed_str());
    }
}

/// How many texts [`push_statement`] keeps: the parameters before the read's are a commit's
/// drained ids, values, timers and files, so their number varies; past this many shapes, a
/// text is made each time.
const KEPT: usize = 64;

/// The text [`push_statement`] appends.
fn statement(start: &str, session: &str, first: &str, limit: usize) -> String {
    let next = format!("COALESCE(({start} = {session} + 1), 9223372036854775807)");
    format!(
        "SELECT $2 AS {ENTRIES_OF}, ({start} = {session}) AS read_from, {next} AS read_below;\n\
         SELECT $2 AS {ENTRIES_OF}, j.seq, j.kind, \
         CASE WHEN j.kind = 'message' THEN NULL ELSE j.data END AS data, j.created_at FROM journal j \
         WHERE j.thread = (SELECT num FROM threads WHERE id = $1) \
         AND j.seq >= ({start} = {session}) AND j.seq < {next} AND j.seq < {first} \
         ORDER BY j.seq LIMIT {limit};\n"
    )
}

/// The seq of the first entry `commit` writes: the read stops below it (all of the session
/// when it writes none).
pub(super) fn first_written(commit: &Commit) -> i64 {
    let messages = commit.messages.iter().map(|m| m.seq);
    let records = commit.records.iter().map(|r| r.seq);
    messages.chain(records).min().unwrap_or(i64::MAX)
}

/// What a settling commit's read returned: the session's bounds and its entries from before
/// the commit.
pub(super) struct Before<'a> {
    /// The rows of those entries.
    rows: &'a [SqliteRow],
    /// The seq of the session's `session_started` record (none: no such session).
    from: Option<i64>,
    /// The seq of the next session's, or `i64::MAX`.
    below: i64,
}

impl<'a> Before<'a> {
    /// Reads the bounds off `rows` (the statements' rows: the bounds, then the entries).
    pub(super) fn of(rows: &'a [SqliteRow]) -> Result<Before<'a>, StoreError> {
        let Some((bounds, rows)) = rows.split_first() else {
            return Err(StoreError::Corrupt(
                "a settling commit's read returned no row".into(),
            ));
        };
        let from: Option<i64> = bounds.try_get("read_from").map_err(crate::db_error)?;
        let below: i64 = bounds.try_get("read_below").map_err(crate::db_error)?;
        Ok(Before { rows, from, below })
    }

    /// The rows of the entries written before the commit, in seq order.
    pub(super) fn rows(&self) -> &'a [SqliteRow] {
        self.rows
    }

    /// The session's entries as `commit` leaves them: `earlier` (these rows, read back: see
    /// `sqlite.rs`'s `read_back`), then those of `commit`'s entries that lie in the session, in
    /// seq order.
    pub(super) fn with_written(&self, mut earlier: Vec<ReadBack>, commit: Commit) -> Vec<ReadBack> {
        let Some(from) = self.from else {
            return earlier;
        };
        let inside = |seq: i64| from <= seq && seq < self.below;
        let written = earlier.len();
        let messages = commit.messages.into_iter().map(JournalEntry::Message);
        let records = commit.records.into_iter().map(JournalEntry::Record);
        earlier.extend(
            messages
                .chain(records)
                .filter(|e| inside(e.seq()))
                .map(ReadBack::Entry),
        );
        earlier[written..].sort_by_key(ReadBack::seq);
        earlier
    }
}
