//! The located value tree both syntaxes parse into.
//!
//! YAML and TS-like files are first turned into a [`Node`] tree that remembers where every key
//! and value starts. Decoding the definitions from this tree (instead of with serde straight from
//! the text) lets validation report every problem of a file at once, each at its line and column.

use std::fmt;

/// A 1-based line and column (in characters) in a definition file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters.
    pub column: u32,
}

impl Span {
    /// A position at `line`, `column` (both 1-based).
    pub(crate) fn new(line: u32, column: u32) -> Self {
        Span { line, column }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A value with the position where it starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    /// The value.
    pub value: Value,
    /// Where the value starts.
    pub span: Span,
}

/// A value of the tree: JSON's data model, plus a marker for TS expressions that would need
/// evaluation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// `null` (YAML `null`, `~` or nothing; TS `null` or `undefined`).
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number(serde_json::Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Node>),
    /// An object, in source order (duplicate keys are reported while parsing and the first kept).
    Object(Vec<Entry>),
    /// A TS expression that would need evaluation: an identifier, a call, a function...
    /// It is kept (not reported) so a decoder can decide: a function `execute` is expected in a
    /// `.ts` tool, but an identifier where a name belongs is an error.
    Dynamic(Dynamic),
}

/// What kind of expression a [`Value::Dynamic`] stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dynamic {
    /// A function, arrow function or method.
    Function,
    /// An identifier, such as a variable or an imported name.
    Identifier,
    /// Any other expression (a call, an operator, a template with `${}`...).
    Expression,
    /// What an evaluated file computed that JSON cannot hold (a symbol, a `Map`, `NaN`).
    Unsupported,
}

impl Dynamic {
    /// A few words naming the expression, for messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Dynamic::Function => "a function",
            Dynamic::Identifier => "an identifier",
            Dynamic::Expression => "an expression",
            Dynamic::Unsupported => {
                "a value JSON cannot hold (a symbol, a `Map`, a class instance, `NaN`)"
            }
        }
    }
}

/// One key of an object with its value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    /// The key.
    pub key: String,
    /// Where the key starts.
    pub key_span: Span,
    /// The value.
    pub value: Node,
}

impl Node {
    /// A node holding `value` at `span`.
    pub(crate) fn new(value: Value, span: Span) -> Self {
        Node { value, span }
    }

    /// The value of `key` when this node is an object that has it.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Object(entries) => entries.iter().find(|e| e.key == key).map(|e| &e.value),
            _ => None,
        }
    }

    /// The node's string, when it is a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// What kind of value this is, for messages ("a string", "an array"...).
    pub(crate) fn kind(&self) -> &'static str {
        match &self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
            Value::Dynamic(d) => d.describe(),
        }
    }

    /// The value as JSON. `None` when it holds a [`Value::Dynamic`] anywhere.
    pub(crate) fn to_json(&self) -> Option<serde_json::Value> {
        Some(match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(n) => serde_json::Value::Number(n.clone()),
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(items) => serde_json::Value::Array(
                items
                    .iter()
                    .map(Node::to_json)
                    .collect::<Option<Vec<_>>>()?,
            ),
            Value::Object(entries) => {
                let mut map = serde_json::Map::new();
                for e in entries {
                    map.insert(e.key.clone(), e.value.to_json()?);
                }
                serde_json::Value::Object(map)
            }
            Value::Dynamic(_) => return None,
        })
    }

    /// The first dynamic value inside this node, with its position.
    pub(crate) fn find_dynamic(&self) -> Option<(Dynamic, Span)> {
        match &self.value {
            Value::Dynamic(d) => Some((*d, self.span)),
            Value::Array(items) => items.iter().find_map(Node::find_dynamic),
            Value::Object(entries) => entries.iter().find_map(|e| e.value.find_dynamic()),
            _ => None,
        }
    }
}

/// Maps byte offsets of a text to 1-based line and character column.
pub(crate) struct LineIndex<'s> {
    text: &'s str,
    line_starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub(crate) fn new(text: &'s str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, line_starts }
    }

    /// The position of byte `offset` (clamped to the text, rounded down to a char boundary).
    pub(crate) fn span(&self, offset: usize) -> Span {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let column = self.text[start..offset].chars().count() + 1;
        Span::new(to_u32(line + 1), to_u32(column))
    }
}

pub(crate) fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_counts_characters_not_bytes() {
        let idx = LineIndex::new("ab\nçd: x\n");
        assert_eq!(idx.span(0), Span::new(1, 1));
        assert_eq!(idx.span(3), Span::new(2, 1));
        // 'ç' is two bytes; 'd' is the second character of line 2.
        assert_eq!(idx.span(5), Span::new(2, 2));
        assert_eq!(idx.span(4), Span::new(2, 1), "inside a char rounds down");
        assert_eq!(idx.span(999), Span::new(3, 1));
    }
}
