//! Reading a Chat Completions stream: `data:` events holding `chat.completion.chunk` objects,
//! then `data: [DONE]`.
//!
//! Lenient on purpose (every field optional, unknown ones ignored): `content` deltas are text,
//! `reasoning_content` (vLLM, DeepSeek, llama.cpp) or `reasoning` (newer vLLM, OpenRouter,
//! Ollama) deltas are thinking, tool-call deltas go to the [`Assembler`], the last `usage` seen
//! is the call's (servers send it once, at the end, or cumulatively). An `error` object inside
//! the stream (vLLM, OpenRouter) fails the attempt. The answer is complete at `[DONE]`, or at
//! the end of the body once a `finish_reason` was seen (servers that omit `[DONE]`); a body that
//! ends before either was cut off.

use duet_runtime::{ModelChunk, Usage};
use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::Value;

use crate::assemble::{Assembler, Delta};
use crate::http::{Decoder, Failure, json_detail};

#[derive(Deserialize, Default)]
#[serde(default)]
struct Chunk {
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Choice {
    index: Option<u64>,
    delta: Option<WireDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireDelta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireCall {
    index: Option<u64>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireFunction {
    name: Option<String>,
    /// Text, as OpenAI sends it; a server that sends an object has it written back as JSON.
    arguments: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

/// The state of one attempt's stream.
#[derive(Default)]
pub(crate) struct OpenAiDecoder {
    calls: Assembler,
    usage: Option<Usage>,
    finished: bool,
    /// The first choice's `finish_reason`.
    reason: Option<String>,
    done: bool,
}

impl OpenAiDecoder {
    pub(crate) fn new() -> Self {
        OpenAiDecoder::default()
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, event: &Event) -> Result<Vec<ModelChunk>, Failure> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            Failure::new(
                format!("the server sent an event that is not a completion chunk ({e})"),
                true,
            )
        })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(stream_error(&error));
        }
        let mut out = Vec::new();
        for choice in chunk.choices {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                let thinking = delta.reasoning_content.or(delta.reasoning);
                if let Some(t) = thinking.filter(|t| !t.is_empty()) {
                    out.push(ModelChunk::Thinking(t));
                }
                if let Some(t) = delta.content.filter(|t| !t.is_empty()) {
                    out.push(ModelChunk::Text(t));
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    let function = call.function.unwrap_or_default();
                    let arguments = match function.arguments {
                        Some(Value::String(s)) => Some(s),
                        Some(Value::Null) | None => None,
                        Some(other) => Some(other.to_string()),
                    };
                    self.calls.push(Delta {
                        index: call.index,
                        id: call.id.as_deref(),
                        name: function.name.as_deref(),
                        arguments: arguments.as_deref(),
                    });
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finished = true;
                self.reason.get_or_insert(reason);
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
                cached_tokens: u
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
                reasoning_tokens: u
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
            });
        }
        Ok(out)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn finish(&mut self) -> Result<Vec<ModelChunk>, Failure> {
        if !self.done && !self.finished {
            return Err(Failure::new(
                "the stream ended before the answer was complete",
                true,
            ));
        }
        let mut out = std::mem::take(&mut self.calls).finish();
        if let Some(u) = self.usage.take() {
            out.push(ModelChunk::Usage(u));
        }
        if let Some(reason) = self.reason.take() {
            out.push(ModelChunk::Finish(reason));
        }
        Ok(out)
    }
}

/// An error object sent inside a 200 stream: transient unless its code is a client error.
fn stream_error(error: &Value) -> Failure {
    let code = error.get("code").and_then(|c| {
        c.as_u64()
            .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
    });
    let retryable = code.is_none_or(|c| !(400..500).contains(&c) || c == 408 || c == 429);
    let detail = json_detail(error).unwrap_or_else(|| error.to_string());
    Failure::new(
        format!("the server reported an error mid-stream: {detail}"),
        retryable,
    )
}
