//! The `scripted` provider: plays a model definition's `script` — one entry per model call,
//! per thread, in call order — so examples, tests and benchmarks run offline and
//! deterministically.

use std::sync::Arc;

use duet_runtime::{Model, ModelChunk, ModelError, ModelRequest, Provider};
use duet_spec::ScriptEntry;
use futures::stream::{self, BoxStream, StreamExt};

/// The `scripted` provider.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scripted;

impl Provider for Scripted {
    fn model(&self, definition: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        Ok(Arc::new(ScriptedModel {
            name: definition.name.clone(),
            script: Arc::new(definition.script.clone()),
        }))
    }
}

/// A model that answers call `n` of a thread with `script[n]`. The call index comes from the
/// thread's committed history, so the position survives restarts; a model call that was never
/// committed (a crash mid-step) is answered the same way again.
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    name: String,
    script: Arc<Vec<ScriptEntry>>,
}

impl Model for ScriptedModel {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        let Some(entry) = self.script.get(request.call_index) else {
            let error = ModelError::new(
                format!(
                    "script exhausted: scripted model `{}` has {} entries and this thread is making call {}",
                    self.name,
                    self.script.len(),
                    request.call_index + 1
                ),
                false,
            );
            return stream::once(async move { Err(error) }).boxed();
        };
        let mut chunks = Vec::new();
        if let Some(t) = &entry.thinking {
            chunks.push(Ok(ModelChunk::Thinking(t.clone())));
        }
        if let Some(t) = &entry.text {
            chunks.push(Ok(ModelChunk::Text(t.clone())));
        }
        for call in &entry.tool_calls {
            chunks.push(Ok(ModelChunk::ToolCall {
                id: None,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }));
        }
        let output = entry.text.as_ref().map_or(0, |t| t.len() / 4) as u64;
        chunks.push(Ok(ModelChunk::Usage(duet_runtime::Usage {
            output_tokens: output,
            ..Default::default()
        })));
        match entry.delay_ms {
            Some(ms) => {
                let delay = std::time::Duration::from_millis(u64::from(ms));
                stream::once(tokio::time::sleep(delay))
                    .flat_map(move |()| stream::iter(chunks.clone()))
                    .boxed()
            }
            None => stream::iter(chunks).boxed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_spec::ScriptToolCall;

    fn request(call_index: usize) -> ModelRequest {
        ModelRequest {
            thread: uuid::Uuid::nil(),
            call_index,
            system: String::new(),
            messages: vec![],
            tools: vec![],
            tool_choice: duet_spec::ToolChoice::Auto,
            parallel_tool_calls: None,
            reasoning: None,
            provider_options: Default::default(),
        }
    }

    #[tokio::test]
    async fn plays_the_entry_at_the_call_index_then_fails() {
        let model = ScriptedModel {
            name: "demo".into(),
            script: Arc::new(vec![
                ScriptEntry {
                    text: Some("one".into()),
                    ..ScriptEntry::default()
                },
                ScriptEntry {
                    text: None,
                    thinking: Some("hm".into()),
                    tool_calls: vec![ScriptToolCall {
                        name: "t".into(),
                        arguments: serde_json::json!({"a": 1}),
                    }],
                    delay_ms: Some(1),
                },
            ]),
        };
        let second: Vec<_> = model.stream(request(1)).collect().await;
        assert_eq!(
            second[0].as_ref().ok(),
            Some(&ModelChunk::Thinking("hm".into()))
        );
        assert!(matches!(second[1].as_ref(), Ok(ModelChunk::ToolCall { name, .. }) if name == "t"));
        let third: Vec<_> = model.stream(request(2)).collect().await;
        let err = third[0]
            .as_ref()
            .err()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert!(
            err.contains("script exhausted") && err.contains("call 3"),
            "{err}"
        );
    }
}
