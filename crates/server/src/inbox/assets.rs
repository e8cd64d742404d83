//! The inbox's stylesheet and script, embedded in the binary and served with a long cache life:
//! their URLs carry a hash of their content, so a new build's page asks for the new file.

use std::sync::LazyLock;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::body::Path;

const CSS: &str = include_str!("assets/inbox.css");
const JS: &str = include_str!("assets/inbox.js");

fn version(s: &str) -> String {
    Sha256::digest(s.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The stylesheet's URL.
pub(crate) static CSS_PATH: LazyLock<String> =
    LazyLock::new(|| format!("/inbox/static/inbox.css?v={}", version(CSS)));

/// The script's URL.
pub(crate) static JS_PATH: LazyLock<String> =
    LazyLock::new(|| format!("/inbox/static/inbox.js?v={}", version(JS)));

/// `GET /inbox/static/{file}`.
pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "inbox.css" => (CSS, "text/css; charset=utf-8"),
        "inbox.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response
}
