//! Tool calls that wait for a person's decision (a tool's `approval`, issue #29): what a pending
//! call records when its step commits ([`Asked`], the `approval_requested` record), and a
//! decision on it ([`Decided`]: queued by [`crate::QueueStore::decide`], first one wins, then
//! written as the `approval_decided` record when the thread's run takes it). An approval's id is
//! the seq of its `approval_requested` record.

use duet_spec::ToolDef;
pub use duet_spec::{Approvers, Decision, RememberScope};
use serde::{Deserialize, Serialize};

/// A pending call, as its `approval_requested` record holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Asked {
    /// The tool call's id.
    pub call: String,
    /// The tool.
    pub tool: String,
    /// The arguments the model proposed.
    pub arguments: serde_json::Value,
    /// The decisions offered.
    pub decisions: Vec<Decision>,
    /// The scopes an approval may be remembered for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remember: Vec<RememberScope>,
    /// Who may decide.
    #[serde(default)]
    pub approvers: Approvers,
    /// The project revision it was asked under ([`duet_spec::Project::revision`]): what a
    /// reader compares when the definitions changed since (a decision is checked against the
    /// current ones, [`check`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The `tool_call_policy` hook that asked (its id), when a hook rather than the tool's
    /// `approval` made the call wait: the tool need not declare an approval, and the decisions
    /// offered are the ones recorded here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Its deadline (the tool's `approval.deadline`, or the one a policy hook's `Ask` gave),
    /// counted from the record's time: what its timers were scheduled from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<duet_spec::Deadline>,
}

/// A decision on a pending call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    /// The approval it answers: the seq of the `approval_requested` record.
    pub approval: i64,
    /// The tool call's id.
    pub call: String,
    /// The tool.
    pub tool: String,
    /// What was decided.
    pub decision: Decision,
    /// `edit`: the arguments the tool runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// `reject`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `respond`: the text that is the tool's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `approve` for the rest of this session or thread: later calls of the tool in that
    /// scope skip approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember: Option<RememberScope>,
    /// Who decided (a principal, canonical JSON), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// When (ms since the Unix epoch).
    pub at: i64,
    /// The caller's `Idempotency-Key`, if one came with it: the same key again replays this
    /// decision and writes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

impl Decided {
    /// The tool result a decision that does not run the tool stands for: `(content, ok)`.
    /// `None` for approve and edit (the tool runs).
    pub fn result(&self) -> Option<(String, bool)> {
        match self.decision {
            Decision::Approve | Decision::Edit => None,
            Decision::Reject => Some((
                match self.reason.as_deref().filter(|r| !r.trim().is_empty()) {
                    Some(reason) => format!("A person rejected this call: {reason}"),
                    None => "A person rejected this call.".to_owned(),
                },
                false,
            )),
            Decision::Respond => Some((self.text.clone().unwrap_or_default(), true)),
        }
    }

    /// The arguments the tool runs with, for approve (`proposed`) and edit.
    pub fn arguments<'a>(&'a self, proposed: &'a serde_json::Value) -> &'a serde_json::Value {
        self.args.as_ref().unwrap_or(proposed)
    }
}

/// Why a decision cannot be taken for `asked` under the current definitions (`tool`, if the
/// project still has it): the pin of a parked approval. `None`: it can.
pub fn check(asked: &Asked, tool: Option<&ToolDef>, decided: &Decided) -> Result<(), Refusal> {
    let Some(tool) = tool else {
        return Err(Refusal::Stale(format!(
            "tool `{}` is no longer defined",
            asked.tool
        )));
    };
    // A call a policy hook asked about needs no `approval` on its tool: the hook is not asked
    // again, and the decisions recorded with the call are the ones offered.
    let approval = tool.approval.as_ref();
    if approval.is_none() && asked.policy.is_none() {
        return Err(Refusal::Stale(format!(
            "tool `{}` no longer needs approval",
            asked.tool
        )));
    }
    let offered = asked.decisions.contains(&decided.decision)
        && (asked.policy.is_some() || approval.is_some_and(|a| a.offers(decided.decision)));
    if !offered {
        return Err(Refusal::NotOffered(decided.decision));
    }
    if let Some(scope) = decided.remember
        && (decided.decision != Decision::Approve
            || !asked.remember.contains(&scope)
            || !approval.is_some_and(|a| a.remember.contains(&scope)))
    {
        return Err(Refusal::Incomplete(format!(
            "this approval does not offer to remember an approval for the {}",
            scope.as_str()
        )));
    }
    let args = decided.arguments(&asked.arguments);
    if let Some(schema) = &tool.args
        && let Some(at) = invalid_at(schema, args)
    {
        return Err(if decided.decision == Decision::Edit {
            Refusal::InvalidArgs(at)
        } else {
            Refusal::Stale(format!(
                "the call's arguments no longer match tool `{}`'s `args`: {at}",
                asked.tool
            ))
        });
    }
    Ok(())
}

/// Where `args` break `schema`: `PATH: what` of the first error, `None` if they match.
fn invalid_at(schema: &serde_json::Value, args: &serde_json::Value) -> Option<String> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("the schema does not compile: {e}")),
    };
    validator.iter_errors(args).next().map(|e| {
        let path = e.instance_path().to_string();
        let path = if path.is_empty() {
            "/".to_owned()
        } else {
            path
        };
        format!("{path}: {e}")
    })
}

/// Why a decision is refused before anything is written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The definitions changed under the parked approval: the call is no longer valid.
    #[error("the definitions changed under this approval: {0}")]
    Stale(String),
    /// The decision is not one the approval offers.
    #[error("`{}` is not a decision this approval offers", .0.as_str())]
    NotOffered(Decision),
    /// Edited arguments that break the tool's `args` schema (the field path first).
    #[error("the edited arguments do not match the tool's `args`: {0}")]
    InvalidArgs(String),
    /// An edit without arguments, a reject without a reason …
    #[error("{0}")]
    Incomplete(String),
}

/// The thread value that remembers an approval of `tool` ("approve for the rest of this
/// session / thread"): `{"scope": "thread"}` or `{"scope": "session", "session": N}`.
pub fn remembered_key(tool: &str) -> String {
    format!("duet.approved.{tool}")
}

/// The value [`remembered_key`] holds for `scope`, decided in session `session`.
pub fn remembered_value(scope: RememberScope, session: i64) -> serde_json::Value {
    match scope {
        RememberScope::Thread => serde_json::json!({"scope": "thread"}),
        RememberScope::Session => serde_json::json!({"scope": "session", "session": session}),
    }
}

/// Whether `value` (what [`remembered_key`] holds) covers a call in session `session`.
pub fn remembered_covers(value: &serde_json::Value, session: i64) -> bool {
    match value.get("scope").and_then(serde_json::Value::as_str) {
        Some("thread") => true,
        Some("session") => {
            value.get("session").and_then(serde_json::Value::as_i64) == Some(session)
        }
        _ => false,
    }
}

/// A pending call as a caller sees it (`invoke`'s `completed.data.approvals`, listings).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// `SESSION:SEQ`, as a park is named in `completed.data.park`: the seq of its
    /// `approval_requested` record is the approval's id.
    pub id: String,
    /// The approval id alone (the record's seq).
    pub seq: i64,
    /// The tool call's id.
    pub call: String,
    /// The tool.
    pub tool: String,
    /// The proposed arguments.
    pub arguments: serde_json::Value,
    /// The decisions offered.
    pub decisions: Vec<Decision>,
    /// The scopes an approval may be remembered for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remember: Vec<RememberScope>,
    /// Who may decide.
    #[serde(default)]
    pub approvers: Approvers,
}

/// The calls of a thread's journal (its `records` and `messages`) still waiting for a
/// decision: asked, and with no result written yet.
pub fn pending(records: &[crate::Record], messages: &[crate::Message]) -> Vec<Pending> {
    let answered = |call: &str| {
        messages
            .iter()
            .any(|m| m.role == crate::Role::Tool && m.tool_call_id.as_deref() == Some(call))
    };
    records
        .iter()
        .filter_map(|r| match &r.body {
            crate::RecordBody::ApprovalRequested(a) if !answered(&a.call) => {
                let session = messages
                    .iter()
                    .rev()
                    .find(|m| m.seq < r.seq)
                    .map_or(0, |m| m.session);
                Some(Pending {
                    id: format!("{session}:{}", r.seq),
                    seq: r.seq,
                    call: a.call.clone(),
                    tool: a.tool.clone(),
                    arguments: a.arguments.clone(),
                    decisions: a.decisions.clone(),
                    remember: a.remember.clone(),
                    approvers: a.approvers.clone(),
                })
            }
            _ => None,
        })
        .collect()
}
