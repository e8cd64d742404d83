//! What a drain, a step or a stop does to a thread, as pure functions: each takes the thread's
//! state (and what happened) and changes its counters, sequence numbers and status in place,
//! returning the journal entries and queue ids to commit. No IO and no clock (`now` comes in):
//! the driver (`engine/`) does the doing and commits what these return.

use duet_spec::{AgentDef, PromptSide};

pub use crate::decide::CallOutcome;
use crate::decide::{self, AfterStep, AfterTurn};
use crate::record::{Record, RecordBody};
use crate::store::Commit;
use crate::types::{
    Message, Queued, Role, SideId, StopReason, Thread, ThreadStatus, ToolCall, ToolStatus,
};

/// Stops the run with `status` and `reason`; the session stays open.
pub fn halt(t: &mut Thread, status: ThreadStatus, reason: StopReason, now: i64) -> Record {
    t.status = status;
    t.stop_reason = Some(reason);
    t.updated_at = now;
    Record::new(
        t.take_seq(),
        RecordBody::Stopped {
            stop_reason: reason,
            status,
            trace: None,
            revision: None,
        },
        now,
    )
}

/// Parks the run for a person: the session stays open.
pub fn park(t: &mut Thread, reason: StopReason, now: i64) -> Record {
    halt(t, ThreadStatus::AwaitingHuman, reason, now)
}

/// Stops the run (a safety limit, an error, an abort): the session stays open.
pub fn stop(t: &mut Thread, reason: StopReason, now: i64) -> Record {
    halt(t, ThreadStatus::Idle, reason, now)
}

/// Ends the session with `reason` and `result`, nobody acting. Its turn counts stay readable
/// until the next session starts ([`drain`] resets them), as its stop reason and result do.
pub fn end_session(t: &mut Thread, reason: StopReason, result: Option<String>, now: i64) -> Record {
    t.session_open = false;
    t.status = ThreadStatus::Idle;
    t.stop_reason = Some(reason);
    t.result.clone_from(&result);
    t.acting = None;
    t.updated_at = now;
    Record::new(
        t.take_seq(),
        RecordBody::SessionEnded {
            stop_reason: reason,
            result,
        },
        now,
    )
}

/// Records a failed step and stops the run (`step_error`): the session stays open, and the
/// error is the thread's result.
pub fn step_error(t: &mut Thread, error: &str, now: i64) -> Vec<Record> {
    let failed = Record::new(
        t.take_seq(),
        RecordBody::StepError {
            error: error.to_owned(),
        },
        now,
    );
    let stopped = stop(t, StopReason::StepError, now);
    t.result = Some(error.to_owned());
    vec![failed, stopped]
}

/// A completed turn of `side`.
pub fn turn_completed(t: &mut Thread, side: SideId, now: i64) -> Record {
    t.turns[side] += 1;
    Record::new(t.take_seq(), RecordBody::TurnCompleted { side }, now)
}

/// Which queued messages a drain takes now: everything but follow-ups; follow-ups only when the
/// run would otherwise have settled (the thread is not running); and while the thread waits
/// for a blocking child, only late tool results (a message cannot come between a tool call
/// and its result; an approve or edit decision waits for its tool's run).
pub fn drainable(t: &Thread, queue: Vec<Queued>) -> Vec<Queued> {
    if t.status == ThreadStatus::Waiting {
        // An approve or edit decision stays queued until its tool's result is written with it
        // (`run_approved`): a crash in between leaves it runnable, and recovery runs the tool.
        return queue
            .into_iter()
            .filter(|q| q.tool.is_some())
            .filter(|q| q.decision.as_ref().is_none_or(|d| d.result().is_some()))
            .collect();
    }
    let (follow_ups, now): (Vec<Queued>, Vec<Queued>) =
        queue.into_iter().partition(|q| q.follow_up);
    if !now.is_empty() {
        now
    } else if t.status != ThreadStatus::Running {
        follow_ups
    } else {
        Vec::new()
    }
}

/// Moves queued inbound messages into the journal: opens a session if none is open (a child's
/// first one starts with its spawn arguments, silent), counts a human side's turn once per side
/// per drain, and gives the turn to the sibling of the first message's author. Late tool results
/// go in as tool messages and leave the turn where it is.
pub fn drain(t: &mut Thread, queue: &[Queued], arguments: &serde_json::Value, now: i64) -> Commit {
    let mut commit = Commit::default();
    // The answer to a park: its deadline's timers are cancelled with it.
    if !queue.is_empty()
        && let Some(question) = crate::deadline::Subject::parked(t)
    {
        commit.cancel_subjects.push(question.to_string());
    }
    let replies_only = queue.iter().all(|q| q.tool.is_some());
    if t.status != ThreadStatus::Running && !replies_only {
        t.steps = Default::default();
        t.steps_total = 0;
        t.stop_reason = None;
    }
    let first_session = t.session == 0;
    if !t.session_open {
        t.session += 1;
        t.session_open = true;
        t.turns = Default::default();
        t.result = None;
        let session = t.session;
        commit.records.push(Record::new(
            t.take_seq(),
            RecordBody::SessionStarted { session },
            now,
        ));
    }
    if first_session && arguments.as_object().is_some_and(|o| !o.is_empty()) {
        let listed = serde_json::to_string_pretty(arguments).unwrap_or_default();
        let mut m = Message::text(
            t.take_seq(),
            t.session,
            Role::System,
            Some(SideId::B),
            format!("Initial arguments:\n{listed}"),
            now,
        );
        m.silent = true;
        commit.messages.push(m);
    }
    let mut counted = [false, false];
    for q in queue {
        if let Some(decided) = &q.decision {
            // A decision on a pending call: recorded; for reject and respond it is also the
            // call's result (approve and edit run the tool next).
            commit.records.push(Record::new(
                t.take_seq(),
                RecordBody::ApprovalDecided(decided.clone()),
                now,
            ));
            if let Some((content, ok)) = decided.result() {
                let mut m = Message::text(
                    t.take_seq(),
                    t.session,
                    Role::Tool,
                    Some(q.side),
                    content,
                    now,
                );
                m.tool_call_id = Some(decided.call.clone());
                m.tool_name = Some(decided.tool.clone());
                m.tool_status = Some(if ok {
                    ToolStatus::Success
                } else {
                    ToolStatus::Error
                });
                commit.messages.push(m);
            }
            commit.drained.push(q.id);
            continue;
        }
        let mut m = Message::text(
            t.take_seq(),
            t.session,
            q.role,
            Some(q.side),
            q.content.clone(),
            now,
        );
        m.silent = q.silent;
        m.images = q.images.clone();
        m.attachments = q.attachments.clone();
        m.message_id.clone_from(&q.message_id);
        if let Some(reply) = &q.tool {
            m.role = Role::Tool;
            m.tool_call_id = Some(reply.call_id.clone());
            m.tool_name = Some(reply.name.clone());
            m.tool_status = Some(reply.status);
        }
        commit.messages.push(m);
        commit.drained.push(q.id);
        let slot = usize::from(q.side == SideId::B);
        if q.human && !counted[slot] {
            counted[slot] = true;
            commit.records.push(turn_completed(t, q.side, now));
        }
    }
    if let Some(first) = queue.iter().find(|q| q.tool.is_none()) {
        t.acting = Some(first.side.sibling());
    }
    if !(t.status == ThreadStatus::Waiting && replies_only) {
        t.status = ThreadStatus::Running;
    }
    t.updated_at = now;
    commit
}

/// The tool calls of `side`'s newest model message that have no result yet: what a waiting
/// thread waits for.
pub fn open_calls(messages: &[Message], side: SideId) -> Vec<&ToolCall> {
    let Some(at) = messages
        .iter()
        .rposition(|m| m.side == Some(side) && m.role != Role::Tool && m.role != Role::System)
    else {
        return Vec::new();
    };
    let answered = |id: &str| {
        messages[at + 1..]
            .iter()
            .any(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
    };
    messages[at]
        .tool_calls
        .iter()
        .filter(|c| !answered(&c.id))
        .collect()
}

/// A thread's history as a step sees it: what is committed, and the step's own messages not yet
/// committed (read as coming after). Borrowed, so a step never copies the history.
#[derive(Clone, Copy, Debug, Default)]
pub struct History<'a> {
    /// The thread's committed messages, in seq order.
    pub committed: &'a [Message],
    /// The step's own messages, not yet committed, in the order they will be.
    pub pending: &'a [Message],
}

impl<'a> History<'a> {
    /// Committed messages only.
    pub fn of(committed: &'a [Message]) -> Self {
        History {
            committed,
            pending: &[],
        }
    }

    /// Every message, newest first.
    pub fn newest_first(self) -> impl Iterator<Item = &'a Message> {
        self.pending.iter().rev().chain(self.committed.iter().rev())
    }
}

/// What a model step (or, for a step that waited on blocking children, its completion) does to
/// the thread once all its tool results are in: the `sessionStatus` text, then the seed's stop
/// order. `handoff` is the agent the step handed the thread to, if any: that ends the step with
/// no turn counted. Returns the records and whether the run settles.
#[allow(clippy::too_many_arguments)]
pub fn complete_step(
    agent: &AgentDef,
    cfg: &PromptSide,
    t: &mut Thread,
    side: SideId,
    history: History<'_>,
    outcomes: &[CallOutcome<'_>],
    handoff: bool,
    now: i64,
) -> (Vec<Record>, bool) {
    let mut records = Vec::new();
    if let Some(text) = decide::status_text(cfg, outcomes) {
        t.status_text = Some(text.clone());
        records.push(Record::new(t.take_seq(), RecordBody::Status { text }, now));
    }
    t.updated_at = now;
    if handoff {
        return (records, false);
    }
    let text = history
        .newest_first()
        .find(|m| m.side == Some(side) && m.role != Role::Tool && m.model.is_some())
        .and_then(|m| m.content.as_deref());
    match decide::after_step(cfg, text, outcomes) {
        AfterStep::EndSession { reason, result } => {
            records.push(end_session(t, reason, Some(result), now));
            (records, true)
        }
        AfterStep::TurnComplete(reason) => {
            records.push(turn_completed(t, side, now));
            let reason = reason.unwrap_or(StopReason::StopOnResponse);
            let next = decide::after_turn(agent, t, side, reason);
            let settle = apply_after_turn(agent, t, next, history, now, &mut records);
            (records, settle)
        }
        AfterStep::Continue => (records, false),
    }
}

/// Applies an [`AfterTurn`] decision; returns whether the run settles.
pub(crate) fn apply_after_turn(
    agent: &AgentDef,
    t: &mut Thread,
    next: AfterTurn,
    history: History<'_>,
    now: i64,
    records: &mut Vec<Record>,
) -> bool {
    match next {
        AfterTurn::EndSession(r) => {
            let result = decide::cap_result_of(agent, history.newest_first());
            records.push(end_session(t, r, result, now));
            true
        }
        AfterTurn::Park(r) => {
            records.push(park(t, r, now));
            true
        }
        AfterTurn::Stop(r) => {
            records.push(stop(t, r, now));
            true
        }
        AfterTurn::Switch(next) => {
            t.acting = Some(next);
            false
        }
    }
}

/// The outcomes of the step whose calls are `calls`, read from the tool messages in `history`
/// (a dropped call counts as a success with empty content: it ran).
pub fn outcomes_of<'a>(calls: &'a [ToolCall], history: &'a [Message]) -> Vec<CallOutcome<'a>> {
    calls
        .iter()
        .map(|c| {
            let result = history
                .iter()
                .rev()
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&c.id));
            CallOutcome {
                name: &c.name,
                arguments: &c.arguments,
                status: result
                    .and_then(|m| m.tool_status)
                    .unwrap_or(ToolStatus::Success),
                content: result.and_then(|m| m.content.as_deref()).unwrap_or(""),
            }
        })
        .collect()
}

/// What a handoff writes: its record, the new agent's first user message (when the prompt's tool
/// entry maps one from the call's arguments), and the re-armed activation marks.
pub struct Handoff {
    /// The `handoff` record.
    pub record: Record,
    /// The new agent's first user message, if the call's arguments give one.
    pub messages: Vec<Message>,
    /// The activation marks to clear (`None` deletes), so `immediate` children start again.
    pub values: Vec<(String, Option<serde_json::Value>)>,
}

/// Passes the thread to `target`, called with `args` from `prompt`: the history stays, the new
/// agent's side A acts next, and its `immediate` children are re-armed.
pub fn handoff(
    t: &mut Thread,
    prompt: &duet_spec::PromptDef,
    target: &str,
    args: &serde_json::Value,
    now: i64,
) -> Handoff {
    let record = Record::new(
        t.take_seq(),
        RecordBody::Handoff {
            from: t.agent.clone(),
            to: target.to_owned(),
        },
        now,
    );
    let mut messages = Vec::new();
    let entry = prompt.tools.iter().find(|e| e.name == target);
    let init = entry
        .and_then(|e| e.init_user_message_property.as_deref())
        .and_then(|p| args.get(p));
    if let Some(text) = init {
        let content = text
            .as_str()
            .map_or_else(|| text.to_string(), str::to_owned);
        messages.push(Message::text(
            t.take_seq(),
            t.session,
            Role::User,
            Some(SideId::B),
            content,
            now,
        ));
    }
    let values = [SideId::A, SideId::B]
        .into_iter()
        .map(|s| (crate::lifecycle::activation_key(target, s), None))
        .collect();
    t.agent = target.to_owned();
    t.acting = Some(SideId::A);
    Handoff {
        record,
        messages,
        values,
    }
}
