//! The typed journal: every fact of a thread's history other than a message is a [`Record`]
//! whose [`RecordBody`] names its kind and carries that kind's fields.
//!
//! Stored as two columns, a kind (`session_started`, …) and a JSON object of fields
//! ([`RecordBody::to_parts`], [`RecordBody::from_parts`]). The format is versioned by its kinds:
//! a kind is never renamed and its fields are only ever added (as optional), and a stored kind
//! this build does not know (written by a newer one) reads back as [`RecordBody::Unknown`] rather
//! than failing the whole journal.

use serde::{Deserialize, Serialize};

use crate::types::{SideId, StopReason, ThreadStatus};

/// A journal fact other than a message, at its place in the thread's sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Its place in the thread's journal (a sequence messages share).
    pub seq: i64,
    /// When it was written, in ms since the Unix epoch.
    pub created_at: i64,
    /// Its kind and that kind's fields.
    pub body: RecordBody,
}

impl Record {
    /// A record of `body` at journal position `seq`, written at `now` (ms since the Unix epoch).
    pub fn new(seq: i64, body: RecordBody, now: i64) -> Self {
        Record {
            seq,
            created_at: now,
            body,
        }
    }

    /// The stored kind (`session_started`, …).
    pub fn kind(&self) -> &str {
        self.body.kind()
    }

    /// The stored fields, as JSON.
    pub fn data(&self) -> serde_json::Value {
        self.body.to_parts().1
    }
}

/// One kind of journal fact, with its fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum RecordBody {
    /// A new session opened.
    SessionStarted {
        /// Its number: 1 for the thread's first session.
        session: i64,
    },
    /// A side completed a turn.
    TurnCompleted {
        /// The side whose turn it was.
        side: SideId,
    },
    /// The run stopped; the session stays open.
    #[serde(rename_all = "camelCase")]
    Stopped {
        /// Why the run stopped.
        stop_reason: StopReason,
        /// Where it left the thread (`idle`, or `awaiting_human` when parked).
        status: ThreadStatus,
        /// At a park, the trace context of the step that asked (when a
        /// [`crate::telemetry::TraceCarrier`] saved one): the step that resumes links to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
        /// At a park, the project revision it parked under ([`duet_spec::Project::revision`]):
        /// a resume under another revision checks the thread still has what it needs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revision: Option<String>,
    },
    /// The session ended.
    #[serde(rename_all = "camelCase")]
    SessionEnded {
        /// Why it ended.
        stop_reason: StopReason,
        /// The session's result, if it has one.
        result: Option<String>,
    },
    /// The free-text status changed.
    Status {
        /// The new status text.
        text: String,
    },
    /// A handler delivery failed: `message` is the seq of the message it was handed.
    HandlerError {
        /// The name the handler is registered under.
        handler: String,
        /// The seq of the message it was handed.
        message: i64,
        /// Its error text.
        error: String,
    },
    /// A step failed.
    StepError {
        /// What failed, as text (also the thread's result).
        error: String,
    },
    /// The thread passed to another agent.
    Handoff {
        /// The agent that had the thread.
        from: String,
        /// The agent that takes its turns from now on.
        to: String,
    },
    /// A hook failed and was skipped.
    HookFailed {
        /// The hook definition's id.
        id: String,
        /// The hook kind that failed (`filter_messages`, …).
        kind: String,
        /// Its error text.
        error: String,
    },
    /// A tool call (`call`) of the step waits for the blocking child `child` (its key): its
    /// result is written when the child's session ends.
    ChildAwaited {
        /// The id of the waiting tool call.
        call: String,
        /// The blocking child's key.
        child: String,
    },
    /// The run that wrote the settle (`stopped` or `session_ended`) just before went on under its
    /// lease: messages (a `follow_up`, a `steer`) were waiting when it settled, so that settle
    /// did not end the run. Written first in the run's next commit.
    RunContinued {
        /// The last seq of the commit that settled.
        after: i64,
    },
    /// A tool call of the step waits for a person's decision (its tool's `approval`); the
    /// record's seq is the approval's id.
    ApprovalRequested(crate::approval::Asked),
    /// A decision on a pending call was taken by the thread's run (the first one given).
    ApprovalDecided(crate::approval::Decided),
    /// A `tool_call_policy` hook denied a tool call: the tool never ran, and the call's result
    /// is an error carrying `reason`.
    ToolCallDenied {
        /// The tool call's id.
        call: String,
        /// The tool.
        tool: String,
        /// The id of the hook that denied it.
        hook: String,
        /// Why.
        reason: String,
    },
    /// A scheduled effect ran (attempt `attempt` of its timer `id`); this commit holds what it
    /// wrote. `messages`: the seqs of the messages it wrote (the spec's
    /// `metadata.scheduledEffect {id, name}` on each).
    EffectRan {
        /// The timer's id (what `schedule_effect` returned).
        id: uuid::Uuid,
        /// The effect's name.
        name: String,
        /// Which attempt this was (1 for the first).
        attempt: u32,
        /// The seqs of the messages it wrote, in order.
        messages: Vec<i64>,
    },
    /// An attempt of a scheduled effect failed: nothing it wrote was kept.
    EffectFailed {
        /// The timer's id.
        id: uuid::Uuid,
        /// The effect's name.
        name: String,
        /// Which attempt this was (1 for the first).
        attempt: u32,
        /// Its error text.
        error: String,
    },
    /// A deadline reminded the person of a question or a pending tool call (`subject`: see
    /// [`crate::deadline::Subject`]); `n` counts the reminders, from 1.
    QuestionReminded {
        /// What is waited on.
        subject: String,
        /// Which reminder.
        n: u32,
    },
    /// A deadline escalated a question or a pending tool call: `to` may answer it too from now on.
    QuestionEscalated {
        /// What is waited on.
        subject: String,
        /// The roles and principals added.
        to: duet_spec::Approvers,
    },
    /// Code emitted a custom thread event (the spec's `state.emit(event, data)`).
    Emitted {
        /// The event's name.
        event: String,
        /// Its data, as the code gave it.
        data: serde_json::Value,
    },
    /// A kind this build does not know, kept as stored.
    #[serde(skip)]
    Unknown {
        /// The stored kind.
        kind: String,
        /// The stored fields, as read.
        data: serde_json::Value,
    },
}

impl RecordBody {
    /// The stored kind.
    pub fn kind(&self) -> &str {
        match self {
            RecordBody::SessionStarted { .. } => "session_started",
            RecordBody::TurnCompleted { .. } => "turn_completed",
            RecordBody::Stopped { .. } => "stopped",
            RecordBody::SessionEnded { .. } => "session_ended",
            RecordBody::Status { .. } => "status",
            RecordBody::HandlerError { .. } => "handler_error",
            RecordBody::StepError { .. } => "step_error",
            RecordBody::Handoff { .. } => "handoff",
            RecordBody::HookFailed { .. } => "hook_failed",
            RecordBody::ChildAwaited { .. } => "child_awaited",
            RecordBody::RunContinued { .. } => "run_continued",
            RecordBody::ApprovalRequested(_) => "approval_requested",
            RecordBody::ApprovalDecided(_) => "approval_decided",
            RecordBody::ToolCallDenied { .. } => "tool_call_denied",
            RecordBody::EffectRan { .. } => "effect_ran",
            RecordBody::EffectFailed { .. } => "effect_failed",
            RecordBody::QuestionReminded { .. } => "question_reminded",
            RecordBody::QuestionEscalated { .. } => "question_escalated",
            RecordBody::Emitted { .. } => "emitted",
            RecordBody::Unknown { kind, .. } => kind,
        }
    }

    /// The stored form: the kind and the fields as a JSON object.
    pub fn to_parts(&self) -> (String, serde_json::Value) {
        if let RecordBody::Unknown { kind, data } = self {
            return (kind.clone(), data.clone());
        }
        let data = serde_json::to_value(self)
            .ok()
            .and_then(|mut v| v.get_mut("data").map(serde_json::Value::take))
            .unwrap_or_else(|| serde_json::json!({}));
        (self.kind().to_owned(), data)
    }

    /// Reads a stored record back; a kind (or a shape) this build does not know is
    /// [`RecordBody::Unknown`].
    pub fn from_parts(kind: &str, data: serde_json::Value) -> RecordBody {
        let tagged = serde_json::json!({"kind": kind, "data": data});
        serde_json::from_value(tagged).unwrap_or_else(|_| RecordBody::Unknown {
            kind: kind.to_owned(),
            data,
        })
    }

    /// [`RecordBody::from_parts`] from the stored text of `data`, read straight into the record
    /// (not through a JSON tree copied into a tagged one): an error when `data` is not one JSON
    /// value.
    pub fn from_stored(kind: &str, data: &str) -> Result<RecordBody, serde_json::Error> {
        // One value and nothing after it, so the tagged text below holds `data` and only it.
        serde_json::from_str::<serde::de::IgnoredAny>(data)?;
        let tagged = format!(
            "{{\"kind\":{},\"data\":{data}}}",
            serde_json::to_string(kind)?
        );
        match serde_json::from_str(&tagged) {
            Ok(body) => Ok(body),
            // Read as `from_parts` reads it (an unknown kind or shape, a repeated key, a value
            // nested as deep as the parser goes): the same record whichever way.
            Err(_) => Ok(RecordBody::from_parts(kind, serde_json::from_str(data)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_round_trips_in_the_stored_shape() {
        let cases = [
            (
                RecordBody::Stopped {
                    stop_reason: StopReason::AwaitingHuman,
                    status: ThreadStatus::AwaitingHuman,
                    trace: None,
                    revision: None,
                },
                "stopped",
                json!({"stopReason": "awaiting_human", "status": "awaiting_human"}),
            ),
            (
                RecordBody::Stopped {
                    stop_reason: StopReason::AwaitingHuman,
                    status: ThreadStatus::AwaitingHuman,
                    trace: Some("{\"traceparent\":\"00-ab-cd-01\"}".into()),
                    revision: Some("0123456789ab".into()),
                },
                "stopped",
                json!({"stopReason": "awaiting_human", "status": "awaiting_human", "trace": "{\"traceparent\":\"00-ab-cd-01\"}", "revision": "0123456789ab"}),
            ),
            (
                RecordBody::SessionEnded {
                    stop_reason: StopReason::SessionStop,
                    result: None,
                },
                "session_ended",
                json!({"stopReason": "session_stop", "result": null}),
            ),
            (
                RecordBody::TurnCompleted { side: SideId::B },
                "turn_completed",
                json!({"side": "b"}),
            ),
            (
                RecordBody::HandlerError {
                    handler: "echo".into(),
                    message: 3,
                    error: "no".into(),
                },
                "handler_error",
                json!({"handler": "echo", "message": 3, "error": "no"}),
            ),
            (
                RecordBody::EffectRan {
                    id: uuid::Uuid::nil(),
                    name: "remind".into(),
                    attempt: 2,
                    messages: vec![7],
                },
                "effect_ran",
                json!({"id": "00000000-0000-0000-0000-000000000000", "name": "remind", "attempt": 2, "messages": [7]}),
            ),
            (
                RecordBody::ChildAwaited {
                    call: "c1".into(),
                    child: "k/gate-1".into(),
                },
                "child_awaited",
                json!({"call": "c1", "child": "k/gate-1"}),
            ),
            (
                RecordBody::ApprovalRequested(crate::approval::Asked {
                    call: "c1".into(),
                    tool: "refund".into(),
                    arguments: json!({"amount": 250}),
                    decisions: vec![duet_spec::Decision::Approve, duet_spec::Decision::Reject],
                    remember: vec![duet_spec::RememberScope::Session],
                    approvers: duet_spec::Approvers {
                        roles: vec!["refunds".into()],
                        principals: Vec::new(),
                    },
                    revision: Some("0123456789ab".into()),
                    policy: None,
                    deadline: None,
                }),
                "approval_requested",
                json!({"call": "c1", "tool": "refund", "arguments": {"amount": 250}, "decisions": ["approve", "reject"], "remember": ["session"], "approvers": {"roles": ["refunds"]}, "revision": "0123456789ab"}),
            ),
            (
                RecordBody::QuestionReminded {
                    subject: "approval:4".into(),
                    n: 2,
                },
                "question_reminded",
                json!({"subject": "approval:4", "n": 2}),
            ),
            (
                RecordBody::QuestionEscalated {
                    subject: "question:1:2".into(),
                    to: duet_spec::Approvers {
                        roles: vec!["managers".into()],
                        principals: Vec::new(),
                    },
                },
                "question_escalated",
                json!({"subject": "question:1:2", "to": {"roles": ["managers"]}}),
            ),
            (
                RecordBody::ApprovalDecided(crate::approval::Decided {
                    approval: 4,
                    call: "c1".into(),
                    tool: "refund".into(),
                    decision: duet_spec::Decision::Edit,
                    args: Some(json!({"amount": 90})),
                    reason: None,
                    text: None,
                    remember: None,
                    author: Some("bob".into()),
                    at: 7,
                    message_id: None,
                }),
                "approval_decided",
                json!({"approval": 4, "call": "c1", "tool": "refund", "decision": "edit", "args": {"amount": 90}, "author": "bob", "at": 7}),
            ),
            (
                RecordBody::ToolCallDenied {
                    call: "c2".into(),
                    tool: "refund".into(),
                    hook: "refund_policy".into(),
                    reason: "over the daily limit".into(),
                },
                "tool_call_denied",
                json!({"call": "c2", "tool": "refund", "hook": "refund_policy", "reason": "over the daily limit"}),
            ),
        ];
        for (body, kind, data) in cases {
            let (k, d) = body.to_parts();
            assert_eq!((k.as_str(), &d), (kind, &data));
            // Field order is part of the stored shape (journals are compared as text).
            assert_eq!(d.to_string(), data.to_string());
            assert_eq!(
                RecordBody::from_stored(kind, &data.to_string()).ok(),
                Some(body.clone())
            );
            assert_eq!(RecordBody::from_parts(kind, data), body);
        }
    }

    #[test]
    fn unknown_kinds_and_shapes_are_kept_as_stored() {
        let future = RecordBody::from_parts("budget_spent", json!({"tokens": 12}));
        assert_eq!(future.kind(), "budget_spent");
        assert_eq!(future.to_parts().1, json!({"tokens": 12}));
        // A known kind with fields it cannot have is not silently misread.
        let odd = RecordBody::from_parts("status", json!({"text": 3}));
        assert!(matches!(odd, RecordBody::Unknown { .. }));
        // The same from the stored text.
        let future = RecordBody::from_stored("budget_spent", r#"{"tokens": 12}"#).ok();
        assert_eq!(
            future.map(|f| f.to_parts()),
            Some(("budget_spent".into(), json!({"tokens": 12})))
        );
        let odd = RecordBody::from_stored("status", r#"{"text": 3}"#);
        assert!(matches!(odd, Ok(RecordBody::Unknown { .. })), "{odd:?}");
        // Text that is not one JSON value is an error, however the tagged text would read.
        for bad in [
            "",
            "{",
            r#"{"text": "a"}, "kind": "status""#,
            r#"{"text": "a"} x"#,
        ] {
            assert!(RecordBody::from_stored("status", bad).is_err(), "{bad:?}");
        }
        assert!(RecordBody::from_stored("a\"quote", "{}").is_ok());
    }
}
