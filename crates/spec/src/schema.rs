//! JSON Schemas in definitions: a tool's `args` and a prompt's `requiredSchema`.

use crate::decode::{Ctx, nearest};
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};

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
            "`{path}` must describe an object (`type: object`): arguments are always an object"
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
        None => {
            keywords(ctx, node, path);
            Some(schema)
        }
    }
}

/// Reads a JSON Schema that tests a value of any type (a tool's `approval.when`), checking it
/// against the meta-schema and compiling it once.
pub(crate) fn condition_schema(
    ctx: &mut Ctx<'_>,
    node: &Node,
    path: &str,
) -> Option<serde_json::Value> {
    let schema = ctx.json(node, path)?;
    let problem = if let Err(e) = jsonschema::meta::validate(&schema) {
        Some(format!(
            "`{path}` is not a valid JSON Schema: {e} (at `{}`)",
            e.instance_path()
        ))
    } else if let Err(e) = jsonschema::validator_for(&schema) {
        Some(format!("`{path}` cannot be compiled: {e}"))
    } else {
        None
    };
    if let Some(message) = problem {
        ctx.push(
            Issue::new(Code::InvalidJsonSchema, message)
                .at(ctx.file, path, Some(node.span))
                .hint("write a JSON Schema such as `{ properties: { amount: { exclusiveMinimum: 100 } } }`"),
        );
        return None;
    }
    keywords(ctx, node, path);
    Some(schema)
}

/// Every keyword of JSON Schema (2020-12, and draft 7's that it renamed), with the annotations.
const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    "$recursiveRef",
    "$recursiveAnchor",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "dependencies",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "dependentSchemas",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// Keywords whose value is a schema.
const SCHEMA: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "additionalProperties",
    "propertyNames",
    "items",
    "additionalItems",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an array of schemas.
const SCHEMAS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to schemas.
const NAMED_SCHEMAS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Warns of each keyword of the schema at `node` (and its subschemas) that JSON Schema does not
/// define — a misspelt `properties` is silently ignored by every validator.
fn keywords(ctx: &mut Ctx<'_>, node: &Node, path: &str) {
    let Value::Object(entries) = &node.value else {
        return;
    };
    for e in entries {
        let at = format!("{path}.{}", e.key);
        if !KEYWORDS.contains(&e.key.as_str()) {
            let mut issue = Issue::new(
                Code::UnknownSchemaKeyword,
                format!(
                    "`{}` is not a JSON Schema keyword: validators ignore it",
                    e.key
                ),
            )
            .at(ctx.file, &at, Some(e.key_span));
            if let Some(near) = nearest(&e.key, KEYWORDS) {
                issue = issue.hint(format!("did you mean `{near}`?"));
            }
            ctx.push(issue);
            continue;
        }
        let key = e.key.as_str();
        if SCHEMA.contains(&key) {
            keywords(ctx, &e.value, &at);
        }
        if SCHEMAS.contains(&key)
            && let Value::Array(items) = &e.value.value
        {
            for (i, item) in items.iter().enumerate() {
                keywords(ctx, item, &format!("{at}[{i}]"));
            }
        }
        if NAMED_SCHEMAS.contains(&key)
            && let Value::Object(named) = &e.value.value
        {
            for n in named {
                keywords(ctx, &n.value, &format!("{at}.{}", n.key));
            }
        }
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
