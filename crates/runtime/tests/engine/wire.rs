//! The scripted models over a real wire: a provider that, for each call, turns the scripted
//! entry into the byte stream an OpenAI-compatible server sends (Server-Sent Events of chat
//! completion chunks, tool-call arguments split across deltas, no call ids — as llama.cpp sends
//! them), serves it from a local HTTP server, and lets the real `openai` provider read it. A
//! scenario played through it must produce the transcript the scripted provider does.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use duet_runtime::{Model, ModelChunk, ModelError, ModelRequest, Provider};
use duet_spec::{ModelDef, ProviderType, ScriptEntry};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::json;

/// Responses waiting to be fetched, by call id: the SSE body and a delay before it.
type Pending = Arc<Mutex<HashMap<String, (String, u64)>>>;

/// The provider (register it as `scripted`).
#[derive(Clone)]
pub struct Wire {
    base: String,
    pending: Pending,
}

impl Wire {
    /// Starts the local server.
    pub async fn start() -> Wire {
        let pending: Pending = Arc::default();
        let app = axum::Router::new()
            .route("/call/{id}/chat/completions", axum::routing::post(serve))
            .with_state(pending.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Wire { base, pending }
    }
}

async fn serve(State(pending): State<Pending>, Path(id): Path<String>) -> axum::response::Response {
    let found = pending.lock().expect("lock").remove(&id);
    let Some((body, delay_ms)) = found else {
        return (axum::http::StatusCode::NOT_FOUND, "no such call").into_response();
    };
    if delay_ms > 0 {
        // tidy:allow-sleep: the scripted entry's `delayMs` is the latency this server plays.
        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
    }
    ([("content-type", "text/event-stream")], body).into_response()
}

/// An entry as an OpenAI chat-completions stream.
fn sse(entry: &ScriptEntry) -> String {
    let chunk = |delta: serde_json::Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "demo",
               "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}))];
    if let Some(t) = &entry.thinking {
        events.push(chunk(json!({"reasoning_content": t})));
    }
    if let Some(t) = &entry.text {
        // In two pieces, split on a character boundary.
        let cut = t
            .char_indices()
            .nth(t.chars().count() / 2)
            .map_or(t.len(), |(i, _)| i);
        for piece in [&t[..cut], &t[cut..]] {
            if !piece.is_empty() {
                events.push(chunk(json!({"content": piece})));
            }
        }
    }
    for (i, call) in entry.tool_calls.iter().enumerate() {
        let args = call.arguments.to_string();
        let cut = args.len() / 2;
        let cut = (0..=cut)
            .rev()
            .find(|&c| args.is_char_boundary(c))
            .unwrap_or(0);
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "type": "function",
            "function": {"name": call.name, "arguments": &args[..cut]}}]}),
        ));
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": &args[cut..]}}]}),
        ));
    }
    let finish = if entry.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "demo",
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    );
    // The scripted provider's count: a quarter of the text's bytes, no input.
    let output = entry.text.as_ref().map_or(0, |t| t.len() / 4);
    events.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "demo",
        "choices": [], "usage": {"prompt_tokens": 0, "completion_tokens": output, "total_tokens": output}}));
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

impl Provider for Wire {
    fn model(&self, def: &ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        Ok(Arc::new(WireModel {
            wire: self.clone(),
            def: def.clone(),
            scripted: duet_models::Scripted.model(def)?,
        }))
    }
}

struct WireModel {
    wire: Wire,
    def: ModelDef,
    /// For what the wire cannot carry: an exhausted script's (or an unmatched branch's) error.
    scripted: Arc<dyn Model>,
}

impl Model for WireModel {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        let Ok(entry) = duet_models::scripted_answer(&self.def.name, &self.def.script, &request)
        else {
            return self.scripted.stream(request);
        };
        let id = uuid::Uuid::now_v7().simple().to_string();
        self.wire.pending.lock().expect("lock").insert(
            id.clone(),
            (sse(&entry), entry.delay_ms.map_or(0, u64::from)),
        );
        let config = duet_models::ProviderConfig::new(
            "scripted",
            ProviderType::Openai,
            &format!("{}/call/{id}", self.wire.base),
            None,
        );
        let def = ModelDef {
            provider: "openai".into(),
            inline_provider: None,
            script: Vec::new(),
            ..self.def.clone()
        };
        match duet_models::OpenAi::new(config).model(&def) {
            Ok(model) => model.stream(request),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        }
    }
}
