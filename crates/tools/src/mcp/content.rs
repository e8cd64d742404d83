//! What an MCP tool gives back, as a [`ToolResult`], and an MCP tool as a [`ToolSpec`].
//!
//! A result's structured content, when present, is the result (as JSON): it is the canonical
//! form, and servers repeat it as text only for older clients. Otherwise the text blocks are
//! joined by newlines, and other blocks are named in brackets (`[image: image/png]`), since a
//! tool result is text. `isError: true` makes it an error result.

use duet_runtime::{ToolResult, ToolSpec};
use rmcp::model::{CallToolResult, Tool};
use serde_json::Value;

/// The spec a model is offered for `tool` (under the tool's own name; the router renames it).
pub(crate) fn spec(tool: &Tool) -> ToolSpec {
    ToolSpec {
        name: tool.name.to_string(),
        description: tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned(),
        parameters: Value::Object((*tool.input_schema).clone()),
    }
}

/// One content block as text.
fn block_text(block: &Value) -> String {
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match block.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => field(block, "text"),
        "image" | "audio" => format!("[{}: {}]", field(block, "type"), field(block, "mimeType")),
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => format!("[resource: {}]", field(resource, "uri")),
            }
        }
        "resource_link" => format!("[resource link: {}]", field(block, "uri")),
        other => format!("[{other} content]"),
    }
}

/// `result` as a tool result.
pub(crate) fn result(result: &CallToolResult) -> ToolResult {
    let text = match &result.structured_content {
        Some(structured) => structured.to_string(),
        None => result
            .content
            .iter()
            .map(|block| {
                serde_json::to_value(block).map_or_else(|_| String::new(), |v| block_text(&v))
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    if result.is_error == Some(true) {
        ToolResult::error(if text.is_empty() {
            "The tool failed and said nothing more.".to_owned()
        } else {
            text
        })
    } else {
        ToolResult::ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> CallToolResult {
        serde_json::from_value(v).expect("a CallToolResult")
    }

    #[test]
    fn results_map_to_text() {
        let r = result(&parse(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
        ]})));
        assert!(r.is_ok());
        assert_eq!(
            r.content,
            "one\n[image: image/png]\ninside\n[resource link: file:///b]"
        );
        let r = result(&parse(json!({
            "content": [{"type": "text", "text": "{\"n\": 1}"}],
            "structuredContent": {"n": 1}
        })));
        assert_eq!(r.content, r#"{"n":1}"#);
        let r = result(&parse(json!({"content": [], "isError": true})));
        assert!(!r.is_ok());
    }
}
