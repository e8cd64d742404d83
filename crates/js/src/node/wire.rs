//! The node host's messages: newline-delimited JSON (`host.mjs` has the list), read a line at a
//! time with a cap on its length.

use duet_runtime::{CodeError, CodeErrorKind};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// A line longer than this is dropped (the host caps a result at half of it).
pub(crate) const MAX_LINE: usize = 64 << 20;

/// What node says.
#[derive(Debug, PartialEq)]
pub(crate) enum Inbound {
    /// Started: its version.
    Ready(String),
    /// Call `id` ended: its result, or why not (the kind and message as node gave them; the
    /// stack unmapped).
    Done(u64, Result<Value, CodeError>),
    /// Call `call`'s code asks state's `method`; answer to `id`.
    Bridge {
        id: String,
        call: u64,
        method: String,
        params: Value,
    },
    /// The answer to ping `id`.
    Pong(u64),
}

/// The message on `line`; `None` for a line that is none of them.
pub(crate) fn parse(line: &[u8]) -> Option<Inbound> {
    let message: Value = serde_json::from_slice(line).ok()?;
    let text = |v: &Value| v.as_str().map(str::to_owned);
    match (&message["id"], message["method"].as_str()) {
        (Value::Null, Some("ready")) => Some(Inbound::Ready(
            text(&message["params"]["node"]).unwrap_or_default(),
        )),
        (Value::String(id), Some("bridge")) => {
            let params = &message["params"];
            Some(Inbound::Bridge {
                id: id.clone(),
                call: params["call"].as_u64()?,
                method: text(&params["method"])?,
                params: params.get("params").cloned().unwrap_or(Value::Null),
            })
        }
        (Value::String(id), None) => id.strip_prefix("p-")?.parse().ok().map(Inbound::Pong),
        (Value::Number(id), None) => {
            let id = id.as_u64()?;
            if let Some(result) = message.get("result") {
                return Some(Inbound::Done(id, Ok(result.clone())));
            }
            let error = message.get("error")?;
            let kind = match error["kind"].as_str() {
                Some("load") => CodeErrorKind::Load,
                _ => CodeErrorKind::Thrown,
            };
            Some(Inbound::Done(
                id,
                Err(CodeError {
                    kind,
                    message: text(&error["message"]).unwrap_or_else(|| "the code failed".into()),
                    stack: text(&error["stack"]),
                    details: Some(error["details"].clone())
                        .filter(serde_json::Value::is_object)
                        .map(Box::new),
                }),
            ))
        }
        _ => None,
    }
}

/// The line that asks node to run call `id`.
pub(crate) fn call(id: u64, call: &duet_runtime::CodeCall) -> String {
    let deadline = u64::try_from(call.limits.deadline.as_millis()).unwrap_or(u64::MAX);
    line(&json!({
        "id": id,
        "method": "call",
        "params": {
            "file": call.file,
            "entry": call.entry,
            "args": call.args,
            "state": call.state,
            "thread": call.thread,
            "call": call.call,
            "stateAt": call.state_at,
            "deadlineMs": deadline,
        },
    }))
}

/// The line that answers bridge request `id`.
pub(crate) fn answer(id: &str, answer: Result<Value, String>) -> String {
    line(&match answer {
        Ok(result) => json!({ "id": id, "result": result }),
        Err(message) => json!({ "id": id, "error": { "message": message } }),
    })
}

/// The line that asks whether node's event loop turns.
pub(crate) fn ping(id: u64) -> String {
    line(&json!({ "id": format!("p-{id}"), "method": "ping" }))
}

/// The line that tells node duet stopped waiting for call `id`.
pub(crate) fn cancel(id: u64) -> String {
    line(&json!({ "method": "cancel", "params": { "call": id } }))
}

fn line(message: &Value) -> String {
    let mut text = message.to_string();
    text.push('\n');
    text
}

/// The next line of `from` into `buf` (without its newline): `Ok(false)` at the end, `Ok(true)`
/// with a line — empty when it was longer than `max` (what came past the cap is skipped).
pub(crate) async fn next_line<R: AsyncBufRead + Unpin>(
    from: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<bool> {
    buf.clear();
    let mut over = false;
    loop {
        let available = from.fill_buf().await?;
        if available.is_empty() {
            return Ok(!buf.is_empty() || over);
        }
        let (chunk, used, done) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (&available[..at], at + 1, true),
            None => (available, available.len(), false),
        };
        if !over && buf.len() + chunk.len() <= max {
            buf.extend_from_slice(chunk);
        } else {
            over = true;
            buf.clear();
        }
        from.consume(used);
        if done {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        assert_eq!(
            parse(br#"{"method":"ready","params":{"node":"v20.1.0"}}"#),
            Some(Inbound::Ready("v20.1.0".into()))
        );
        assert_eq!(
            parse(br#"{"id":3,"result":{"a":1}}"#),
            Some(Inbound::Done(3, Ok(json!({"a": 1}))))
        );
        assert_eq!(
            parse(br#"{"id":3,"result":null}"#),
            Some(Inbound::Done(3, Ok(Value::Null)))
        );
        let Some(Inbound::Done(4, Err(e))) =
            parse(br#"{"id":4,"error":{"kind":"load","message":"Error: gone","stack":null}}"#)
        else {
            panic!("a failed call");
        };
        assert_eq!(e.kind, CodeErrorKind::Load);
        assert_eq!(e.message, "Error: gone");
        assert_eq!(e.stack, None);
        assert_eq!(
            parse(br#"{"id":"b-7","method":"bridge","params":{"call":4,"method":"getValue","params":{"key":"k"}}}"#),
            Some(Inbound::Bridge {
                id: "b-7".into(),
                call: 4,
                method: "getValue".into(),
                params: json!({"key": "k"}),
            })
        );
        assert_eq!(
            parse(br#"{"id":"p-9","result":null}"#),
            Some(Inbound::Pong(9))
        );
        assert_eq!(parse(b"hello"), None);
        assert_eq!(
            parse(br#"{"id":"b-1","method":"bridge","params":{}}"#),
            None
        );
        assert_eq!(parse(br#"{"id":-1,"result":1}"#), None);
    }

    #[tokio::test]
    async fn a_line_past_the_cap_is_skipped_not_kept() {
        let mut from: &[u8] = b"short\nmuch too long\nok\nlast";
        let mut buf = Vec::new();
        let mut lines = Vec::new();
        while next_line(&mut from, &mut buf, 8).await.expect("reads") {
            lines.push(String::from_utf8_lossy(&buf).into_owned());
        }
        assert_eq!(lines, ["short", "", "ok", "last"]);
    }
}
