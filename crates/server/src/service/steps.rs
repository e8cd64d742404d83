//! The step a pending tool call belongs to, as the inbox shows it (`inbox/decision.rs`): the model message that made
//! the calls, each call that waited for a decision (asked, decided — queued or written — and its
//! result once the tool ran or the decision stood for it), the conversation before it, and what
//! the thread said after all its calls had results (the model's next message).

use duet_runtime::approval::{Asked, Decided};
use duet_runtime::{Message, Park, RecordBody, Role, Thread};
use duet_spec::ToolDef;

use super::{ServiceError, approvals};
use crate::auth::Caller;
use crate::views::ApprovalId;

/// How many messages before the step the page shows.
const TAIL: usize = 12;
/// The most notifications a step lists.
const NOTIFIED: usize = 50;

/// One call of the step that waited (or waits) for a decision.
pub(crate) struct Call {
    /// Its approval id (`THREAD:SESSION:SEQ`).
    pub id: String,
    /// The seq of its `approval_requested` record.
    pub seq: i64,
    pub asked: Asked,
    /// The tool as the project defines it now.
    pub tool: Option<ToolDef>,
    /// Its decision, once taken (queued or written by the run).
    pub decided: Option<Decided>,
    /// Its result, once written.
    pub result: Option<Message>,
}

impl Call {
    /// Whether it still takes a decision.
    pub(crate) fn open(&self) -> bool {
        self.decided.is_none() && self.result.is_none()
    }
}

/// A step with calls that waited for a decision.
pub(crate) struct Step {
    pub thread: Thread,
    /// Its parents, nearest first.
    pub parents: Vec<Thread>,
    /// The model message that made the calls.
    pub message: Option<Message>,
    pub calls: Vec<Call>,
    /// The messages before the step (at most [`TAIL`]).
    pub before: Vec<Message>,
    /// What the thread said once every call of the step had its result (none silent, no
    /// tool results of the step).
    pub after: Vec<Message>,
    /// When the step asked.
    pub asked_at: i64,
    /// The seq of the thread's first message (a child's is its parent's).
    pub first_seq: Option<i64>,
    /// The notifications sent about its calls that the caller may see, newest first.
    pub notified: Vec<duet_server_store::Delivery>,
}

impl Step {
    /// Whether every call of the step has its result: the thread ran on.
    pub(crate) fn done(&self) -> bool {
        self.calls.iter().all(|c| c.result.is_some())
    }

    /// The calls that still take a decision.
    pub(crate) fn open(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| c.open())
    }
}

/// The step of approval `id` as `caller` may see it, or `None` when `id` is not a tool call
/// (a question).
pub(crate) async fn load(
    state: &crate::state::AppState,
    caller: &Caller,
    id: &str,
) -> Result<Option<Step>, ServiceError> {
    let (approval, thread) = approvals::find(state, caller, id).await?;
    if thread.park() == Some(approval.park) {
        return Ok(None);
    }
    let store = state.runtime().store();
    let (records, messages, queue) = tokio::try_join!(
        store.records(thread.id),
        store.messages(thread.id),
        store.queue(thread.id)
    )?;
    let Some((this, asked_at)) = records.iter().find_map(|r| match &r.body {
        RecordBody::ApprovalRequested(a) if r.seq == approval.park.seq => {
            Some((a.call.clone(), r.created_at))
        }
        _ => None,
    }) else {
        return Ok(None);
    };
    let message = messages
        .iter()
        .find(|m| m.tool_calls.iter().any(|c| c.id == this))
        .cloned();
    let in_step = |call: &str| match &message {
        Some(m) => m.tool_calls.iter().any(|c| c.id == call),
        None => call == this,
    };
    let decisions: Vec<Decided> = queue
        .into_iter()
        .filter_map(|q| q.decision)
        .chain(records.iter().filter_map(|r| match &r.body {
            RecordBody::ApprovalDecided(d) => Some(d.clone()),
            _ => None,
        }))
        .collect();
    let result_of = |call: &str| {
        messages
            .iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(call))
            .cloned()
    };
    let project = state.runtime().project();
    let calls: Vec<Call> = records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ApprovalRequested(a) if in_step(&a.call) => Some(Call {
                id: ApprovalId {
                    thread: thread.id,
                    park: Park {
                        session: approval.park.session,
                        seq: r.seq,
                    },
                }
                .to_string(),
                seq: r.seq,
                tool: project.tools.get(&a.tool).map(|d| d.def.clone()),
                decided: decisions.iter().find(|d| d.approval == r.seq).cloned(),
                result: result_of(&a.call),
                asked: a.clone(),
            }),
            _ => None,
        })
        .collect();
    let step_seq = message.as_ref().map_or(approval.park.seq, |m| m.seq);
    let shown: Vec<&Message> = messages
        .iter()
        .filter(|m| m.seq < step_seq && !m.silent)
        .collect();
    let before = shown[shown.len().saturating_sub(TAIL)..]
        .iter()
        .map(|m| (*m).clone())
        .collect();
    let done = calls.iter().all(|c| c.result.is_some());
    // Every call of the step's message (those that needed no decision too) has its result
    // listed with the step, not after it.
    let step_calls: Vec<&str> = match &message {
        Some(m) => m.tool_calls.iter().map(|c| c.id.as_str()).collect(),
        None => calls.iter().map(|c| c.asked.call.as_str()).collect(),
    };
    let after = if done {
        messages
            .iter()
            .filter(|m| m.seq > step_seq && !m.silent)
            .filter(|m| {
                !(m.role == Role::Tool
                    && m.tool_call_id
                        .as_deref()
                        .is_some_and(|c| step_calls.contains(&c)))
            })
            .take(TAIL)
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let parents = approvals::parents(state, &thread).await?;
    let first_seq = messages.iter().find(|m| !m.silent).map(|m| m.seq);
    let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
    let notified = super::notify::about_ids(state, caller, &ids, NOTIFIED).await?;
    Ok(Some(Step {
        notified,
        first_seq,
        thread,
        parents,
        message,
        calls,
        before,
        after,
        asked_at,
    }))
}
