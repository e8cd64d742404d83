//! What code sees and returns, as JSON in the spec's shapes: a message (`Message`), the
//! messages a model is sent (for the `filter_messages` family), a tool call, a tool result both
//! ways, the `state` snapshot, a thread file (`FileRecord`) and bytes (`{"$bytes": base64}`).

use serde_json::{Value, json};

use crate::files::ReturnedFile;
use crate::model::ChatMessage;
use crate::tools::ToolResult;
use crate::types::{Message, Role, Thread, ToolCall, ToolStatus};

/// A stored message in the spec's `Message` shape (`id` is its seq; `created_at` in µs, as the
/// spec has it; `tool_calls` a JSON-encoded array, as the spec stores it).
pub(crate) fn message(m: &Message) -> Value {
    json!({
        "id": m.seq.to_string(),
        "role": m.role.as_str(),
        "content": m.content,
        "name": m.tool_name,
        "tool_calls": tool_calls_text(&m.tool_calls),
        "tool_call_id": m.tool_call_id,
        "tool_status": m.tool_status.map(|s| match s {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
        }),
        "created_at": m.created_at.saturating_mul(1000),
        "silent": m.silent,
        "side": m.side.map(crate::types::side_str),
        "depth": 0,
    })
}

fn tool_calls_text(calls: &[ToolCall]) -> Option<String> {
    if calls.is_empty() {
        return None;
    }
    Some(Value::Array(calls.iter().map(tool_call).collect()).to_string())
}

/// A thread file or directory as the spec's `FileRecord`: `{path, name, type: 'file' |
/// 'directory', mimeType, size, createdAt, updatedAt}` (times in ms since the Unix epoch, as
/// `Date.now()` counts; `mimeType` `null` for a directory). `readdirFile` gives
/// `{entries: FileRecord[]}`, `getFileStats` `{files, directories, bytes}`, `grepFiles`
/// `[{path, line, text}]`, `findFiles` `{paths, truncated}`.
pub(crate) fn file(r: &crate::files::FileRecord) -> Value {
    json!({
        "path": r.path,
        "name": r.name(),
        "type": match r.kind {
            crate::files::FileKind::File => "file",
            crate::files::FileKind::Directory => "directory",
        },
        "mimeType": r.mime_type,
        "size": r.size,
        "createdAt": r.created_at,
        "updatedAt": r.updated_at,
    })
}

/// Bytes as they cross the bridge, both ways: `{"$bytes": base64}` (the glue makes an
/// `ArrayBuffer` of it, and it of an `ArrayBuffer`, a typed array or a `DataView`).
pub(crate) fn bytes(data: &[u8]) -> Value {
    use base64::Engine as _;
    json!({ "$bytes": base64::engine::general_purpose::STANDARD.encode(data) })
}

/// The bytes `{"$bytes": base64}` holds; `None` for any other value, `Some(Err)` for base64
/// that is not.
pub(crate) fn bytes_of(v: &Value) -> Option<Result<Vec<u8>, String>> {
    use base64::Engine as _;
    let o = v.as_object().filter(|o| o.len() == 1)?;
    let text = o.get("$bytes")?.as_str()?;
    Some(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("`$bytes` is not base64: {e}")),
    )
}

/// A tool call as the spec's `ToolCall` (`{id, type: 'function', function: {name, arguments}}`,
/// the arguments a JSON string).
pub(crate) fn tool_call(c: &ToolCall) -> Value {
    json!({
        "id": c.id,
        "type": "function",
        "function": { "name": c.name, "arguments": c.arguments.to_string() },
    })
}

/// A tool result as the spec's `ToolResult`.
pub(crate) fn tool_result(r: &ToolResult) -> Value {
    if r.is_ok() {
        json!({ "status": "success", "result": r.content })
    } else {
        json!({ "status": "error", "error": r.content })
    }
}

/// What a tool's `execute` returned, as its result: a string is the result text; an object
/// with `status` is a `ToolResult` (`result`, or `error`); anything else is its JSON text.
/// `null` (`undefined`) is an empty success.
pub(crate) fn tool_result_of(value: &Value) -> ToolResult {
    match value {
        Value::Null => ToolResult::ok(""),
        Value::String(s) => ToolResult::ok(s.clone()),
        Value::Object(o) if o.get("status").and_then(Value::as_str) == Some("error") => {
            let text = o
                .get("error")
                .or_else(|| o.get("result"))
                .map_or_else(|| "The tool failed.".to_owned(), text_of);
            ToolResult::error(text)
        }
        Value::Object(o) if o.get("status").and_then(Value::as_str) == Some("success") => {
            ToolResult::ok(o.get("result").map(text_of).unwrap_or_default())
        }
        other => ToolResult::ok(other.to_string()),
    }
}

/// The files in the `attachments` of what a tool's `execute` returned (an object's; spec §8:
/// an `AttachmentRef` by its `path`, a `ToolAttachment` by its base64 `data`), or what is wrong
/// with one.
pub(crate) fn returned_files(value: &Value) -> Result<Vec<ReturnedFile>, String> {
    use base64::Engine as _;
    let Some(items) = value.get("attachments").filter(|a| !a.is_null()) else {
        return Ok(Vec::new());
    };
    let Some(items) = items.as_array() else {
        return Err("`attachments` must be an array".to_owned());
    };
    let text = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    items
        .iter()
        .enumerate()
        .map(|(i, a)| match (text(a, "data"), text(a, "path")) {
            (Some(data), _) => {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|e| format!("attachments[{i}].data is not base64: {e}"))?;
                Ok(ReturnedFile::Data {
                    name: text(a, "name").unwrap_or_else(|| "attachment".to_owned()),
                    mime: text(a, "mimeType"),
                    data,
                })
            }
            (None, Some(path)) => Ok(ReturnedFile::Path(path)),
            (None, None) => Err(format!(
                "attachments[{i}] has neither `path` (a file of the thread) nor `data`"
            )),
        })
        .collect()
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The messages a model is about to be sent, for the `filter_messages` family: each has `id`,
/// its index, so a returned message that keeps its id keeps what JSON does not carry (images,
/// provider data).
pub(crate) fn chat(messages: &[ChatMessage]) -> Value {
    Value::Array(
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                json!({
                    "id": i.to_string(),
                    "role": m.role.as_str(),
                    "content": m.content,
                    "name": m.name,
                    "tool_calls": if m.tool_calls.is_empty() {
                        Value::Null
                    } else {
                        Value::Array(m.tool_calls.iter().map(tool_call).collect())
                    },
                    "tool_call_id": m.tool_call_id,
                    "tool_status": m.tool_call_id.as_ref().map(|_| if m.is_error { "error" } else { "success" }),
                })
            })
            .collect(),
    )
}

/// The messages a `filter_messages`-family hook returned, read back against what it was given.
pub(crate) fn chat_of(given: &[ChatMessage], value: &Value) -> Result<Vec<ChatMessage>, String> {
    let Value::Array(items) = value else {
        return Err(format!(
            "the hook must return an array of messages, not {}",
            kind(value)
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(o) = item else {
                return Err(format!(
                    "message {i} the hook returned is {}, not an object",
                    kind(item)
                ));
            };
            let mut m = o
                .get("id")
                .and_then(Value::as_str)
                .and_then(|id| id.parse::<usize>().ok())
                .and_then(|i| given.get(i).cloned())
                .unwrap_or_else(|| ChatMessage {
                    role: Role::User,
                    content: None,
                    tool_calls: Vec::new(),
                    tool_call_id: None,
                    name: None,
                    is_error: false,
                    thinking: None,
                    provider_data: None,
                    images: Vec::new(),
                    documents: Vec::new(),
                    attachments: Vec::new(),
                });
            if let Some(role) = o.get("role") {
                m.role = role_of(role).ok_or_else(|| {
                    format!("message {i}'s role must be system, user, assistant or tool")
                })?;
            }
            if let Some(content) = o.get("content") {
                m.content = match content {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                };
            }
            if let Some(calls) = o.get("tool_calls") {
                m.tool_calls = calls_of(calls).map_err(|e| format!("message {i}: {e}"))?;
            }
            if let Some(id) = o.get("tool_call_id") {
                m.tool_call_id = id.as_str().map(str::to_owned);
            }
            Ok(m)
        })
        .collect()
}

fn calls_of(v: &Value) -> Result<Vec<ToolCall>, String> {
    let parsed;
    let v = match v {
        Value::Null => return Ok(Vec::new()),
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).map_err(|e| format!("tool_calls: {e}"))?;
            &parsed
        }
        other => other,
    };
    let Value::Array(items) = v else {
        return Err("tool_calls must be an array".into());
    };
    items
        .iter()
        .map(|c| {
            let id = c.get("id").and_then(Value::as_str);
            let f = c.get("function");
            let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
            let (Some(id), Some(name)) = (id, name) else {
                return Err("a tool call needs `id` and `function.name`".to_owned());
            };
            let arguments = match f.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or(Value::String(s.clone()))
                }
                Some(other) => other.clone(),
                None => json!({}),
            };
            Ok(ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments,
            })
        })
        .collect()
}

/// A role's stored name read back.
pub(crate) fn role_of(v: &Value) -> Option<Role> {
    match v.as_str()? {
        "system" => Some(Role::System),
        "user" => Some(Role::User),
        "assistant" => Some(Role::Assistant),
        "tool" => Some(Role::Tool),
        _ => None,
    }
}

/// What a `before_create_message` hook returned, over the message it was given: its
/// `content` and `silent` may change (its seq, session and role stay the runtime's).
pub(crate) fn message_of(given: Message, value: &Value) -> Result<Message, String> {
    let mut m = given;
    match value {
        Value::Null => Ok(m),
        Value::Object(o) => {
            if let Some(content) = o.get("content") {
                m.content = match content {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                };
            }
            if let Some(silent) = o.get("silent").and_then(Value::as_bool) {
                m.silent = silent;
            }
            Ok(m)
        }
        other => Err(format!(
            "the hook must return the message (an object), not {}",
            kind(other)
        )),
    }
}

/// The `state` snapshot for `thread` running `agent`: identity, the spawn `arguments`, and
/// `execution` (`null` at rest: effects and endpoints).
pub(crate) fn state(thread: &Thread, arguments: &Value, execution: Option<Value>) -> Value {
    json!({
        "threadId": thread.key,
        "agentId": thread.agent,
        "userId": null,
        "createdAt": thread.created_at.saturating_mul(1000),
        "arguments": arguments,
        "terminated": if thread.status == crate::types::ThreadStatus::Terminated {
            Some(thread.updated_at.saturating_mul(1000))
        } else {
            None
        },
        "execution": execution,
    })
}

/// `state.execution` during a turn of `side`.
pub(crate) fn execution(thread: &Thread, side: crate::types::SideId) -> Value {
    json!({
        "flowId": format!("{}:{}", thread.id, thread.session),
        "currentSide": crate::types::side_str(side),
        "stopped": false,
    })
}

/// Whether a host's answer is `undefined` (`{"$undefined": true}`: the function returned
/// nothing), which only hooks whose `null` means something tell from `null`.
pub(crate) fn is_undefined(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| o.len() == 1 && o.get("$undefined") == Some(&Value::Bool(true)))
}

/// A host's answer with `undefined` read as `null`.
pub(crate) fn settled(v: Value) -> Value {
    if is_undefined(&v) { Value::Null } else { v }
}

/// A JSON value's kind, for messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
