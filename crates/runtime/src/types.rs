//! The runtime's data: threads, messages (with their images and token usage), journal records,
//! statuses and stop reasons.
//!
//! These are what the store persists and what callers read back. Time is milliseconds since the
//! Unix epoch, from the runtime's [`crate::Clock`].

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use duet_spec::{PerSide, SideId};

/// A thread's internal id (UUID v7). Callers address threads by their own string key.
pub type ThreadId = Uuid;

/// The stored role of a message: who wrote it. Side A writes `assistant`, side B writes `user`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Context that is no side's turn: a child's initial arguments, a note a hook injected.
    System,
    /// Written by side B.
    User,
    /// Written by side A.
    Assistant,
    /// A tool call's result.
    Tool,
}

impl Role {
    /// The stored form: `system`, `user`, `assistant` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Reads the stored form back; `None` for any other text.
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        })
    }

    /// The role a side's own messages are stored with.
    pub fn authored_by(side: SideId) -> Role {
        match side {
            SideId::A => Role::Assistant,
            SideId::B => Role::User,
        }
    }
}

/// `a` or `b`, as stored.
pub fn side_str(side: SideId) -> &'static str {
    match side {
        SideId::A => "a",
        SideId::B => "b",
    }
}

/// Parses `a` or `b`.
pub fn parse_side(s: &str) -> Option<SideId> {
    match s {
        "a" => Some(SideId::A),
        "b" => Some(SideId::B),
        _ => None,
    }
}

/// A tool call a model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, which its result's `tool_call_id` names (the runtime makes one up when the
    /// provider gives none).
    pub id: String,
    /// The tool it calls.
    pub name: String,
    /// The arguments the model gave.
    pub arguments: serde_json::Value,
}

/// Whether a tool call succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// The call did its work.
    Success,
    /// The call failed: its content says why.
    Error,
}

impl ToolStatus {
    /// The stored form: `success` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
        }
    }

    /// Reads the stored form back; `None` for any other text.
    pub fn parse(s: &str) -> Option<ToolStatus> {
        match s {
            "success" => Some(ToolStatus::Success),
            "error" => Some(ToolStatus::Error),
            _ => None,
        }
    }
}

/// An image attached to a prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRef {
    /// The image's media type (`mimeType` on the wire), e.g. `image/png`.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Base64.
    pub data: String,
}

/// Tokens a model call used, as its provider counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Tokens read (the request), cached ones included.
    pub input_tokens: u64,
    /// Tokens written, reasoning included.
    pub output_tokens: u64,
    /// Of the input, tokens read from the provider's cache.
    #[serde(default)]
    pub cached_tokens: u64,
    /// Of the output, reasoning tokens.
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// `self` and `other` added up.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cached_tokens: self.cached_tokens + other.cached_tokens,
            reasoning_tokens: self.reasoning_tokens + other.reasoning_tokens,
        }
    }
}

/// One message of a thread. `seq` orders a thread's journal (messages and records share it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Its place in the thread's journal.
    pub seq: i64,
    /// The session it was written in.
    pub session: i64,
    /// Its stored role: who wrote it.
    pub role: Role,
    /// The side that wrote it (for `tool` messages, the side whose call it answers).
    pub side: Option<SideId>,
    /// Its text; `None` for a model message of tool calls alone.
    pub content: Option<String>,
    /// Model reasoning that came with it, if any.
    pub thinking: Option<String>,
    /// The tool calls the model made in it.
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// For a `tool` message: the tool that answered.
    pub tool_name: Option<String>,
    /// For a `tool` message: whether the call succeeded.
    pub tool_status: Option<ToolStatus>,
    /// Hidden from ordinary listings (lifecycle traffic).
    pub silent: bool,
    /// The model definition that produced it, for model messages.
    pub model: Option<String>,
    /// What its model call cost, for model messages (fallbacks' and retries' calls included).
    pub usage: Option<Usage>,
    /// What its provider asked to keep with it (thinking signatures), given back to that
    /// provider with the context; opaque to the runtime.
    pub provider_data: Option<serde_json::Value>,
    /// Images that came with it (an inbound prompt's), passed to models that take images.
    pub images: Vec<ImageRef>,
    /// Thread files that came with it (paths in this thread's filesystem), passed to models as
    /// their types allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::files::AttachmentRef>,
    /// The id its sender chose for it (an inbound delivery's `message_id`), kept so a protocol
    /// can show the sender its own id; `None` for what duet wrote itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// When it was written, in ms since the Unix epoch.
    pub created_at: i64,
}

impl Message {
    /// A plain message with no tool parts.
    pub fn text(
        seq: i64,
        session: i64,
        role: Role,
        side: Option<SideId>,
        content: String,
        now: i64,
    ) -> Self {
        Message {
            seq,
            session,
            role,
            side,
            content: Some(content),
            thinking: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            tool_status: None,
            silent: false,
            model: None,
            usage: None,
            provider_data: None,
            images: Vec::new(),
            attachments: Vec::new(),
            message_id: None,
            created_at: now,
        }
    }
}

/// Where a thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    /// A runner is executing it (or died doing so and recovery will continue it).
    Running,
    /// Parked: the next turn is a person's.
    AwaitingHuman,
    /// A tool call of the acting side waits for a blocking child's session to end: the thread
    /// holds no lease and no task; the child's result, when it comes, is that call's tool result.
    Waiting,
    /// Nothing runs: the session ended, or the run stopped on a safety limit or an error.
    Idle,
    /// Terminated for good.
    Terminated,
}

impl ThreadStatus {
    /// The stored form: `running`, `awaiting_human`, `waiting`, `idle` or `terminated`.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Running => "running",
            ThreadStatus::AwaitingHuman => "awaiting_human",
            ThreadStatus::Waiting => "waiting",
            ThreadStatus::Idle => "idle",
            ThreadStatus::Terminated => "terminated",
        }
    }

    /// Reads the stored form back; `None` for any other text.
    pub fn parse(s: &str) -> Option<ThreadStatus> {
        Some(match s {
            "running" => ThreadStatus::Running,
            "awaiting_human" => ThreadStatus::AwaitingHuman,
            "waiting" => ThreadStatus::Waiting,
            "idle" => ThreadStatus::Idle,
            "terminated" => ThreadStatus::Terminated,
            _ => return None,
        })
    }
}

/// Why a run stopped. The first four and [`StopReason::HookBlocked`] end the session (see
/// [`StopReason::ends_session`]); the rest leave it open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The side's `sessionStop` tool succeeded: the session did its work.
    SessionStop,
    /// The side's `sessionFail` tool succeeded: the session reports a failure.
    SessionFail,
    /// A handler ended the session ([`crate::ThreadState::stop_session`]).
    StateStopSession,
    /// The exchange cap `maxSessionTurns` is reached.
    MaxSessionTurns,
    /// The acting side used up its `maxSteps` in this run.
    MaxSideSteps,
    /// The run used up its step ceiling (250, or the largest per-side `maxSteps`).
    MaxTotalSteps,
    /// A turn ended on the side's `stopTool` call; the next turn is a person's.
    StopTool,
    /// A turn ended on the model's answer (`stopOnResponse`, or a side whose every step is a
    /// turn); the next turn is a person's.
    StopOnResponse,
    /// The run parked for a person otherwise: the acting side is human, or a handler's turn
    /// ended before one.
    AwaitingHuman,
    /// A handler's turn had no inbound message and its sibling is a handler too: the run stops
    /// rather than trade empty turns.
    HandlerIdle,
    /// A step failed for good (a model error, an exhausted script, an unregistered handler); the
    /// error is the thread's result.
    StepError,
    /// The run was aborted on purpose (the control plane's `abort`).
    Aborted,
    /// A `prefilter_llm_history` hook blocked the step: the session ends before the model call.
    HookBlocked,
}

impl StopReason {
    /// Every stop reason, in declaration order.
    pub const ALL: [StopReason; 13] = [
        StopReason::SessionStop,
        StopReason::SessionFail,
        StopReason::StateStopSession,
        StopReason::MaxSessionTurns,
        StopReason::MaxSideSteps,
        StopReason::MaxTotalSteps,
        StopReason::StopTool,
        StopReason::StopOnResponse,
        StopReason::AwaitingHuman,
        StopReason::HandlerIdle,
        StopReason::StepError,
        StopReason::Aborted,
        StopReason::HookBlocked,
    ];

    /// The stored form (`session_stop`, `max_side_steps`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::SessionStop => "session_stop",
            StopReason::SessionFail => "session_fail",
            StopReason::StateStopSession => "state_stop_session",
            StopReason::MaxSessionTurns => "max_session_turns",
            StopReason::MaxSideSteps => "max_side_steps",
            StopReason::MaxTotalSteps => "max_total_steps",
            StopReason::StopTool => "stop_tool",
            StopReason::StopOnResponse => "stop_on_response",
            StopReason::AwaitingHuman => "awaiting_human",
            StopReason::HandlerIdle => "handler_idle",
            StopReason::StepError => "step_error",
            StopReason::Aborted => "aborted",
            StopReason::HookBlocked => "hook_blocked",
        }
    }

    /// Reads the stored form back; `None` for any other text.
    pub fn parse(s: &str) -> Option<StopReason> {
        StopReason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether this reason is a terminal session end.
    pub fn ends_session(self) -> bool {
        matches!(
            self,
            StopReason::SessionStop
                | StopReason::SessionFail
                | StopReason::StateStopSession
                | StopReason::MaxSessionTurns
                | StopReason::HookBlocked
        )
    }
}

/// A thread's current state: the cache of its journal that the store keeps beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct Thread {
    /// Its internal id: what the store, its children and their registry rows refer to it by.
    pub id: ThreadId,
    /// The caller-owned key that addresses it.
    pub key: String,
    /// The agent now taking the thread's turns (a handoff changes it).
    pub agent: String,
    /// The agent the thread was created for: callers may keep addressing it by that name.
    pub origin: String,
    /// The parent thread, for a subagent's thread.
    pub parent: Option<ThreadId>,
    /// The principal that owns the thread (canonical JSON of `{type, issuer, subject}`), if it
    /// was created under one: no other principal may invoke, read or resume it.
    pub principal: Option<String>,
    /// Where the thread was first invoked from (`scope.source`).
    pub source: Option<String>,
    /// Where the thread is.
    pub status: ThreadStatus,
    /// Free text set by `sessionStatus` or a handler's `set_status`.
    pub status_text: Option<String>,
    /// The current (or last) session number; 0 before the first.
    pub session: i64,
    /// Whether that session is still open: the next inbound message continues it rather than
    /// starting another.
    pub session_open: bool,
    /// Why the last run stopped or the last session ended; cleared when a new run starts.
    pub stop_reason: Option<StopReason>,
    /// The last ended session's result.
    pub result: Option<String>,
    /// Completed turns per side in the open session.
    pub turns: PerSide<i64>,
    /// Model steps per side, and in all, in the current run.
    pub steps: PerSide<i64>,
    /// Model steps of both sides together in the current run.
    pub steps_total: i64,
    /// The side whose turn it is.
    pub acting: Option<SideId>,
    /// Handler delivery watermarks: the last message seq delivered to each side's handler.
    pub watermarks: PerSide<i64>,
    /// The next journal sequence number.
    pub next_seq: i64,
    /// The run that holds the thread's lease (every run has an id of its own), if one does.
    pub lease_owner: Option<Uuid>,
    /// When that lease runs out unless renewed, in ms since the Unix epoch.
    pub lease_expires: i64,
    /// When the thread was created, in ms since the Unix epoch.
    pub created_at: i64,
    /// When its state last changed, in ms since the Unix epoch.
    pub updated_at: i64,
}

impl Thread {
    /// A new, idle thread.
    pub fn new(
        id: ThreadId,
        key: String,
        agent: String,
        parent: Option<ThreadId>,
        now: i64,
    ) -> Self {
        Thread {
            id,
            key,
            origin: agent.clone(),
            agent,
            parent,
            principal: None,
            source: None,
            status: ThreadStatus::Idle,
            status_text: None,
            session: 0,
            session_open: false,
            stop_reason: None,
            result: None,
            turns: PerSide::default(),
            steps: PerSide::default(),
            steps_total: 0,
            acting: None,
            watermarks: PerSide::default(),
            next_seq: 1,
            lease_owner: None,
            lease_expires: 0,
            created_at: now,
            updated_at: now,
        }
    }

    /// Takes the next journal sequence number.
    pub fn take_seq(&mut self) -> i64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }
}

/// An inbound message waiting in a thread's durable queue.
#[derive(Clone, Debug, PartialEq)]
pub struct Queued {
    /// The queue row's id: what [`Commit::drained`](crate::Commit::drained) lists once it is
    /// written.
    pub id: i64,
    /// The stored role it is written with.
    pub role: Role,
    /// The side that wrote it.
    pub side: SideId,
    /// The message text.
    pub content: String,
    /// Whether a person on a human side wrote it (counts as that side's turn).
    pub human: bool,
    /// Hidden from ordinary listings once written (lifecycle traffic).
    pub silent: bool,
    /// A follow-up: delivered only when the run would otherwise settle.
    pub follow_up: bool,
    /// A blocking child's result for the parent's open tool call (then `role` is `tool`).
    pub tool: Option<ToolReply>,
    /// A decision on a pending tool call (then `tool` names the call): the run writes it as
    /// an `approval_decided` record, and runs the tool for approve and edit.
    pub decision: Option<crate::approval::Decided>,
    /// Images that came with it.
    pub images: Vec<ImageRef>,
    /// Thread files that came with it (paths in this thread's filesystem).
    pub attachments: Vec<crate::files::AttachmentRef>,
    /// The trace context it was queued in, if one was saved.
    pub trace: Option<String>,
    /// The id its sender chose (the delivery's `message_id`), written with the message.
    pub message_id: Option<String>,
    /// When it was queued, in ms since the Unix epoch.
    pub created_at: i64,
}

/// A tool result that arrives after its step committed: a blocking child's outcome for the tool
/// call its parent made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolReply {
    /// The parent's tool call it answers.
    pub call_id: String,
    /// That call's tool name.
    pub name: String,
    /// Whether the call succeeded: an error when the child's session failed or was aborted.
    pub status: ToolStatus,
}

/// A message to queue.
#[derive(Clone, Debug, PartialEq)]
pub struct NewQueued {
    /// The stored role it is written with.
    pub role: Role,
    /// The side that wrote it.
    pub side: SideId,
    /// The message text.
    pub content: String,
    /// Whether a person on a human side wrote it (counts as that side's turn).
    pub human: bool,
    /// Hide it from ordinary listings once written (lifecycle traffic).
    pub silent: bool,
    /// Hold it until the run would otherwise settle (the control plane's `follow_up`).
    pub follow_up: bool,
    /// A late tool result (see [`Queued::tool`]).
    pub tool: Option<ToolReply>,
    /// A caller-chosen id (an idempotency key): a second delivery with the same id to the same
    /// thread is refused by the store, writing nothing.
    pub message_id: Option<String>,
    /// Who delivers it (a principal, canonical JSON): recorded with the answer to a park, so
    /// the answer that won can be named.
    pub author: Option<String>,
    /// Images that come with it.
    pub images: Vec<ImageRef>,
    /// Thread files that come with it (paths in the receiving thread's filesystem, written
    /// there before it is queued).
    pub attachments: Vec<crate::files::AttachmentRef>,
    /// The trace context of whatever queued it (see [`crate::telemetry::TraceCarrier`]): the
    /// run that drains it continues that trace.
    pub trace: Option<String>,
}

impl NewQueued {
    /// A message written by `side` with `role`: not a person's, not silent, not a follow-up.
    pub fn new(role: Role, side: SideId, content: impl Into<String>) -> Self {
        NewQueued {
            role,
            side,
            content: content.into(),
            human: false,
            silent: false,
            follow_up: false,
            tool: None,
            message_id: None,
            author: None,
            images: Vec::new(),
            attachments: Vec::new(),
            trace: None,
        }
    }
}

/// A subagent instance in its parent's registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Child {
    /// The child thread (its id is the reference the parent's model uses).
    pub child: ThreadId,
    /// The parent thread whose registry it is in.
    pub parent: ThreadId,
    /// The relationship name (`as`, else the agent).
    pub relationship: String,
    /// The parent side that owns the relationship.
    pub owner: SideId,
    /// The agent the child runs.
    pub agent: String,
    /// The instance name the parent gave it.
    pub name: Option<String>,
    /// Whether the parent waits for the child's session to end (else the child runs beside it).
    pub blocking: bool,
    /// `parentCommunication: explicit`: nothing is delivered to the parent automatically.
    pub explicit: bool,
    /// Where the child is in its life.
    pub status: ChildStatus,
    /// The free text its `sessionStatus` binding or handler last set, if any.
    pub status_text: Option<String>,
    /// The parent's tool call that waits for this child's session to end (a blocking spawn or
    /// continuation), while it waits.
    pub awaiting: Option<String>,
    /// When it was spawned, in ms since the Unix epoch.
    pub created_at: i64,
    /// The arguments it was spawned with (a JSON object): its prompts' `{{name}}` variables.
    pub arguments: serde_json::Value,
    /// The env values its relationship's `scopedEnv` copied from the parent.
    pub env: std::collections::BTreeMap<String, String>,
}

/// A child's lifecycle state in its parent's registry (its free-text status is apart, in
/// [`Child::status_text`], so no status text can read as a state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildStatus {
    /// Started, or a message was routed to it; its session is open.
    Running,
    /// Its last session ended well.
    Idle,
    /// Its last session failed (`sessionFail`, an error, a cap without its terminal tool).
    Failed,
    /// It waits for a person.
    AwaitingHuman,
    /// It waits for a blocking child of its own.
    Waiting,
    /// Terminated for good: no message reaches it.
    Terminated,
}

impl ChildStatus {
    /// Every child status, in declaration order.
    pub const ALL: [ChildStatus; 6] = [
        ChildStatus::Running,
        ChildStatus::Idle,
        ChildStatus::Failed,
        ChildStatus::AwaitingHuman,
        ChildStatus::Waiting,
        ChildStatus::Terminated,
    ];

    /// The stored form (`running`, `awaiting_human`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ChildStatus::Running => "running",
            ChildStatus::Idle => "idle",
            ChildStatus::Failed => "failed",
            ChildStatus::AwaitingHuman => "awaiting_human",
            ChildStatus::Waiting => "waiting",
            ChildStatus::Terminated => "terminated",
        }
    }

    /// Reads the stored form back; `None` for any other text.
    pub fn parse(s: &str) -> Option<ChildStatus> {
        ChildStatus::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether messages may still reach it.
    pub fn is_live(self) -> bool {
        self != ChildStatus::Terminated
    }
}

/// Where a thread parked for a person: the session and the journal position it parked at. While
/// a thread is parked nothing is written to it, so this names one question; an answer that
/// names it is refused once the thread has moved on (someone answered first). Written `S:N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Park {
    /// The session the question belongs to.
    pub session: i64,
    /// The journal's next seq while parked: the answer is written there.
    pub seq: i64,
}

impl std::fmt::Display for Park {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.session, self.seq)
    }
}

impl std::str::FromStr for Park {
    type Err = String;

    fn from_str(s: &str) -> Result<Park, String> {
        let (session, seq) = s
            .split_once(':')
            .ok_or_else(|| format!("a park id is SESSION:SEQ, not `{s}`"))?;
        let int = |v: &str| {
            v.trim()
                .parse::<i64>()
                .map_err(|_| format!("a park id is SESSION:SEQ, not `{s}`"))
        };
        Ok(Park {
            session: int(session)?,
            seq: int(seq)?,
        })
    }
}

impl Thread {
    /// The park the thread is at, when it waits for a person.
    pub fn park(&self) -> Option<Park> {
        (self.status == ThreadStatus::AwaitingHuman).then_some(Park {
            session: self.session,
            seq: self.next_seq,
        })
    }
}
