//! The JSON-RPC 2.0 binding (everything the REST and gRPC paths did not take): reads the
//! envelope, passes the call down, and writes the outcome as `{"jsonrpc","id","result"|"error"}`
//! over HTTP 200. A body that is not JSON is `-32700`, a wrong media type `-32005`, an envelope
//! that is not a request `-32600`: all answered here, before anything else runs.

use std::future::Future;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::config::Limits;
use crate::env::{Binding, Call, Outcome, is_json, read_body};
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
    let bytes = match read_body(Request::from_parts(parts.clone(), body), limits.body).await {
        Ok(b) => b,
        Err(e) => return reply(&Value::Null, Err(e)),
    };
    let envelope: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return reply(
                &Value::Null,
                Err(A2aError::parse_error(format!("Parse error: {e}"))),
            );
        }
    };
    let call = match read_envelope(envelope) {
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
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p,
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
fn reply(id: &Value, result: Result<Value, A2aError>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        envelope(id, result),
    )
        .into_response()
}

/// The text of a JSON-RPC response: `{"jsonrpc","id","result"|"error"}`, compact.
fn envelope(id: &Value, result: Result<Value, A2aError>) -> String {
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
                let text = envelope(&id, Ok(result.clone()));
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
