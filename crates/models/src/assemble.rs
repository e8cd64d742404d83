//! Tool calls assembled from streamed pieces, as the servers users run actually send them.
//!
//! OpenAI streams a call as deltas keyed by `index`, the first with the `id` and name, the rest
//! with pieces of the argument text. Other servers differ: vLLM and llama.cpp may send an `id`
//! only on the first delta (or a first delta with an `index` and no `id`), Ollama sends
//! `index: 0` for every parallel call, Gemini's compatible endpoint sends no `index`, some send
//! the `id` and name again on every delta. The rules, in order:
//!
//! - a delta whose `id` is a call's already seen continues that call;
//! - a new `id` with the `index` of a call that has no `id` yet gives that call its `id`;
//! - any other new `id` starts a new call (so Ollama's reused `index: 0` makes two calls);
//! - a delta with an `index` and no `id` continues the latest call with that `index`, unless it
//!   names a tool again after that call's arguments are complete (a second call reusing the
//!   index without an id);
//! - a delta with neither continues the one call still open (arguments not yet a complete JSON
//!   value) when exactly one is; a delta that names a tool otherwise starts a new call, and one
//!   that does not continues the latest call;
//! - arguments are parsed once the answer is complete: empty means `{}`, text that does not
//!   parse is given as a JSON string (the runtime makes it an error result the model sees).
//!
//! Calls without an `id` are given none: the runtime makes one up. Nothing here panics.

use duet_runtime::ModelChunk;
use serde_json::Value;

/// One streamed piece of a tool call, as a server sent it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Delta<'a> {
    pub(crate) index: Option<u64>,
    pub(crate) id: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
    pub(crate) arguments: Option<&'a str>,
}

#[derive(Clone, Debug)]
struct Partial {
    index: Option<u64>,
    id: Option<String>,
    name: String,
    arguments: String,
}

impl Partial {
    /// Whether the arguments so far are a complete JSON value (the call is closed).
    fn complete(&self) -> bool {
        let t = self.arguments.trim();
        !t.is_empty() && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()
    }
}

/// The tool calls of one answer, being assembled.
#[derive(Clone, Debug, Default)]
pub(crate) struct Assembler {
    calls: Vec<Partial>,
}

fn present(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

impl Assembler {
    /// Adds one delta.
    pub(crate) fn push(&mut self, delta: Delta<'_>) {
        let id = present(delta.id);
        let name = present(delta.name);
        let target = match (id, delta.index) {
            (Some(id), index) => self
                .calls
                .iter()
                .rposition(|c| c.id.as_deref() == Some(id))
                .or_else(|| {
                    let i = self
                        .calls
                        .iter()
                        .rposition(|c| index.is_some() && c.index == index)?;
                    let c = &self.calls[i];
                    (c.id.is_none() && !(name.is_some() && !c.name.is_empty() && c.complete()))
                        .then_some(i)
                }),
            (None, Some(index)) => self
                .calls
                .iter()
                .rposition(|c| c.index == Some(index))
                .filter(|&i| {
                    let c = &self.calls[i];
                    !(name.is_some() && !c.name.is_empty() && c.complete())
                }),
            (None, None) => {
                let open: Vec<usize> = (0..self.calls.len())
                    .filter(|&i| !self.calls[i].complete())
                    .collect();
                match (open.as_slice(), name) {
                    ([only], _) => Some(*only),
                    (_, Some(_)) => None,
                    (_, None) => self.calls.len().checked_sub(1),
                }
            }
        };
        let call = match target {
            Some(i) => &mut self.calls[i],
            None => {
                self.calls.push(Partial {
                    index: delta.index,
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                let last = self.calls.len() - 1;
                &mut self.calls[last]
            }
        };
        if call.id.is_none() {
            call.id = id.map(str::to_owned);
        }
        if call.index.is_none() {
            call.index = delta.index;
        }
        if let Some(name) = name
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        if let Some(args) = delta.arguments {
            call.arguments.push_str(args);
        }
    }

    /// The calls, in the order they started, their arguments parsed.
    pub(crate) fn finish(self) -> Vec<ModelChunk> {
        self.calls
            .into_iter()
            .map(|c| ModelChunk::ToolCall {
                id: c.id,
                name: c.name,
                arguments: parse_arguments(&c.arguments),
            })
            .collect()
    }
}

/// A call's argument text as a value: empty is `{}`, JSON is parsed, anything else is kept as
/// the raw text (a JSON string, which the runtime turns into an error result).
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d<'a>(
        index: Option<u64>,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: Option<&'a str>,
    ) -> Delta<'a> {
        Delta {
            index,
            id,
            name,
            arguments,
        }
    }

    fn calls(deltas: &[Delta<'_>]) -> Vec<(Option<String>, String, Value)> {
        let mut a = Assembler::default();
        for delta in deltas {
            a.push(delta.clone());
        }
        a.finish()
            .into_iter()
            .filter_map(|c| match c {
                ModelChunk::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id, name, arguments)),
                _ => None,
            })
            .collect()
    }

    fn call(id: Option<&str>, name: &str, args: Value) -> (Option<String>, String, Value) {
        (id.map(str::to_owned), name.to_owned(), args)
    }

    #[test]
    fn openai_parallel_calls_by_index() {
        let got = calls(&[
            d(Some(0), Some("call_a"), Some("weather"), Some("")),
            d(Some(0), None, None, Some("{\"city\":")),
            d(Some(1), Some("call_b"), Some("time"), Some("")),
            d(Some(0), None, None, Some("\"Paris\"}")),
            d(Some(1), None, None, Some("{}")),
        ]);
        assert_eq!(
            got,
            [
                call(Some("call_a"), "weather", json!({"city": "Paris"})),
                call(Some("call_b"), "time", json!({})),
            ]
        );
    }

    #[test]
    fn the_id_may_come_after_the_first_delta() {
        let got = calls(&[
            d(Some(0), None, Some("weather"), Some("{\"ci")),
            d(Some(0), Some("call_late"), None, Some("ty\":\"Oslo\"}")),
        ]);
        assert_eq!(
            got,
            [call(Some("call_late"), "weather", json!({"city": "Oslo"}))]
        );
    }

    #[test]
    fn a_call_without_any_id_gets_none() {
        let got = calls(&[
            d(Some(0), None, Some("a"), Some("{}")),
            d(Some(1), None, Some("b"), None),
        ]);
        assert_eq!(
            got,
            [call(None, "a", json!({})), call(None, "b", json!({}))]
        );
    }

    #[test]
    fn ollama_reuses_index_zero_with_new_ids() {
        let got = calls(&[
            d(Some(0), Some("call_1"), Some("ls"), Some("{\"dir\":\"/\"}")),
            d(
                Some(0),
                Some("call_2"),
                Some("ls"),
                Some("{\"dir\":\"/tmp\"}"),
            ),
        ]);
        assert_eq!(
            got,
            [
                call(Some("call_1"), "ls", json!({"dir": "/"})),
                call(Some("call_2"), "ls", json!({"dir": "/tmp"})),
            ]
        );
    }

    #[test]
    fn a_reused_index_without_ids_starts_a_call_once_the_first_is_complete() {
        let got = calls(&[
            d(Some(0), None, Some("ls"), Some("{\"dir\":\"/\"}")),
            d(Some(0), None, Some("ls"), Some("{\"dir\":\"/tmp\"}")),
        ]);
        assert_eq!(
            got,
            [
                call(None, "ls", json!({"dir": "/"})),
                call(None, "ls", json!({"dir": "/tmp"})),
            ]
        );
    }

    #[test]
    fn repeated_ids_and_names_continue_the_call() {
        let got = calls(&[
            d(Some(0), Some("c"), Some("f"), Some("{\"a\":")),
            d(Some(0), Some("c"), Some("f"), Some("1}")),
        ]);
        assert_eq!(got, [call(Some("c"), "f", json!({"a": 1}))]);
    }

    #[test]
    fn no_index_continues_the_one_open_call() {
        let got = calls(&[
            d(None, Some("x"), Some("f"), Some("{\"a\"")),
            d(None, None, None, Some(":1}")),
            d(None, Some("y"), Some("g"), Some("{\"b\":2}")),
        ]);
        assert_eq!(
            got,
            [
                call(Some("x"), "f", json!({"a": 1})),
                call(Some("y"), "g", json!({"b": 2})),
            ]
        );
    }

    #[test]
    fn no_index_and_no_id_with_a_name_starts_a_call_when_none_is_open() {
        let got = calls(&[
            d(None, None, Some("f"), Some("{}")),
            d(None, None, Some("g"), Some("{\"q\":")),
            d(None, None, Some("g"), Some("1}")),
        ]);
        assert_eq!(
            got,
            [call(None, "f", json!({})), call(None, "g", json!({"q": 1}))]
        );
    }

    #[test]
    fn unparsable_arguments_are_kept_as_text() {
        let got = calls(&[d(Some(0), Some("c"), Some("f"), Some("{\"a\": 1,"))]);
        assert_eq!(got, [call(Some("c"), "f", json!("{\"a\": 1,"))]);
        assert_eq!(parse_arguments("  "), json!({}));
        assert_eq!(parse_arguments("[1]"), json!([1]));
    }

    #[test]
    fn orphan_pieces_never_panic() {
        let got = calls(&[
            d(None, None, None, Some("{}")),
            d(Some(7), None, None, None),
        ]);
        assert_eq!(got, [call(None, "", json!({})), call(None, "", json!({}))]);
        assert!(calls(&[]).is_empty());
    }
}
