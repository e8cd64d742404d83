//! The Chat Completions request body for a [`ModelRequest`].
//!
//! System prompt first, then the context: text messages, assistant tool calls (arguments as
//! JSON text) and tool results by `tool_call_id`. Tools as function schemas; `tool_choice` only
//! when it is not the default `auto` and tools are offered (OpenAI refuses it without tools);
//! likewise `parallel_tool_calls`. `reasoning.effort` becomes `reasoning_effort`. The model's
//! `maxOutputTokens` becomes `max_completion_tokens` on OpenAI's own service (its reasoning
//! models refuse `max_tokens`) and `max_tokens` elsewhere (what compatible servers read).
//! Thinking is not sent back: DeepSeek refuses it and the others ignore it.

use duet_runtime::{ChatMessage, ModelRequest, Role};
use duet_spec::ToolChoice;
use serde_json::{Map, Value, json};

/// What a model definition adds to every request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    pub(crate) model: String,
    pub(crate) max_output_tokens: Option<u32>,
    /// Whether the cap is `max_completion_tokens` (OpenAI's service) or `max_tokens`.
    pub(crate) max_completion_tokens: bool,
    pub(crate) provider_options: Map<String, Value>,
    /// Whether the model takes images (unless its definition says `supportsImages: false`).
    pub(crate) images: bool,
    /// Whether the model takes documents as `file` parts (unless its definition says
    /// `supportsDocuments: false`); a document it does not take is sent as a line of text
    /// naming the file.
    pub(crate) documents: bool,
}

/// The JSON body.
pub(crate) fn body(settings: &Settings, request: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    messages.extend(request.messages.iter().map(|m| message(m, settings)));
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        match request.tool_choice {
            ToolChoice::Auto => {}
            ToolChoice::None => {
                body.insert("tool_choice".into(), json!("none"));
            }
            ToolChoice::Required => {
                body.insert("tool_choice".into(), json!("required"));
            }
        }
        if let Some(p) = request.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(p));
        }
    }
    if let Some(effort) = request.reasoning.as_ref().and_then(|r| r.effort.as_ref()) {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(max) = settings.max_output_tokens {
        let key = if settings.max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(key.into(), json!(max));
    }
    crate::options::merge(
        &mut body,
        &settings.provider_options,
        &request.provider_options,
    );
    Value::Object(body)
}

fn message(m: &ChatMessage, settings: &Settings) -> Value {
    match m.role {
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content.clone().unwrap_or_default(),
        }),
        Role::Assistant if !m.tool_calls.is_empty() => {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function", "function": {
                        "name": c.name,
                        "arguments": arguments_text(&c.arguments),
                    }})
                })
                .collect();
            json!({
                "role": "assistant",
                "content": m.content.as_deref().filter(|c| !c.is_empty()),
                "tool_calls": calls,
            })
        }
        role if (settings.images && !m.images.is_empty())
            || (settings.documents && !m.documents.is_empty()) =>
        {
            // Content parts: the text, then each image as a data URL, then each document as
            // a `file` part with its bytes as a data URL.
            let mut parts: Vec<Value> = text_of(m, settings.documents)
                .iter()
                .map(|c| json!({"type": "text", "text": c}))
                .collect();
            if settings.images {
                parts.extend(m.images.iter().map(|i| {
                    json!({"type": "image_url", "image_url": {
                        "url": format!("data:{};base64,{}", i.mime_type, i.data),
                    }})
                }));
            }
            if settings.documents {
                parts.extend(m.documents.iter().map(|d| {
                    json!({"type": "file", "file": {
                        "filename": d.filename(),
                        "file_data": format!("data:{};base64,{}", d.mime_type, d.data),
                    }})
                }));
            }
            json!({"role": role.as_str(), "content": parts})
        }
        role => json!({"role": role.as_str(), "content": text_of(m, false).unwrap_or_default()}),
    }
}

/// A message's text, with a line for each of its documents unless they are `sent` as parts;
/// `None` when it has neither.
fn text_of(m: &ChatMessage, sent: bool) -> Option<String> {
    let lines: Vec<String> = if sent {
        Vec::new()
    } else {
        m.documents
            .iter()
            .map(duet_runtime::DocumentRef::line)
            .collect()
    };
    let text = m.content.as_deref().filter(|c| !c.is_empty());
    match (text, lines.is_empty()) {
        (t, true) => t.map(str::to_owned),
        (None, false) => Some(lines.join("\n")),
        (Some(t), false) => Some(format!("{t}\n\n{}", lines.join("\n"))),
    }
}

/// Arguments as the JSON text the API carries; arguments that never parsed go back as the raw
/// text the model wrote.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_runtime::{ToolCall, ToolSpec};

    fn request() -> ModelRequest {
        ModelRequest {
            thread: uuid::Uuid::nil(),
            call_index: 0,
            system: String::new(),
            messages: vec![],
            tools: vec![],
            tool_choice: ToolChoice::None,
            parallel_tool_calls: Some(false),
            reasoning: None,
            provider_options: Map::new(),
        }
    }

    #[test]
    fn tool_fields_only_with_tools() {
        let b = body(&Settings::default(), &request());
        assert!(b.get("tool_choice").is_none() && b.get("parallel_tool_calls").is_none());
        assert!(b.get("messages").is_some_and(|m| m == &json!([])), "{b}");
        let mut r = request();
        r.tools.push(ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        });
        let b = body(&Settings::default(), &r);
        assert_eq!(b["tool_choice"], "none");
        assert_eq!(b["parallel_tool_calls"], false);
    }

    #[test]
    fn the_output_cap_is_named_for_the_server() {
        let mut s = Settings {
            max_output_tokens: Some(100),
            ..Settings::default()
        };
        assert_eq!(body(&s, &request())["max_tokens"], 100);
        s.max_completion_tokens = true;
        let b = body(&s, &request());
        assert_eq!(b["max_completion_tokens"], 100);
        assert!(b.get("max_tokens").is_none());
    }

    #[test]
    fn images_are_content_parts_unless_the_model_takes_none() {
        let mut r = request();
        r.messages.push(ChatMessage {
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
        });
        let with = Settings {
            images: true,
            ..Settings::default()
        };
        let last = |b: Value| {
            b["messages"]
                .as_array()
                .and_then(|m| m.last().cloned())
                .unwrap_or_default()
        };
        assert_eq!(
            last(body(&with, &r))["content"],
            json!([
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}}
            ])
        );
        assert_eq!(
            last(body(&Settings::default(), &r))["content"],
            "What is this?"
        );
    }

    #[test]
    fn documents_are_file_parts_unless_the_model_takes_none() {
        let mut r = request();
        r.messages.push(ChatMessage {
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
        });
        let with = Settings {
            documents: true,
            ..Settings::default()
        };
        assert_eq!(
            body(&with, &r)["messages"][0]["content"],
            json!([
                {"type": "text", "text": "Summarise it."},
                {"type": "file", "file": {
                    "filename": "report.pdf",
                    "file_data": "data:application/pdf;base64,JVBERi0=",
                }}
            ])
        );
        assert_eq!(
            body(&Settings::default(), &r)["messages"][0]["content"],
            "Summarise it.\n\n[attachment /attachments/report.pdf, application/pdf, 2 KB]"
        );
    }

    #[test]
    fn raw_arguments_go_back_as_written() {
        let mut r = request();
        r.messages.push(ChatMessage {
            role: Role::Assistant,
            content: None,
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: json!("{\"a\": 1,"),
            }],
            tool_call_id: None,
            name: None,
            is_error: false,
            thinking: Some("hm".into()),
            provider_data: None,
            images: vec![],
            documents: vec![],
            attachments: vec![],
        });
        let b = body(&Settings::default(), &r);
        assert_eq!(
            b["messages"][0],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1,"}}
            ]})
        );
    }
}
