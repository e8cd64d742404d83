//! YAML definition files into the located [`Node`] tree.
//!
//! Built on `saphyr-parser` (safe Rust, YAML 1.2) events, resolved with the YAML 1.2 core schema
//! and nothing looser: `yes`, `on` and quoted `"true"` are strings, and a quoted `"5"` is a
//! string, so `humn: "yes"` or `maxSessionTurns: "ten"` surface as type errors instead of being
//! guessed at.

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span as YSpan};
use std::collections::HashMap;

use crate::issue::{Code, Issue};
use crate::node::{Entry, Node, Span, Value, to_u32};

/// Deeper nesting than this is refused (real definitions nest a few levels; JSON Schemas a few
/// more). It keeps every recursive walk of the tree far from the stack's end.
pub(crate) const MAX_DEPTH: usize = 64;
/// Alias expansion may not grow the tree past this many nodes ("billion laughs").
const MAX_NODES: usize = 200_000;

enum Frame {
    Seq {
        span: Span,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        span: Span,
        anchor: usize,
        entries: Vec<Entry>,
        key: Option<(String, Span)>,
    },
}

/// Parses one YAML document. Problems that do not stop parsing (a duplicate key) come back with
/// the tree; a syntax error comes back alone.
pub(crate) fn parse(text: &str) -> (Option<Node>, Vec<Issue>) {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(text);
    loop {
        let (event, span) = match parser.next_event() {
            None => break,
            Some(Ok(ev)) => ev,
            Some(Err(e)) => return (None, vec![scan_error(&e)]),
        };
        if let Err(issue) = b.event(event, span) {
            return (None, vec![issue]);
        }
        if b.done {
            break;
        }
    }
    let root = b.root.take();
    (
        Some(root.unwrap_or(Node::new(Value::Null, Span::new(1, 1)))),
        b.issues,
    )
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    documents: usize,
    nodes: usize,
    issues: Vec<Issue>,
    done: bool,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: YSpan) -> Result<(), Issue> {
        let at = pos(&span);
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    self.done = true;
                    return Err(Issue::new(
                        Code::MultipleDocuments,
                        "a definition file holds one YAML document; this one has a second",
                    )
                    .at("", "", Some(at))
                    .hint("split the documents into one file each"));
                }
            }
            Event::StreamEnd => self.done = true,
            Event::Scalar(text, style, anchor, tag) => {
                let is_str_tag = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !is_str_tag {
                    resolve_plain(&text)
                } else {
                    Value::String(text.into_owned())
                };
                self.finish_node(Node::new(value, at), anchor)?;
            }
            Event::SequenceStart(anchor, _) => {
                self.push(
                    Frame::Seq {
                        span: at,
                        anchor,
                        items: Vec::new(),
                    },
                    at,
                )?;
            }
            Event::MappingStart(anchor, _) => {
                self.push(
                    Frame::Map {
                        span: at,
                        anchor,
                        entries: Vec::new(),
                        key: None,
                    },
                    at,
                )?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq {
                        span,
                        anchor,
                        items,
                    }) => (Node::new(Value::Array(items), span), anchor),
                    Some(Frame::Map {
                        span,
                        anchor,
                        entries,
                        ..
                    }) => (Node::new(Value::Object(entries), span), anchor),
                    None => return Ok(()),
                };
                self.finish_node(node, anchor)?;
            }
            Event::Alias(id) => {
                let node = match self.anchors.get(&id) {
                    Some(n) => Node {
                        span: at,
                        ..n.clone()
                    },
                    None => {
                        return Err(syntax(at, "alias to an anchor that is not defined"));
                    }
                };
                self.nodes += count(&node);
                if self.nodes > MAX_NODES {
                    return Err(syntax(at, "aliases expand to too large a document"));
                }
                self.finish_node(node, 0)?;
            }
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn push(&mut self, frame: Frame, at: Span) -> Result<(), Issue> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(syntax(
                at,
                &format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.stack.push(frame);
        Ok(())
    }

    fn finish_node(&mut self, node: Node, anchor: usize) -> Result<(), Issue> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(syntax(node.span, "document too large"));
        }
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => {
                    let text = match node.value {
                        Value::String(s) => s,
                        Value::Null => String::new(),
                        Value::Bool(b) => b.to_string(),
                        Value::Number(n) => n.to_string(),
                        _ => return Err(syntax(node.span, "only plain keys are supported")),
                    };
                    *key = Some((text, node.span));
                }
                Some((k, key_span)) => {
                    if entries.iter().any(|e| e.key == k) {
                        self.issues.push(
                            Issue::new(Code::DuplicateKey, format!("key `{k}` appears twice"))
                                .at("", &k, Some(key_span))
                                .hint("remove one of them; the first is used"),
                        );
                    } else {
                        entries.push(Entry {
                            key: k,
                            key_span,
                            value: node,
                        });
                    }
                }
            },
        }
        Ok(())
    }
}

fn count(node: &Node) -> usize {
    1 + match &node.value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(entries) => entries.iter().map(|e| count(&e.value)).sum(),
        _ => 0,
    }
}

fn pos(span: &YSpan) -> Span {
    Span::new(to_u32(span.start.line()), to_u32(span.start.col() + 1))
}

fn syntax(at: Span, message: &str) -> Issue {
    let issue = Issue::new(Code::YamlSyntax, message.to_owned()).at("", "", Some(at));
    // What the parser says when a key is indented more or less than its siblings.
    let indentation = [
        "expected key",
        "mapping values are not allowed",
        "block mapping",
        "block sequence",
        "indentation",
        "expected '-'",
    ];
    if indentation.iter().any(|m| message.contains(m)) {
        issue.hint(
            "check the indentation of this line and the one above it: a key lines up with its siblings (spaces, not tabs), and a nested key is indented further than its parent",
        )
    } else {
        issue
    }
}

fn scan_error(e: &ScanError) -> Issue {
    let m = e.marker();
    let at = Span::new(to_u32(m.line()), to_u32(m.col() + 1));
    syntax(at, e.info())
}

/// The YAML 1.2 core schema for plain scalars.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = parse_int(text) {
        return Value::Number(n.into());
    }
    if is_float(text)
        && let Some(n) = text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
    {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

fn parse_int(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return i64::from_str_radix(oct, 8).ok();
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn is_float(text: &str) -> bool {
    let t = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let mut parts = mantissa.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next();
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match frac {
        Some(f) => digits(int) && digits(f) && !(int.is_empty() && f.is_empty()),
        None => !int.is_empty() && digits(int),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        let (node, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        node.expect("parsed")
    }

    #[test]
    fn spans_are_one_based_lines_and_columns() {
        let n = root("name: approval_gate\nsideB:\n  human: true\n");
        let side_b = n.get("sideB").expect("sideB");
        let human = side_b.get("human").expect("human");
        assert_eq!(human.span, Span::new(3, 10));
        assert_eq!(human.value, Value::Bool(true));
        match &side_b.value {
            Value::Object(e) => assert_eq!(e[0].key_span, Span::new(3, 3)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn core_schema_only() {
        let n = root("a: yes\nb: \"true\"\nc: 10\nd: '5'\ne: 1.5\nf: ~\ng: on\nh: 1e3\n");
        assert_eq!(
            n.get("a").map(|v| &v.value),
            Some(&Value::String("yes".into()))
        );
        assert_eq!(
            n.get("b").map(|v| &v.value),
            Some(&Value::String("true".into()))
        );
        assert_eq!(
            n.get("c").map(|v| &v.value),
            Some(&Value::Number(10.into()))
        );
        assert_eq!(
            n.get("d").map(|v| &v.value),
            Some(&Value::String("5".into()))
        );
        assert!(matches!(
            n.get("e").map(|v| &v.value),
            Some(Value::Number(_))
        ));
        assert_eq!(n.get("f").map(|v| &v.value), Some(&Value::Null));
        assert_eq!(
            n.get("g").map(|v| &v.value),
            Some(&Value::String("on".into()))
        );
        assert!(matches!(
            n.get("h").map(|v| &v.value),
            Some(Value::Number(_))
        ));
    }

    #[test]
    fn duplicate_keys_keep_the_first_and_are_reported() {
        let (node, issues) = parse("a: 1\na: 2\n");
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].code, Code::DuplicateKey);
        assert_eq!(issues[0].line, Some(2));
        assert_eq!(
            node.and_then(|n| n.get("a").cloned()).map(|v| v.value),
            Some(Value::Number(1.into()))
        );
    }

    #[test]
    fn syntax_errors_are_located() {
        let (node, issues) = parse("a: [1, 2\nb: 3\n");
        assert!(node.is_none());
        assert_eq!(issues[0].code, Code::YamlSyntax);
        assert!(issues[0].line.is_some());
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let (node, issues) = parse(&text);
        assert!(node.is_none());
        assert_eq!(issues[0].code, Code::YamlSyntax);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = "[".repeat(10_000);
        let (node, issues) = parse(&text);
        assert!(node.is_none());
        assert_eq!(issues.len(), 1);
    }
}
