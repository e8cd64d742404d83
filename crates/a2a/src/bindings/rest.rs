//! The HTTP+JSON binding, under `/rest` (and `/rest/{tenant}`): the verb and path name the
//! operation (`POST /message:send`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel`, …), path
//! segments and query parameters join the body as params, and the outcome is written as the
//! bare object or a `google.rpc.Status` error with the table's HTTP status. Answers in the JSON
//! media type the client used (`application/json` unless it sent `application/a2a+json`).

use std::future::Future;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};

use crate::config::Limits;
use crate::env::{Binding, Call, Outcome, Params, is_json, read_body};
use crate::error::A2aError;

/// The path the REST binding lives under.
pub(crate) const PREFIX: &str = "/rest";

/// The first path segments that start an operation; anything else first is a tenant.
const ROOTS: [&str; 4] = [
    "message:send",
    "message:stream",
    "tasks",
    "extendedAgentCard",
];

pub(crate) async fn binding<F: Future<Output = Response>>(
    limits: Limits,
    req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let path = req.uri().path();
    let Some(rest) = path
        .strip_prefix(PREFIX)
        .filter(|r| r.is_empty() || r.starts_with('/'))
    else {
        return next(req).await;
    };
    let content_type = answer_type(req.headers());
    let segments: Vec<String> = rest
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let (method, mut params) = match route(req.method(), &segments) {
        Ok(found) => found,
        Err(e) => return reply(content_type, Err(e)),
    };
    if let Err(e) = add_query(req.uri().query(), &mut params) {
        return reply(content_type, Err(e));
    }
    let (parts, body) = req.into_parts();
    if parts.method == Method::POST {
        if let Err(ct) = is_json(&parts.headers) {
            let refused = A2aError::content_type_not_supported(&ct)
                .with_http_status(axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
            return reply(content_type, Err(refused));
        }
        let bytes = match read_body(body, limits.body).await {
            Ok(b) => b,
            Err(e) => return reply(content_type, Err(e)),
        };
        if !bytes.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Object(body)) => {
                    if let Err(e) = merge(body, &mut params) {
                        return reply(content_type, Err(e));
                    }
                }
                Ok(_) => {
                    return reply(
                        content_type,
                        Err(A2aError::invalid_params(
                            "the body must be a JSON object",
                            vec![],
                        )),
                    );
                }
                Err(e) => {
                    return reply(
                        content_type,
                        Err(A2aError::parse_error(format!("Parse error: {e}"))),
                    );
                }
            }
        }
    }
    let mut req = Request::from_parts(parts, Body::empty());
    req.extensions_mut().insert(Call {
        binding: Binding::Rest,
        method: method.to_owned(),
        params: Params::Tree(Value::Object(params)),
    });
    let mut response = next(req).await;
    match response.extensions_mut().remove::<Outcome>() {
        Some(Outcome(result)) => reply(content_type, result),
        None => response,
    }
}

/// The operation a verb and path name, with the params the path carries.
fn route(
    verb: &Method,
    segments: &[String],
) -> Result<(&'static str, Map<String, Value>), A2aError> {
    let mut params = Map::new();
    let mut segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    if segs.first().is_some_and(|s| !ROOTS.contains(s)) && segs.len() > 1 {
        params.insert("tenant".into(), Value::String(segs.remove(0).to_owned()));
    }
    let get = verb == Method::GET;
    let post = verb == Method::POST;
    let delete = verb == Method::DELETE;
    let mut put = |k: &str, v: &str| {
        params.insert(k.into(), Value::String(v.to_owned()));
    };
    let op = match segs.as_slice() {
        ["message:send"] if post => "SendMessage",
        ["message:stream"] if post => "SendStreamingMessage",
        ["tasks"] if get => "ListTasks",
        ["extendedAgentCard"] if get => "GetExtendedAgentCard",
        ["tasks", id, "subscribe"] if get || post => {
            put("id", id);
            "SubscribeToTask"
        }
        ["tasks", task, "pushNotificationConfigs"] if post || get => {
            put("taskId", task);
            if post {
                "CreateTaskPushNotificationConfig"
            } else {
                "ListTaskPushNotificationConfigs"
            }
        }
        ["tasks", task, "pushNotificationConfigs", id] if get || delete => {
            put("taskId", task);
            put("id", id);
            if get {
                "GetTaskPushNotificationConfig"
            } else {
                "DeleteTaskPushNotificationConfig"
            }
        }
        ["tasks", id] => match id.rsplit_once(':') {
            Some((id, "cancel")) if post => {
                put("id", id);
                "CancelTask"
            }
            Some((id, "subscribe")) if get || post => {
                put("id", id);
                "SubscribeToTask"
            }
            Some((_, "cancel" | "subscribe")) => return Err(not_allowed(verb)),
            _ if get => {
                put("id", id);
                "GetTask"
            }
            _ => return Err(not_allowed(verb)),
        },
        ["message:send" | "message:stream" | "tasks" | "extendedAgentCard"]
        | ["tasks", _, "subscribe" | "pushNotificationConfigs"]
        | ["tasks", _, "pushNotificationConfigs", _] => return Err(not_allowed(verb)),
        _ => {
            return Err(A2aError::method_not_found(&format!(
                "/{}",
                segments.join("/")
            )));
        }
    };
    Ok((op, params))
}

fn not_allowed(verb: &Method) -> A2aError {
    A2aError::custom(
        -32601,
        405,
        "METHOD_NOT_ALLOWED",
        format!("this path does not take {verb}"),
    )
}

/// Query parameters as params: numbers and booleans where the proto has them.
fn add_query(query: Option<&str>, params: &mut Map<String, Value>) -> Result<(), A2aError> {
    let Some(query) = query else { return Ok(()) };
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let value = match key.as_ref() {
            "historyLength" | "pageSize" => match value.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => return Err(bad(&key, "an integer")),
            },
            "includeArtifacts" => match value.as_ref() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(bad(&key, "true or false")),
            },
            "A2A-Version" => continue,
            _ => Value::String(value.into_owned()),
        };
        params.insert(key.into_owned(), value);
    }
    Ok(())
}

/// Joins the body to the path's params; a body member that contradicts the path is refused.
fn merge(body: Map<String, Value>, params: &mut Map<String, Value>) -> Result<(), A2aError> {
    for (key, value) in body {
        match params.get(&key) {
            Some(from_path) if *from_path != value && !value.is_null() && value != "" => {
                return Err(bad(&key, "differs from the path"));
            }
            Some(_) => {}
            None => {
                params.insert(key, value);
            }
        }
    }
    Ok(())
}

fn bad(field: &str, why: &str) -> A2aError {
    A2aError::invalid_params(
        format!("Invalid params: {field}: {why}"),
        vec![(field.to_owned(), why.to_owned())],
    )
}

/// `application/a2a+json` when the client spoke it, `application/json` otherwise.
fn answer_type(headers: &HeaderMap) -> &'static str {
    let spoke = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/a2a+json"))
    };
    if spoke(header::CONTENT_TYPE) || (spoke(header::ACCEPT) && !accepts_json(headers)) {
        "application/a2a+json"
    } else {
        "application/json"
    }
}

fn accepts_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"))
}

/// A REST response: the object, or the error with its status.
fn reply(content_type: &'static str, result: Result<String, A2aError>) -> Response {
    match result {
        Ok(body) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(e) => (
            e.http_status(),
            [(header::CONTENT_TYPE, content_type)],
            e.to_rest().to_string(),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(verb: Method, path: &str) -> Result<(&'static str, Value), i64> {
        let segs: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        route(&verb, &segs)
            .map(|(op, p)| (op, Value::Object(p)))
            .map_err(|e| e.code())
    }

    #[test]
    fn verbs_and_paths_name_the_operations() {
        use serde_json::json;
        let cases = [
            (
                Method::POST,
                "/message:send",
                Ok(("SendMessage", json!({}))),
            ),
            (
                Method::POST,
                "/acme/message:stream",
                Ok(("SendStreamingMessage", json!({"tenant": "acme"}))),
            ),
            (Method::GET, "/tasks", Ok(("ListTasks", json!({})))),
            (
                Method::GET,
                "/tasks/t1",
                Ok(("GetTask", json!({"id": "t1"}))),
            ),
            (
                Method::POST,
                "/tasks/t1:cancel",
                Ok(("CancelTask", json!({"id": "t1"}))),
            ),
            (
                Method::GET,
                "/tasks/t1:subscribe",
                Ok(("SubscribeToTask", json!({"id": "t1"}))),
            ),
            (
                Method::POST,
                "/tasks/t1:subscribe",
                Ok(("SubscribeToTask", json!({"id": "t1"}))),
            ),
            (
                Method::POST,
                "/tasks/t1/subscribe",
                Ok(("SubscribeToTask", json!({"id": "t1"}))),
            ),
            (
                Method::POST,
                "/tasks/t1/pushNotificationConfigs",
                Ok(("CreateTaskPushNotificationConfig", json!({"taskId": "t1"}))),
            ),
            (
                Method::GET,
                "/tasks/t1/pushNotificationConfigs",
                Ok(("ListTaskPushNotificationConfigs", json!({"taskId": "t1"}))),
            ),
            (
                Method::DELETE,
                "/tasks/t1/pushNotificationConfigs/c",
                Ok((
                    "DeleteTaskPushNotificationConfig",
                    json!({"taskId": "t1", "id": "c"}),
                )),
            ),
            (
                Method::GET,
                "/extendedAgentCard",
                Ok(("GetExtendedAgentCard", json!({}))),
            ),
            (Method::GET, "/message:send", Err(-32601)),
            (Method::DELETE, "/tasks/t1", Err(-32601)),
            (Method::GET, "/nowhere", Err(-32601)),
        ];
        for (verb, path, want) in cases {
            assert_eq!(op(verb.clone(), path), want, "{verb} {path}");
        }
    }
}
