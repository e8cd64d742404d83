//! The approval inbox: web pages at `/inbox` where a person answers what waits for them,
//! served by `duet serve` on the same state and code paths as the REST API (a question is an
//! approval of `/approvals`, an answer goes through the same delivery, first answer wins).
//! Server-rendered HTML with a little script for the live parts (SSE) and the keys; nothing to
//! build, everything compiled into the binary.
//!
//! Every response carries a strict Content-Security-Policy (scripts and styles only from this
//! server, no inline script, no framing), so even Markdown the renderer let through could not
//! run a script.

mod assets;
mod attachments;
mod conversation;
mod decide;
mod decision;
mod follow;
mod form;
mod history;
mod item;
mod layout;
mod link;
mod markdown;
mod notified;
mod queue;
mod schema_form;
mod signin;
mod upload;
mod viewer;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::handler::Handler;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};

use crate::state::AppState;

/// What every inbox response says about how it may be used.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The inbox's routes.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/inbox", get(queue::page))
        .route("/inbox/", get(queue::page))
        .route("/inbox/events", get(queue::events))
        .route("/inbox/history", get(history::page))
        // An answer may attach a file: limited by the file limits as it streams, its fields by
        // the body limit (`upload.rs`).
        .route(
            "/inbox/items/{id}",
            get(item::page).post(item::answer.layer(DefaultBodyLimit::disable())),
        )
        .route(
            "/inbox/items/{id}/files/{thread}/{*path}",
            get(attachments::serve),
        )
        .route("/inbox/items/{id}/follow", get(follow::follow))
        .route("/inbox/sign-in", get(signin::page).post(signin::sign_in))
        .route("/inbox/sign-out", post(signin::sign_out))
        .route("/inbox/static/{file}", get(assets::serve))
        .route("/links/{token}", get(link::page).post(link::follow))
        .layer(axum::middleware::from_fn(headers))
}

/// Adds the security headers to every inbox response (and `no-store` to the pages: they show
/// what a person may see, which a shared cache must not keep).
async fn headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
