//! The JSON-RPC 2.0 binding (everything the REST and gRPC paths did not take): reads the
//! envelope, passes the call down, and writes the outcome as `{"jsonrpc","id","result"|"error"}`
//! over HTTP 200. A body that is not JSON is `-32700`, a wrong media type `-32005`, an envelope
//! that is not a request `-32600`: all answered here, before anything else runs.

use std::future::Future;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::config::Limits;
use crate::env::{Binding, Call, Outcome, Params, is_json, read_body};
use crate::error::A2aError;

pub(crate) async fn binding<F: Future<Output = Response>>(
    limits: Limits,
    req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    if req.extensions().get::<Call>().is_some() {
        return next(req).await;
    }
    if req.method() != Method::POST {
        let mut r = reply(
            &Value::Null,
            Err(A2aError::invalid_request("JSON-RPC requests are POSTed")),
        );
        *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        r.headers_mut()
            .insert(header::ALLOW, axum::http::HeaderValue::from_static("POST"));
        return r;
    }
    if let Err(content_type) = is_json(req.headers()) {
        return reply(
            &Value::Null,
            Err(A2aError::content_type_not_supported(&content_type)),
        );
    }
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body, limits.body).await {
        Ok(b) => b,
        Err(e) => return reply(&Value::Null, Err(e)),
    };
    let call = match read_call(&bytes) {
        Ok(call) => call,
        Err((id, e)) => return reply(&id, Err(e)),
    };
    let Binding::JsonRpc { id } = &call.binding else {
        return reply(
            &Value::Null,
            Err(A2aError::internal("a JSON-RPC call without its id")),
        );
    };
    let id = id.clone();
    let mut req = Request::from_parts(parts, Body::empty());
    req.extensions_mut().insert(call);
    let mut response = next(req).await;
    match response.extensions_mut().remove::<Outcome>() {
        Some(Outcome(result)) => reply(&id, result),
        None => response,
    }
}

/// The call a request body makes, or the error it is answered with (and the id to answer it
/// with). A plain, well-formed request is read as it is (its params kept as their text, read straight
/// into the operation's request by triage); anything else is read as a JSON tree, which tells
/// what is wrong with it.
fn read_call(body: &[u8]) -> Result<Call, (Value, A2aError)> {
    if let Some(call) = well_formed(body) {
        return Ok(call);
    }
    let envelope: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            A2aError::parse_error(format!("Parse error: {e}")),
        )
    })?;
    read_envelope(envelope)
}

/// The envelope's members, as a well-formed request has them.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    jsonrpc: String,
    id: Option<Value>,
    method: String,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

/// The call of a body that is one well-formed request (what [`read_envelope`] accepts, with
/// each member once), its params an object's text; `None` for anything else.
fn well_formed(body: &[u8]) -> Option<Call> {
    // An object (serde would also read the struct from an array, by position), and text that
    // reading it checks as a tree would (see `plain`).
    if body.trim_ascii_start().first() != Some(&b'{') || !plain(body) {
        return None;
    }
    let e: Envelope = serde_json::from_slice(body).ok()?;
    if e.jsonrpc != "2.0" {
        return None;
    }
    let id = match e.id {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => return None,
    };
    let params = match e.params.map(RawValue::get) {
        None => Params::Tree(json!({})),
        Some(text) if text.starts_with('{') => Params::Text(text.to_owned()),
        Some(_) => return None,
    };
    Some(Call {
        binding: Binding::JsonRpc { id },
        method: e.method,
        params,
    })
}

/// How deep a body read as text may nest: well inside the parser's limit (128).
const SHALLOW: usize = 64;

/// Whether `body` is text that a typed reading checks as a JSON tree does. A typed reading skips
/// what it does not keep (an unknown member, a raw value's insides) by its syntax alone: not
/// held to the depth limit, a string's escapes not decoded, a number not converted. So the body
/// must be UTF-8, nest at most [`SHALLOW`] deep, hold no control character in a string, escape
/// nothing but a quote, a backslash, a slash, `b`, `f`, `n`, `r`, `t` and a `u` of a character
/// that is not a surrogate, and write each number without an exponent in at most 20
/// characters. Whatever else is wrong with it, the reading itself refuses.
fn plain(body: &[u8]) -> bool {
    if std::str::from_utf8(body).is_err() {
        return false;
    }
    let (mut depth, mut i) = (0usize, 0usize);
    while let Some(&b) = body.get(i) {
        match b {
            b'"' => match string_end(body, i + 1) {
                Some(end) => i = end,
                None => return false,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > SHALLOW {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let len = body[i..]
                    .iter()
                    .take_while(|c| matches!(c, b'-' | b'+' | b'.' | b'0'..=b'9' | b'e' | b'E'))
                    .count();
                if len > 20 || body[i..i + len].iter().any(|c| matches!(c, b'e' | b'E')) {
                    return false;
                }
                i += len - 1;
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// Where a string that starts at `i` (after its opening quote) ends, at its closing quote;
/// `None` when it does not end or is not plain ([`plain`]).
fn string_end(body: &[u8], mut i: usize) -> Option<usize> {
    loop {
        match *body.get(i)? {
            b'"' => return Some(i),
            b'\\' => match *body.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = std::str::from_utf8(body.get(i + 2..i + 6)?).ok()?;
                    let unit = u16::from_str_radix(hex, 16).ok()?;
                    if (0xD800..=0xDFFF).contains(&unit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
}

/// Checks the envelope: an object, `"jsonrpc": "2.0"`, a string `method`, an `id` that is a
/// string, a number or null, and `params` an object (or absent).
fn read_envelope(envelope: Value) -> Result<Call, (Value, A2aError)> {
    let Value::Object(mut obj) = envelope else {
        return Err((
            Value::Null,
            A2aError::invalid_request("a JSON-RPC request is one object (batches are not served)"),
        ));
    };
    let id = match obj.remove("id") {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => {
            return Err((
                Value::Null,
                A2aError::invalid_request("`id` is a string, a number or null"),
            ));
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, A2aError::invalid_request("`jsonrpc` must be \"2.0\"")));
    }
    let Some(Value::String(method)) = obj.remove("method") else {
        return Err((id, A2aError::invalid_request("`method` must be a string")));
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Params::Tree(json!({})),
        Some(p @ Value::Object(_)) => Params::Tree(p),
        Some(_) => {
            return Err((
                id,
                A2aError::invalid_params(
                    "`params` must be an object",
                    vec![("params".into(), "an object".into())],
                ),
            ));
        }
    };
    Ok(Call {
        binding: Binding::JsonRpc { id },
        method,
        params,
    })
}

/// A JSON-RPC response over HTTP 200. Written as text around the result's own (a `json!`
/// envelope would copy the whole result into a new value before writing it).
fn reply(id: &Value, result: Result<String, A2aError>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        envelope(id, result),
    )
        .into_response()
}

/// The text of a JSON-RPC response: `{"jsonrpc","id","result"|"error"}`, compact.
fn envelope(id: &Value, result: Result<String, A2aError>) -> String {
    match result {
        Ok(result) => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
        Err(e) => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#,
            e.to_jsonrpc()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::Operation;

    /// Every body is read as a JSON tree read it (what the binding did before it read a
    /// well-formed request as text): the same id and method, and the same operation or error
    /// once triage reads the params.
    #[test]
    fn a_request_is_read_as_its_json_tree_reads() {
        let send = r#""message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi \"you\"\n"}]}"#;
        let bodies = [
            format!(r#"{{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {{{send}}}}}"#),
            format!(r#"{{"params": {{{send}}}, "method": "SendMessage", "id": "a", "jsonrpc": "2.0"}}"#),
            format!(r#"{{"jsonrpc": "2.0", "id": null, "method": "SendMessage", "params": {{{send}, "configuration": {{"historyLength": 2, "returnImmediately": true}}}}}}"#),
            format!(r#"{{"jsonrpc": "2.0", "method": "SendMessage", "params": {{{send}, "unknown": [1, {{}}]}}}}"#),
            r#"{"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "t.1", "contextId": "", "parts": [{"data": {"z": 1, "a": [1.5, null]}}, {"url": "https://x.test/f", "mediaType": "text/plain", "filename": "f"}, {"raw": "aGk="}]}}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": {"messageId": "", "role": "ROLE_UNSPECIFIED", "parts": []}}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"historyLength": "two"}}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": {"messageId": "a", "messageId": "b", "role": "ROLE_USER", "parts": [{"text": "x"}]}}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {"message": {"message_id": "a", "role": "ROLE_USER", "parts": [{"text": "x"}]}}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 8, "method": "SendMessage", "params": null}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": [1]}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 10, "method": "GetTask", "params": {"id": "t.1", "historyLength": 3}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 11, "method": "GetTask", "params": {"id": "t.1", "historyLength": -1}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 12, "method": "ListTasks", "params": {"pageSize": 5, "status": "TASK_STATE_UNSPECIFIED", "contextId": ""}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 13, "method": "ListTasks"}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 14, "method": "NoSuchMethod", "params": {}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 15, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "t.1", "url": "ftp://x"}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1.5, "method": "CancelTask", "params": {"id": ""}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask", "params": {"id": "t"}}"#.to_owned(),
            r#"{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": 7}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}"#.to_owned(),
            r#"[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}} x"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t""#.to_owned(),
            "".to_owned(),
            " \n".to_owned(),
            r#"["2.0", 1, "GetTask", {"id": "t"}]"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}, "x": 1e400}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}, "x": "\ud800"}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t", "x": 1e400}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\ud800"}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t\ud83d\ude00"}}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t", "historyLength": 1e1}}"#.to_owned(),
        ];
        // Nested past the parser's depth, in the params and in the envelope.
        let mut bodies = bodies.to_vec();
        for depth in [60, 120, 126, 127, 128, 200] {
            let deep = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
            bodies.push(format!(
                r#"{{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {{"message": {{"messageId": "m", "role": "ROLE_USER", "parts": [{{"data": {deep}}}]}}}}}}"#
            ));
            bodies.push(format!(
                r#"{{"jsonrpc": "2.0", "id": {deep}, "method": "GetTask"}}"#
            ));
            bodies.push(format!(
                r#"{{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {{"id": "t"}}, "x": {deep}}}"#
            ));
        }
        let text_bodies = bodies.clone();
        let mut bodies: Vec<Vec<u8>> = bodies.into_iter().map(String::into_bytes).collect();
        // Not UTF-8: in an unknown member, and in the params.
        bodies.push(
            b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"GetTask\", \"params\": {\"id\": \"t\"}, \"x\": \"\xff\"}"
                .to_vec(),
        );
        bodies.push(
            b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"GetTask\", \"params\": {\"id\": \"t\", \"x\": \"\xff\"}}"
                .to_vec(),
        );
        for bytes in &bodies {
            let body = String::from_utf8_lossy(bytes);
            let tree = serde_json::from_slice::<Value>(bytes)
                .map_err(|e| {
                    (
                        Value::Null,
                        A2aError::parse_error(format!("Parse error: {e}")),
                    )
                })
                .and_then(read_envelope);
            let read = read_call(bytes);
            match (tree, read) {
                (Ok(tree), Ok(read)) => {
                    let (Binding::JsonRpc { id: a }, Binding::JsonRpc { id: b }) =
                        (&tree.binding, &read.binding)
                    else {
                        panic!("not JSON-RPC: {body}");
                    };
                    assert_eq!((a, &tree.method), (b, &read.method), "{body}");
                    let Params::Tree(params) = tree.params else {
                        panic!("{body}");
                    };
                    assert_eq!(
                        Operation::parse(&tree.method, params),
                        Operation::parse_params(&read.method, read.params),
                        "{body}"
                    );
                }
                (Err((a, e)), Err((b, f))) => assert_eq!((a, e), (b, f), "{body}"),
                (tree, read) => panic!("{body}: {tree:?} but {read:?}"),
            }
        }
        // What `plain` lets through, and what it leaves to the tree.
        for (text, is_plain) in [
            (
                r#"{"a": "[[[[{{{{", "b": "x\"[[[[\\", "c": [-1.5, 0, 12]}"#,
                true,
            ),
            (r#"{"a": "\u00e9\n\/", "b": [{"c": []}]}"#, true),
            (r#"{"a": "\ud83d\ude00"}"#, false),
            (r#"{"a": "\x"}"#, false),
            (r#"{"a": 1e3}"#, false),
            (r#"{"a": 123456789012345678901}"#, false),
            ("{\"a\": \"tab\there\"}", false),
            (r#"{"a": "open"#, false),
        ] {
            assert_eq!(plain(text.as_bytes()), is_plain, "{text}");
        }
        assert!(!plain(b"{\"a\": \"\xff\"}"));
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(plain(nested(SHALLOW).as_bytes()));
        assert!(!plain(nested(SHALLOW + 1).as_bytes()));
        // The common request is read as text (not as a tree).
        assert!(matches!(
            read_call(text_bodies[0].as_bytes()).map(|c| c.params),
            Ok(Params::Text(_))
        ));
    }

    /// The envelope reads as the value a `json!` envelope would have written, for every kind of
    /// id, a result of any shape, and an error.
    #[test]
    fn the_envelope_is_the_json_rpc_response() {
        let results = [
            json!({"task": {"id": "t\"1\u{7f}\n", "history": [1, 2.5, null, true], "é": {}}}),
            json!([]),
            json!("text"),
            Value::Null,
        ];
        for id in [json!("req-1"), json!(7), json!(-1.5), Value::Null] {
            for result in &results {
                let text = envelope(&id, Ok(result.to_string()));
                let read: Value = serde_json::from_str(&text).expect("JSON");
                assert_eq!(read, json!({"jsonrpc": "2.0", "id": id, "result": result}));
                let keys: Vec<&String> = read.as_object().expect("object").keys().collect();
                assert_eq!(keys, ["jsonrpc", "id", "result"], "{text}");
            }
            let e = A2aError::invalid_request("no");
            let text = envelope(&id, Err(e.clone()));
            let read: Value = serde_json::from_str(&text).expect("JSON");
            assert_eq!(
                read,
                json!({"jsonrpc": "2.0", "id": id, "error": e.to_jsonrpc()})
            );
        }
    }
}
