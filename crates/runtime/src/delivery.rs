//! What a delivery is and how a run ended: who delivers ([`Origin`]), what happens when the
//! thread is busy ([`WhenBusy`]), and the outcome ([`Delivered`], [`Settled`]).

use serde_json::json;

use crate::event::AgentEvent;
use crate::types::{Park, StopReason, Thread, ThreadId, ThreadStatus};

/// What a delivery does when another runner holds the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenBusy {
    /// Queue the message durably for that runner (`duet send`, a parent's message to a child).
    Queue,
    /// Refuse it, writing nothing: `invoke`'s `session_busy`.
    Reject,
    /// Refuse it, writing nothing, when a run holds the thread or its journal no longer ends
    /// where the sender read it (its `next_seq`): a person's next message to a thread read as
    /// idle, which must not become the answer to a question another session asked meanwhile.
    RejectIfMoved(i64),
}

impl WhenBusy {
    /// The `next_seq` the sender read the thread at, when the delivery is refused past it.
    pub fn read_at(self) -> Option<i64> {
        match self {
            WhenBusy::RejectIfMoved(next_seq) => Some(next_seq),
            WhenBusy::Queue | WhenBusy::Reject => None,
        }
    }
}

/// What a person's message to a thread, as read, is when the sender names no park and does not
/// ask to queue it (`duet send`'s default; a client over HTTP names the park with `If-Match`,
/// an A2A client with the task): the one rule for "would this message race something?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressed {
    /// The thread waits for a person: the message answers that park, and is refused
    /// (`already_answered`) if another answer is accepted first.
    Answers(Park),
    /// Nothing runs and nothing is asked (its session ended, or a run stopped with it open): the
    /// message is the thread's next — it starts the next session, or continues the open one —
    /// delivered only if no run holds the thread and nothing was written to it since it was
    /// read ([`WhenBusy::RejectIfMoved`]).
    Next,
    /// A run holds the thread, or it waits for a subagent (`running`, `waiting`): the message
    /// would land in the middle of that work. Queued only when the sender asks.
    Busy(ThreadStatus),
}

impl Addressed {
    /// What a message to `t`, as read, is.
    pub fn of(t: &Thread) -> Self {
        match (t.park(), t.status) {
            (Some(park), _) => Addressed::Answers(park),
            (None, ThreadStatus::Running | ThreadStatus::Waiting) => Addressed::Busy(t.status),
            // A terminated thread refuses every delivery (`terminated`) whatever it is.
            (None, _) => Addressed::Next,
        }
    }
}

/// Who delivers a message, and from where.
#[derive(Clone, Copy, Debug, Default)]
pub struct Origin<'a> {
    /// The principal as canonical JSON; a thread created under one is theirs alone.
    pub principal: Option<&'a str>,
    /// Where the message comes from (`scope.source`), kept on a thread the delivery creates.
    pub source: Option<&'a str>,
    /// Who writes it, when not `principal` (an admin answering another principal's thread):
    /// recorded with the answer to a park.
    pub author: Option<&'a str>,
    /// The parent thread, when a parent delivers to its child: the message enters as `user` (side
    /// A acts on it) and a new thread is created as that parent's child.
    pub parent: Option<ThreadId>,
    /// The parent waits for this run inline (a blocking spawn): its outcome is the parent's tool
    /// result, so it is not also delivered to the parent as a message.
    pub inline: bool,
}

/// How a run settled.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The id of the thread that ran.
    pub thread: ThreadId,
    /// The parent thread, for a subagent.
    pub parent: Option<ThreadId>,
    /// The thread's caller-owned key.
    pub key: String,
    /// The thread's current (or last) session number.
    pub session: i64,
    /// Where the thread was left.
    pub status: ThreadStatus,
    /// Why the run stopped (none while the thread waits for a blocking child).
    pub stop_reason: Option<StopReason>,
    /// The last ended session's result, or the error of the step that failed the run.
    pub result: Option<String>,
    /// The question it is parked at, when it waits for a person: an answer names it.
    pub park: Option<Park>,
    /// The tool calls it waits on a person's decision for (filled when a run settles
    /// `waiting`; empty otherwise).
    pub approvals: Vec<crate::approval::Pending>,
    /// The whole thread as it stood then (as the run's last write left it): a caller that
    /// answers with the thread need not read it again.
    pub last: Box<Thread>,
    /// The entries of session [`Settled::session`] as the run's settling write left them
    /// (what `JournalStore::session_entries` reads below `last`'s next seq), when the claim
    /// asked for them ([`Claim::reporting_session`]) and the store read them with that write;
    /// `None` otherwise.
    pub session_entries: Option<Vec<crate::store::JournalEntry>>,
}

impl Settled {
    /// How `t` stands now, as a settled run's outcome.
    pub fn of(t: &Thread) -> Self {
        Settled {
            thread: t.id,
            parent: t.parent,
            key: t.key.clone(),
            session: t.session,
            status: t.status,
            stop_reason: t.stop_reason,
            result: t.result.clone(),
            park: t.park(),
            approvals: Vec::new(),
            last: Box::new(t.clone()),
            session_entries: None,
        }
    }

    /// [`Settled::of`] `t` just written by a settling write that gave up the lease: its copy
    /// without the lease, as the store now holds it.
    pub fn released(t: &Thread) -> Self {
        let mut settled = Settled::of(t);
        settled.last.lease_owner = None;
        settled.last.lease_expires = 0;
        settled
    }

    /// The terminal event for this outcome: `failed` for a step error, `completed` otherwise,
    /// with `data: {thread, session, status, stopReason, result}` and, when parked, `park`;
    /// when waiting for decisions, `approvals: [{id, tool, arguments, decisions}]`.
    pub fn terminal_event(&self) -> AgentEvent {
        if self.stop_reason == Some(StopReason::Aborted) {
            return AgentEvent::Failed {
                details: "the run was aborted".into(),
                retryable: false,
                code: Some(crate::codes::ABORTED.into()),
            };
        }
        if self.stop_reason == Some(StopReason::StepError) {
            return AgentEvent::Failed {
                details: self
                    .result
                    .clone()
                    .unwrap_or_else(|| "a step failed".into()),
                // Providers retry transient failures themselves (emitting `retrying`); what
                // reaches here failed for good.
                retryable: false,
                code: Some("step_error".into()),
            };
        }
        let mut data = json!({
            "thread": self.key,
            "session": self.session,
            "status": self.status.as_str(),
            "stopReason": self.stop_reason.map(StopReason::as_str),
            "result": self.result,
        });
        if let Some(park) = self.park {
            data["park"] = json!(park.to_string());
        }
        if !self.approvals.is_empty() {
            data["approvals"] = json!(self.approvals);
        }
        AgentEvent::Completed { data: Some(data) }
    }
}

/// What delivering an inbound message did.
#[derive(Clone, Debug, PartialEq)]
pub enum Delivered {
    /// This caller ran the thread until it settled.
    Settled(Settled),
    /// Another runner holds the thread: the message is queued durably and that runner delivers
    /// it before its next step.
    Queued {
        /// The id of the thread it is queued on.
        thread: ThreadId,
    },
    /// A delivery with the same message id was made before: nothing was written, and this is
    /// how the thread stands now.
    Duplicate(Settled),
}

/// What [`crate::Runtime::accept`] wrote.
#[derive(Debug)]
pub enum Accepted {
    /// Written, and this caller took the lease: it must run the thread
    /// ([`crate::Runtime::run_claimed`]).
    Claimed(Claim),
    /// Written; another runner holds the thread and delivers it before its next step.
    Queued {
        /// The id of the thread it is queued on.
        thread: ThreadId,
    },
    /// A delivery with the same message id was made before: nothing was written.
    Duplicate(Settled),
}

/// A thread's lease, taken by a delivery: the right (and the duty) to run it. Made only by the
/// runtime.
#[derive(Debug)]
pub struct Claim {
    pub(crate) thread: ThreadId,
    pub(crate) run: uuid::Uuid,
    pub(crate) inline: bool,
    /// The run's first read, when the write that took the lease read it too.
    pub(crate) start: Option<Box<crate::store::RunStart>>,
    /// Whether the run reports its session's entries ([`Claim::reporting_session`]).
    pub(crate) report: bool,
}

impl Claim {
    /// The thread claimed.
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// The run that holds the lease (the control plane's `runId`).
    pub fn run(&self) -> uuid::Uuid {
        self.run
    }

    /// Asks the run for the entries of the session it settles in
    /// ([`Settled::session_entries`]), read with its settling write where the store can (on
    /// SQLite, in the same call): for a caller that answers with the session, such as a
    /// blocking A2A send.
    pub fn reporting_session(mut self) -> Self {
        self.report = true;
        self
    }
}

/// One inbound message and how to deliver it (see [`crate::Runtime::deliver_message`]).
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    /// The thread's key.
    pub key: &'a str,
    /// The agent to create the thread for, if it is new (`None`: it must exist).
    pub agent: Option<&'a str>,
    /// What is said.
    pub text: &'a str,
    /// Images with it (passed to models that take images).
    pub images: &'a [crate::types::ImageRef],
    /// Paths of files of the thread that come with it: each must be a file of the thread
    /// (otherwise [`crate::RunError::Attachment`], nothing written); resolved to
    /// [`crate::files::AttachmentRef`]s on the queued message.
    pub attachments: &'a [String],
    /// Who delivers it.
    pub origin: Origin<'a>,
    /// What to do when another run holds the thread.
    pub when_busy: WhenBusy,
    /// Deliver only as the answer to this park: refused (`already_answered`), writing nothing,
    /// once the thread has moved on from it or another answer is queued for it.
    pub answers: Option<Park>,
    /// A caller-chosen id: a second delivery with it to the same thread writes nothing and
    /// returns [`Delivered::Duplicate`].
    pub message_id: Option<&'a str>,
    /// The trace context the message continues (see [`crate::telemetry::TraceCarrier`]), when
    /// not the current span's: a delivery made from a task of its own.
    pub trace: Option<&'a str>,
}

impl<'a> Delivery<'a> {
    /// A delivery of `text` to `key` that queues behind a busy run, with no park and no id.
    pub fn new(key: &'a str, text: &'a str) -> Self {
        Delivery {
            key,
            agent: None,
            text,
            images: &[],
            attachments: &[],
            origin: Origin::default(),
            when_busy: WhenBusy::Queue,
            answers: None,
            message_id: None,
            trace: None,
        }
    }
}
