//! What the REST API returns, converted by hand from the runtime's types (the wire shape is
//! this crate's, never derived onto the runtime's types). Field names are camelCase. And
//! [`segment`], a path segment percent-encoded for the URLs the API and the inbox give.

use duet_runtime::control::Entry;
use duet_runtime::{Child, FirstAnswer, Park, Thread, ThreadId};
use duet_spec::{AgentDef, Side};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Caller;

/// A parked question's id across all threads: `{thread id}:{session}:{seq}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApprovalId {
    /// The parked thread.
    pub thread: ThreadId,
    /// Where it is parked.
    pub park: Park,
}

impl std::fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.thread, self.park)
    }
}

impl std::str::FromStr for ApprovalId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("an approval id is THREAD-ID:SESSION:SEQ, not `{s}`");
        let (thread, park) = s.split_once(':').ok_or_else(bad)?;
        Ok(ApprovalId {
            thread: thread.parse().map_err(|_| bad())?,
            park: park.parse().map_err(|_| bad())?,
        })
    }
}

/// One of the project's agents.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentView {
    /// Its name.
    pub(crate) name: String,
    /// What backs side A: `human`, `prompt` or `handler`.
    pub(crate) side_a: &'static str,
    /// What backs side B.
    pub(crate) side_b: &'static str,
    /// Whether it is exposed as a tool (and over A2A).
    pub(crate) exposed: bool,
    /// Its description, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
}

fn backing(side: &Side) -> &'static str {
    match side {
        Side::Human(_) => "human",
        Side::Prompt(_) => "prompt",
        Side::Handler(_) => "handler",
    }
}

impl From<&AgentDef> for AgentView {
    fn from(a: &AgentDef) -> Self {
        AgentView {
            name: a.name.clone(),
            side_a: backing(&a.sides.a),
            side_b: backing(&a.sides.b),
            exposed: a.expose_as_tool,
            description: a.description.clone().or_else(|| a.tool_description.clone()),
        }
    }
}

/// Turns taken, per side.
#[derive(Serialize, ToSchema)]
pub(crate) struct Turns {
    /// Side A's.
    pub(crate) a: i64,
    /// Side B's.
    pub(crate) b: i64,
}

/// A thread as a caller sees it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadView {
    /// The caller's key for it.
    pub(crate) key: String,
    /// Its id (stable; approvals name it).
    pub(crate) id: String,
    /// The agent it runs now.
    pub(crate) agent: String,
    /// The parent's key, for a subagent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<String>,
    /// `running`, `awaiting_human`, `waiting`, `idle` or `terminated`.
    pub(crate) status: &'static str,
    /// Why the last run stopped.
    pub(crate) stop_reason: Option<&'static str>,
    /// The last ended session's result, or a failed step's error.
    pub(crate) result: Option<String>,
    /// The current (or last) session.
    pub(crate) session: i64,
    /// Turns taken in the current session, per side.
    pub(crate) turns: Turns,
    /// Where it waits for a person (`SESSION:SEQ`), while it does.
    pub(crate) park: Option<String>,
    /// The approval to answer (`POST /approvals/{id}`), while it waits for a person.
    pub(crate) approval: Option<String>,
    /// The journal's last seq: follow the events after it.
    pub(crate) seq: i64,
    /// When it was created (ms since the Unix epoch).
    pub(crate) created_at: i64,
    /// When it last changed.
    pub(crate) updated_at: i64,
    /// Its subagents (only on `GET /threads/{key}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) children: Option<Vec<ChildView>>,
}

impl ThreadView {
    /// `t` for `caller`, its parent's key given.
    pub(crate) fn of(t: &Thread, caller: &Caller, parent: Option<&Thread>) -> Self {
        ThreadView {
            key: caller.visible_key(&t.key),
            id: t.id.to_string(),
            agent: t.agent.clone(),
            parent: parent.map(|p| caller.visible_key(&p.key)),
            status: t.status.as_str(),
            stop_reason: t.stop_reason.map(|r| r.as_str()),
            result: t.result.clone(),
            session: t.session,
            turns: Turns {
                a: t.turns.a,
                b: t.turns.b,
            },
            park: t.park().map(|p| p.to_string()),
            approval: t
                .park()
                .map(|park| ApprovalId { thread: t.id, park }.to_string()),
            seq: t.next_seq - 1,
            created_at: t.created_at,
            updated_at: t.updated_at,
            children: None,
        }
    }
}

/// A subagent in its parent's registry.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildView {
    /// The child thread's key.
    pub(crate) key: String,
    /// The agent it runs.
    pub(crate) agent: String,
    /// The relationship it was spawned under.
    pub(crate) relationship: String,
    /// `running`, `idle`, `failed`, `awaiting_human`, `waiting` or `terminated`.
    pub(crate) status: &'static str,
    /// Whether its parent waits for it.
    pub(crate) blocking: bool,
}

impl ChildView {
    /// `c`, whose thread is `key`, for `caller`.
    pub(crate) fn of(c: &Child, key: &str, caller: &Caller) -> Self {
        ChildView {
            key: caller.visible_key(key),
            agent: c.agent.clone(),
            relationship: c.relationship.clone(),
            status: c.status.as_str(),
            blocking: c.blocking,
        }
    }
}

/// One journal entry: a message, or another fact of a run.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EntryView {
    /// Its place in the journal (the SSE event id, and the cursor).
    pub(crate) seq: i64,
    /// `message`, or a record kind (`turn_completed`, `parked`, `session_ended`, ...).
    pub(crate) kind: String,
    /// The message's or record's fields.
    #[schema(value_type = Object)]
    pub(crate) data: Value,
    /// When it was committed (ms since the Unix epoch).
    pub(crate) created_at: i64,
}

impl From<Entry> for EntryView {
    fn from(e: Entry) -> Self {
        EntryView {
            seq: e.seq,
            kind: e.kind,
            data: e.data,
            created_at: e.created_at,
        }
    }
}

/// A page of a listing.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Page<T> {
    /// This page.
    pub(crate) items: Vec<T>,
    /// Pass as `cursor` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

/// What waits for a person: a parked question (`kind: question`) or a tool call that waits for
/// a decision (`kind: tool_call`, with its tool, arguments and the decisions offered).
#[derive(Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApprovalView {
    /// Answer it with `POST /approvals/{id}`.
    pub(crate) id: String,
    /// `question` or `tool_call`.
    pub(crate) kind: &'static str,
    /// A tool call's tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool: Option<String>,
    /// A tool call's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) call: Option<String>,
    /// A tool call's proposed arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) arguments: Option<serde_json::Value>,
    /// The decisions offered (`approve`, `edit`, `reject`, `respond`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) decisions: Option<Vec<String>>,
    /// Who may decide (`{roles, principals}`; recorded, enforced in a later release).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) approvers: Option<serde_json::Value>,
    /// A tool call's decision as recorded (`decision`, `author`, `at`, `reason`, `args`,
    /// `text`, `remember`), once one was taken (`GET /approvals/{id}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) decided: Option<serde_json::Value>,
    /// The parked thread.
    pub(crate) thread: String,
    /// Its agent.
    pub(crate) agent: String,
    /// Its park (`SESSION:SEQ`).
    pub(crate) park: String,
    /// The question: the thread's last message.
    pub(crate) question: Option<String>,
    /// Since when it waits (ms since the Unix epoch).
    pub(crate) since: i64,
    /// Its parents, nearest first, up to the top-level thread.
    pub(crate) parents: Vec<ParentView>,
    /// Its deadline, when it has one (a duet extension), as its timers stand — the declared
    /// one or one code set: `subject`; `at`, `action` (`default`), `default` (the answer given)
    /// and `status`; `reminders` (`at`, `status` each); `escalate` (`at`, `status`, `roles`,
    /// `principals`) and `escalated` (who was added, once it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) deadline: Option<duet_runtime::deadline::Standing>,
}

/// A thread above a parked one.
#[derive(Clone, Serialize, ToSchema)]
pub(crate) struct ParentView {
    /// Its key.
    pub(crate) key: String,
    /// Its agent.
    pub(crate) agent: String,
}

/// A decision on a tool call as the API shows it: as recorded, its author named by subject
/// (`bob`), as an answer's is.
pub(crate) fn decided(d: &duet_runtime::approval::Decided) -> Value {
    let mut v = serde_json::json!(d);
    if let Some(author) = d.author.as_deref() {
        v["author"] = Value::String(Caller::author_name(author));
    }
    v
}

/// The answer that won a park, in a 409.
pub(crate) fn first_answer(first: &FirstAnswer) -> Value {
    serde_json::json!({
        "content": first.content,
        "at": first.at,
        "author": first.author.as_deref().map(Caller::author_name),
        "messageId": first.message_id,
    })
}

/// What accepting a message returns at once (202).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AcceptedView {
    /// The thread's key.
    pub(crate) thread: String,
    /// `accepted` (this server runs it now), `queued` (a run in flight takes it) or
    /// `duplicate` (this message id was delivered before; nothing was written).
    pub(crate) delivery: &'static str,
    /// Where to follow it: the thread's events after the journal's seq at acceptance.
    pub(crate) events: String,
}

/// Percent-encodes `s` for one path segment (every byte but the unreserved ones).
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
