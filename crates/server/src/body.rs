//! Request bodies and query strings, read strictly: JSON only (415 otherwise), within the body
//! limit (413), parsed with the parser's position and the field's path in the error (400),
//! unknown fields refused. A refused request stores nothing: bodies are read before any write.
//! fastagent's wire (invoke and the control plane's POSTs) is read by [`AnyJson`]: a body that
//! parses as JSON is taken whatever its `Content-Type`, as fastagent's server takes it.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use crate::problem::Problem;

/// A JSON body of `T`, read strictly.
pub(crate) struct Json<T>(pub T);

/// Whether `content_type` is JSON (`application/json`, or any `+json` type).
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Parses `bytes` as `T`: a syntax error names its line and column, a type error the field's
/// path.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at = format!("line {} column {}", inner.line(), inner.column());
        let problem = if inner.is_syntax() || inner.is_eof() {
            Problem::bad_request("malformed_json", format!("the body is not JSON: {inner}"))
        } else {
            let field = if path == "." {
                String::new()
            } else {
                format!(" at `{path}`")
            };
            Problem::bad_request(
                "invalid_body",
                format!("the body is invalid{field}: {inner}"),
            )
            .with("path", path.into())
        };
        problem.with("position", at.into())
    })?;
    de.end().map_err(|e| {
        Problem::bad_request("malformed_json", format!("the body is not JSON: {e}"))
    })?;
    Ok(value)
}

impl<S, T> FromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = content_type(&req);
        if !is_json(&content_type) {
            return Err(Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                if content_type.is_empty() {
                    "the body must be JSON: send `Content-Type: application/json`".to_owned()
                } else {
                    format!("the body must be JSON (`application/json`), not `{content_type}`")
                },
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(bytes_rejection)?;
        parse(&bytes).map(Json)
    }
}

/// A JSON body of `T` on fastagent's wire: taken whatever its `Content-Type` when it parses as
/// JSON (fastagent's server reads the body as JSON without looking at the header, and its
/// clients send none). A body that does not parse is refused as [`Json`] refuses it: 415 when it
/// was declared as something other than JSON, else 400 with the parser's position.
pub(crate) struct AnyJson<T>(pub T);

impl<S, T> FromRequest<S> for AnyJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = content_type(&req);
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(bytes_rejection)?;
        let declared_other = !content_type.is_empty() && !is_json(&content_type);
        if declared_other && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() {
            return Err(Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!(
                    "the body must be JSON: it is declared `{content_type}` and does not parse \
                     as JSON"
                ),
            ));
        }
        parse(&bytes).map(AnyJson)
    }
}

/// A body of any type as bytes, within the body limit (413 past it, as a problem): what a
/// thread endpoint's code reads as it likes.
pub(crate) struct RawBody(pub(crate) Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(bytes_rejection)
    }
}

/// The request's declared `Content-Type` (empty when absent or not text).
fn content_type(req: &Request) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn bytes_rejection(e: BytesRejection) -> Problem {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            "the body is larger than this server accepts",
        )
    } else {
        Problem::bad_request("unreadable_body", e.body_text())
    }
}

/// A query string of `T`, unknown parameters refused.
pub(crate) struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e: QueryRejection| Problem::bad_request("invalid_query", e.body_text()))
    }
}

/// A path parameter of `T`, read as the problem shape says (a segment that is not UTF-8 is a
/// 400 `invalid_path`).
pub(crate) struct Path<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e| Problem::bad_request("invalid_path", e.body_text()))
    }
}
