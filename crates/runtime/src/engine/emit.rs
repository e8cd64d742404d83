//! Events of committed messages, sent only after their commit: thinking, text, then each tool
//! call's start and, when its result is in the same commit, its end. A model's text and
//! thinking went out live as it streamed ([`Streamed`]); they are not sent again.

use serde_json::json;

use crate::event::{AgentEvent, EventSink};
use crate::types::{Message, Role, ToolStatus};

fn ended(m: &Message) -> Option<AgentEvent> {
    Some(AgentEvent::ToolEnded {
        id: m.tool_call_id.clone()?,
        is_error: m.tool_status == Some(ToolStatus::Error),
        content: json!(m.content.clone().unwrap_or_default()),
    })
}

/// What a step already streamed of its model's message (seq `seq`).
#[derive(Default)]
pub(super) struct Streamed {
    pub(super) seq: i64,
    pub(super) text: String,
}

/// The events of `messages`, committed together.
pub(super) fn messages(events: &EventSink, messages: &[Message]) {
    streamed(events, messages, None);
}

/// The events of `messages`, committed together, but for what `live` already streamed: the
/// message it streamed sends its text again only if what was stored differs (a stop tool's
/// response, a hook's rewrite), as a message of its own.
pub(super) fn streamed(events: &EventSink, messages: &[Message], live: Option<&Streamed>) {
    let result = |id: &str| {
        messages
            .iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
    };
    for m in messages
        .iter()
        .filter(|m| !m.silent && matches!(m.role, Role::User | Role::Assistant))
    {
        let was_live = live.filter(|l| l.seq == m.seq);
        if let Some(th) = m.thinking.as_ref().filter(|_| was_live.is_none()) {
            events.send(AgentEvent::Thinking { delta: th.clone() });
        }
        if let Some(c) = m.content.as_ref().filter(|c| !c.is_empty())
            && was_live.is_none_or(|l| l.text != **c)
        {
            events.text(c);
            events.end_text();
        }
        for call in &m.tool_calls {
            events.send(AgentEvent::ToolStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                args: call.arguments.clone(),
            });
            if let Some(end) = result(&call.id).and_then(ended) {
                events.send(end);
            }
        }
    }
}

/// The ends of tool calls whose results arrived after their step committed (a blocking child's
/// answer), among freshly drained `messages`.
pub(super) fn tool_ends(events: &EventSink, messages: &[Message]) {
    for m in messages.iter().filter(|m| m.role == Role::Tool) {
        if let Some(end) = ended(m) {
            events.send(end);
        }
    }
}
