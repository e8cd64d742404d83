//! TS-like definition files (`export default defineAgent({...})`) into the located [`Node`] tree.
//!
//! The file is parsed with `oxc_parser` and read statically; nothing is ever executed. Literals,
//! arrays, objects and `${}`-free template literals become values; `satisfies X`, `as const` and
//! parentheses are looked through. Anything that would need evaluation becomes
//! [`Value::Dynamic`] (the decoder decides whether that is fine, as for a tool's `execute`), and
//! spreads, computed keys and holes are reported at their line and column. All oxc use lives in
//! this module, because oxc's API changes between minor versions.

use oxc_allocator::Allocator;
use oxc_ast::ast::{
    Argument, ArrayExpressionElement, ExportDefaultDeclarationKind, Expression, ObjectPropertyKind,
    Statement, UnaryOperator,
};
use oxc_parser::Parser;
use oxc_span::{GetSpan, SourceType};

use crate::decode::join;
use crate::issue::{Code, Issue};
use crate::node::{Dynamic, Entry, LineIndex, Node, Span, Value};
use crate::yaml::MAX_DEPTH;

/// What a `.ts` file defines: the define function it calls (`defineAgent`), where, and the
/// object literal it passes.
pub(crate) struct Definition {
    pub(crate) function: String,
    pub(crate) span: Span,
    pub(crate) node: Node,
}

/// Brackets deeper than this are refused before parsing: oxc's parser recurses, and a file of
/// ten thousand `[` must be an error, not a stack overflow.
const MAX_BRACKET_DEPTH: usize = 256;

/// `.ts` definitions larger than this are refused. oxc's parser recurses once per nested
/// expression (`- - - 1`, `a ? b : c ? ...`), up to one level per byte; bounding the size bounds
/// the depth, and [`PARSER_STACK`] is sized for it.
const MAX_TS_BYTES: usize = 256 << 10;
/// The parser thread's stack: at most [`MAX_TS_BYTES`] levels, a few hundred bytes each.
const PARSER_STACK: usize = 512 << 20;

#[cfg(test)]
pub(crate) fn parse(text: &str) -> (Option<Definition>, Vec<Issue>) {
    parse_source(text, false)
}

/// Reads `text`, TypeScript, or JavaScript when `js`.
pub(crate) fn parse_source(text: &str, js: bool) -> (Option<Definition>, Vec<Issue>) {
    if text.len() > MAX_TS_BYTES {
        let issue = Issue::new(
            Code::TsSyntax,
            format!(
                "a `.ts` definition may be at most {} KiB",
                MAX_TS_BYTES >> 10
            ),
        );
        return (None, vec![issue]);
    }
    // A thread of its own: its stack is reserved, not committed, so the size costs nothing
    // unless a pathological file needs it; and a panic inside oxc stays a reported issue.
    let outcome = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("duet-ts-parser".into())
            .stack_size(PARSER_STACK)
            .spawn_scoped(scope, || parse_here(text, js))
            .map(|handle| handle.join())
    });
    match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => (
            None,
            vec![Issue::new(
                Code::TsSyntax,
                "the TypeScript parser failed on this file",
            )],
        ),
        Err(e) => (
            None,
            vec![Issue::new(
                Code::TsSyntax,
                format!("cannot start the TypeScript parser: {e}"),
            )],
        ),
    }
}

fn parse_here(text: &str, js: bool) -> (Option<Definition>, Vec<Issue>) {
    let lines = LineIndex::new(text);
    if let Some(offset) = too_deep(text) {
        let issue = Issue::new(
            Code::TsSyntax,
            "brackets nest too deeply to be a definition",
        )
        .at("", "", Some(lines.span(offset)));
        return (None, vec![issue]);
    }
    let allocator = Allocator::default();
    let source_type = if js {
        SourceType::mjs()
    } else {
        SourceType::ts()
    };
    let ret = Parser::new(&allocator, text, source_type).parse();
    if ret.panicked || !ret.diagnostics.is_empty() {
        let issues = ret
            .diagnostics
            .iter()
            .map(|d| {
                let offset = d.labels.first().map_or(0, |l| l.offset() as usize);
                let mut issue = Issue::new(Code::TsSyntax, d.message.to_string()).at(
                    "",
                    "",
                    Some(lines.span(offset)),
                );
                if let Some(help) = &d.help {
                    issue = issue.hint(help.to_string());
                }
                issue
            })
            .collect::<Vec<_>>();
        if !issues.is_empty() {
            return (None, issues);
        }
        return (
            None,
            vec![Issue::new(Code::TsSyntax, "the file could not be parsed")],
        );
    }

    let mut reader = Reader {
        lines: &lines,
        issues: Vec::new(),
    };
    let mut exports = ret.program.body.iter().filter_map(|s| match s {
        Statement::ExportDefaultDeclaration(e) => Some(e),
        _ => None,
    });
    let export = exports.next();
    // One file, one definition: a second `export default` is an error, not a definition
    // silently dropped (the first is still read, so its own problems are reported too).
    for extra in exports {
        reader.issues.push(
            Issue::new(
                Code::TsMultipleDefaultExports,
                "a definition file has one `export default`; this is another",
            )
            .at("", "", Some(lines.span(extra.span.start as usize)))
            .hint("put each definition in a file of its own"),
        );
    }
    let Some(export) = export else {
        return (
            None,
            vec![no_definition(
                Span::new(1, 1),
                "the file has no `export default`",
            )],
        );
    };
    let at = lines.span(export.span.start as usize);
    let expr = match &export.declaration {
        ExportDefaultDeclarationKind::FunctionDeclaration(_)
        | ExportDefaultDeclarationKind::ClassDeclaration(_)
        | ExportDefaultDeclarationKind::TSInterfaceDeclaration(_) => None,
        other => other.as_expression(),
    };
    let call = match expr.map(Expression::get_inner_expression) {
        Some(Expression::CallExpression(call)) => call,
        _ => {
            return reader.fail(no_definition(
                at,
                "the default export is not a call such as `defineAgent({...})`",
            ));
        }
    };
    let function = match call.callee.get_inner_expression() {
        Expression::Identifier(id) => id.name.to_string(),
        _ => {
            return reader.fail(no_definition(
                at,
                "the default export calls something other than a define function",
            ));
        }
    };
    // The spec's positional `defineEffect(description, argsSchema?, handler)`: read as the
    // object `{ description, args, handler }`.
    let positional = function == "defineEffect"
        && !matches!(
            call.arguments
                .first()
                .and_then(Argument::as_expression)
                .map(Expression::get_inner_expression),
            Some(Expression::ObjectExpression(_)) | None
        );
    if positional {
        let mut values = Vec::new();
        for a in &call.arguments {
            match a {
                Argument::SpreadElement(s) => {
                    reader.not_static(s.span.start, "a spread argument", "")
                }
                other => values.extend(other.as_expression().map(|e| reader.value(e, 0, ""))),
            }
        }
        let span = reader.lines.span(call.span.start as usize);
        return match crate::effect::positional(values) {
            Some(node) => (
                Some(Definition {
                    function,
                    span,
                    node,
                }),
                reader.issues,
            ),
            None => reader.fail(no_definition(
                span,
                "`defineEffect` takes an object literal, or `(description, argsSchema?, handler)` with a string description",
            )),
        };
    }
    let arg = match call.arguments.as_slice() {
        [arg] => arg,
        _ => {
            let span = reader.lines.span(call.span.start as usize);
            return reader.fail(no_definition(
                span,
                &format!("`{function}` must be called with exactly one object literal"),
            ));
        }
    };
    let node = match arg {
        Argument::SpreadElement(s) => {
            reader.not_static(s.span.start, "a spread argument", "");
            None
        }
        other => other.as_expression().map(|e| reader.value(e, 0, "")),
    };
    let span = lines.span(call.span.start as usize);
    let definition = node.map(|node| Definition {
        function,
        span,
        node,
    });
    (definition, reader.issues)
}

fn no_definition(at: Span, message: &str) -> Issue {
    Issue::new(Code::TsNoDefinition, message.to_owned())
        .at("", "", Some(at))
        .hint("write `export default defineAgent({ ... })` (or definePrompt, defineTool, defineHook, defineHandler, defineModel)")
}

/// Where brackets first nest deeper than a definition's may (256), as a byte offset: checked
/// before any parser recurses over `text` (also by `duet-js` before it strips types).
pub fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, b) in text.bytes().enumerate() {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_BRACKET_DEPTH {
                    return Some(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

struct Reader<'l, 's> {
    lines: &'l LineIndex<'s>,
    issues: Vec<Issue>,
}

impl Reader<'_, '_> {
    /// No definition: `issue`, after what was reported so far.
    fn fail(mut self, issue: Issue) -> (Option<Definition>, Vec<Issue>) {
        self.issues.push(issue);
        (None, self.issues)
    }

    fn span(&self, offset: u32) -> Span {
        self.lines.span(offset as usize)
    }

    fn not_static(&mut self, offset: u32, what: &str, path: &str) {
        let span = self.span(offset);
        self.issues.push(
            Issue::new(
                Code::TsNotStatic,
                format!("{what} would need evaluation; duet reads definitions statically"),
            )
            .at("", path, Some(span))
            .hint("write the value out as a literal"),
        );
    }

    fn value(&mut self, expr: &Expression<'_>, depth: usize, path: &str) -> Node {
        let expr = expr.get_inner_expression();
        let at = self.span(expr.span().start);
        if depth > MAX_DEPTH {
            self.not_static(expr.span().start, "nesting this deep", path);
            return Node::new(Value::Null, at);
        }
        let value = match expr {
            Expression::BooleanLiteral(b) => Value::Bool(b.value),
            Expression::NullLiteral(_) => Value::Null,
            Expression::Identifier(id) if id.name == "undefined" => Value::Null,
            Expression::NumericLiteral(n) => number(n.value),
            Expression::UnaryExpression(u) if u.operator == UnaryOperator::UnaryNegation => {
                match u.argument.get_inner_expression() {
                    Expression::NumericLiteral(n) => number(-n.value),
                    _ => Value::Dynamic(Dynamic::Expression),
                }
            }
            Expression::StringLiteral(s) => Value::String(s.value.to_string()),
            Expression::TemplateLiteral(t) if t.expressions.is_empty() => {
                let text = t
                    .quasis
                    .first()
                    .and_then(|q| q.value.cooked.as_ref())
                    .map(|c| c.to_string());
                Value::String(text.unwrap_or_default())
            }
            Expression::ArrayExpression(arr) => {
                let mut items = Vec::with_capacity(arr.elements.len());
                for (i, el) in arr.elements.iter().enumerate() {
                    let item_path = format!("{path}[{i}]");
                    match el {
                        ArrayExpressionElement::SpreadElement(s) => {
                            self.not_static(s.span.start, "a spread (`...`)", &item_path)
                        }
                        ArrayExpressionElement::Elision(e) => {
                            self.not_static(e.span.start, "an array hole", &item_path)
                        }
                        other => {
                            if let Some(e) = other.as_expression() {
                                items.push(self.value(e, depth + 1, &item_path));
                            }
                        }
                    }
                }
                Value::Array(items)
            }
            Expression::ObjectExpression(obj) => {
                let mut entries: Vec<Entry> = Vec::with_capacity(obj.properties.len());
                for prop in &obj.properties {
                    let prop = match prop {
                        ObjectPropertyKind::SpreadProperty(s) => {
                            self.not_static(s.span.start, "a spread (`...`)", path);
                            continue;
                        }
                        ObjectPropertyKind::ObjectProperty(p) => p,
                    };
                    let key_span = self.span(prop.key.span().start);
                    let key = match (prop.computed, prop.key.static_name()) {
                        (false, Some(k)) => k.to_string(),
                        _ => {
                            self.not_static(prop.key.span().start, "a computed key", path);
                            continue;
                        }
                    };
                    let value = if prop.method {
                        Node::new(
                            Value::Dynamic(Dynamic::Function),
                            self.span(prop.value.span().start),
                        )
                    } else {
                        self.value(&prop.value, depth + 1, &join(path, &key))
                    };
                    if entries.iter().any(|e| e.key == key) {
                        self.issues.push(
                            Issue::new(Code::DuplicateKey, format!("key `{key}` appears twice"))
                                .at("", &join(path, &key), Some(key_span))
                                .hint("remove one of them; the first is used"),
                        );
                        continue;
                    }
                    entries.push(Entry {
                        key,
                        key_span,
                        value,
                    });
                }
                Value::Object(entries)
            }
            Expression::ArrowFunctionExpression(_) | Expression::FunctionExpression(_) => {
                Value::Dynamic(Dynamic::Function)
            }
            Expression::Identifier(_) => Value::Dynamic(Dynamic::Identifier),
            _ => Value::Dynamic(Dynamic::Expression),
        };
        Node::new(value, at)
    }
}

pub(crate) fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        // Integral and exactly representable: keep it an integer, as YAML would.
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number((v as i64).into());
    }
    serde_json::Number::from_f64(v).map_or(Value::Dynamic(Dynamic::Expression), Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(text: &str) -> Definition {
        let (d, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        d.expect("a definition")
    }

    #[test]
    fn reads_what_people_write() {
        let d = def(
            r#"import { defineAgent, type AgentConfig } from '@standardagents/spec';
// a comment
/* another */
export default defineAgent({
  name: 'approval_gate',
  "exposeAsTool": true,
  toolDescription: `Request human
approval.`,
  maxSessionTurns: 4,
  sideA: { prompt: 'approval_presenter', },
  sideB: { human: true } as const,
} satisfies AgentConfig);
"#,
        );
        assert_eq!(d.function, "defineAgent");
        assert_eq!(d.span, Span::new(4, 16));
        let n = &d.node;
        assert_eq!(n.get("name").and_then(Node::as_str), Some("approval_gate"));
        assert_eq!(
            n.get("toolDescription").and_then(Node::as_str),
            Some("Request human\napproval.")
        );
        assert_eq!(
            n.get("maxSessionTurns").map(|v| &v.value),
            Some(&Value::Number(4.into()))
        );
        let human = n.get("sideB").and_then(|s| s.get("human")).expect("human");
        assert_eq!(human.value, Value::Bool(true));
        assert_eq!(human.span, Span::new(11, 19));
    }

    #[test]
    fn evaluation_is_data_not_a_crash() {
        let d = def(
            "export default defineTool({ description: 'x', execute: async (s) => { return 1 }, n: base, m() { } })",
        );
        assert_eq!(
            d.node.get("execute").map(|v| &v.value),
            Some(&Value::Dynamic(Dynamic::Function))
        );
        assert_eq!(
            d.node.get("m").map(|v| &v.value),
            Some(&Value::Dynamic(Dynamic::Function))
        );
        assert_eq!(
            d.node.get("n").map(|v| &v.value),
            Some(&Value::Dynamic(Dynamic::Identifier))
        );
    }

    #[test]
    fn spreads_and_computed_keys_are_reported_where_they_are() {
        let (d, issues) =
            parse("export default defineAgent({\n  ...base,\n  [k]: 1,\n  a: [...xs],\n})");
        assert!(d.is_some());
        let places: Vec<_> = issues.iter().map(|i| (i.code, i.line, i.column)).collect();
        assert_eq!(
            places,
            vec![
                (Code::TsNotStatic, Some(2), Some(3)),
                (Code::TsNotStatic, Some(3), Some(4)),
                (Code::TsNotStatic, Some(4), Some(7)),
            ]
        );
    }

    #[test]
    fn syntax_errors_and_missing_exports() {
        let (d, issues) = parse("export default defineAgent({ name: 'x', ");
        assert!(d.is_none());
        assert_eq!(issues[0].code, Code::TsSyntax);
        let (d, issues) = parse("const x = defineAgent({});");
        assert!(d.is_none());
        assert_eq!(issues[0].code, Code::TsNoDefinition);
        let (_, issues) = parse(&"(".repeat(100_000));
        assert_eq!(issues[0].code, Code::TsSyntax);
    }

    #[test]
    fn a_second_default_export_is_an_error_and_the_first_is_read() {
        let (d, issues) = parse(
            "export default defineAgent({ name: 'one' });\n\nexport default defineAgent({ name: 'two' });\n",
        );
        let d = d.expect("the first definition");
        assert_eq!(d.node.get("name").and_then(Node::as_str), Some("one"));
        let places: Vec<_> = issues.iter().map(|i| (i.code, i.line, i.column)).collect();
        assert_eq!(
            places,
            vec![(Code::TsMultipleDefaultExports, Some(3), Some(1))]
        );
        // Reported even when the first export is no definition at all.
        let (d, issues) = parse("export default 1;\nexport default defineAgent({});\n");
        assert!(d.is_none());
        let codes: Vec<_> = issues.iter().map(|i| i.code).collect();
        assert_eq!(
            codes,
            vec![Code::TsMultipleDefaultExports, Code::TsNoDefinition]
        );
    }

    #[test]
    fn pathological_nesting_is_an_issue_not_a_stack_overflow() {
        for chain in ["-", "!", "a ? b : ", "x = ", "typeof "] {
            let body = chain.repeat(MAX_TS_BYTES / chain.len() - 64);
            let text = format!("export default defineAgent({{ name: {body}1 }})");
            let (d, issues) = parse(&text);
            let refused = issues.iter().any(|i| i.code == Code::TsSyntax);
            let dynamic = d.is_some_and(|d| {
                matches!(
                    d.node.get("name").map(|n| &n.value),
                    Some(Value::Dynamic(_))
                )
            });
            assert!(refused || dynamic, "{chain:?}: {issues:?}");
        }
    }
}
