//! A duet thread's sessions seen as A2A tasks: the task id names the thread and the session
//! (`{thread}.{session}`), and everything else — state, history, the result artifact — is read
//! from the thread and its journal, so every process sees the same task and nothing is stored
//! twice.

use duet_a2a::{
    Artifact, Message as A2aMessage, Part, Role as A2aRole, Task, TaskState, TaskStatus, timestamp,
};
use duet_runtime::{Message, SideId, StopReason, Thread, ThreadId, ThreadStatus};
use serde_json::Value;

use crate::service::tasks::SessionFacts;

/// A task: one session of one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskRef {
    pub thread: ThreadId,
    pub session: i64,
}

impl TaskRef {
    /// The task's id on the wire.
    pub(crate) fn id(&self) -> String {
        format!("{}.{}", self.thread, self.session)
    }

    /// Reads a task id; `None` for anything that is not one.
    pub(crate) fn parse(id: &str) -> Option<Self> {
        let (thread, session) = id.rsplit_once('.')?;
        let session: i64 = session.parse().ok().filter(|s| *s >= 1)?;
        Some(Self {
            thread: thread.parse().ok()?,
            session,
        })
    }

    /// The thread's current (or last) session.
    pub(crate) fn current(t: &Thread) -> Self {
        Self {
            thread: t.id,
            session: t.session.max(1),
        }
    }

    /// The session a message delivered to `t` now lands in: the open one, or the next.
    pub(crate) fn next_for(t: &Thread) -> Self {
        Self {
            thread: t.id,
            session: if t.session_open || t.session == 0 {
                t.session.max(1)
            } else {
                t.session + 1
            },
        }
    }
}

/// The state of a session that ended for `reason`.
fn ended(reason: StopReason) -> TaskState {
    match reason {
        StopReason::SessionFail | StopReason::StepError => TaskState::Failed,
        StopReason::Aborted => TaskState::Canceled,
        StopReason::HookBlocked => TaskState::Rejected,
        _ => TaskState::Completed,
    }
}

/// The A2A state of session `session` of `t`.
pub(crate) fn state(t: &Thread, session: i64, facts: &SessionFacts) -> TaskState {
    if let Some((reason, _)) = &facts.ended {
        return ended(*reason);
    }
    // Terminated before the session ended (or even opened): canceled.
    if t.status == ThreadStatus::Terminated {
        return TaskState::Canceled;
    }
    if session < t.session {
        return TaskState::Completed;
    }
    if session > t.session {
        // Queued, its session not opened yet.
        return if t.status == ThreadStatus::Running {
            TaskState::Working
        } else {
            TaskState::Submitted
        };
    }
    // Waiting on tool calls a person must decide (not on a child): the client's turn.
    if waits_on_decisions(t, facts) {
        return TaskState::InputRequired;
    }
    current_state(t)
}

/// Whether `t`'s current session waits on tool calls that need a person's decision (the
/// journal's facts of that session).
fn waits_on_decisions(t: &Thread, facts: &SessionFacts) -> bool {
    t.status == ThreadStatus::Waiting && !facts.pending.is_empty()
}

/// The state of `t`'s current session, from the thread alone (no journal read): a `waiting`
/// thread reads as working here, though it may wait on decisions ([`state`] knows).
pub(crate) fn current_state(t: &Thread) -> TaskState {
    // A session that ended keeps its end, even on a thread terminated since (as the journal
    // has it).
    if !t.session_open && t.session > 0 && t.stop_reason.is_some() {
        return t.stop_reason.map_or(TaskState::Completed, ended);
    }
    open_state(t)
}

/// The state of `t`'s open (or not yet opened) session.
fn open_state(t: &Thread) -> TaskState {
    if t.status == ThreadStatus::Terminated {
        return TaskState::Canceled;
    }
    if t.session == 0 {
        return TaskState::Submitted;
    }
    match t.status {
        ThreadStatus::Running | ThreadStatus::Waiting => TaskState::Working,
        ThreadStatus::AwaitingHuman => TaskState::InputRequired,
        ThreadStatus::Terminated => TaskState::Canceled,
        ThreadStatus::Idle => match t.stop_reason {
            Some(StopReason::StepError) => TaskState::Failed,
            Some(StopReason::Aborted) => TaskState::Canceled,
            // Stopped on a limit with the session open: the next message continues it.
            _ => TaskState::InputRequired,
        },
    }
}

/// How a task is shown: the caller's name for the thread, the side the client plays, and how
/// much history.
#[derive(Clone, Debug)]
pub(crate) struct View {
    pub context: String,
    pub client: SideId,
    pub history: usize,
    pub artifacts: bool,
    /// The origin a large result file's download URL starts with (the public URL, else the
    /// request's: [`super::files_out`]); `None`: root-relative.
    pub origin: Option<String>,
}

/// The task for session `r.session` of `t`.
pub(crate) fn task(t: &Thread, r: TaskRef, facts: &SessionFacts, view: &View) -> Task {
    let id = r.id();
    let message = |m: &Message| A2aMessage {
        message_id: message_id(&id, m),
        context_id: Some(view.context.clone()),
        task_id: Some(id.clone()),
        role: if m.side == Some(view.client) {
            A2aRole::User
        } else {
            A2aRole::Agent
        },
        parts: vec![Part::text(m.content.clone().unwrap_or_default())],
        metadata: None,
        extensions: vec![],
        reference_task_ids: vec![],
    };
    let state = state(t, r.session, facts);
    // The agent's latest word: its last message, when nothing of the client's came after it.
    let last_agent = facts
        .messages
        .last()
        .filter(|m| m.side != Some(view.client))
        .map(message);
    let result = facts
        .ended
        .as_ref()
        .and_then(|(_, result)| result.clone())
        .or_else(|| {
            (state == TaskState::Failed && r.session == t.session)
                .then(|| t.result.clone())
                .flatten()
        });
    let status_message = match (state, &result) {
        (TaskState::Failed, Some(error)) => Some(A2aMessage {
            parts: vec![Part::text(error.clone())],
            ..A2aMessage::agent_text(format!("{id}.status"), "")
        }),
        (TaskState::InputRequired, _) if waits_on_decisions(t, facts) => Some(
            super::asking::status_message(&id, t.id, r.session, &facts.pending, facts),
        ),
        // Parked at a question with a deadline: its message says the deadline too.
        (TaskState::InputRequired, _) if r.session == t.session => {
            let (timers, notes) = &facts.deadlines;
            let standing = duet_runtime::deadline::Subject::parked(t)
                .and_then(|q| duet_runtime::deadline::standing(timers, notes, q));
            match (last_agent, standing) {
                (Some(m), Some(d)) => Some(super::asking::with_deadline(m, &d, facts.read_at)),
                (m, _) => m,
            }
        }
        _ => last_agent,
    }
    .map(|mut m| {
        m.context_id = Some(view.context.clone());
        m.task_id = Some(id.clone());
        m
    });
    let at = if r.session == t.session {
        t.updated_at
    } else {
        facts.last_at
    };
    // The files first: they are what the session produced, its result text says so; a client
    // that reads the first artifact gets them (docs/decisions.md).
    let mut artifacts = Vec::new();
    if view.artifacts && state == TaskState::Completed {
        let origin = view.origin.as_deref();
        artifacts.extend(super::files_out::artifact(
            &id,
            &view.context,
            &facts.files,
            origin,
        ));
    }
    if view.artifacts
        && let Some(result) = result.filter(|_| state == TaskState::Completed)
    {
        artifacts.push(result_artifact(&id, &result));
    }
    let history: Vec<A2aMessage> = shown(facts, view).iter().map(message).collect();
    Task {
        id: id.clone(),
        context_id: view.context.clone(),
        status: TaskStatus {
            state,
            message: status_message,
            timestamp: chrono::DateTime::from_timestamp_millis(at).map(timestamp),
        },
        artifacts,
        history,
        metadata: None,
    }
}

/// A message's id on the wire: the one its sender chose (a client's `messageId`), else duet's
/// own, `{task}.{seq}`.
fn message_id(task: &str, m: &Message) -> String {
    m.message_id
        .clone()
        .unwrap_or_else(|| format!("{task}.{}", m.seq))
}

/// The messages a task's history shows: the session's last `view.history`.
fn shown<'a>(facts: &'a SessionFacts, view: &View) -> &'a [Message] {
    let all = &facts.messages;
    &all[all.len().saturating_sub(view.history)..]
}

/// The journal seq of each message of [`task`]'s history, in its order (what follows a task
/// compares, as a client may choose any id).
pub(crate) fn history_seqs(facts: &SessionFacts, view: &View) -> Vec<i64> {
    shown(facts, view).iter().map(|m| m.seq).collect()
}

/// A session's result as an artifact: a `data` part when it is a JSON object or array.
pub(crate) fn result_artifact(task: &str, result: &str) -> Artifact {
    let part = match serde_json::from_str::<Value>(result) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => Part::data(v),
        _ => Part::text(result),
    };
    Artifact {
        artifact_id: format!("{task}.result"),
        name: Some("result".into()),
        description: Some("the session's result".into()),
        parts: vec![part],
        metadata: None,
        extensions: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_name_a_thread_and_a_session() {
        let r = TaskRef {
            thread: uuid::Uuid::now_v7(),
            session: 3,
        };
        assert_eq!(TaskRef::parse(&r.id()), Some(r));
        for bad in [
            "",
            "x.1",
            "nope",
            &format!("{}.0", r.thread),
            &format!("{}.-1", r.thread),
        ] {
            assert_eq!(TaskRef::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_structured_result_is_a_data_part() {
        let a = result_artifact("t", r#"{"decision":"approved"}"#);
        assert_eq!(
            serde_json::to_value(&a.parts[0]).expect("serializes"),
            serde_json::json!({"data": {"decision": "approved"}})
        );
        let t = result_artifact("t", "approved");
        assert_eq!(
            serde_json::to_value(&t.parts[0]).expect("serializes"),
            serde_json::json!({"text": "approved"})
        );
    }
}
