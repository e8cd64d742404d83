//! What a model step writes, as data: built from the model's answer and what each of its tool
//! calls produced, with no IO and no clock. The engine does the IO around it — the model call,
//! the tools, then one write of the plan (`engine/write.rs`).
//!
//! - [`model_message`]: the model's answer as the step's first message (a stop tool's response
//!   standing in for the text where the side's binding says so).
//! - [`step`]: the step's messages (the model's, then each stored tool result), the records (a
//!   wait on blocking children, or the stop rules' outcome and a handoff) and whether the run
//!   settles.

use duet_spec::{AgentDef, PromptDef, PromptSide};

use crate::decide::{self, CallOutcome};
use crate::model::Usage;
use crate::record::{Record, RecordBody};
use crate::store::{Commit, NewTimer};
use crate::tools::ToolResult;
use crate::transition::{self, History};
use crate::types::{Message, Role, SideId, Thread, ThreadStatus, ToolCall};

/// A model's answer, as the step received it.
#[derive(Clone, Debug, Default)]
pub struct ModelAnswer {
    /// The text, whole.
    pub text: String,
    /// The reasoning the provider showed, whole.
    pub thinking: String,
    /// Each tool call: the id the model gave (if any), the tool's name, its arguments.
    pub calls: Vec<(Option<String>, String, serde_json::Value)>,
    /// The call's tokens.
    pub usage: Option<Usage>,
    /// What the provider asks to be sent back with this message (e.g. signed thinking).
    pub provider_data: Option<serde_json::Value>,
}

/// The model's message for `answer` (seq taken from `t`), with the text that reached the caller
/// live: all of it, unless a stop tool's response may stand in for it (then nothing streams).
pub fn model_message(
    t: &mut Thread,
    side: SideId,
    cfg: &PromptSide,
    model: &str,
    answer: ModelAnswer,
    now: i64,
) -> Message {
    let seq = t.take_seq();
    let tool_calls: Vec<ToolCall> = answer
        .calls
        .into_iter()
        .enumerate()
        .map(|(i, (id, name, arguments))| ToolCall {
            id: id.unwrap_or_else(|| format!("call_{seq}_{i}")),
            name,
            arguments,
        })
        .collect();
    let call_refs: Vec<(&str, &serde_json::Value)> = tool_calls
        .iter()
        .map(|c| (c.name.as_str(), &c.arguments))
        .collect();
    let text = answer.text;
    let content =
        decide::stop_tool_response(cfg, &call_refs).or((!text.is_empty()).then_some(text));
    Message {
        seq,
        session: t.session,
        role: Role::authored_by(side),
        side: Some(side),
        content,
        thinking: (!answer.thinking.is_empty()).then_some(answer.thinking),
        tool_calls,
        tool_call_id: None,
        tool_name: None,
        tool_status: None,
        silent: false,
        model: Some(model.to_owned()),
        usage: answer.usage,
        provider_data: answer.provider_data,
        images: Vec::new(),
        attachments: Vec::new(),
        message_id: None,
        created_at: now,
    }
}

/// How one tool call of a step went.
#[derive(Clone, Debug, Default)]
pub struct CallDone {
    /// What the call produced (`None`: it waits for a blocking child).
    pub result: Option<ToolResult>,
    /// What is stored: the result after the hooks (`None`: a hook dropped it, or it waits).
    pub stored: Option<ToolResult>,
}

/// What a step's calls came to.
#[derive(Clone, Debug, Default)]
pub struct CallsDone {
    /// One per call of the model's message, in order.
    pub calls: Vec<CallDone>,
    /// The agent the thread passes to, and the index of the call that made the handoff.
    pub handoff: Option<(String, usize)>,
    /// The calls that wait for a blocking child: call index and the child's key.
    pub awaiting: Vec<(usize, String)>,
    /// The calls that wait for a person's decision: call index and what is asked.
    pub approvals: Vec<(usize, crate::approval::Asked)>,
    /// The effects `effect:` tool calls scheduled: call index and the timer.
    pub scheduled: Vec<(usize, NewTimer)>,
}

/// Who steps, under which definitions, on what history.
#[derive(Clone, Copy)]
pub struct StepOf<'a> {
    /// The thread's agent.
    pub agent: &'a AgentDef,
    /// The acting side's prompt backing.
    pub cfg: &'a PromptSide,
    /// The prompt it names.
    pub prompt: &'a PromptDef,
    /// The acting side.
    pub side: SideId,
    /// The thread's committed messages.
    pub history: &'a [Message],
    /// When the step's messages are written.
    pub now: i64,
}

/// What a step commits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepPlan {
    /// The model's message (less the calls a hook dropped), then each stored tool result, then
    /// a handoff's first message.
    pub messages: Vec<Message>,
    /// Its records, in seq order.
    pub records: Vec<Record>,
    /// Durable values it writes (a handoff's).
    pub values: Vec<(String, Option<serde_json::Value>)>,
    /// The timers its `effect:` tool calls scheduled.
    pub timers: Vec<NewTimer>,
    /// Whether the run settles after this commit.
    pub settle: bool,
    /// The step waits for blocking children or for decisions: the thread is `waiting`, one
    /// `child_awaited` or `approval_requested` record per open call.
    pub waits: bool,
}

impl StepPlan {
    /// The plan as a commit.
    pub fn into_commit(self) -> Commit {
        Commit {
            messages: self.messages,
            records: self.records,
            values: self.values,
            timers: self.timers,
            settle: self.settle,
            ..Commit::default()
        }
    }
}

/// The step's plan once every call has run (or started to wait): counters, seqs and status are
/// updated on `t`.
pub fn step(t: &mut Thread, of: StepOf<'_>, mut message: Message, done: CallsDone) -> StepPlan {
    let StepOf {
        agent,
        cfg,
        prompt,
        side,
        history,
        now,
    } = of;
    let calls = message.tool_calls.clone();
    let timers: Vec<NewTimer> = done.scheduled.into_iter().map(|(_, t)| t).collect();
    let tool_messages: Vec<Message> = calls
        .iter()
        .zip(&done.calls)
        .filter_map(|(call, d)| Some((call, d.stored.as_ref()?)))
        .map(|(call, r)| {
            // A terminal tool's message lists no paths: child-local paths do not leak.
            let listed = crate::lifecycle::terminal_binding(cfg, &call.name).is_none();
            tool_message(t, (side, listed), call, r, now)
        })
        .collect();
    // A call a hook dropped leaves the history with its result; it still counts below. A call
    // that waits for its child stays.
    message.tool_calls.retain(|c| {
        calls
            .iter()
            .zip(&done.calls)
            .any(|(k, d)| k.id == c.id && (d.stored.is_some() || d.result.is_none()))
    });
    t.steps[side] += 1;
    t.steps_total += 1;
    t.updated_at = now;
    let mut messages = Vec::with_capacity(1 + tool_messages.len());
    messages.push(message);
    messages.extend(tool_messages);
    if !done.awaiting.is_empty() || !done.approvals.is_empty() {
        let mut records = awaited(t, &calls, &done.awaiting, now);
        // Each pending call's record: its seq is the approval's id.
        records.extend(done.approvals.into_iter().map(|(_, asked)| {
            Record::new(t.take_seq(), RecordBody::ApprovalRequested(asked), now)
        }));
        return StepPlan {
            messages,
            records,
            timers,
            waits: true,
            ..StepPlan::default()
        };
    }
    // The stop rules read what was stored (a hook may have rewritten a result); a dropped call
    // counts as it ran.
    let outcomes: Vec<CallOutcome<'_>> = calls
        .iter()
        .zip(&done.calls)
        .filter_map(|(c, d)| Some((c, d.stored.as_ref().or(d.result.as_ref())?)))
        .map(|(c, r)| CallOutcome {
            name: &c.name,
            arguments: &c.arguments,
            status: r.status,
            content: &r.content,
        })
        .collect();
    let pending = History {
        committed: history,
        pending: &messages,
    };
    let (mut records, settle) = transition::complete_step(
        agent,
        cfg,
        t,
        side,
        pending,
        &outcomes,
        done.handoff.is_some(),
        now,
    );
    drop(outcomes);
    let mut values = Vec::new();
    debug_assert!(
        done.handoff
            .as_ref()
            .is_none_or(|(_, at)| *at < calls.len()),
        "a handoff names a call of the step"
    );
    if let Some((target, at)) = &done.handoff
        && let Some(call) = calls.get(*at)
    {
        let handed = transition::handoff(t, prompt, target, &call.arguments, now);
        records.push(handed.record);
        messages.extend(handed.messages);
        values = handed.values;
    }
    StepPlan {
        messages,
        records,
        values,
        timers,
        settle,
        waits: false,
    }
}

/// The stored result of `call`: it carries the result's attachments, and (when `listed`) its
/// text ends with their paths.
fn tool_message(
    t: &mut Thread,
    (side, listed): (SideId, bool),
    call: &ToolCall,
    r: &ToolResult,
    now: i64,
) -> Message {
    let mut content = r.content.clone();
    if listed {
        content.push_str(&crate::files::attachment_list(&r.attachments));
    }
    Message {
        seq: t.take_seq(),
        session: t.session,
        role: Role::Tool,
        side: Some(side),
        content: Some(content),
        thinking: None,
        tool_calls: Vec::new(),
        tool_call_id: Some(call.id.clone()),
        tool_name: Some(call.name.clone()),
        tool_status: Some(r.status),
        silent: false,
        model: None,
        usage: None,
        provider_data: None,
        images: Vec::new(),
        attachments: r.attachments.clone(),
        message_id: None,
        created_at: now,
    }
}

/// A thread that waits: the records saying which calls wait for which children.
fn awaited(
    t: &mut Thread,
    calls: &[ToolCall],
    awaiting: &[(usize, String)],
    now: i64,
) -> Vec<Record> {
    t.status = ThreadStatus::Waiting;
    debug_assert!(
        awaiting.iter().all(|(at, _)| *at < calls.len()),
        "every awaited call is a call of the step"
    );
    awaiting
        .iter()
        .filter_map(|(at, key)| {
            Some(Record::new(
                t.take_seq(),
                RecordBody::ChildAwaited {
                    call: calls.get(*at)?.id.clone(),
                    child: key.clone(),
                },
                now,
            ))
        })
        .collect()
}
