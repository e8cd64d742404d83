//! Reading a Messages API stream: `message_start`, then per content block
//! `content_block_start` / `content_block_delta` / `content_block_stop`, then `message_delta`
//! and `message_stop`; `ping` anywhere; `error` (`overloaded_error` after a 200) ends it.
//!
//! Text and thinking deltas stream as they come. A `tool_use` block is a call once it stops (its
//! `input_json_delta` pieces joined and parsed). Thinking blocks with their signatures, and
//! redacted thinking, are kept whole and given at the end as provider data
//! `{"anthropic": {"blocks": [...]}}`, with the usage: input from `message_start` (cache reads
//! and writes included), output from the last `message_delta` (it counts cumulatively).

use std::collections::BTreeMap;

use duet_runtime::{ModelChunk, Usage};
use eventsource_stream::Event;
use serde_json::{Value, json};

use crate::assemble::parse_arguments;
use crate::http::{Decoder, Failure, json_detail};

enum Block {
    Text,
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(Value),
    ToolUse {
        id: String,
        name: String,
        input: Value,
        json: String,
    },
    Other,
}

/// The state of one attempt's stream.
#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    blocks: BTreeMap<u64, Block>,
    kept: Vec<Value>,
    input: u64,
    cached: u64,
    output: u64,
    started: bool,
    stopped: bool,
    /// `message_delta`'s `stop_reason`.
    reason: Option<String>,
}

impl AnthropicDecoder {
    pub(crate) fn new() -> Self {
        AnthropicDecoder::default()
    }

    fn usage(&mut self, usage: &Value) {
        let n = |k: &str| usage.get(k).and_then(Value::as_u64);
        if let Some(i) = n("input_tokens") {
            let cache_read = n("cache_read_input_tokens").unwrap_or(0);
            let cache_write = n("cache_creation_input_tokens").unwrap_or(0);
            self.input = i + cache_read + cache_write;
            self.cached = cache_read;
        }
        if let Some(o) = n("output_tokens") {
            self.output = o;
        }
    }

    fn block_start(&mut self, index: u64, b: &Value, out: &mut Vec<ModelChunk>) {
        let block = match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t = text(b, "text");
                if !t.is_empty() {
                    out.push(ModelChunk::Text(t));
                }
                Block::Text
            }
            Some("thinking") => {
                let thinking = text(b, "thinking");
                if !thinking.is_empty() {
                    out.push(ModelChunk::Thinking(thinking.clone()));
                }
                Block::Thinking {
                    thinking,
                    signature: text(b, "signature"),
                }
            }
            Some("redacted_thinking") => Block::Redacted(b.clone()),
            Some("tool_use") => Block::ToolUse {
                id: text(b, "id"),
                name: text(b, "name"),
                input: b.get("input").cloned().unwrap_or(Value::Null),
                json: String::new(),
            },
            _ => Block::Other,
        };
        self.blocks.insert(index, block);
    }

    fn block_delta(&mut self, index: u64, d: &Value, out: &mut Vec<ModelChunk>) {
        let block = self.blocks.get_mut(&index);
        match (d.get("type").and_then(Value::as_str), block) {
            (Some("text_delta"), _) => {
                let t = text(d, "text");
                if !t.is_empty() {
                    out.push(ModelChunk::Text(t));
                }
            }
            (Some("thinking_delta"), block) => {
                let t = text(d, "thinking");
                if let Some(Block::Thinking { thinking, .. }) = block {
                    thinking.push_str(&t);
                }
                if !t.is_empty() {
                    out.push(ModelChunk::Thinking(t));
                }
            }
            (Some("signature_delta"), Some(Block::Thinking { signature, .. })) => {
                signature.push_str(&text(d, "signature"));
            }
            (Some("input_json_delta"), Some(Block::ToolUse { json, .. })) => {
                json.push_str(&text(d, "partial_json"));
            }
            _ => {}
        }
    }

    fn block_stop(&mut self, index: u64, out: &mut Vec<ModelChunk>) {
        match self.blocks.remove(&index) {
            Some(Block::Thinking {
                thinking,
                signature,
            }) => {
                self.kept.push(
                    json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                );
            }
            Some(Block::Redacted(b)) => self.kept.push(b),
            Some(Block::ToolUse {
                id,
                name,
                input,
                json,
            }) => {
                let arguments = if json.trim().is_empty() && input.is_object() {
                    input
                } else {
                    parse_arguments(&json)
                };
                out.push(ModelChunk::ToolCall {
                    id: Some(id).filter(|i| !i.is_empty()),
                    name,
                    arguments,
                });
            }
            Some(Block::Text | Block::Other) | None => {}
        }
    }
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, event: &Event) -> Result<Vec<ModelChunk>, Failure> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            Failure::new(
                format!("the server sent an event that is not JSON ({e})"),
                true,
            )
        })?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(u) = v.pointer("/message/usage") {
                    self.usage(u);
                }
            }
            "content_block_start" => {
                let b = v.get("content_block").cloned().unwrap_or(Value::Null);
                self.block_start(index, &b, &mut out);
            }
            "content_block_delta" => {
                let d = v.get("delta").cloned().unwrap_or(Value::Null);
                self.block_delta(index, &d, &mut out);
            }
            "content_block_stop" => self.block_stop(index, &mut out),
            "message_delta" => {
                if let Some(u) = v.get("usage") {
                    self.usage(u);
                }
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.reason = Some(reason.to_owned());
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let kind = v.pointer("/error/type").and_then(Value::as_str);
                let retryable = matches!(
                    kind,
                    Some("overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error")
                );
                let detail = json_detail(&v).unwrap_or_else(|| data.to_owned());
                return Err(Failure::new(
                    format!("the stream reported an error: {detail}"),
                    retryable,
                ));
            }
            _ => {}
        }
        Ok(out)
    }

    fn done(&self) -> bool {
        self.stopped
    }

    fn finish(&mut self) -> Result<Vec<ModelChunk>, Failure> {
        if !self.stopped {
            return Err(Failure::new(
                "the stream ended before `message_stop`: the answer was cut off",
                true,
            ));
        }
        let mut out = Vec::new();
        if !self.kept.is_empty() {
            let blocks = std::mem::take(&mut self.kept);
            out.push(ModelChunk::ProviderData(
                json!({"anthropic": {"blocks": blocks}}),
            ));
        }
        if self.started {
            out.push(ModelChunk::Usage(Usage {
                input_tokens: self.input,
                output_tokens: self.output,
                cached_tokens: self.cached,
                reasoning_tokens: 0,
            }));
        }
        if let Some(reason) = self.reason.take() {
            out.push(ModelChunk::Finish(reason));
        }
        Ok(out)
    }
}
