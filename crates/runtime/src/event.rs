//! What a caller sees of a run: the Agent Handler protocol's seven event types
//! (`shared/seeds/000`, §5), serialised with the protocol's field names.

use serde::{Deserialize, Serialize};

/// One event of a run's stream. `completed` and `failed` are terminal: exactly one ends a stream
/// consumed to its end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
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
        #[serde(skip_serializing_if = "Option::is_none")]
        data: Option<serde_json::Value>,
    },
    Failed {
        details: String,
        retryable: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
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
#[derive(Clone, Debug)]
pub struct EventSink(Option<tokio::sync::mpsc::UnboundedSender<AgentEvent>>);

impl EventSink {
    /// A sink and the receiver its events arrive on.
    pub fn channel() -> (EventSink, tokio::sync::mpsc::UnboundedReceiver<AgentEvent>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (EventSink(Some(tx)), rx)
    }

    /// A sink that drops everything.
    pub fn discard() -> EventSink {
        EventSink(None)
    }

    pub fn send(&self, event: AgentEvent) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(event);
        }
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
        for (event, wire) in cases {
            assert_eq!(serde_json::to_value(&event).ok(), Some(wire.clone()));
            assert_eq!(serde_json::from_value::<AgentEvent>(wire).ok(), Some(event));
        }
    }
}
