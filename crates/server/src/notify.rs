//! Reaching people (issue #31): the notices the database writes with each fact a person may
//! need to know are routed to subscriptions and approvers (`router.rs`), rendered per channel,
//! and sent through the one outbox (`sender.rs`), which A2A push shares.
//!
//! This module is the vocabulary the parts share, a leaf: [`Event`] (what happened), [`View`]
//! (what a notification says, whatever the channel) and [`Links`] (the one-time answers it
//! carries). The channels render a `View` into their body (`webhook.rs`, `slack.rs`,
//! `email.rs`) and send a stored delivery.

use serde::Serialize;

pub(crate) mod email;
mod facts;
#[cfg(test)]
mod fixtures;
pub(crate) mod http;
pub(crate) mod links;
mod recipients;
pub(crate) mod router;
pub(crate) mod sender;
pub(crate) mod shown;
pub(crate) mod slack;
pub(crate) mod webhook;

/// What happened, as notifications name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Event {
    /// A question is waiting: a thread parked for a person, or a tool call waits for a
    /// decision.
    #[serde(rename = "question.parked")]
    QuestionParked,
    /// Someone answered a question or decided a tool call.
    #[serde(rename = "question.answered")]
    QuestionAnswered,
    /// A deadline answered a question with its default (nobody did in time).
    #[serde(rename = "question.expired")]
    QuestionExpired,
    /// A deadline escalated a question: more people may answer it now.
    #[serde(rename = "question.escalated")]
    QuestionEscalated,
    /// A deadline reminded the people a question waits for.
    #[serde(rename = "question.reminded")]
    QuestionReminded,
    /// A session ended (not by failing).
    #[serde(rename = "session.ended")]
    SessionEnded,
    /// A session ended by failing.
    #[serde(rename = "thread.failed")]
    ThreadFailed,
}

impl Event {
    /// Every event, in this order.
    pub const ALL: [Event; 7] = [
        Event::QuestionParked,
        Event::QuestionAnswered,
        Event::QuestionExpired,
        Event::QuestionEscalated,
        Event::QuestionReminded,
        Event::SessionEnded,
        Event::ThreadFailed,
    ];

    /// Its name on the wire (`question.parked`, …): the same names definitions use.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::QuestionParked => "question.parked",
            Event::QuestionAnswered => "question.answered",
            Event::QuestionExpired => "question.expired",
            Event::QuestionEscalated => "question.escalated",
            Event::QuestionReminded => "question.reminded",
            Event::SessionEnded => "session.ended",
            Event::ThreadFailed => "thread.failed",
        }
    }

    /// The event named `name`.
    pub fn parse(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether it is about a question that may still be waiting (it carries answer links).
    pub fn asks(self) -> bool {
        matches!(
            self,
            Event::QuestionParked | Event::QuestionEscalated | Event::QuestionReminded
        )
    }
}

/// What a notification says, whatever the channel: the webhook's JSON body is this
/// serialized; Slack and email render it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// What happened.
    pub event: Event,
    /// When (ms since the Unix epoch).
    pub at: i64,
    /// The thread: its id, its key (as its owner sees it) and its agent.
    pub thread: ThreadRef,
    /// The question, for the `question.*` events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
    /// The answer or decision, for `question.answered` and `question.expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// For `question.escalated`: the roles and principals added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalated_to: Option<duet_spec::Approvers>,
    /// For `question.reminded`: which reminder (from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reminder: Option<u32>,
    /// For `session.ended` and `thread.failed`: the session, why it ended, and its result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionEnd>,
    /// The answers this notification carries (none for a recipient who may not answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<Links>,
}

/// The thread a notification is about.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRef {
    /// Its id.
    pub id: String,
    /// Its key, as its owner sees it.
    pub key: String,
    /// Its agent.
    pub agent: String,
    /// Whose it is (a principal's subject), if anyone's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// The question a `question.*` notification is about.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// The approval id (`THREAD:SESSION:SEQ`): what the API, the inbox and links answer.
    pub approval: String,
    /// `question` (a park: the answer is a message) or `tool_call` (a decision).
    pub kind: QuestionKind,
    /// What is asked, as text: the last message before the park, or the proposed call in words.
    pub text: String,
    /// For a tool call: the tool and its proposed arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<ProposedCall>,
    /// For a tool call: the decisions that may be taken.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<duet_spec::Decision>,
    /// Who may answer (empty: the thread's owner).
    pub approvers: duet_spec::Approvers,
    /// The deadline in words, when it has one (`answered with "reject" at …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
}

/// What a question is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    /// A thread parked for a person's message.
    Question,
    /// A tool call waiting for a decision.
    ToolCall,
}

/// A tool call proposed for a decision.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposedCall {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// Its proposed arguments.
    pub args: serde_json::Value,
}

/// How a question was answered.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Who answered (a principal's subject, `slack:USER`, or `deadline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// For a tool call: the decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<duet_spec::Decision>,
    /// The answer's text, or the decision's reason or response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A session's end.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEnd {
    /// Which session.
    pub session: i64,
    /// Why it ended (`session_stop`, `step_error`, …).
    pub stop_reason: String,
    /// Its result, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// The answers a notification carries: each a one-time, expiring, signed URL bound to the
/// approval and the recipient.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Links {
    /// Approve the tool call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approve: Option<String>,
    /// Reject it (the page asks for a reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reject: Option<String>,
    /// The question's page in the inbox (needs a sign-in; not one-time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open: Option<String>,
    /// When the one-time links stop working (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::Event;

    #[test]
    fn event_names_round_trip() {
        for e in Event::ALL {
            assert_eq!(Event::parse(e.as_str()), Some(e));
            assert_eq!(
                serde_json::to_value(e).ok(),
                Some(serde_json::json!(e.as_str()))
            );
        }
        assert_eq!(Event::parse("question.lost"), None);
    }

    #[test]
    fn the_events_are_the_ones_definitions_may_name() {
        let names: Vec<&str> = Event::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(names, duet_spec::NotificationDef::EVENTS);
    }
}
