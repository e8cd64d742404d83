//! `/threads/{key}/api/…`: a thread's endpoints (the project's `agents/api/` files), any
//! method, authorised as the thread's other routes are (the caller must see the thread). The
//! request goes to the code as it came — less the credentials that admitted it, which are
//! duet's — and its `Response` comes back as the code made it, less hop-by-hop headers; any other
//! value the code returns is a `200` of JSON. No thread or no route is a 404, a path served under
//! other methods a 405 with `Allow`, the code's failure a 500 `endpoint_failed` naming it, and a
//! write to a thread that runs a 409 `thread_busy` with `Retry-After`.

use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use duet_runtime::{EndpointError, EndpointRequest, EndpointResponse};

use crate::auth::Caller;
use crate::body::{Path, RawBody};
use crate::problem::Problem;
use crate::service::{endpoints, threads};
use crate::state::AppState;

/// The OpenAPI entries of the endpoint routes, which are registered for every method by hand
/// (the document names the common ones).
#[derive(utoipa::OpenApi)]
#[openapi(paths(root, nested))]
pub(crate) struct Doc;

/// The request's headers that are not the code's: what admitted the caller.
const WITHHELD: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// Headers of one connection, not of the response (RFC 9110 §7.6.1), and the length, which the
/// server sets from the body.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// The thread's endpoint at the root of its `api/` (`agents/api/index.ts`).
#[utoipa::path(method(get, post, put, patch, delete), path = "/threads/{key}/api", tag = "threads",
    params(("key" = String, Path, description = "The thread's key (percent-encoded)")),
    request_body(content = String, description = "Whatever the endpoint reads", content_type = "*/*"),
    responses((status = 200, description = "What the endpoint's code answered: its `Response` (any status, headers and body), or a value as JSON"),
        (status = 404, description = "No such thread, or no endpoint at this path", body = crate::problem::ProblemBody),
        (status = 405, description = "Endpoints here answer other methods (`Allow`)", body = crate::problem::ProblemBody),
        (status = 409, description = "The thread runs and the endpoint wrote to it (`thread_busy`, `Retry-After`), or it is terminated (`terminated`); nothing was written", body = crate::problem::ProblemBody),
        (status = 500, description = "The endpoint's code failed (`endpoint_failed`, the error as `detail`); nothing it wrote was kept", body = crate::problem::ProblemBody)))]
#[allow(clippy::too_many_arguments)]
pub(crate) async fn root(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
    method: Method,
    uri: Uri,
    OriginalUri(original): OriginalUri,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, Problem> {
    let request = Incoming {
        method,
        uri,
        original,
        headers,
        body: body.to_vec(),
    };
    serve(&state, &caller, &key, request).await
}

/// The thread's endpoint at `path` under its `api/` (`agents/api/orders/[id].get.ts` answers
/// `GET /threads/{key}/api/orders/42`).
#[utoipa::path(method(get, post, put, patch, delete), path = "/threads/{key}/api/{path}", tag = "threads",
    params(("key" = String, Path, description = "The thread's key (percent-encoded)"),
        ("path" = String, Path, description = "The endpoint's path, `/`s and all, as the `agents/api/` files route it")),
    request_body(content = String, description = "Whatever the endpoint reads", content_type = "*/*"),
    responses((status = 200, description = "What the endpoint's code answered: its `Response` (any status, headers and body), or a value as JSON"),
        (status = 404, description = "No such thread, or no endpoint at this path", body = crate::problem::ProblemBody),
        (status = 405, description = "Endpoints here answer other methods (`Allow`)", body = crate::problem::ProblemBody),
        (status = 409, description = "The thread runs and the endpoint wrote to it (`thread_busy`, `Retry-After`), or it is terminated (`terminated`); nothing was written", body = crate::problem::ProblemBody),
        (status = 500, description = "The endpoint's code failed (`endpoint_failed`, the error as `detail`); nothing it wrote was kept", body = crate::problem::ProblemBody)))]
#[allow(clippy::too_many_arguments)]
pub(crate) async fn nested(
    State(state): State<AppState>,
    caller: Caller,
    Path((key, _path)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    OriginalUri(original): OriginalUri,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, Problem> {
    let request = Incoming {
        method,
        uri,
        original,
        headers,
        body: body.to_vec(),
    };
    serve(&state, &caller, &key, request).await
}

/// A request as it came.
struct Incoming {
    method: Method,
    /// The URI as routed here (under a nesting app's prefix, without it).
    uri: Uri,
    /// The URI as the client sent it.
    original: Uri,
    headers: HeaderMap,
    body: Vec<u8>,
}

async fn serve(
    state: &AppState,
    caller: &Caller,
    key: &str,
    req: Incoming,
) -> Result<Response, Problem> {
    let t = threads::find(state, caller, key).await?;
    let path = api_path(req.uri.path()).to_owned();
    let url = format!(
        "{}{}",
        origin(state, &req.headers, &req.original),
        req.original.path_and_query().map_or("/", |p| p.as_str())
    );
    let request = EndpointRequest {
        method: req.method.as_str().to_owned(),
        path,
        query: req.uri.query().map(str::to_owned),
        url,
        headers: req
            .headers
            .iter()
            .filter(|(name, _)| !WITHHELD.contains(&name.as_str()))
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                (name.as_str().to_owned(), value)
            })
            .collect(),
        body: req.body,
    };
    match endpoints::call(state, &t, request).await {
        Ok(answer) => response(answer),
        Err(e) => Ok(refusal(e, key)),
    }
}

/// The path under the thread's `api`: `/threads/KEY/api/orders/42` → `/orders/42` (as sent,
/// percent-encoded; the runtime decodes each segment after splitting).
fn api_path(routed: &str) -> &str {
    let rest = routed.strip_prefix("/threads/").unwrap_or(routed);
    let after_key = rest
        .find('/')
        .map_or("", |at| rest.get(at..).unwrap_or_default());
    after_key.strip_prefix("/api").unwrap_or(after_key)
}

/// The origin clients reached this server at, for the code's `req.url`: the public URL; with
/// forwarded headers trusted, the proxy's scheme and host; else the `Host` when it names a
/// loopback host; else the listener's (as the A2A cards' URLs are made: never a name the
/// request alone says, which the code may echo to others).
pub(crate) fn origin(state: &AppState, headers: &HeaderMap, uri: &Uri) -> String {
    let o = state.options();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .map(|v| v.trim().to_owned())
            .filter(|h| duet_net::authority_host(h).is_some())
    };
    let host = header("host").or_else(|| uri.authority().map(ToString::to_string));
    if let Some(url) = &o.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    if o.trust_forwarded {
        let scheme = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .map(|p| p.trim().to_ascii_lowercase())
            .filter(|p| p == "http" || p == "https")
            .unwrap_or_else(|| "http".to_owned());
        let host = header("x-forwarded-host")
            .or(host)
            .unwrap_or_else(|| "localhost".to_owned());
        return format!("{scheme}://{host}");
    }
    match (host, o.listener) {
        (Some(h), _) if duet_net::is_loopback_authority(&h) => format!("http://{h}"),
        (_, Some(addr)) if addr.ip().is_unspecified() => {
            format!("http://localhost:{}", addr.port())
        }
        (_, Some(addr)) => format!("http://{addr}"),
        (_, None) => "http://localhost".to_owned(),
    }
}

/// The code's answer as an HTTP response: its status, its headers less the hop-by-hop ones,
/// its body (none for `HEAD`: the router strips it). A header HTTP cannot carry fails the call.
fn response(answer: EndpointResponse) -> Result<Response, Problem> {
    let status = StatusCode::from_u16(answer.status).map_err(|_| {
        failed(format!(
            "the endpoint's Response has status {}",
            answer.status
        ))
    })?;
    // A header `Connection` names is of the connection too.
    let named: Vec<String> = answer
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut headers = HeaderMap::new();
    for (name, value) in &answer.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            failed(format!(
                "the endpoint's Response has a header named {name:?}, which is not a header name"
            ))
        })?;
        if HOP_BY_HOP.contains(&name.as_str()) || named.iter().any(|n| n == name.as_str()) {
            continue;
        }
        let value = HeaderValue::from_str(value).map_err(|_| {
            failed(format!(
                "the endpoint's Response has a `{name}` header whose value HTTP cannot carry"
            ))
        })?;
        headers.append(name, value);
    }
    let mut response = (status, Body::from(answer.body)).into_response();
    *response.headers_mut() = headers;
    Ok(response)
}

/// The 500 of an endpoint whose code failed.
fn failed(detail: String) -> Problem {
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "endpoint_failed", detail)
}

/// An endpoint's refusal as a problem (with `Allow` for a 405, `Retry-After` for a busy
/// thread).
fn refusal(e: EndpointError, key: &str) -> Response {
    match e {
        EndpointError::NotFound(what) => Problem::not_found(what).into_response(),
        EndpointError::MethodNotAllowed(allowed) => {
            let allow = allowed.join(", ");
            let mut response = Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("this endpoint answers {allow}"),
            )
            .into_response();
            if let Ok(value) = HeaderValue::from_str(&allow) {
                response.headers_mut().insert(header::ALLOW, value);
            }
            response
        }
        EndpointError::Failed(why) => failed(why).into_response(),
        e @ EndpointError::Busy(_) => {
            let mut response =
                Problem::new(StatusCode::CONFLICT, "thread_busy", e.to_string()).into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        e @ EndpointError::Terminated(_) => {
            Problem::new(StatusCode::CONFLICT, "terminated", e.to_string()).into_response()
        }
        EndpointError::Run(e) => crate::problem::run_error(e, key).into_response(),
        other => Problem::internal(&other).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_path_is_what_follows_the_key() {
        assert_eq!(api_path("/threads/t/api"), "");
        assert_eq!(api_path("/threads/t/api/"), "/");
        assert_eq!(api_path("/threads/a%2Fb/api/orders/4%202"), "/orders/4%202");
    }

    #[test]
    fn hop_by_hop_headers_are_dropped_and_the_rest_kept_in_order() {
        let answer = EndpointResponse {
            status: 202,
            headers: vec![
                ("X-One".into(), "1".into()),
                ("Connection".into(), "close, X-Private".into()),
                ("x-private".into(), "hop".into()),
                ("transfer-encoding".into(), "chunked".into()),
                ("content-length".into(), "999".into()),
                ("set-cookie".into(), "a=1".into()),
                ("set-cookie".into(), "b=2".into()),
            ],
            body: b"ok".to_vec(),
        };
        let r = response(answer).expect("a response");
        assert_eq!(r.status(), 202);
        let names: Vec<&str> = r.headers().keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["x-one", "set-cookie"]);
        assert_eq!(r.headers().get_all("set-cookie").iter().count(), 2);
    }

    #[test]
    fn a_header_http_cannot_carry_fails_the_call() {
        for (name, value) in [("bad name", "v"), ("x-a", "line\nbreak")] {
            let answer = EndpointResponse {
                status: 200,
                headers: vec![(name.into(), value.into())],
                body: Vec::new(),
            };
            let p = response(answer).expect_err("refused");
            assert_eq!((p.status.as_u16(), p.code), (500, "endpoint_failed"));
        }
    }
}
