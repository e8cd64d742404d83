//! Provider options merged into a request body: the model definition's `providerOptions`, then
//! the prompt's over them, each a top-level key of the body. A `null` removes the key (to drop
//! a field a server refuses, such as `stream_options`); the keys that make the call what it is
//! (`model`, `messages`, `stream`) are never replaced.

use serde_json::{Map, Value};

const PROTECTED: &[&str] = &["model", "messages", "stream"];

/// `body` with `model`'s options, then `prompt`'s, merged in.
pub(crate) fn merge(
    body: &mut Map<String, Value>,
    model: &Map<String, Value>,
    prompt: &Map<String, Value>,
) {
    for (key, value) in model.iter().chain(prompt) {
        if PROTECTED.contains(&key.as_str()) {
            tracing::warn!(key, "provider option ignored: duet sets it itself");
            continue;
        }
        if value.is_null() {
            body.remove(key);
        } else {
            body.insert(key.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn the_prompt_wins_null_removes_and_the_call_stays_itself() {
        let mut body = map(
            json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 10}),
        );
        merge(
            &mut body,
            &map(json!({"temperature": 0.2, "top_p": 0.9, "stream": false})),
            &map(json!({"temperature": 0.7, "stream_options": null, "model": "other"})),
        );
        assert_eq!(
            Value::Object(body),
            json!({"model": "m", "stream": true, "max_tokens": 10, "temperature": 0.7, "top_p": 0.9})
        );
    }
}
