//! JSON Schemas in definitions: a tool's `args` and a prompt's `requiredSchema`.

use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::Node;

/// Reads a JSON Schema that must describe an object, checking it against the meta-schema and
/// compiling it once (as the runtime will) so a bad `pattern` is caught here, not mid-session.
pub(crate) fn object_schema(
    ctx: &mut Ctx<'_>,
    node: &Node,
    path: &str,
) -> Option<serde_json::Value> {
    let schema = ctx.json(node, path)?;
    let problem = if !schema.is_object() {
        Some(format!(
            "`{path}` must be a JSON Schema object, not {}",
            node.kind()
        ))
    } else if schema.get("type").and_then(serde_json::Value::as_str) != Some("object") {
        Some(format!(
            "`{path}` must describe an object (`type: object`): tool arguments are always an object"
        ))
    } else if let Err(e) = jsonschema::meta::validate(&schema) {
        Some(format!(
            "`{path}` is not a valid JSON Schema: {e} (at `{}`)",
            e.instance_path()
        ))
    } else if let Err(e) = jsonschema::validator_for(&schema) {
        Some(format!("`{path}` cannot be compiled: {e}"))
    } else {
        None
    };
    match problem {
        Some(message) => {
            ctx.push(
                Issue::new(Code::InvalidJsonSchema, message)
                    .at(ctx.file, path, Some(node.span))
                    .hint("write a JSON Schema such as `{ type: object, properties: { decision: { type: string } }, required: [decision] }`"),
            );
            None
        }
        None => Some(schema),
    }
}

/// The property names a JSON object schema declares.
pub fn property_names(schema: &serde_json::Value) -> Vec<&str> {
    schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}
