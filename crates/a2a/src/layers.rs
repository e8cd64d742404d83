//! The middleware of the seed's stack that are not bindings, each one job: card injection, the
//! well-known card, the reserved gRPC path, the stream offer, triage, message extraction and the
//! two limits. Each takes the request and the rest of the stack below it (`next`, called at most
//! once); `A2aServer` (`server.rs`) chains them in the seed's order.

use std::future::Future;

use axum::extract::{OriginalUri, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::card::{AgentCard, PROTOCOL_VERSION};
use super::config::{Depends, Limits, Site};
use super::env::{Call, Card, CardSince, HistoryLength, MessageText, PageSize, outcome};
use super::error::A2aError;
use super::operation::Operation;
use super::stream::StreamBuilder;

/// The path of the agent card.
pub const WELL_KNOWN: &str = "/.well-known/agent-card.json";
/// How long anyone may cache a card that is the same for every request (a public URL).
const CARD_PUBLIC: &str = "public, max-age=300";
/// How long a client may cache a card built from its request's headers: not a shared cache,
/// which would hand one client's card to others.
const CARD_PRIVATE: &str = "private, max-age=300";

/// `Env`: resolves the card for the URL this request reached, and records it.
pub(crate) async fn inject_card<F: Future<Output = Response>>(
    site: &Site,
    mut req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let (root, base, depends) = site.urls(&req);
    req.extensions_mut()
        .insert(Card(site.resolved(&base, &root)));
    req.extensions_mut().insert(depends);
    req.extensions_mut().insert(CardSince(site.since));
    next(req).await
}

/// `WellKnown`: `GET /.well-known/agent-card.json`, with `Cache-Control`, an `ETag` and the
/// `Vary` of what its URLs were built from.
pub(crate) async fn well_known<F: Future<Output = Response>>(
    req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    if req.uri().path() != WELL_KNOWN {
        return next(req).await;
    }
    let Some(Card(card)) = req.extensions().get::<Card>().cloned() else {
        return next(req).await;
    };
    let since = req.extensions().get::<CardSince>().copied();
    let depends = req
        .extensions()
        .get::<Depends>()
        .copied()
        .unwrap_or(Depends::Host);
    let body = serde_json::to_string(card.as_ref()).unwrap_or_default();
    let tag = format!("\"{}\"", &hex(&Sha256::digest(body.as_bytes()))[..16]);
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let status = if fresh {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let mut response = if fresh {
        status.into_response()
    } else {
        body.into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(match depends {
            Depends::Nothing => CARD_PUBLIC,
            Depends::Host | Depends::Forwarded => CARD_PRIVATE,
        }),
    );
    if let Some(vary) = depends.vary() {
        h.insert(header::VARY, HeaderValue::from_static(vary));
    }
    if let Ok(tag) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, tag);
    }
    if let Some(CardSince(at)) = since
        && let Ok(at) = HeaderValue::from_str(&at.format("%a, %d %b %Y %H:%M:%S GMT").to_string())
    {
        h.insert(header::LAST_MODIFIED, at);
    }
    response
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `Bindings::Grpc`: `/grpc` is reserved, and answers 501.
pub(crate) async fn grpc<F: Future<Output = Response>>(
    req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let path = req.uri().path();
    if path != "/grpc" && !path.starts_with("/grpc/") {
        return next(req).await;
    }
    let body = json!({"error": {"code": 501, "status": "UNIMPLEMENTED",
        "message": "the gRPC binding is not served; use JSON-RPC or HTTP+JSON (see the agent card)",
        "details": []}});
    (
        StatusCode::NOT_IMPLEMENTED,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `SSEStream`: offers the stream builder, framed for the call's binding.
pub(crate) async fn offer_stream<F: Future<Output = Response>>(
    mut req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    if let Some(call) = req.extensions().get::<Call>() {
        let builder = StreamBuilder {
            binding: call.binding.clone(),
        };
        req.extensions_mut().insert(builder);
    }
    next(req).await
}

/// `Triage`: checks the protocol version, resolves the operation and validates its request,
/// then refuses what the card says the agent does not do. Nothing below runs for a refusal.
pub(crate) async fn triage<F: Future<Output = Response>>(
    mut req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    // The URI the client sent (before a router nested the stack), as `OriginalUri` reads it.
    let uri = req
        .extensions()
        .get::<OriginalUri>()
        .map_or_else(|| req.uri().clone(), |o| o.0.clone());
    let Some(call) = req.extensions_mut().remove::<Call>() else {
        return outcome(Err(A2aError::internal("triage without a binding")));
    };
    let Some(Card(card)) = req.extensions().get::<Card>().cloned() else {
        return outcome(Err(A2aError::internal("triage without a card")));
    };
    if let Err(e) = check_version(req.headers(), uri.query()) {
        return outcome(Err(e));
    }
    // What the card rules out is refused before the params are read: a push config sent to an
    // agent without push is `PushNotificationNotSupported`, however it is written.
    if let Err(e) = offered(&card, &call.method) {
        return outcome(Err(e));
    }
    let op = match Operation::parse_params(&call.method, call.params) {
        Ok(op) => op,
        Err(e) => return outcome(Err(e)),
    };
    if let Err(e) = capable(&card, &op, req.headers()) {
        return outcome(Err(e));
    }
    req.extensions_mut().insert(op);
    next(req).await
}

/// A2A-Version (header, or query parameter): `Major.Minor`, patch ignored; missing or empty
/// means 0.3, which this server does not speak.
fn check_version(headers: &HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
    let from_query = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k.eq_ignore_ascii_case("A2A-Version"))
            .map(|(_, v)| v.into_owned())
    });
    let asked = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .or(from_query)
        .unwrap_or_else(|| "0.3".to_owned());
    let mut parts = asked.split('.');
    let major_minor = (parts.next(), parts.next());
    let wanted = PROTOCOL_VERSION.split_once('.');
    match (major_minor, wanted) {
        ((Some(major), Some(minor)), Some((w_major, w_minor)))
            if major == w_major && minor == w_minor && parts.all(|p| p.parse::<u32>().is_ok()) =>
        {
            Ok(())
        }
        _ => Err(A2aError::version_not_supported(&asked)),
    }
}

/// The card's capabilities gate their operations, by name.
fn offered(card: &AgentCard, method: &str) -> Result<(), A2aError> {
    let caps = &card.capabilities;
    match method {
        "SendStreamingMessage" | "SubscribeToTask" if !caps.streaming => {
            Err(A2aError::unsupported_operation(format!(
                "{method} needs streaming, which this agent does not offer"
            )))
        }
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig"
            if !caps.push_notifications =>
        {
            Err(A2aError::push_notification_not_supported())
        }
        "GetExtendedAgentCard" if !caps.extended_agent_card => Err(
            A2aError::unsupported_operation("this agent does not offer an extended agent card"),
        ),
        _ => Ok(()),
    }
}

/// What only the parsed request shows (a push config inside a message), and the card's
/// required extensions, which the client must name.
fn capable(card: &AgentCard, op: &Operation, headers: &HeaderMap) -> Result<(), A2aError> {
    let caps = &card.capabilities;
    if let Operation::SendMessage(r) | Operation::SendStreamingMessage(r) = op
        && r.configuration
            .as_ref()
            .is_some_and(|c| c.task_push_notification_config.is_some())
        && !caps.push_notifications
    {
        return Err(A2aError::push_notification_not_supported());
    }
    let named: Vec<String> = headers
        .get_all("a2a-extensions")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_owned())
        .collect();
    if let Some(missing) = card
        .required_extensions()
        .find(|uri| !named.iter().any(|n| n == uri))
    {
        return Err(A2aError::extension_support_required(missing));
    }
    Ok(())
}

/// `ExtractMessage`: the joined text of the request's message, when it has one.
pub(crate) async fn extract_message<F: Future<Output = Response>>(
    mut req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let text = req
        .extensions()
        .get::<Operation>()
        .and_then(Operation::message)
        .map(|m| m.text());
    if let Some(text) = text {
        req.extensions_mut().insert(MessageText(text));
    }
    next(req).await
}

/// `LimitHistoryLength`: `min(requested, cap)`, the cap when the client did not ask.
pub(crate) async fn limit_history<F: Future<Output = Response>>(
    limits: Limits,
    mut req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let asked = req
        .extensions()
        .get::<Operation>()
        .and_then(Operation::requested_history);
    let n = asked.map_or(limits.history_length, |n| {
        usize::try_from(n).unwrap_or(0).min(limits.history_length)
    });
    req.extensions_mut().insert(HistoryLength(n));
    next(req).await
}

/// `LimitPaginationSize`: the requested page size clamped to `[1, cap]`, the cap when unset.
pub(crate) async fn limit_page<F: Future<Output = Response>>(
    limits: Limits,
    mut req: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let asked = req
        .extensions()
        .get::<Operation>()
        .and_then(Operation::requested_page_size);
    let n = asked.map_or(limits.page_size, |n| {
        usize::try_from(n)
            .unwrap_or(1)
            .clamp(1, limits.page_size.max(1))
    });
    req.extensions_mut().insert(PageSize(n));
    next(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("a2a-version", HeaderValue::from_str(v).expect("header"));
            check_version(&h, None).map_err(|e| e.code())
        };
        assert_eq!(with("1.0"), Ok(()));
        assert_eq!(with("1.0.3"), Ok(()));
        assert_eq!(with("0.3"), Err(-32009));
        assert_eq!(with("1.1"), Err(-32009));
        assert_eq!(with("2"), Err(-32009));
        assert_eq!(
            check_version(&HeaderMap::new(), None).map_err(|e| e.code()),
            Err(-32009)
        );
        assert_eq!(
            check_version(&HeaderMap::new(), Some("A2A-Version=1.0")),
            Ok(())
        );
    }
}
