//! One model call of a step: its answer gathered while its text and thinking stream to the
//! caller live (the message itself is committed at the step's end, before its tool calls run),
//! its retries announced, its usage and provider data kept for the message.

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::event::{AgentEvent, EventSink};
use crate::model::{Model, ModelChunk, ModelError, ModelRequest};
use crate::plan::ModelAnswer as Answer;
use crate::telemetry::attr;

/// The `chat` span of a call of model definition `name` (its provider and provider model).
pub(super) fn span(project: &duet_spec::Project, name: &str) -> tracing::Span {
    match project.models.get(name).map(|d| &d.def) {
        Some(def) => crate::telemetry::chat(name, &def.provider, &def.model),
        None => crate::telemetry::chat(name, "", name),
    }
}

/// Calls `model` inside its [`span`] (whose attributes it records: time to first token, retries,
/// finish reason, tokens), streaming thinking and (when `live_text`) text to `events` as they
/// come; `Ok(None)` when the run was cancelled meanwhile (dropping the stream closes the
/// provider's request).
pub(super) async fn call(
    model: &dyn Model,
    request: ModelRequest,
    cancel: &CancellationToken,
    events: &EventSink,
    live_text: bool,
) -> Result<Option<Answer>, ModelError> {
    let span = tracing::Span::current();
    let started = std::time::Instant::now();
    let mut first = true;
    let mut retries = 0u32;
    let mut finish: Option<String> = None;
    let mut stream = model.stream(request);
    let mut answer = Answer::default();
    let outcome = loop {
        let chunk = tokio::select! {
            () = cancel.cancelled() => break Ok(None),
            chunk = stream.next() => chunk,
        };
        if first
            && matches!(
                chunk,
                Some(Ok(ModelChunk::Text(_)
                    | ModelChunk::Thinking(_)
                    | ModelChunk::ToolCall { .. }))
            )
        {
            first = false;
            span.record(
                attr::TIME_TO_FIRST_TOKEN_MS,
                started.elapsed().as_secs_f64() * 1000.0,
            );
        }
        match chunk {
            None => break Ok(Some(())),
            Some(Ok(ModelChunk::Text(mut s))) => {
                // Streamed as it will be stored (`crate::nul`).
                crate::nul::replace(&mut s);
                if live_text {
                    events.text(&s);
                }
                answer.text.push_str(&s);
            }
            Some(Ok(ModelChunk::Thinking(mut s))) => {
                crate::nul::replace(&mut s);
                if !s.is_empty() {
                    events.send(AgentEvent::Thinking { delta: s.clone() });
                }
                answer.thinking.push_str(&s);
            }
            Some(Ok(ModelChunk::ToolCall {
                id,
                name,
                arguments,
            })) => answer.calls.push((id, name, arguments)),
            Some(Ok(ModelChunk::ProviderData(data))) => match &mut answer.provider_data {
                Some(kept) => merge(kept, data),
                None => answer.provider_data = Some(data),
            },
            Some(Ok(ModelChunk::Usage(u))) => {
                answer.usage = Some(answer.usage.unwrap_or_default().plus(u));
            }
            Some(Ok(ModelChunk::Finish(reason))) => finish = Some(reason),
            Some(Ok(ModelChunk::Retrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            })) => {
                retries += 1;
                span.record(attr::RETRIES, retries);
                events.send(AgentEvent::Retrying {
                    attempt,
                    max_attempts,
                    delay_ms,
                    reason,
                });
            }
            Some(Err(e)) => break Err(e),
        }
    };
    events.end_text();
    match &outcome {
        Ok(Some(())) => {
            let finish = finish.as_deref().unwrap_or(if answer.calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            });
            span.record(attr::RESPONSE_FINISH_REASONS, finish);
            if let Some(u) = &answer.usage {
                span.record(attr::USAGE_INPUT_TOKENS, u.input_tokens);
                span.record(attr::USAGE_OUTPUT_TOKENS, u.output_tokens);
            }
        }
        Ok(None) => {
            span.record(attr::ERROR_TYPE, "cancelled");
        }
        Err(_) => {
            span.record(attr::ERROR_TYPE, "model_error");
        }
    }
    match outcome {
        Ok(Some(())) => Ok(Some(answer)),
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Merges `more` into `kept`: objects key by key, arrays appended, anything else replaced.
pub(super) fn merge(kept: &mut Value, more: Value) {
    match (kept, more) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => a.extend(b),
        (kept, more) => *kept = more,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provider_data_merges_objects_and_appends_arrays() {
        let mut kept = json!({"anthropic": {"blocks": [1]}, "x": 1});
        merge(
            &mut kept,
            json!({"anthropic": {"blocks": [2], "y": true}, "x": 2}),
        );
        assert_eq!(
            kept,
            json!({"anthropic": {"blocks": [1, 2], "y": true}, "x": 2})
        );
    }
}
