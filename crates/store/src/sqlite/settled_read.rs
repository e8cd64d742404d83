//! A settling commit's read of its session (`commit_reading`): the session's entries written
//! before the commit are read back in the commit's call; the commit's own are taken as the
//! commit holds them, not read back and decoded again. What the two make is what
//! `session_entries` reads after the commit (the store conformance suite holds them equal).

use duet_runtime::{Commit, JournalEntry};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::commit::ENTRIES_OF;
use duet_runtime::StoreError;

/// The statement that ends a settling commit's call: session `$session` of thread `$1`'s
/// bounds (its `session_started` record's seq, and the next session's: `start` is the text
/// that finds one, up to the comparison of its session number) on every row, and its entries
/// below seq `$first` (the commit's first, see [`first_written`]), at most `limit`. Always one
/// row at least: when no entry is read, one with the bounds alone (its journal columns null).
pub(super) fn statement(start: &str, session: &str, first: &str, limit: usize) -> String {
    format!(
        "SELECT $2 AS {ENTRIES_OF}, b.lo AS read_from, b.hi AS read_below, j.* FROM \
         (SELECT ({start} = {session}) AS lo, \
          COALESCE(({start} = {session} + 1), 9223372036854775807) AS hi) b \
         LEFT JOIN journal j ON j.thread = (SELECT num FROM threads WHERE id = $1) \
         AND j.seq >= b.lo AND j.seq < b.hi AND j.seq < {first} \
         ORDER BY j.seq LIMIT {limit};\n"
    )
}

/// The seq of the first entry `commit` writes: the read stops below it (all of the session
/// when it writes none).
pub(super) fn first_written(commit: &Commit) -> i64 {
    let first = |seq: Option<i64>| seq.unwrap_or(i64::MAX);
    first(commit.messages.first().map(|m| m.seq)).min(first(commit.records.first().map(|r| r.seq)))
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
    /// Reads the bounds off `rows` (the statement's), and which of them are entries.
    pub(super) fn of(rows: &'a [SqliteRow]) -> Result<Before<'a>, StoreError> {
        let Some(first) = rows.first() else {
            return Err(StoreError::Corrupt(
                "a settling commit's read returned no row".into(),
            ));
        };
        let from: Option<i64> = first.try_get("read_from").map_err(crate::db_error)?;
        let below: i64 = first.try_get("read_below").map_err(crate::db_error)?;
        // The row of the bounds alone (no entry matched) has no seq.
        let seq: Option<i64> = first.try_get("seq").map_err(crate::db_error)?;
        let rows = if seq.is_some() { rows } else { &[] };
        Ok(Before { rows, from, below })
    }

    /// The rows of the entries written before the commit, in seq order.
    pub(super) fn rows(&self) -> &'a [SqliteRow] {
        self.rows
    }

    /// The session's entries as `commit` leaves them: `earlier` (these rows, decoded), then
    /// those of `commit`'s entries that lie in the session, in seq order.
    pub(super) fn with_written(
        &self,
        mut earlier: Vec<JournalEntry>,
        commit: Commit,
    ) -> Vec<JournalEntry> {
        let Some(from) = self.from else {
            return earlier;
        };
        let inside = |seq: i64| from <= seq && seq < self.below;
        let written = earlier.len();
        earlier.extend(
            commit
                .messages
                .into_iter()
                .filter(|m| inside(m.seq))
                .map(JournalEntry::Message),
        );
        earlier.extend(
            commit
                .records
                .into_iter()
                .filter(|r| inside(r.seq))
                .map(JournalEntry::Record),
        );
        earlier[written..].sort_by_key(JournalEntry::seq);
        earlier
    }
}
