//! A write as data: SQL text with numbered arguments (`Batch`, `Arg`), and the journal rows of a
//! commit in the column order both backends insert.

use duet_runtime::{Commit, Message, NewQueued, Record, StopReason, StoreError, Thread, side_str};
use uuid::Uuid;

/// A bind value of a batch.
#[derive(Clone)]
pub(crate) enum Arg {
    Int(i64),
    OptInt(Option<i64>),
    Text(Option<String>),
    Bool(bool),
}

/// Arguments gathered in order by `bind` calls, as a query would take them: the bind macros of
/// [`crate::fragments`] fill a batch's arguments with it as they fill a query.
#[derive(Default)]
pub(crate) struct Args(pub(crate) Vec<Arg>);

impl Args {
    /// Adds `value` as the next argument.
    pub(crate) fn bind(mut self, value: impl Into<Arg>) -> Self {
        self.0.push(value.into());
        self
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}

impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::OptInt(v)
    }
}

impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}

impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}

/// SQL text and its numbered arguments; `$1` is the thread id, `$2` the lease owner, `$3..$19`
/// the thread's columns.
pub(crate) struct Batch {
    pub(crate) sql: String,
    pub(crate) args: Vec<Arg>,
}

/// Text as it is written: no NUL (each becomes U+FFFD, `duet_runtime::nul`).
pub(crate) fn text(s: Option<&str>) -> Arg {
    Arg::Text(s.map(duet_runtime::nul::cleaned))
}

impl Batch {
    pub(crate) fn new(t: &Thread, owner: Uuid) -> Self {
        let args = vec![
            text(Some(&t.id.to_string())),
            text(Some(&owner.to_string())),
            text(Some(&t.agent)),
            text(Some(t.status.as_str())),
            text(t.status_text.as_deref()),
            Arg::Int(t.session),
            Arg::Bool(t.session_open),
            text(t.stop_reason.map(StopReason::as_str)),
            text(t.result.as_deref()),
            Arg::Int(t.turns.a),
            Arg::Int(t.turns.b),
            Arg::Int(t.steps.a),
            Arg::Int(t.steps.b),
            Arg::Int(t.steps_total),
            text(t.acting.map(side_str)),
            Arg::Int(t.watermarks.a),
            Arg::Int(t.watermarks.b),
            Arg::Int(t.next_seq),
            Arg::Int(t.updated_at),
        ];
        Batch {
            sql: String::new(),
            args,
        }
    }

    /// Adds an argument and returns its placeholder.
    pub(crate) fn param(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }

    /// `VALUES (..), (..)` over `rows`, their arguments added.
    pub(crate) fn values(&mut self, rows: Vec<Vec<Arg>>) -> String {
        let mut out = String::from("VALUES ");
        for (i, row) in rows.into_iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push('(');
            for (j, arg) in row.into_iter().enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                out.push_str(&self.param(arg));
            }
            out.push(')');
        }
        out
    }
}

/// `rows` as one JSON array of arrays (an integer or a boolean as a number, a text as a string,
/// none as `null`), for a statement that reads its rows with `jsonb_each` from one parameter:
/// one bind, and one statement text whatever the number of rows.
pub(crate) fn json_rows(rows: &[Vec<Arg>]) -> Result<String, StoreError> {
    use std::io::Write as _;
    let corrupt =
        |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("a journal row as JSON: {e}"));
    let mut out: Vec<u8> = Vec::with_capacity(64 + rows.len() * 128);
    out.push(b'[');
    for (i, row) in rows.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"[" } else { b",[" });
        for (j, arg) in row.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            match arg {
                Arg::Int(v) | Arg::OptInt(Some(v)) => {
                    write!(out, "{v}").map_err(|e| corrupt(&e))?
                }
                Arg::Bool(v) => out.push(if *v { b'1' } else { b'0' }),
                Arg::Text(Some(v)) => {
                    serde_json::to_writer(&mut out, v).map_err(|e| corrupt(&e))?
                }
                Arg::OptInt(None) | Arg::Text(None) => out.extend_from_slice(b"null"),
            }
        }
        out.push(b']');
    }
    out.push(b']');
    String::from_utf8(out).map_err(|e| corrupt(&e))
}

/// The journal rows of a commit: its messages, then its records, as batch arguments in the
/// column order of `JOURNAL_COLUMNS` (after `thread`).
pub(crate) fn journal_rows(commit: &Commit) -> Result<Vec<Vec<Arg>>, StoreError> {
    let mut rows: Vec<Vec<Arg>> = Vec::new();
    for m in &commit.messages {
        rows.push(message_row(m)?);
    }
    for r in &commit.records {
        rows.push(record_row(r));
    }
    Ok(rows)
}

/// `journal`'s columns after `thread`.
pub(crate) const JOURNAL_COLUMNS: &str = "seq, kind, session, role, side, content, thinking, tool_calls, \
     tool_call_id, tool_name, tool_status, silent, model, data, created_at";

fn message_row(m: &Message) -> Result<Vec<Arg>, StoreError> {
    let calls = if m.tool_calls.is_empty() {
        None
    } else {
        let mut calls =
            serde_json::to_string(&m.tool_calls).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        duet_runtime::nul::replace_in_json(&mut calls);
        Some(calls)
    };
    let mut data = crate::message_data::write(m).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    if let Some(data) = &mut data {
        duet_runtime::nul::replace_in_json(data);
    }
    Ok(vec![
        Arg::Int(m.seq),
        Arg::Text(Some("message".into())),
        Arg::OptInt(Some(m.session)),
        Arg::Text(Some(m.role.as_str().into())),
        Arg::Text(m.side.map(|s| side_str(s).into())),
        text(m.content.as_deref()),
        text(m.thinking.as_deref()),
        Arg::Text(calls),
        text(m.tool_call_id.as_deref()),
        text(m.tool_name.as_deref()),
        Arg::Text(m.tool_status.map(|s| s.as_str().into())),
        Arg::Bool(m.silent),
        text(m.model.as_deref()),
        Arg::Text(data),
        Arg::Int(m.created_at),
    ])
}

fn record_row(r: &Record) -> Vec<Arg> {
    let (kind, data) = r.body.to_parts();
    let mut row = vec![Arg::Int(r.seq), Arg::Text(Some(kind)), Arg::OptInt(None)];
    row.extend((0..8).map(|_| Arg::Text(None)));
    row.extend([
        Arg::Bool(false),
        Arg::Text(None),
        Arg::Text(Some(duet_runtime::nul::json_text(&data))),
        Arg::Int(r.created_at),
    ]);
    row
}

/// The `SET` list writing a thread's state from `Batch::new`'s `$3..$19`.
pub(crate) const THREAD_SET: &str = "agent = $3, status = $4, status_text = $5, session = $6, session_open = $7, \
     stop_reason = $8, result = $9, turns_a = $10, turns_b = $11, steps_a = $12, steps_b = $13, \
     steps_total = $14, acting = $15, watermark_a = $16, watermark_b = $17, next_seq = $18, updated_at = $19";

/// A queued message's values after `thread`, in the column order of `QUEUED_COLUMNS`.
pub(crate) fn queued_row(q: &NewQueued, now: i64) -> Vec<Arg> {
    vec![
        Arg::Text(Some(q.role.as_str().into())),
        Arg::Text(Some(side_str(q.side).into())),
        text(Some(&q.content)),
        Arg::Bool(q.human),
        Arg::Bool(q.silent),
        Arg::Bool(q.follow_up),
        Arg::Int(now),
        text(q.tool.as_ref().map(|r| r.call_id.as_str())),
        text(q.tool.as_ref().map(|r| r.name.as_str())),
        Arg::Text(q.tool.as_ref().map(|r| r.status.as_str().to_owned())),
        Arg::Text(
            (!q.images.is_empty())
                .then(|| duet_runtime::nul::json_text(&serde_json::json!(q.images))),
        ),
        Arg::Text(q.trace.clone()),
        Arg::Text(crate::fragments::attachments_json(&q.attachments)),
    ]
}

/// `queue`'s columns after `thread`, as a commit writes them (`message_id` is not among them:
/// only a delivery carries a sender's id, and deliveries are queued outside commits).
pub(crate) const QUEUED_COLUMNS: &str = "role, side, content, human, silent, follow_up, created_at, \
     tool_call_id, tool_name, tool_status, images, trace, attachments";
