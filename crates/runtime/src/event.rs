//! What a caller sees of a run: the Agent Handler protocol's seven event types
//! (`shared/seeds/000`, §5), serialised with the protocol's field names.

use serde::{Deserialize, Serialize};

/// One event of a run's stream. `completed` and `failed` are terminal: exactly one ends a stream
/// consumed to its end. [`AgentEvent::Other`] carries event types this build does not know (from
/// a newer remote agent): terminal consumers ignore them and relays pass them on unchanged
/// (MUSTs 4 and 5).
#[derive(Clone, Debug, PartialEq)]
pub enum AgentEvent {
    /// Output text: a run's answer is all its `text` deltas, in order.
    Text {
        /// The next piece of text.
        delta: String,
    },
    /// Model reasoning: process, not the answer ([`collect`](crate::collect) ignores it).
    Thinking {
        /// The next piece of reasoning.
        delta: String,
    },
    /// A tool call starts.
    ToolStarted {
        /// The call's id, which its `tool_ended` repeats.
        id: String,
        /// The tool it calls.
        name: String,
        /// The call's arguments.
        args: serde_json::Value,
    },
    /// A tool call's result is in.
    ToolEnded {
        /// The id of the call it ends.
        id: String,
        /// Whether the call failed (`isError` on the wire).
        is_error: bool,
        /// The result (duet sends its text as a JSON string).
        content: serde_json::Value,
    },
    /// Advisory: a transient failure is retried after a pause; the next event closes it.
    Retrying {
        /// Which attempt this is, counting from 1.
        attempt: u32,
        /// How many attempts will be made in all (`maxAttempts` on the wire).
        max_attempts: u32,
        /// The pause before the next attempt, in ms (`delayMs` on the wire).
        delay_ms: u64,
        /// Why, in prose for people.
        reason: String,
    },
    /// Terminal: the run succeeded.
    Completed {
        /// Structured data, when there is some; duet's is `{thread, session, status,
        /// stopReason, result}`.
        data: Option<serde_json::Value>,
    },
    /// Terminal: the run failed, or could not start.
    Failed {
        /// What went wrong, for people.
        details: String,
        /// Whether sending again to the same session may succeed.
        retryable: bool,
        /// What kind of failure it is: one of [`codes`](crate::codes) for duet's own.
        code: Option<String>,
    },
    /// An event of a type this build does not know, kept whole.
    Other(serde_json::Value),
}

/// The wire form of the known events.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Known {
    Text {
        delta: String,
    },
    Thinking {
        delta: String,
    },
    ToolStarted {
        id: String,
        name: String,
        args: serde_json::Value,
    },
    ToolEnded {
        id: String,
        #[serde(rename = "isError")]
        is_error: bool,
        content: serde_json::Value,
    },
    Retrying {
        attempt: u32,
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        reason: String,
    },
    Completed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<serde_json::Value>,
    },
    Failed {
        details: String,
        retryable: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
}

const KNOWN_TYPES: [&str; 7] = [
    "text",
    "thinking",
    "tool_started",
    "tool_ended",
    "retrying",
    "completed",
    "failed",
];

impl Serialize for AgentEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let known = match self.clone() {
            AgentEvent::Other(v) => return v.serialize(s),
            AgentEvent::Text { delta } => Known::Text { delta },
            AgentEvent::Thinking { delta } => Known::Thinking { delta },
            AgentEvent::ToolStarted { id, name, args } => Known::ToolStarted { id, name, args },
            AgentEvent::ToolEnded {
                id,
                is_error,
                content,
            } => Known::ToolEnded {
                id,
                is_error,
                content,
            },
            AgentEvent::Retrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => Known::Retrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            },
            AgentEvent::Completed { data } => Known::Completed { data },
            AgentEvent::Failed {
                details,
                retryable,
                code,
            } => Known::Failed {
                details,
                retryable,
                code,
            },
        };
        known.serialize(s)
    }
}

impl<'de> Deserialize<'de> for AgentEvent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let kind = value
            .get("type")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        match kind {
            Some(k) if KNOWN_TYPES.contains(&k.as_str()) => {
                let known: Known =
                    serde_json::from_value(value).map_err(serde::de::Error::custom)?;
                Ok(match known {
                    Known::Text { delta } => AgentEvent::Text { delta },
                    Known::Thinking { delta } => AgentEvent::Thinking { delta },
                    Known::ToolStarted { id, name, args } => {
                        AgentEvent::ToolStarted { id, name, args }
                    }
                    Known::ToolEnded {
                        id,
                        is_error,
                        content,
                    } => AgentEvent::ToolEnded {
                        id,
                        is_error,
                        content,
                    },
                    Known::Retrying {
                        attempt,
                        max_attempts,
                        delay_ms,
                        reason,
                    } => AgentEvent::Retrying {
                        attempt,
                        max_attempts,
                        delay_ms,
                        reason,
                    },
                    Known::Completed { data } => AgentEvent::Completed { data },
                    Known::Failed {
                        details,
                        retryable,
                        code,
                    } => AgentEvent::Failed {
                        details,
                        retryable,
                        code,
                    },
                })
            }
            Some(_) => Ok(AgentEvent::Other(value)),
            None => Err(serde::de::Error::custom("an event needs a string `type`")),
        }
    }
}

impl AgentEvent {
    /// Whether this event ends a stream.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            AgentEvent::Completed { .. } | AgentEvent::Failed { .. }
        )
    }
}

/// Where a run sends its events. Sending never blocks; a dropped receiver is ignored (the run
/// goes on and commits; only the caller stopped listening).
///
/// Text goes through [`EventSink::text`], message by message ([`EventSink::end_text`] closes
/// one): the first text of a message after another's is preceded by a blank line, so the
/// answer that `collect` joins never glues two messages' words together.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: Option<tokio::sync::mpsc::UnboundedSender<AgentEvent>>,
    text: std::sync::Arc<TextState>,
    held: std::sync::Arc<Held>,
}

/// Events held back until [`EventSink::settle`] (see [`EventSink::hold`]).
#[derive(Debug, Default)]
struct Held {
    on: std::sync::atomic::AtomicBool,
    events: std::sync::Mutex<Vec<AgentEvent>>,
}

/// Where the text of a stream stands.
#[derive(Debug, Default)]
struct TextState {
    /// Some text was sent.
    any: std::sync::atomic::AtomicBool,
    /// A message's text is being sent.
    open: std::sync::atomic::AtomicBool,
}

/// The name of the non-terminal extension event that reports a model call's tokens.
pub const USAGE_EVENT: &str = "usage";

impl EventSink {
    /// A sink and the receiver its events arrive on.
    pub fn channel() -> (EventSink, tokio::sync::mpsc::UnboundedReceiver<AgentEvent>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (
            EventSink {
                tx: Some(tx),
                text: Default::default(),
                held: Default::default(),
            },
            rx,
        )
    }

    /// A sink that drops everything.
    pub fn discard() -> EventSink {
        EventSink {
            tx: None,
            text: Default::default(),
            held: Default::default(),
        }
    }

    /// Sends `event` to the receiver, if there is one still listening (or keeps it, in order,
    /// while events are held).
    pub fn send(&self, event: AgentEvent) {
        use std::sync::atomic::Ordering::SeqCst;
        let Some(tx) = &self.tx else {
            return;
        };
        if self.held.on.load(SeqCst) {
            let mut held = self
                .held
                .events
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if self.held.on.load(SeqCst) {
                held.push(event);
                return;
            }
        }
        let _ = tx.send(event);
    }

    /// Whether what is sent is held back now ([`EventSink::hold`]): for a run, that its step has
    /// not waited on anything since the run's last write.
    pub(crate) fn holding(&self) -> bool {
        self.held.on.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Holds back what is sent from now on, until [`EventSink::settle`]: what a step streams
    /// before the commit it must follow has landed (a step that has not waited yet; a drain or
    /// steps held for a later commit). The hold is the sink's, shared by its clones: a sink is
    /// one run's.
    pub(crate) fn hold(&self) {
        self.held
            .on
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Ends a hold: sends what was held back, in order, when the write it follows `landed`
    /// (else drops it: that write never happened); then sends the rest as it comes.
    pub(crate) fn settle(&self, landed: bool) {
        let mut held = self
            .held
            .events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let events = std::mem::take(&mut *held);
        if let (true, Some(tx)) = (landed, &self.tx) {
            for event in events {
                let _ = tx.send(event);
            }
        }
        // Cleared under the lock, after the held events went: a concurrent send waits for the
        // lock, then goes after them.
        self.held
            .on
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Sends a piece of a message's text (a blank line first when it opens a message after
    /// another's text).
    pub fn text(&self, delta: &str) {
        use std::sync::atomic::Ordering::SeqCst;
        if delta.is_empty() {
            return;
        }
        let opens = !self.text.open.swap(true, SeqCst);
        let after_other = opens && self.text.any.swap(true, SeqCst);
        let delta = if after_other {
            format!("\n\n{delta}")
        } else {
            delta.to_owned()
        };
        self.send(AgentEvent::Text { delta });
    }

    /// Ends the current message's text.
    pub fn end_text(&self) {
        self.text
            .open
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Reports a model call's tokens as the `usage` extension event (non-terminal: consumers
    /// that do not know it ignore it, relays pass it on).
    pub fn usage(&self, usage: &crate::types::Usage) {
        let mut event = serde_json::json!({"type": USAGE_EVENT});
        if let (serde_json::Value::Object(e), serde_json::Value::Object(u)) =
            (&mut event, serde_json::json!(usage))
        {
            e.extend(u);
        }
        self.send(AgentEvent::Other(event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_event_round_trips_with_the_protocols_field_names() {
        let cases = [
            (
                AgentEvent::Text { delta: "hi".into() },
                json!({"type": "text", "delta": "hi"}),
            ),
            (
                AgentEvent::Thinking { delta: "hm".into() },
                json!({"type": "thinking", "delta": "hm"}),
            ),
            (
                AgentEvent::ToolStarted {
                    id: "c1".into(),
                    name: "t".into(),
                    args: json!({"a": 1}),
                },
                json!({"type": "tool_started", "id": "c1", "name": "t", "args": {"a": 1}}),
            ),
            (
                AgentEvent::ToolEnded {
                    id: "c1".into(),
                    is_error: true,
                    content: json!("no"),
                },
                json!({"type": "tool_ended", "id": "c1", "isError": true, "content": "no"}),
            ),
            (
                AgentEvent::Retrying {
                    attempt: 1,
                    max_attempts: 3,
                    delay_ms: 500,
                    reason: "busy".into(),
                },
                json!({"type": "retrying", "attempt": 1, "maxAttempts": 3, "delayMs": 500, "reason": "busy"}),
            ),
            (
                AgentEvent::Completed { data: None },
                json!({"type": "completed"}),
            ),
            (
                AgentEvent::Completed {
                    data: Some(json!({"status": "idle"})),
                },
                json!({"type": "completed", "data": {"status": "idle"}}),
            ),
            (
                AgentEvent::Failed {
                    details: "x".into(),
                    retryable: true,
                    code: Some("session_busy".into()),
                },
                json!({"type": "failed", "details": "x", "retryable": true, "code": "session_busy"}),
            ),
        ];
        let future = json!({"type": "citation", "url": "https://example.org", "n": 1});
        let cases = cases
            .into_iter()
            .chain([(AgentEvent::Other(future.clone()), future)]);
        for (event, wire) in cases {
            assert_eq!(serde_json::to_value(&event).ok(), Some(wire.clone()));
            assert_eq!(serde_json::from_value::<AgentEvent>(wire).ok(), Some(event));
        }
        assert!(serde_json::from_value::<AgentEvent>(json!({"delta": "no type"})).is_err());
        assert!(
            serde_json::from_value::<AgentEvent>(json!({"type": "text"})).is_err(),
            "a known type keeps its shape"
        );
    }
}
