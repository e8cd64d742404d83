//! Cassettes: recorded wire traffic as data, one folder each under `tests/cassettes/`.
//!
//! - `cassette.json`: `about` (what it shows, where its shape comes from), `provider` (`type`,
//!   optional `headers`, `timeoutMs`, `maxAttempts`), `model` (`model`, optional
//!   `maxOutputTokens`, `providerOptions`), and `calls`: the model calls made in order, each a
//!   `request` (`system`, `messages`, `tools`, `toolChoice`, `parallelToolCalls`, `reasoning`,
//!   `providerOptions`). A message `{"fromCall": N}` is the assistant message call N produced,
//!   merged from its chunks as the runtime merges them (provider data included).
//! - `NN.request.json`: the HTTP request the NN-th exchange expects: `method`, `path`,
//!   `headers` (those that must match), `body` (matched whole).
//! - `NN.response.sse` (or `.json`, `.txt`): the exact response bytes. They are sent one SSE
//!   event at a time, and also split wherever the text holds `<<CUT>>`; at `<<DROP>>` the
//!   connection breaks, at `<<HOLD>>` the body stalls forever.
//! - `NN.response.meta.json` (optional): `status` (default 200), `headers`, `delayMs`.
//! - `expected.json`: for each call, the chunks it gives (the last may be `{"error": ...}`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use duet_models::{Anthropic, ApiKey, OpenAi, ProviderConfig, RetryPolicy};
use duet_runtime::{
    ChatMessage, Model, ModelChunk, ModelError, ModelRequest, Provider, Role, ToolCall, ToolSpec,
};
use duet_spec::{Capabilities, ModelDef, ProviderType, Reasoning, ToolChoice};
use serde_json::{Map, Value, json};

use super::server::{Exchange, Piece};

/// The key every cassette's provider is given; it must never appear in any output.
pub const KEY: &str = "test-key-5f1d0c9a7e";

/// A cassette, loaded.
pub struct Cassette {
    pub name: String,
    pub dir: PathBuf,
    pub spec: Value,
    pub exchanges: Vec<Exchange>,
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every cassette folder, sorted.
pub fn all(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("tests/cassettes")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

impl Cassette {
    pub fn load(dir: &Path) -> Cassette {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let spec = json_file(&dir.join("cassette.json"));
        let mut numbers: Vec<String> = std::fs::read_dir(dir)
            .expect("cassette folder")
            .flatten()
            .filter_map(|e| {
                let file = e.file_name().to_string_lossy().into_owned();
                file.strip_suffix(".request.json").map(str::to_owned)
            })
            .collect();
        numbers.sort();
        let exchanges = numbers.iter().map(|n| exchange(dir, &name, n)).collect();
        Cassette {
            name,
            dir: dir.to_owned(),
            spec,
            exchanges,
        }
    }

    /// The model this cassette's provider serves, pointed at `base`.
    pub fn model(&self, base: &str) -> Arc<dyn Model> {
        let p = &self.spec["provider"];
        let provider_type = match p["type"].as_str() {
            Some("anthropic") => ProviderType::Anthropic,
            _ => ProviderType::Openai,
        };
        let base_url = match provider_type {
            ProviderType::Openai => format!("{base}/v1"),
            ProviderType::Anthropic => base.to_owned(),
        };
        let mut config = ProviderConfig::new(
            provider_type.as_str(),
            provider_type,
            &base_url,
            Some(ApiKey::new(KEY)),
        );
        if let Some(h) = p["headers"].as_object() {
            for (k, v) in h {
                config
                    .headers
                    .insert(k.clone(), v.as_str().unwrap_or_default().to_owned());
            }
        }
        if let Some(ms) = p["timeoutMs"].as_u64() {
            config.timeout = Duration::from_millis(ms);
        }
        // Small, exact waits: the delays in `expected.json` are these.
        config.retry = RetryPolicy {
            max_attempts: p["maxAttempts"].as_u64().map_or(3, |n| n as u32),
            base_delay: Duration::from_millis(2),
            max_delay: Duration::from_millis(50),
            max_retry_after: Duration::from_millis(50),
            jitter: false,
        };
        let m = &self.spec["model"];
        let def = ModelDef {
            name: "cassette".into(),
            provider: provider_type.as_str().into(),
            inline_provider: None,
            model: m["model"].as_str().unwrap_or("model").into(),
            fallbacks: vec![],
            included_providers: vec![],
            input_price: None,
            output_price: None,
            cached_price: None,
            capabilities: Capabilities {
                max_output_tokens: m["maxOutputTokens"].as_u64().map(|n| n as u32),
                ..Capabilities::default()
            },
            provider_options: m["providerOptions"]
                .as_object()
                .cloned()
                .unwrap_or_default(),
            provider_tools: vec![],
            script: vec![],
        };
        let built = match provider_type {
            ProviderType::Openai => OpenAi::new(config).model(&def),
            ProviderType::Anthropic => Anthropic::new(config).model(&def),
        };
        built.expect("a model")
    }

    /// The calls to make.
    pub fn calls(&self) -> Vec<Value> {
        self.spec["calls"].as_array().cloned().unwrap_or_default()
    }
}

fn exchange(dir: &Path, cassette: &str, n: &str) -> Exchange {
    let request = json_file(&dir.join(format!("{n}.request.json")));
    let meta_path = dir.join(format!("{n}.response.meta.json"));
    let meta = if meta_path.exists() {
        json_file(&meta_path)
    } else {
        json!({})
    };
    let (bytes, content_type) = ["sse", "json", "txt"]
        .iter()
        .find_map(|ext| {
            let path = dir.join(format!("{n}.response.{ext}"));
            let kind = match *ext {
                "sse" => "text/event-stream",
                "json" => "application/json",
                _ => "text/plain",
            };
            path.exists().then(|| (read(&path), kind))
        })
        .unwrap_or_else(|| panic!("{cassette}: exchange {n} has no response file"));
    let mut response_headers = vec![("content-type".to_owned(), content_type.to_owned())];
    if let Some(h) = meta["headers"].as_object() {
        for (k, v) in h {
            response_headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            response_headers.push((k.clone(), v.as_str().unwrap_or_default().to_owned()));
        }
    }
    let headers: BTreeMap<String, String> = request["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .map(|(k, v)| {
                    (
                        k.to_ascii_lowercase(),
                        v.as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Exchange {
        name: format!("{cassette}/{n}"),
        method: request["method"].as_str().unwrap_or("POST").to_owned(),
        path: request["path"].as_str().unwrap_or("/").to_owned(),
        headers,
        body: request["body"].clone(),
        status: meta["status"].as_u64().map_or(200, |s| s as u16),
        response_headers,
        pieces: pieces(&bytes),
        delay: Duration::from_millis(meta["delayMs"].as_u64().unwrap_or(0)),
    }
}

/// The response text as pieces: one per SSE event, split again at `<<CUT>>`, ending at
/// `<<DROP>>` or `<<HOLD>>`.
fn pieces(text: &str) -> Vec<Piece> {
    let stop = [("<<DROP>>", Piece::Drop), ("<<HOLD>>", Piece::Hold)]
        .into_iter()
        .filter_map(|(m, p)| text.find(m).map(|i| (i, p)))
        .min_by_key(|(i, _)| *i);
    let (body, end) = match stop {
        Some((i, p)) => (&text[..i], Some(p)),
        None => (text, None),
    };
    let mut out = Vec::new();
    for cut in body.split("<<CUT>>") {
        let mut event = cut;
        while let Some(i) = event.find("\n\n") {
            out.push(Piece::Bytes(event.as_bytes()[..i + 2].to_vec()));
            event = &event[i + 2..];
        }
        if !event.is_empty() {
            out.push(Piece::Bytes(event.as_bytes().to_vec()));
        }
    }
    out.extend(end);
    out
}

fn role(s: &str) -> Role {
    match s {
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        "system" => Role::System,
        _ => Role::User,
    }
}

/// The request `call` describes; `{"fromCall": N}` messages come from `outputs[N]`.
pub fn request(call: &Value, outputs: &[Vec<Value>]) -> ModelRequest {
    let r = &call["request"];
    let messages = r["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| match m["fromCall"].as_u64() {
                    Some(n) => assistant_from(&outputs[n as usize]),
                    None => message(m),
                })
                .collect()
        })
        .unwrap_or_default();
    let tools = r["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| ToolSpec {
                    name: t["name"].as_str().unwrap_or_default().into(),
                    description: t["description"].as_str().unwrap_or_default().into(),
                    parameters: t["parameters"].clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    ModelRequest {
        thread: uuid::Uuid::nil(),
        call_index: 0,
        system: r["system"].as_str().unwrap_or_default().into(),
        messages,
        tools,
        tool_choice: match r["toolChoice"].as_str() {
            Some("none") => ToolChoice::None,
            Some("required") => ToolChoice::Required,
            _ => ToolChoice::Auto,
        },
        parallel_tool_calls: r["parallelToolCalls"].as_bool(),
        reasoning: r.get("reasoning").map(|x| Reasoning {
            effort: x["effort"].as_str().map(str::to_owned),
            max_tokens: x["maxTokens"].as_u64().map(|n| n as u32),
            include: x["include"].as_bool(),
            exclude: x["exclude"].as_bool(),
        }),
        provider_options: r["providerOptions"]
            .as_object()
            .cloned()
            .unwrap_or_default(),
    }
}

fn message(m: &Value) -> ChatMessage {
    let s = |k: &str| m[k].as_str().map(str::to_owned);
    ChatMessage {
        role: role(m["role"].as_str().unwrap_or("user")),
        content: s("content"),
        tool_calls: m["toolCalls"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| ToolCall {
                        id: c["id"].as_str().unwrap_or_default().into(),
                        name: c["name"].as_str().unwrap_or_default().into(),
                        arguments: c["arguments"].clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        tool_call_id: s("toolCallId"),
        name: s("name"),
        is_error: m["isError"].as_bool().unwrap_or(false),
        thinking: s("thinking"),
        provider_data: m.get("providerData").cloned(),
        images: m["images"]
            .as_array()
            .map(|is| {
                is.iter()
                    .map(|i| duet_runtime::ImageRef {
                        mime_type: i["mimeType"].as_str().unwrap_or_default().into(),
                        data: i["data"].as_str().unwrap_or_default().into(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        documents: m["documents"]
            .as_array()
            .map(|ds| {
                ds.iter()
                    .map(|d| duet_runtime::DocumentRef {
                        path: d["path"].as_str().unwrap_or_default().into(),
                        mime_type: d["mimeType"].as_str().unwrap_or_default().into(),
                        size: d["size"].as_i64().unwrap_or_default(),
                        data: d["data"].as_str().unwrap_or_default().into(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        attachments: Vec::new(),
    }
}

/// The assistant message a call's chunks make, merged as the runtime merges them: text and
/// thinking joined, calls in order (a made-up id where none came), provider data merged.
fn assistant_from(chunks: &[Value]) -> ChatMessage {
    let mut text = String::new();
    let mut thinking = String::new();
    let mut calls = Vec::new();
    let mut data = Value::Null;
    for c in chunks {
        if let Some(t) = c["text"].as_str() {
            text.push_str(t);
        }
        if let Some(t) = c["thinking"].as_str() {
            thinking.push_str(t);
        }
        if let Some(call) = c.get("toolCall") {
            calls.push(ToolCall {
                id: call["id"]
                    .as_str()
                    .map_or_else(|| format!("made_up_{}", calls.len()), str::to_owned),
                name: call["name"].as_str().unwrap_or_default().into(),
                arguments: call["arguments"].clone(),
            });
        }
        if let Some(d) = c.get("providerData") {
            merge(&mut data, d);
        }
    }
    ChatMessage {
        role: Role::Assistant,
        content: (!text.is_empty()).then_some(text),
        tool_calls: calls,
        tool_call_id: None,
        name: None,
        is_error: false,
        thinking: (!thinking.is_empty()).then_some(thinking),
        provider_data: (!data.is_null()).then_some(data),
        images: Vec::new(),
        documents: Vec::new(),
        attachments: Vec::new(),
    }
}

/// The runtime's merge of provider data: objects key by key, arrays appended.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (Value::Array(a), Value::Array(b)) => a.extend(b.iter().cloned()),
        (slot, v) => *slot = v.clone(),
    }
}

/// A chunk (or the error ending a call) as `expected.json` writes it.
pub fn chunk_json(item: &Result<ModelChunk, ModelError>) -> Value {
    match item {
        Ok(ModelChunk::Text(t)) => json!({"text": t}),
        Ok(ModelChunk::Thinking(t)) => json!({"thinking": t}),
        Ok(ModelChunk::ToolCall {
            id,
            name,
            arguments,
        }) => json!({"toolCall": {"id": id, "name": name, "arguments": arguments}}),
        Ok(ModelChunk::ProviderData(d)) => json!({"providerData": d}),
        Ok(ModelChunk::Usage(u)) => json!({"usage": u}),
        Ok(ModelChunk::Finish(reason)) => json!({"finish": reason}),
        Ok(ModelChunk::Retrying {
            attempt,
            max_attempts,
            delay_ms,
            reason,
        }) => json!({"retrying": {
            "attempt": attempt, "maxAttempts": max_attempts, "delayMs": delay_ms, "reason": reason,
        }}),
        Err(e) => json!({"error": {"message": e.message, "retryable": e.retryable}}),
    }
}

/// An object map, for building requests by hand.
pub fn object(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}
