//! An evaluated definition laid over its static reading: the values are what the code computed,
//! the positions are where the static reader found each key and value.
//!
//! A value the static reader located (`maxSteps: "3"` written out) keeps its own line and
//! column; one it could not (a key brought in by a spread, a value a helper returned) takes the
//! position of its nearest located parent, so every issue still has `file:line:col`.

use std::collections::BTreeSet;

use crate::decode::join;
use crate::eval::{EvalError, EvalErrorKind, JsValue};
use crate::issue::{Code, Issue};
use crate::node::{Dynamic, Entry, Node, Span, Value};
use crate::yaml::MAX_DEPTH;

/// What laying an evaluated value over its static reading gives.
pub(crate) struct Laid {
    /// The value tree, located.
    pub(crate) node: Node,
    /// The paths (`args`, `requiredSchema`) whose value was a zod schema, now its JSON Schema.
    pub(crate) schemas: BTreeSet<String>,
}

/// Lays `value` over `shape` (the static reading, when there was one); `at` is where the
/// definition starts.
pub(crate) fn lay(value: &JsValue, shape: Option<&Node>, at: Span) -> Laid {
    let mut schemas = BTreeSet::new();
    let node = lay_at(value, shape, at, "", 0, &mut schemas);
    Laid { node, schemas }
}

fn lay_at(
    value: &JsValue,
    shape: Option<&Node>,
    parent: Span,
    path: &str,
    depth: usize,
    schemas: &mut BTreeSet<String>,
) -> Node {
    let at = shape.map_or(parent, |s| s.span);
    if depth > MAX_DEPTH {
        return Node::new(Value::Dynamic(Dynamic::Unsupported), at);
    }
    let v = match value {
        JsValue::Undefined | JsValue::Null => Value::Null,
        JsValue::Bool(b) => Value::Bool(*b),
        JsValue::Number(n) => crate::ts::number(*n),
        JsValue::String(s) => Value::String(s.clone()),
        JsValue::Function => Value::Dynamic(Dynamic::Function),
        JsValue::Other(_) => Value::Dynamic(Dynamic::Unsupported),
        JsValue::Array(items) => {
            // Items pair with the written ones by index only when as many were written: a
            // spread or a hole (which the static reader does not keep) would shift them, and
            // then every item takes the array's position.
            let written = match shape.map(|s| &s.value) {
                Some(Value::Array(w)) if w.len() == items.len() => Some(w),
                _ => None,
            };
            Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let shape = written.and_then(|w| w.get(i));
                        lay_at(item, shape, at, &format!("{path}[{i}]"), depth + 1, schemas)
                    })
                    .collect(),
            )
        }
        JsValue::Object(entries) => Value::Object(lay_entries(
            entries.iter().map(|(k, v)| (k.as_str(), v)),
            shape,
            at,
            path,
            depth,
            schemas,
        )),
        JsValue::Schema(json) => {
            schemas.insert(path.to_owned());
            return from_json(json, at);
        }
        JsValue::Provider(p) => match &p.options {
            None => Value::String(p.provider_type.clone()),
            Some(options) => {
                let kind = JsValue::String(p.provider_type.clone());
                let all = std::iter::once(("type", &kind))
                    .chain(options.iter().map(|(k, v)| (k.as_str(), v)));
                Value::Object(lay_entries(all, shape, at, path, depth, schemas))
            }
        },
    };
    Node::new(v, at)
}

fn lay_entries<'v>(
    entries: impl Iterator<Item = (&'v str, &'v JsValue)>,
    shape: Option<&Node>,
    at: Span,
    path: &str,
    depth: usize,
    schemas: &mut BTreeSet<String>,
) -> Vec<Entry> {
    let written = match shape.map(|s| &s.value) {
        Some(Value::Object(w)) => Some(w),
        _ => None,
    };
    entries
        // `{ key: undefined }` is the same as no key, as JSON and every JS reader treat it.
        .filter(|(_, v)| !matches!(v, JsValue::Undefined))
        .map(|(key, v)| {
            let written = written.and_then(|w| w.iter().find(|e| e.key == key));
            let key_span = written.map_or(at, |e| e.key_span);
            let value_shape = written.map(|e| &e.value);
            Entry {
                key: key.to_owned(),
                key_span,
                value: lay_at(
                    v,
                    value_shape,
                    key_span,
                    &join(path, key),
                    depth + 1,
                    schemas,
                ),
            }
        })
        .collect()
}

/// A JSON value as a located tree, every part at `at`.
pub(crate) fn from_json(json: &serde_json::Value, at: Span) -> Node {
    let v = match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(n.clone()),
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => {
            Value::Array(items.iter().map(|i| from_json(i, at)).collect())
        }
        serde_json::Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Entry {
                    key: k.clone(),
                    key_span: at,
                    value: from_json(v, at),
                })
                .collect(),
        ),
    };
    Node::new(v, at)
}

/// Where the value at `path` (`args`, `sideA.tools[1]`) is written in `node`, or its nearest
/// written parent.
pub(crate) fn locate(node: &Node, path: &str) -> Span {
    let mut at = node;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        let (key, rest) = seg.split_once('[').unwrap_or((seg, ""));
        let Some(next) = at.get(key) else { break };
        at = next;
        for idx in rest.split(['[', ']']).filter(|s| !s.is_empty()) {
            match (&at.value, idx.parse::<usize>()) {
                (Value::Array(items), Ok(i)) if i < items.len() => at = &items[i],
                _ => return at.span,
            }
        }
    }
    at.span
}

/// The issue for a file that could not be evaluated; `file` is the definition's path.
pub(crate) fn issue(file: &str, error: &EvalError, fallback: Span) -> Issue {
    let code = match error.kind {
        EvalErrorKind::Syntax => Code::TsSyntax,
        EvalErrorKind::Thrown => Code::TsEvalError,
        EvalErrorKind::Limit => Code::TsEvalLimit,
        EvalErrorKind::Import => Code::TsImport,
        EvalErrorKind::PackageMissing => Code::TsPackageMissing,
        EvalErrorKind::Schema => Code::TsSchema,
    };
    let span = error
        .at
        .map_or(fallback, |(line, column)| Span::new(line, column));
    let mut issue = Issue::new(code, error.message.clone()).at(
        error.file.as_deref().unwrap_or(file),
        error.path.as_deref().unwrap_or(""),
        Some(span),
    );
    if let Some(hint) = &error.hint {
        issue = issue.hint(hint.clone());
    }
    issue
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::ProviderValue;

    fn obj(entries: &[(&str, JsValue)]) -> JsValue {
        JsValue::Object(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn written_values_keep_their_place_and_computed_ones_take_their_parents() {
        let (def, _) = crate::ts::parse_source(
            "const extra = { maxSteps: 3 };\nexport default defineTool({\n  description: 'x',\n  ...extra,\n  nested: { a: 1 },\n})",
            false,
        );
        let def = def.expect("read");
        let value = obj(&[
            ("description", JsValue::String("x".into())),
            ("maxSteps", JsValue::Number(3.0)),
            (
                "nested",
                obj(&[("a", JsValue::Number(1.0)), ("b", JsValue::Undefined)]),
            ),
            (
                "args",
                JsValue::Schema(serde_json::json!({ "type": "object" })),
            ),
        ]);
        let laid = lay(&value, Some(&def.node), def.span);
        let n = &laid.node;
        assert_eq!(n.get("description").map(|d| d.span), Some(Span::new(3, 16)));
        // Brought in by the spread: the definition's own position.
        assert_eq!(n.get("maxSteps").map(|d| d.span), Some(def.node.span));
        let nested = n.get("nested").expect("nested");
        assert_eq!(nested.get("a").map(|d| d.span), Some(Span::new(5, 16)));
        assert!(nested.get("b").is_none(), "undefined is absent");
        assert_eq!(laid.schemas, BTreeSet::from(["args".to_owned()]));
        assert_eq!(
            n.get("args")
                .and_then(|a| a.get("type"))
                .and_then(Node::as_str),
            Some("object")
        );
    }

    #[test]
    fn array_items_pair_with_written_ones_only_when_none_was_spread_in() {
        let text = "const COMMON = ['nope'];\nexport default definePrompt({\n  tools: [...COMMON, 'lookup'],\n  more: ['a', 'b'],\n})";
        let (def, _) = crate::ts::parse_source(text, false);
        let def = def.expect("read");
        let value = obj(&[
            (
                "tools",
                JsValue::Array(vec![
                    JsValue::String("nope".into()),
                    JsValue::String("lookup".into()),
                ]),
            ),
            (
                "more",
                JsValue::Array(vec![
                    JsValue::String("a".into()),
                    JsValue::String("b".into()),
                ]),
            ),
        ]);
        let node = lay(&value, Some(&def.node), def.span).node;
        let spans = |key: &str| match node.get(key).map(|n| &n.value) {
            Some(Value::Array(items)) => items.iter().map(|i| i.span).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let tools = node.get("tools").map(|n| n.span).expect("tools");
        // `nope` came from the spread: not at `'lookup'`'s place, but the array's.
        assert_eq!(spans("tools"), vec![tools, tools]);
        assert_eq!(spans("more"), vec![Span::new(4, 10), Span::new(4, 15)]);
    }

    #[test]
    fn providers_become_a_name_or_an_inline_provider() {
        let bare = JsValue::Provider(ProviderValue {
            provider_type: "openai".into(),
            options: None,
        });
        assert_eq!(
            lay(&bare, None, Span::new(1, 1)).node.as_str(),
            Some("openai")
        );
        let called = JsValue::Provider(ProviderValue {
            provider_type: "anthropic".into(),
            options: Some(vec![("baseUrl".into(), JsValue::String("http://x".into()))]),
        });
        let node = lay(&called, None, Span::new(1, 1)).node;
        assert_eq!(node.get("type").and_then(Node::as_str), Some("anthropic"));
        assert_eq!(node.get("baseUrl").and_then(Node::as_str), Some("http://x"));
    }
}
