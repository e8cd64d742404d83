//! The Messages API request body for a [`ModelRequest`].
//!
//! The system prompt is `system`; context messages become content blocks, consecutive ones of a
//! role merged into one message (tool results are `tool_result` blocks in a user message, first
//! in it as the API requires; a `system` context message is user text). An assistant message
//! sends back, before its text and `tool_use` blocks, the thinking and redacted-thinking blocks
//! kept in its provider data (`{"anthropic": {"blocks": [...]}}`), signatures intact: the API
//! refuses a tool result whose assistant turn lost them. `max_tokens` is required: the model's
//! `maxOutputTokens`, else 4096 (raised to fit a thinking budget). `reasoning` with a
//! `maxTokens` or an `effort` turns on extended thinking with that budget.

use duet_runtime::{ChatMessage, ModelRequest, Role};
use duet_spec::{Reasoning, ToolChoice};
use serde_json::{Map, Value, json};

/// `max_tokens` when the model definition gives no `maxOutputTokens`.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The smallest thinking budget the API takes.
const MIN_BUDGET: u32 = 1024;

/// What a model definition adds to every request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    pub(crate) model: String,
    pub(crate) max_output_tokens: Option<u32>,
    pub(crate) provider_options: Map<String, Value>,
    /// Whether the model takes images (unless its definition says `supportsImages: false`).
    pub(crate) images: bool,
    /// Whether the model takes documents (unless its definition says `supportsDocuments:
    /// false`); a document it does not take is sent as a line of text naming the file.
    pub(crate) documents: bool,
}

/// The thinking budget `reasoning` asks for: its `maxTokens`, else one by `effort`.
fn budget(reasoning: &Reasoning) -> Option<u32> {
    if let Some(tokens) = reasoning.max_tokens {
        return Some(tokens);
    }
    match reasoning.effort.as_deref()? {
        "none" | "off" => None,
        "minimal" | "low" => Some(2_048),
        "medium" => Some(8_192),
        _ => Some(16_384),
    }
}

/// The JSON body.
pub(crate) fn body(settings: &Settings, request: &ModelRequest) -> Value {
    let thinking = request
        .reasoning
        .as_ref()
        .and_then(budget)
        .map(|b| b.max(MIN_BUDGET));
    let mut max_tokens = settings.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let thinking = thinking.and_then(|b| {
        if settings.max_output_tokens.is_none() && b >= max_tokens {
            max_tokens = b + DEFAULT_MAX_TOKENS;
        }
        // The budget must be below `max_tokens`; too small a cap leaves no room to think.
        let b = b.min(max_tokens.saturating_sub(1));
        (b >= MIN_BUDGET).then_some(b)
    });
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !request.system.is_empty() {
        body.insert("system".into(), json!(request.system));
    }
    body.insert(
        "messages".into(),
        Value::Array(messages(&request.messages, settings)),
    );
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let kind = match request.tool_choice {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
            ToolChoice::Required => "any",
        };
        let serial = request.parallel_tool_calls == Some(false) && kind != "none";
        if kind != "auto" || serial {
            let mut choice = json!({"type": kind});
            if serial {
                choice["disable_parallel_tool_use"] = json!(true);
            }
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(b) = thinking {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": b}),
        );
    }
    crate::options::merge(
        &mut body,
        &settings.provider_options,
        &request.provider_options,
    );
    Value::Object(body)
}

/// The context as Messages API messages: one per run of a role, tool results first in theirs.
fn messages(context: &[ChatMessage], settings: &Settings) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in context {
        let (role, blocks) = match m.role {
            Role::Assistant => ("assistant", assistant_blocks(m)),
            Role::Tool => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content.clone().unwrap_or_default(),
                });
                if m.is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
            Role::User | Role::System => {
                // Images and documents first, then the text (as the API's guide suggests).
                let mut blocks: Vec<Value> = if settings.images {
                    m.images
                        .iter()
                        .map(|i| {
                            json!({"type": "image", "source": {
                                "type": "base64", "media_type": i.mime_type, "data": i.data,
                            }})
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let mut lines = Vec::new();
                for d in &m.documents {
                    if settings.documents {
                        blocks.push(
                            json!({"type": "document", "title": d.filename(), "source": {
                                "type": "base64", "media_type": d.mime_type, "data": d.data,
                            }}),
                        );
                    } else {
                        lines.push(d.line());
                    }
                }
                blocks.extend(text_block(m.content.as_deref()));
                blocks.extend(text_block(Some(&lines.join("\n"))));
                ("user", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((r, existing)) if *r == role => existing.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, mut blocks)| {
            // Stable: tool results first, everything else after, each in its order.
            blocks.sort_by_key(|b| b["type"] != "tool_result");
            json!({"role": role, "content": blocks})
        })
        .collect()
}

fn text_block(text: Option<&str>) -> Option<Value> {
    // The API refuses empty text blocks.
    text.filter(|t| !t.trim().is_empty())
        .map(|t| json!({"type": "text", "text": t}))
}

fn assistant_blocks(m: &ChatMessage) -> Vec<Value> {
    let mut blocks: Vec<Value> = m
        .provider_data
        .as_ref()
        .and_then(|d| d.pointer("/anthropic/blocks"))
        .and_then(Value::as_array)
        .map(|kept| {
            kept.iter()
                .filter(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    blocks.extend(text_block(m.content.as_deref()));
    for call in &m.tool_calls {
        let input = match &call.arguments {
            Value::Object(_) => call.arguments.clone(),
            _ => json!({}),
        };
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(reasoning: Option<Reasoning>) -> ModelRequest {
        ModelRequest {
            thread: uuid::Uuid::nil(),
            call_index: 0,
            system: String::new(),
            messages: vec![ChatMessage {
                role: Role::Assistant,
                content: Some("  ".into()),
                tool_calls: vec![],
                tool_call_id: None,
                name: None,
                is_error: false,
                thinking: Some("unsigned thinking is never sent".into()),
                provider_data: Some(json!({"openai": {"x": 1}})),
                images: vec![],
                documents: vec![],
                attachments: vec![],
            }],
            tools: vec![],
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: None,
            reasoning,
            provider_options: Map::new(),
        }
    }

    fn effort(e: &str) -> Option<Reasoning> {
        Some(Reasoning {
            effort: Some(e.into()),
            max_tokens: None,
            include: None,
            exclude: None,
        })
    }

    fn settings(max: Option<u32>) -> Settings {
        Settings {
            model: "m".into(),
            max_output_tokens: max,
            provider_options: Map::new(),
            images: true,
            documents: true,
        }
    }

    #[test]
    fn images_go_before_the_text_unless_the_model_takes_none() {
        let mut r = request(None);
        r.messages = vec![ChatMessage {
            role: Role::User,
            content: Some("What is this?".into()),
            tool_calls: vec![],
            tool_call_id: None,
            name: None,
            is_error: false,
            thinking: None,
            provider_data: None,
            images: vec![duet_runtime::ImageRef {
                mime_type: "image/png".into(),
                data: "iVBORw0K".into(),
            }],
            documents: vec![],
            attachments: vec![],
        }];
        let b = body(&settings(None), &r);
        assert_eq!(
            b["messages"][0]["content"],
            json!([
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
                {"type": "text", "text": "What is this?"}
            ])
        );
        let none = Settings {
            images: false,
            ..settings(None)
        };
        assert_eq!(
            body(&none, &r)["messages"][0]["content"],
            json!([{"type": "text", "text": "What is this?"}])
        );
    }

    #[test]
    fn documents_are_blocks_unless_the_model_takes_none() {
        let mut r = request(None);
        r.messages = vec![ChatMessage {
            role: Role::User,
            content: Some("Summarise it.".into()),
            tool_calls: vec![],
            tool_call_id: None,
            name: None,
            is_error: false,
            thinking: None,
            provider_data: None,
            images: vec![],
            documents: vec![duet_runtime::DocumentRef {
                path: "/attachments/report.pdf".into(),
                mime_type: "application/pdf".into(),
                size: 2048,
                data: "JVBERi0=".into(),
            }],
            attachments: vec![],
        }];
        assert_eq!(
            body(&settings(None), &r)["messages"][0]["content"],
            json!([
                {"type": "document", "title": "report.pdf", "source": {
                    "type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
                {"type": "text", "text": "Summarise it."}
            ])
        );
        let none = Settings {
            documents: false,
            ..settings(None)
        };
        assert_eq!(
            body(&none, &r)["messages"][0]["content"],
            json!([
                {"type": "text", "text": "Summarise it."},
                {"type": "text", "text": "[attachment /attachments/report.pdf, application/pdf, 2 KB]"}
            ])
        );
    }

    #[test]
    fn max_tokens_makes_room_for_the_thinking_budget() {
        let b = body(&settings(None), &request(None));
        assert_eq!(b["max_tokens"], DEFAULT_MAX_TOKENS);
        assert!(b.get("thinking").is_none());
        let b = body(&settings(None), &request(effort("medium")));
        assert_eq!(b["max_tokens"], 8_192 + DEFAULT_MAX_TOKENS);
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
        let b = body(&settings(Some(3_000)), &request(effort("high")));
        assert_eq!(b["max_tokens"], 3_000);
        assert_eq!(b["thinking"]["budget_tokens"], 2_999);
        let b = body(&settings(Some(1_000)), &request(effort("low")));
        assert!(b.get("thinking").is_none(), "no room to think: {b}");
        assert!(
            body(&settings(None), &request(effort("none")))
                .get("thinking")
                .is_none()
        );
    }

    #[test]
    fn empty_text_and_unsigned_thinking_are_not_sent() {
        let b = body(&settings(None), &request(None));
        assert_eq!(b["messages"], json!([]));
    }
}
