//! What a notice means (pure): the fact the database copied into `notices` read as an [`Event`]
//! about a question (a park or a pending tool call) or a session, with what the fact itself says
//! (who answered, what was decided, the escalation's roles, the reminder's number, the
//! session's end). What the question was is read from the thread by the router.

use duet_runtime::approval::Decided;
use duet_runtime::deadline::{self, Subject};
use duet_runtime::{Park, RecordBody, StopReason};
use duet_server_store::Notice;

use super::{Answer, Event, SessionEnd};

/// What a question is, by its id's parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asking {
    /// A park: the answer is a message; `park` is where it waited (or waits).
    Park(Park),
    /// A pending tool call: its `approval_requested` record's seq, in `session`.
    Call { session: i64, seq: i64 },
}

impl Asking {
    /// Its approval id's tail (`SESSION:SEQ`).
    pub(crate) fn park(self) -> Park {
        match self {
            Asking::Park(p) => p,
            Asking::Call { session, seq } => Park { session, seq },
        }
    }
}

/// A notice, read.
#[derive(Clone, Debug)]
pub(crate) struct Fact {
    /// What happened.
    pub(crate) event: Event,
    /// The question it is about (the `question.*` events).
    pub(crate) asking: Option<Asking>,
    /// The answer or decision.
    pub(crate) answer: Option<Answer>,
    /// An escalation's added roles and principals.
    pub(crate) escalated_to: Option<duet_spec::Approvers>,
    /// A reminder's number.
    pub(crate) reminder: Option<u32>,
    /// A session's end.
    pub(crate) session_end: Option<SessionEnd>,
}

impl Fact {
    fn new(event: Event) -> Fact {
        Fact {
            event,
            asking: None,
            answer: None,
            escalated_to: None,
            reminder: None,
            session_end: None,
        }
    }
}

/// The stop reasons that end a session by failing (`thread.failed`).
fn failed(reason: StopReason) -> bool {
    matches!(
        reason,
        StopReason::SessionFail | StopReason::StepError | StopReason::HookBlocked
    )
}

/// Who an answer's author is, in words (a principal's subject; the deadline is `deadline`; a
/// Slack user who clicked a button is `slack:{user id}`, which Slack's channel mentions).
pub(crate) fn author_name(author: Option<&str>) -> Option<String> {
    author.map(
        |a| match serde_json::from_str::<duet_runtime::Principal>(a) {
            Ok(p) if p.issuer == "slack" => format!("slack:{}", p.subject),
            _ => crate::auth::Caller::author_name(a),
        },
    )
}

/// What `n` means; `None` when it is nothing anyone hears of (a record this build does not
/// know, a `stopped` that is no park).
pub(crate) fn interpret(n: &Notice) -> Option<Fact> {
    let data: serde_json::Value = serde_json::from_str(&n.data).unwrap_or_default();
    let session = n.session.unwrap_or_default();
    if n.fact == "answer" {
        let author = data.get("author").and_then(|a| a.as_str());
        let event = if deadline::is_deadline(author) {
            Event::QuestionExpired
        } else {
            Event::QuestionAnswered
        };
        let mut fact = Fact::new(event);
        fact.asking = Some(Asking::Park(Park {
            session,
            seq: n.seq,
        }));
        fact.answer = Some(Answer {
            by: author_name(author),
            decision: None,
            text: data
                .get("content")
                .and_then(|c| c.as_str())
                .map(str::to_owned),
        });
        return Some(fact);
    }
    let body = RecordBody::from_parts(&n.fact, data);
    let fact = match body {
        RecordBody::Stopped {
            status: duet_runtime::ThreadStatus::AwaitingHuman,
            ..
        } => {
            let mut f = Fact::new(Event::QuestionParked);
            // The park is the thread's next seq after the commit that parked it.
            f.asking = Some(Asking::Park(Park {
                session,
                seq: n.seq + 1,
            }));
            f
        }
        RecordBody::ApprovalRequested(_) => {
            let mut f = Fact::new(Event::QuestionParked);
            f.asking = Some(Asking::Call {
                session,
                seq: n.seq,
            });
            f
        }
        RecordBody::ApprovalDecided(d) => decided(&d, session),
        RecordBody::QuestionReminded { subject, n: nth } => {
            let mut f = Fact::new(Event::QuestionReminded);
            f.asking = Some(asking_of(&subject, session, n.seq)?);
            f.reminder = Some(nth);
            f
        }
        RecordBody::QuestionEscalated { subject, to } => {
            let mut f = Fact::new(Event::QuestionEscalated);
            f.asking = Some(asking_of(&subject, session, n.seq)?);
            f.escalated_to = Some(to);
            f
        }
        RecordBody::SessionEnded {
            stop_reason,
            result,
        } => {
            let mut f = Fact::new(if failed(stop_reason) {
                Event::ThreadFailed
            } else {
                Event::SessionEnded
            });
            f.session_end = Some(SessionEnd {
                session,
                stop_reason: serde_json::to_value(stop_reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                result,
            });
            f
        }
        // A failed step leaves the session open and the thread idle: the run failed.
        RecordBody::StepError { error } => {
            let mut f = Fact::new(Event::ThreadFailed);
            f.session_end = Some(SessionEnd {
                session,
                stop_reason: "step_error".to_owned(),
                result: Some(error),
            });
            f
        }
        _ => return None,
    };
    Some(fact)
}

fn decided(d: &Decided, session: i64) -> Fact {
    let author = d.author.as_deref();
    let mut f = Fact::new(if deadline::is_deadline(author) {
        Event::QuestionExpired
    } else {
        Event::QuestionAnswered
    });
    f.asking = Some(Asking::Call {
        session,
        seq: d.approval,
    });
    f.answer = Some(Answer {
        by: author_name(author),
        decision: Some(d.decision),
        text: d.reason.clone().or_else(|| d.text.clone()),
    });
    f
}

/// The question a deadline's record at `seq` is about: a pending call by its seq, or a
/// question by where its park stands after the record (a reminder or an escalation moves it).
fn asking_of(subject: &str, session: i64, seq: i64) -> Option<Asking> {
    match subject.parse::<Subject>().ok()? {
        Subject::Approval(call) => Some(Asking::Call { session, seq: call }),
        Subject::Question { session, .. } => Some(Asking::Park(Park {
            session,
            seq: seq + 1,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(fact: &str, seq: i64, data: serde_json::Value) -> Notice {
        Notice {
            id: 1,
            thread: uuid::Uuid::now_v7(),
            seq,
            session: Some(2),
            fact: fact.into(),
            data: data.to_string(),
            created_at: 0,
        }
    }

    #[test]
    fn a_park_is_asked_at_the_next_seq() {
        let f = interpret(&notice(
            "stopped",
            7,
            serde_json::json!({"stopReason": "awaiting_human", "status": "awaiting_human"}),
        ))
        .expect("a park");
        assert_eq!(f.event, Event::QuestionParked);
        assert_eq!(f.asking, Some(Asking::Park(Park { session: 2, seq: 8 })));
        let idle = notice(
            "stopped",
            7,
            serde_json::json!({"stopReason": "handler_idle", "status": "idle"}),
        );
        assert!(interpret(&idle).is_none());
    }

    #[test]
    fn the_deadline_s_answer_is_an_expiry() {
        let by_deadline = notice(
            "answer",
            8,
            serde_json::json!({"author": deadline::author(), "content": "no"}),
        );
        assert_eq!(
            interpret(&by_deadline).map(|f| f.event),
            Some(Event::QuestionExpired)
        );
        let by_bob = notice(
            "answer",
            8,
            serde_json::json!({"author": crate::auth::principal("bob").canonical(), "content": "yes"}),
        );
        let f = interpret(&by_bob).expect("an answer");
        assert_eq!(f.event, Event::QuestionAnswered);
        assert_eq!(f.answer.and_then(|a| a.by).as_deref(), Some("bob"));
    }

    #[test]
    fn a_slack_user_s_decision_names_them_as_slack_s() {
        let clicked = duet_runtime::Principal {
            kind: "user".into(),
            issuer: "slack".into(),
            subject: "U0BOB".into(),
        }
        .canonical();
        let decided = notice(
            "approval_decided",
            9,
            serde_json::json!({"approval": 5, "call": "c1", "tool": "deploy",
                "decision": "approve", "author": clicked, "at": 1}),
        );
        let f = interpret(&decided).expect("a decision");
        assert_eq!(f.event, Event::QuestionAnswered);
        assert_eq!(f.answer.and_then(|a| a.by).as_deref(), Some("slack:U0BOB"));
    }

    #[test]
    fn a_failing_end_is_a_failure() {
        let end = |reason: &str| {
            interpret(&notice(
                "session_ended",
                3,
                serde_json::json!({"stopReason": reason, "result": null}),
            ))
            .map(|f| f.event)
        };
        assert_eq!(end("step_error"), Some(Event::ThreadFailed));
        assert_eq!(end("session_stop"), Some(Event::SessionEnded));
        let step = notice("step_error", 5, serde_json::json!({"error": "model down"}));
        let f = interpret(&step).expect("a failure");
        assert_eq!(f.event, Event::ThreadFailed);
        assert_eq!(
            f.session_end.and_then(|e| e.result).as_deref(),
            Some("model down")
        );
        assert!(
            interpret(&notice(
                "turn_completed",
                3,
                serde_json::json!({"side": "a"})
            ))
            .is_none()
        );
    }
}
