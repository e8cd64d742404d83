//! Reading typed definitions out of a located [`Node`] tree, collecting every problem.
//!
//! Unlike serde, which stops at the first error, these readers report a problem and carry on,
//! so one pass over a file finds all of its issues.

use std::collections::BTreeMap;

use crate::issue::{Code, Issue};
use crate::node::{Entry, Node, Span, Value};

/// Where issues of one file go.
pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a str,
    pub(crate) issues: &'a mut Vec<Issue>,
    /// For lists whose invalid or duplicate items are dropped while decoding (`parentHooks`,
    /// `sideA.subagents`), the index as written of each item kept; see [`crate::Source`].
    pub(crate) written: BTreeMap<String, Vec<usize>>,
    /// Whether the file was evaluated: its values are computed, so a function or a value JSON
    /// cannot hold where data belongs is a wrong type, not "would need evaluation".
    pub(crate) evaluated: bool,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(file: &'a str, issues: &'a mut Vec<Issue>) -> Self {
        Ctx {
            file,
            issues,
            written: BTreeMap::new(),
            evaluated: false,
        }
    }
}

impl Ctx<'_> {
    pub(crate) fn report(
        &mut self,
        code: Code,
        message: impl Into<String>,
        path: &str,
        span: Span,
    ) {
        self.push(Issue::new(code, message).at(self.file, path, Some(span)));
    }

    pub(crate) fn push(&mut self, mut issue: Issue) {
        issue.file = Some(self.file.to_owned());
        self.issues.push(issue);
    }

    fn wrong_type(&mut self, node: &Node, path: &str, expected: &str) {
        match &node.value {
            Value::Dynamic(d) if !self.evaluated => self.push(
                Issue::new(
                    Code::TsNotStatic,
                    format!(
                        "`{path}` is {}, which would need evaluation; expected {expected}",
                        d.describe()
                    ),
                )
                .at(self.file, path, Some(node.span))
                .hint("write the value out as a literal"),
            ),
            _ => self.report(
                Code::WrongType,
                format!("`{path}` must be {expected}, not {}", node.kind()),
                path,
                node.span,
            ),
        }
    }

    pub(crate) fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.wrong_type(node, path, "a string");
                None
            }
        }
    }

    /// A string that must not be empty (names, references).
    pub(crate) fn name(&mut self, node: &Node, path: &str) -> Option<String> {
        let s = self.string(node, path)?;
        if s.trim().is_empty() {
            self.report(
                Code::InvalidValue,
                format!("`{path}` must not be empty"),
                path,
                node.span,
            );
            return None;
        }
        Some(s)
    }

    pub(crate) fn boolean(&mut self, node: &Node, path: &str) -> Option<bool> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                self.wrong_type(node, path, "`true` or `false`");
                None
            }
        }
    }

    /// A whole number of at least 1.
    pub(crate) fn count(&mut self, node: &Node, path: &str) -> Option<u32> {
        let Value::Number(n) = &node.value else {
            self.wrong_type(node, path, "a whole number");
            return None;
        };
        match n.as_i64() {
            Some(i) if i >= 1 => Some(u32::try_from(i).unwrap_or(u32::MAX)),
            Some(i) => {
                self.report(
                    Code::InvalidValue,
                    format!("`{path}` must be at least 1, not {i}"),
                    path,
                    node.span,
                );
                None
            }
            None => {
                self.wrong_type(node, path, "a whole number");
                None
            }
        }
    }

    pub(crate) fn number(&mut self, node: &Node, path: &str) -> Option<f64> {
        match &node.value {
            Value::Number(n) => n.as_f64(),
            _ => {
                self.wrong_type(node, path, "a number");
                None
            }
        }
    }

    pub(crate) fn array<'n>(&mut self, node: &'n Node, path: &str) -> &'n [Node] {
        match &node.value {
            Value::Array(items) => items,
            _ => {
                self.wrong_type(node, path, "an array");
                &[]
            }
        }
    }

    pub(crate) fn strings(&mut self, node: &Node, path: &str) -> Vec<String> {
        let items = self.array(node, path);
        items
            .iter()
            .enumerate()
            .filter_map(|(i, n)| self.name(n, &format!("{path}[{i}]")))
            .collect()
    }

    pub(crate) fn string_map(&mut self, node: &Node, path: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let Value::Object(entries) = &node.value else {
            self.wrong_type(node, path, "an object of strings");
            return out;
        };
        for e in entries {
            if let Some(v) = self.string(&e.value, &join(path, &e.key)) {
                out.insert(e.key.clone(), v);
            }
        }
        out
    }

    /// Any literal value, as JSON.
    pub(crate) fn json(&mut self, node: &Node, path: &str) -> Option<serde_json::Value> {
        if let Some((d, span)) = node.find_dynamic() {
            if self.evaluated {
                self.report(
                    Code::WrongType,
                    format!("`{path}` holds {}, where data belongs", d.describe()),
                    path,
                    span,
                );
                return None;
            }
            self.push(
                Issue::new(
                    Code::TsNotStatic,
                    format!(
                        "`{path}` holds {}, which would need evaluation",
                        d.describe()
                    ),
                )
                .at(self.file, path, Some(span))
                .hint("write the value out as a literal"),
            );
            return None;
        }
        node.to_json()
    }

    /// A JSON object (free-form options).
    pub(crate) fn json_object(
        &mut self,
        node: &Node,
        path: &str,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        if !matches!(node.value, Value::Object(_)) {
            self.wrong_type(node, path, "an object");
            return None;
        }
        match self.json(node, path)? {
            serde_json::Value::Object(map) => Some(map),
            _ => None,
        }
    }

    /// Reads `node` as an object, or reports that it is not one.
    pub(crate) fn object<'n>(&mut self, node: &'n Node, path: &str) -> Option<Obj<'n>> {
        match &node.value {
            Value::Object(entries) => Some(Obj {
                entries,
                span: node.span,
                path: path.to_owned(),
                used: vec![false; entries.len()],
            }),
            _ => {
                let what = if path.is_empty() {
                    "the definition"
                } else {
                    path
                };
                let message = format!("{what} must be an object, not {}", node.kind());
                match &node.value {
                    Value::Dynamic(_) => self.wrong_type(node, path, "an object"),
                    _ => self.report(Code::WrongType, message, path, node.span),
                }
                None
            }
        }
    }
}

/// `a.b`, or `b` at the root.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// An object being read: fields are taken one by one, and what is left is reported as unknown.
pub(crate) struct Obj<'n> {
    entries: &'n [Entry],
    pub(crate) span: Span,
    pub(crate) path: String,
    used: Vec<bool>,
}

impl<'n> Obj<'n> {
    /// The value of `key`, marking it read.
    pub(crate) fn take(&mut self, key: &str) -> Option<&'n Node> {
        let i = self.entries.iter().position(|e| e.key == key)?;
        self.used[i] = true;
        Some(&self.entries[i].value)
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|e| e.key == key)
    }

    /// Where `key` is written (the object's start if absent).
    pub(crate) fn key_span(&self, key: &str) -> Span {
        self.entries
            .iter()
            .find(|e| e.key == key)
            .map_or(self.span, |e| e.key_span)
    }

    pub(crate) fn path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    pub(crate) fn string(&mut self, ctx: &mut Ctx<'_>, key: &str) -> Option<String> {
        let path = self.path(key);
        self.take(key).and_then(|n| ctx.string(n, &path))
    }

    pub(crate) fn name(&mut self, ctx: &mut Ctx<'_>, key: &str) -> Option<String> {
        let path = self.path(key);
        self.take(key).and_then(|n| ctx.name(n, &path))
    }

    pub(crate) fn boolean(&mut self, ctx: &mut Ctx<'_>, key: &str) -> Option<bool> {
        let path = self.path(key);
        self.take(key).and_then(|n| ctx.boolean(n, &path))
    }

    pub(crate) fn count(&mut self, ctx: &mut Ctx<'_>, key: &str) -> Option<u32> {
        let path = self.path(key);
        self.take(key).and_then(|n| ctx.count(n, &path))
    }

    pub(crate) fn number(&mut self, ctx: &mut Ctx<'_>, key: &str) -> Option<f64> {
        let path = self.path(key);
        self.take(key).and_then(|n| ctx.number(n, &path))
    }

    pub(crate) fn strings(&mut self, ctx: &mut Ctx<'_>, key: &str) -> Vec<String> {
        let path = self.path(key);
        self.take(key)
            .map(|n| ctx.strings(n, &path))
            .unwrap_or_default()
    }

    pub(crate) fn string_map(&mut self, ctx: &mut Ctx<'_>, key: &str) -> BTreeMap<String, String> {
        let path = self.path(key);
        self.take(key)
            .map(|n| ctx.string_map(n, &path))
            .unwrap_or_default()
    }

    pub(crate) fn json_object(
        &mut self,
        ctx: &mut Ctx<'_>,
        key: &str,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        let path = self.path(key);
        self.take(key).and_then(|n| ctx.json_object(n, &path))
    }

    /// A required non-empty string.
    pub(crate) fn required_name(&mut self, ctx: &mut Ctx<'_>, key: &str) -> Option<String> {
        if !self.has(key) {
            let what = if self.path.is_empty() {
                "the definition".to_owned()
            } else {
                format!("`{}`", self.path)
            };
            ctx.report(
                Code::MissingField,
                format!("{what} needs `{key}`"),
                &self.path(key),
                self.span,
            );
            return None;
        }
        self.name(ctx, key)
    }

    /// Reports every key not read so far that `allowed` does not list either.
    pub(crate) fn finish(self, ctx: &mut Ctx<'_>, allowed: &[&str]) {
        for (e, used) in self.entries.iter().zip(&self.used) {
            if *used || allowed.contains(&e.key.as_str()) {
                continue;
            }
            let path = join(&self.path, &e.key);
            let mut issue = Issue::new(
                Code::UnknownField,
                format!("unknown field `{}`; allowed: {}", e.key, allowed.join(", ")),
            )
            .at(ctx.file, &path, Some(e.key_span));
            if let Some(near) = nearest(&e.key, allowed) {
                issue = issue.hint(format!("did you mean `{near}`?"));
            }
            ctx.push(issue);
        }
    }
}

/// The allowed name closest to a misspelt one, when it is close enough to be the intent (an
/// edit distance of at most 2, or a quarter of the name's length). Every "did you mean" of
/// duet's is this one: `duet validate`'s, and the server's and CLI's for an agent's name.
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word_l = word.to_lowercase();
    candidates
        .iter()
        .map(|c| (distance(&word_l, &c.to_lowercase()), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// `^[a-z][a-z0-9_]*$`.
pub(crate) fn is_snake_case(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_close_words_only() {
        assert_eq!(
            nearest("humn", &["human", "prompt", "handler", "label"]),
            Some("human")
        );
        assert_eq!(
            nearest("sessionstop", &["sessionStop", "sessionFail"]),
            Some("sessionStop")
        );
        assert_eq!(nearest("colour", &["human", "prompt"]), None);
    }

    #[test]
    fn snake_case() {
        assert!(is_snake_case("approval_gate2"));
        assert!(!is_snake_case("ApprovalGate"));
        assert!(!is_snake_case("2fa"));
        assert!(!is_snake_case("a-b"));
        assert!(!is_snake_case(""));
    }
}
