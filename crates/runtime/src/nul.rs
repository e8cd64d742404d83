//! U+0000 (NUL) is stored nowhere: Postgres's `text` and `jsonb` cannot hold it (a commit of
//! one fails, `invalid byte sequence for encoding "UTF8": 0x00`), so a model's reply, a tool's
//! result or code's output that carries one has it replaced by U+FFFD, the replacement
//! character, on every backend alike. The doors that take text from people refuse it instead
//! (they can say so to whoever sent it); a run has nobody to refuse to, and failing its commit
//! would fail the same step again on every retry.

use serde_json::Value;

use crate::record::{Record, RecordBody};
use crate::store::Commit;
use crate::types::{Message, NewQueued};

/// What stands in for a NUL.
pub const REPLACEMENT: char = '\u{FFFD}';

/// Replaces each NUL of `s` with [`REPLACEMENT`]; whether there was one. Allocates only then.
pub fn replace(s: &mut String) -> bool {
    if !s.contains('\0') {
        return false;
    }
    *s = s.replace('\0', "\u{FFFD}");
    true
}

/// `c`, or [`REPLACEMENT`] for a NUL: for text made a character at a time.
pub fn char(c: char) -> char {
    if c == '\0' { REPLACEMENT } else { c }
}

/// A copy of `s` with each NUL replaced by [`REPLACEMENT`].
pub fn cleaned(s: &str) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{FFFD}")
    } else {
        s.to_owned()
    }
}

/// [`replace`] on an optional text.
pub fn replace_opt(s: &mut Option<String>) -> bool {
    s.as_mut().is_some_and(replace)
}

/// [`replace`] in every string of `v`, object keys included; whether there was one.
pub fn replace_json(v: &mut Value) -> bool {
    match v {
        Value::String(s) => replace(s),
        Value::Array(items) => items.iter_mut().fold(false, |any, i| replace_json(i) | any),
        Value::Object(map) => {
            let mut any = false;
            if map.keys().any(|k| k.contains('\0')) {
                let entries = std::mem::take(map);
                for (mut k, v) in entries {
                    replace(&mut k);
                    map.insert(k, v);
                }
                any = true;
            }
            map.values_mut().fold(any, |any, i| replace_json(i) | any)
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Replaces each escaped NUL (`\u0000`) in JSON text `json` with `\ufffd`, in place (the same
/// length); whether there was one. A `\u0000` whose backslash is itself escaped (`\\u0000`,
/// the six characters written out) is text, and stays.
pub fn replace_in_json(json: &mut String) -> bool {
    const ESCAPE: &str = "\\u0000";
    if !json.contains(ESCAPE) {
        return false;
    }
    let at: Vec<usize> = json
        .match_indices(ESCAPE)
        .map(|(i, _)| i)
        .filter(|&i| {
            // Escapes it: an even run of backslashes before it (each pair is one backslash).
            json.as_bytes()[..i]
                .iter()
                .rev()
                .take_while(|&&b| b == b'\\')
                .count()
                % 2
                == 0
        })
        .collect();
    for &i in &at {
        json.replace_range(i..i + ESCAPE.len(), "\\ufffd");
    }
    !at.is_empty()
}

/// `v` as JSON text with no NUL in any of its strings ([`replace_in_json`]).
pub fn json_text(v: &Value) -> String {
    let mut text = v.to_string();
    replace_in_json(&mut text);
    text
}

/// [`replace`] in every text a message is stored with (its text, reasoning, tool calls and
/// their arguments, what its provider keeps with it, names and ids); whether there was one.
pub fn message(m: &mut Message) -> bool {
    let mut any = replace_opt(&mut m.content) | replace_opt(&mut m.thinking);
    for call in &mut m.tool_calls {
        any |= replace(&mut call.id) | replace(&mut call.name) | replace_json(&mut call.arguments);
    }
    any |= replace_opt(&mut m.tool_call_id)
        | replace_opt(&mut m.tool_name)
        | replace_opt(&mut m.model)
        | replace_opt(&mut m.message_id);
    if let Some(data) = &mut m.provider_data {
        any |= replace_json(data);
    }
    any
}

/// [`replace`] in a message to queue: its text and the tool call it answers (a message id
/// or an author comes from a door, which refuses a NUL).
pub fn queued(q: &mut NewQueued) -> bool {
    let mut any = replace(&mut q.content);
    if let Some(tool) = &mut q.tool {
        any |= replace(&mut tool.call_id) | replace(&mut tool.name);
    }
    any
}

/// [`replace`] in every text of a record; whether there was one. Field by field (no
/// serialization: a run's every commit passes here), and every kind named, so a new kind is a
/// compile error here until its texts are.
pub fn record(r: &mut Record) -> bool {
    match &mut r.body {
        RecordBody::SessionStarted { .. }
        | RecordBody::TurnCompleted { .. }
        | RecordBody::RunContinued { .. }
        | RecordBody::QuestionReminded { .. }
        | RecordBody::QuestionEscalated { .. } => false,
        RecordBody::Stopped {
            trace, revision, ..
        } => replace_opt(trace) | replace_opt(revision),
        RecordBody::SessionEnded { result, .. } => replace_opt(result),
        RecordBody::Status { text } => replace(text),
        RecordBody::HandlerError { handler, error, .. } => replace(handler) | replace(error),
        RecordBody::StepError { error } => replace(error),
        RecordBody::Handoff { from, to } => replace(from) | replace(to),
        RecordBody::HookFailed { id, kind, error } => replace(id) | replace(kind) | replace(error),
        RecordBody::ChildAwaited { call, child } => replace(call) | replace(child),
        RecordBody::ApprovalRequested(asked) => {
            replace(&mut asked.call)
                | replace(&mut asked.tool)
                | replace_json(&mut asked.arguments)
                | replace_opt(&mut asked.revision)
                | replace_opt(&mut asked.policy)
        }
        RecordBody::ApprovalDecided(decided) => {
            let args = decided.args.as_mut().is_some_and(replace_json);
            args | replace(&mut decided.call)
                | replace(&mut decided.tool)
                | replace_opt(&mut decided.reason)
                | replace_opt(&mut decided.text)
                | replace_opt(&mut decided.author)
        }
        RecordBody::ToolCallDenied {
            call,
            tool,
            hook,
            reason,
        } => replace(call) | replace(tool) | replace(hook) | replace(reason),
        RecordBody::EffectRan { name, .. } => replace(name),
        RecordBody::EffectFailed { name, error, .. } => replace(name) | replace(error),
        RecordBody::Emitted { event, data } => replace(event) | replace_json(data),
        RecordBody::Unknown { kind, data } => replace(kind) | replace_json(data),
    }
}

/// [`replace`] in every text `c` writes (its messages, records, values, queued messages and
/// timers): the engine's write path does it before each commit, and the in-memory store as it
/// takes one.
pub fn commit(c: &mut Commit) {
    for m in &mut c.messages {
        message(m);
    }
    for r in &mut c.records {
        record(r);
    }
    for (key, value) in &mut c.values {
        replace(key);
        if let Some(v) = value {
            replace_json(v);
        }
    }
    for q in &mut c.enqueue {
        queued(q);
    }
    for t in &mut c.timers {
        replace(&mut t.name);
        replace_json(&mut t.args);
        replace_opt(&mut t.subject);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_nul_is_replaced_and_nothing_else_changes() {
        let mut s = "a\0b\0\0".to_owned();
        assert!(replace(&mut s));
        assert_eq!(s, "a\u{FFFD}b\u{FFFD}\u{FFFD}");
        let mut plain = "no nul, a literal \\u0000".to_owned();
        assert!(!replace(&mut plain));
        assert_eq!(plain, "no nul, a literal \\u0000");
        let mut none = None;
        assert!(!replace_opt(&mut none));
        let made: String = "x\0y".chars().map(char).collect();
        assert_eq!(made, "x\u{FFFD}y");
    }

    #[test]
    fn json_strings_and_keys_are_replaced_at_any_depth() {
        let mut v = json!({"k\0": ["x\0", {"deep": "y\0z"}, 1, null, true], "ok": "\\u0000"});
        assert!(replace_json(&mut v));
        assert_eq!(
            v,
            json!({"k\u{FFFD}": ["x\u{FFFD}", {"deep": "y\u{FFFD}z"}, 1, null, true], "ok": "\\u0000"})
        );
        let mut clean = json!({"a": ["b", 2]});
        assert!(!replace_json(&mut clean));
    }

    #[test]
    fn an_escaped_nul_is_replaced_and_a_written_out_one_is_not() {
        // (JSON text, as it must read after) — a run of backslashes before `u0000` escapes it
        // when odd.
        let cases = [
            (r#""\u0000""#, r#""\ufffd""#),
            (r#""\\u0000""#, r#""\\u0000""#),
            (r#""\\\u0000""#, r#""\\\ufffd""#),
            (
                r#"["a\u0000b","\\u0000","\u0000"]"#,
                r#"["a\ufffdb","\\u0000","\ufffd"]"#,
            ),
            (r#"{"\u0000":1}"#, r#"{"\ufffd":1}"#),
            (r#""\u00001""#, r#""\ufffd1""#),
            (r#""\u0001""#, r#""\u0001""#),
        ];
        for (json, want) in cases {
            let mut text = json.to_owned();
            assert_eq!(replace_in_json(&mut text), json != want, "{json}");
            assert_eq!(text, want, "{json}");
            let mut back: Value = serde_json::from_str(&text).expect("still JSON");
            assert!(!replace_json(&mut back), "a NUL left in {text}");
        }
    }

    #[test]
    fn json_text_has_no_nul_escape_left_and_keeps_a_literal_one() {
        let v = json!({"a": "x\0y", "b": "a literal \\u0000"});
        let text = json_text(&v);
        let back: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(back, json!({"a": "x\u{FFFD}y", "b": "a literal \\u0000"}));
        // No NUL: the text is the value's own.
        let clean = json!({"b": "a literal \\u0000"});
        assert_eq!(json_text(&clean), clean.to_string());
    }
}
