//! The runtime's spans, named and attributed in the OpenTelemetry GenAI semantic conventions:
//! `invoke_agent {agent}` for each step a side takes (a model step or a handler turn),
//! `chat {model}` for each model call, `execute_tool {tool}` for each tool call, `commit`
//! for each write of a run, and `timer {kind} {name}` for each firing of a due timer. They are plain `tracing` spans (target [`TARGET`]): they cost next to
//! nothing unless a subscriber wants them, and whoever composes the process decides what to do
//! with them (`duet serve` turns them into `/metrics`).
//!
//! The attribute names are this module's constants (the semantic-conventions crate marks the
//! `gen_ai.*` names as moved). `tracing`'s macros take a field name only as a literal, so each
//! span below spells them out, and a test checks that the spelling is the constants'.
//! Message contents are attributes only when the runtime was built to capture them
//! ([`crate::RuntimeBuilder::capture_content`]).
//!
//! A trace crosses a park, a restart or another process only through the store: a
//! [`TraceCarrier`] (given by whoever exports the spans) saves contexts as text, kept with queued
//! messages and parks.

use tracing::Span;
use tracing::field::Empty;

mod carrier;

pub(crate) use carrier::RunTrace;
pub use carrier::{TraceCarrier, saved_context};

/// The target every span here has.
pub const TARGET: &str = "duet::telemetry";

/// The span names (each span's `otel.name` adds the agent, model or tool).
pub mod span {
    /// A side's step: a model step or a handler turn.
    pub const INVOKE_AGENT: &str = "invoke_agent";
    /// A model call.
    pub const CHAT: &str = "chat";
    /// A tool call.
    pub const EXECUTE_TOOL: &str = "execute_tool";
    /// A write of a run (one transaction).
    pub const COMMIT: &str = "commit";
    /// A due timer fired (an effect run, a deadline acted on).
    pub const TIMER: &str = "timer";
}

/// The attribute names.
pub mod attr {
    /// `invoke_agent`, `chat` or `execute_tool`.
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// The provider of a model call (`openai`, `anthropic`, `scripted`, ...).
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// The model asked for.
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// Why the model stopped: `stop`, or `tool_calls` when it called tools.
    pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// Input tokens of a model call.
    pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Output tokens of a model call.
    pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// The thread (its stored key).
    pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// The agent a thread runs.
    pub const AGENT_NAME: &str = "gen_ai.agent.name";
    /// The tool called.
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    /// The tool call's id.
    pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// What went wrong, when something did.
    pub const ERROR_TYPE: &str = "error.type";
    /// The side acting (`a` or `b`).
    pub const SIDE: &str = "duet.side";
    /// The model definition a call used (a model has a name of its own and a provider model).
    pub const MODEL_DEFINITION: &str = "duet.model";
    /// Milliseconds from a model call's start to its first chunk.
    pub const TIME_TO_FIRST_TOKEN_MS: &str = "duet.time_to_first_token_ms";
    /// Retries a model call made.
    pub const RETRIES: &str = "duet.retries";
    /// A commit's outcome: `committed` or `lease_lost`.
    pub const OUTCOME: &str = "duet.outcome";
    /// Turns a commit completed.
    pub const TURNS: &str = "duet.turns";
    /// A timer's kind: `effect` or `deadline`.
    pub const TIMER_KIND: &str = "duet.timer.kind";
    /// A timer's name: the effect's, or the deadline's action.
    pub const TIMER_NAME: &str = "duet.timer.name";
    /// A timer's id.
    pub const TIMER_ID: &str = "duet.timer.id";
    /// Which attempt a firing is (1 for the first).
    pub const TIMER_ATTEMPT: &str = "duet.timer.attempt";
    /// How late a timer fired: milliseconds from its due time to its firing.
    pub const TIMER_LATENESS_MS: &str = "duet.timer.lateness_ms";
    /// The span's name as OpenTelemetry shows it.
    pub const OTEL_NAME: &str = "otel.name";
    /// A model call's system prompt (only with content capture on).
    pub const SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
    /// The messages a model call sent, as JSON (only with content capture on).
    pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// What the model answered, as JSON (only with content capture on).
    pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
}

/// The span of a side's step on thread `conversation` of `agent`.
pub(crate) fn invoke_agent(agent: &str, conversation: &str, side: &str) -> Span {
    tracing::info_span!(
        target: "duet::telemetry",
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {agent}"),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = agent,
        gen_ai.conversation.id = conversation,
        duet.side = side,
        error.type = Empty,
    )
}

/// The span of a call of model definition `definition` (provider `provider`, model `model`).
pub(crate) fn chat(definition: &str, provider: &str, model: &str) -> Span {
    tracing::info_span!(
        target: "duet::telemetry",
        "chat",
        otel.name = %format_args!("chat {model}"),
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        duet.model = definition,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        duet.time_to_first_token_ms = Empty,
        duet.retries = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
    )
}

/// Records on `span` (a `chat` span) what a model call sent: its system prompt and messages, in
/// the GenAI conventions' shape (`[{role, parts: [{type, content}]}]`).
pub(crate) fn record_input(span: &Span, system: &str, messages: &[crate::model::ChatMessage]) {
    let input: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| {
            let mut parts = Vec::new();
            if let Some(text) = &m.content {
                let kind = if m.tool_call_id.is_some() { "tool_call_response" } else { "text" };
                parts.push(serde_json::json!({"type": kind, "content": text}));
            }
            for c in &m.tool_calls {
                parts.push(serde_json::json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}));
            }
            serde_json::json!({"role": m.role.as_str(), "parts": parts})
        })
        .collect();
    span.record(attr::SYSTEM_INSTRUCTIONS, system);
    span.record(
        attr::INPUT_MESSAGES,
        serde_json::Value::Array(input).to_string(),
    );
}

/// Records on `span` (a `chat` span) what the model answered: its text and tool calls.
pub(crate) fn record_output(
    span: &Span,
    text: &str,
    calls: &[(Option<String>, String, serde_json::Value)],
) {
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(serde_json::json!({"type": "text", "content": text}));
    }
    for (id, name, arguments) in calls {
        parts.push(serde_json::json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments}));
    }
    let output = serde_json::json!([{"role": "assistant", "parts": parts}]);
    span.record(attr::OUTPUT_MESSAGES, output.to_string());
}

/// The span of tool call `call_id` of `tool`.
pub(crate) fn execute_tool(tool: &str, call_id: &str) -> Span {
    tracing::info_span!(
        target: "duet::telemetry",
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        error.type = Empty,
    )
}

/// The span of a commit of thread `conversation`.
pub(crate) fn commit(conversation: &str) -> Span {
    tracing::info_span!(
        target: "duet::telemetry",
        "commit",
        gen_ai.conversation.id = conversation,
        duet.outcome = Empty,
        duet.turns = Empty,
        error.type = Empty,
    )
}

/// The span of a firing of `timer`, `lateness_ms` after it fell due. Its `duet.outcome` is
/// recorded at the end: `completed`, `retried`, `failed`, `deferred`, or `lost` (another process
/// holds it now).
pub(crate) fn timer(timer: &crate::store::Timer, lateness_ms: i64) -> Span {
    let kind = timer.kind.as_str();
    tracing::info_span!(
        target: "duet::telemetry",
        "timer",
        otel.name = %format_args!("timer {kind} {}", timer.name),
        duet.timer.kind = kind,
        duet.timer.name = timer.name.as_str(),
        duet.timer.id = %timer.id,
        duet.timer.attempt = timer.attempts,
        duet.timer.lateness_ms = lateness_ms.max(0),
        duet.outcome = Empty,
        error.type = Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each span's fields are spelled as the constants say (a typo would be a new attribute).
    #[test]
    fn the_spans_fields_are_the_constants() {
        let names: Vec<&str> = vec![
            attr::OPERATION_NAME,
            attr::PROVIDER_NAME,
            attr::REQUEST_MODEL,
            attr::RESPONSE_FINISH_REASONS,
            attr::USAGE_INPUT_TOKENS,
            attr::USAGE_OUTPUT_TOKENS,
            attr::CONVERSATION_ID,
            attr::AGENT_NAME,
            attr::TOOL_NAME,
            attr::TOOL_CALL_ID,
            attr::ERROR_TYPE,
            attr::SIDE,
            attr::MODEL_DEFINITION,
            attr::TIME_TO_FIRST_TOKEN_MS,
            attr::RETRIES,
            attr::OUTCOME,
            attr::TURNS,
            attr::OTEL_NAME,
            attr::SYSTEM_INSTRUCTIONS,
            attr::INPUT_MESSAGES,
            attr::OUTPUT_MESSAGES,
            attr::TIMER_KIND,
            attr::TIMER_NAME,
            attr::TIMER_ID,
            attr::TIMER_ATTEMPT,
            attr::TIMER_LATENESS_MS,
        ];
        // A subscriber that wants everything, so the spans have metadata to read.
        let subscriber = tracing_subscriber_free::Everything;
        let t = crate::store::Timer {
            id: uuid::Uuid::nil(),
            thread: uuid::Uuid::nil(),
            kind: crate::store::TimerKind::Effect,
            name: "e".to_owned(),
            args: serde_json::json!({}),
            subject: None,
            due_at: 0,
            created_at: 0,
            status: crate::store::TimerStatus::Processing,
            attempts: 1,
            max_attempts: 1,
            last_error: None,
            updated_at: 0,
            claimed_by: None,
            claimed_until: None,
        };
        tracing::subscriber::with_default(subscriber, || {
            for (span, name) in [
                (invoke_agent("a", "k", "a"), span::INVOKE_AGENT),
                (chat("d", "p", "m"), span::CHAT),
                (execute_tool("t", "c"), span::EXECUTE_TOOL),
                (commit("k"), span::COMMIT),
                (timer(&t, 5), span::TIMER),
            ] {
                let meta = span.metadata().expect("an enabled span");
                assert_eq!(meta.name(), name);
                assert_eq!(meta.target(), TARGET);
                for field in meta.fields() {
                    assert!(
                        names.contains(&field.name()),
                        "{name}: `{}` is not a constant",
                        field.name()
                    );
                }
            }
        });
    }

    /// The smallest subscriber that enables every span (the runtime does not depend on
    /// `tracing-subscriber`).
    mod tracing_subscriber_free {
        use tracing::span::{Attributes, Id, Record};
        use tracing::{Event, Metadata, Subscriber};

        pub(super) struct Everything;

        impl Subscriber for Everything {
            fn enabled(&self, _: &Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &Attributes<'_>) -> Id {
                Id::from_u64(1)
            }
            fn record(&self, _: &Id, _: &Record<'_>) {}
            fn record_follows_from(&self, _: &Id, _: &Id) {}
            fn event(&self, _: &Event<'_>) {}
            fn enter(&self, _: &Id) {}
            fn exit(&self, _: &Id) {}
        }
    }
}
