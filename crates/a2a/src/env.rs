//! What the middleware stack records on a request as it passes down (the seed's Rack env, here
//! typed request extensions) and what the terminal handler leaves on the response for the
//! binding to format ([`Outcome`]).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use serde_json::Value;

use super::card::AgentCard;
use super::error::A2aError;

/// Which binding a call came in on, and what its response needs.
#[derive(Debug, Clone)]
pub(crate) enum Binding {
    /// JSON-RPC 2.0: the request's `id`, echoed in every response.
    JsonRpc { id: Value },
    /// HTTP+JSON.
    Rest,
}

/// A call the binding read: the operation's name and its raw params.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub binding: Binding,
    pub method: String,
    pub params: Params,
}

/// A call's params as the binding has them.
#[derive(Debug, Clone)]
pub(crate) enum Params {
    /// A JSON tree (the REST binding joins the path, the query and the body into one).
    Tree(Value),
    /// The text of a JSON object, as the request had it (JSON-RPC): read straight into the
    /// operation's request.
    Text(String),
}

/// The served card (`env["a2a.agent_card"]`), resolved for this request's URL.
#[derive(Debug, Clone)]
pub(crate) struct Card(pub Arc<AgentCard>);

/// When the card was made, for `Last-Modified`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CardSince(pub chrono::DateTime<chrono::Utc>);

/// The joined text of the request's message (`env["a2a.message"]`).
#[derive(Debug, Clone)]
pub(crate) struct MessageText(pub String);

/// `env["a2a.history_length"]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HistoryLength(pub usize);

/// `env["a2a.page_size"]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageSize(pub usize);

/// A result for the binding to write, left on an otherwise empty response: the result as JSON
/// text, or the error.
#[derive(Debug, Clone)]
pub(crate) struct Outcome(pub Result<String, A2aError>);

/// An empty response carrying `result` for the binding.
pub(crate) fn outcome(result: Result<String, A2aError>) -> Response {
    let mut response = Response::new(Body::empty());
    response.extensions_mut().insert(Outcome(result));
    response
}

/// Whether the request's `Content-Type` (if any) is JSON: `application/json`,
/// `application/a2a+json`, or another `+json`.
pub(crate) fn is_json(headers: &HeaderMap) -> Result<(), String> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let text = value.to_str().unwrap_or("");
    let essence = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
    {
        Ok(())
    } else {
        Err(text.to_owned())
    }
}

/// Reads a whole body, at most `limit` bytes.
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<axum::body::Bytes, A2aError> {
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| A2aError::invalid_request(format!("the body is over {limit} bytes")))
}
