//! What a server without API keys (`--no-auth`) admits. With no key to present, a browser is
//! the attacker's way in: a page whose name an attacker rebinds to 127.0.0.1 (DNS rebinding)
//! sends requests with its own name as `Host`, and a page of any origin can post a form. So only
//! requests addressed to a loopback name or address — or to `--public-url`'s host — are
//! served, and a state-changing request that a browser says came from another origin (`Origin`,
//! or `Sec-Fetch-Site` without one) is refused. The health probes are always answered.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::problem::Problem;
use crate::state::AppState;

/// The routes answered whoever asks (they say whether the server is up, nothing else).
const PROBES: [&str; 2] = ["/healthz", "/readyz"];

/// The middleware: with auth on, nothing to do.
pub(crate) async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if state.options().auth || PROBES.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(ToString::to_string));
    if !host.as_deref().is_some_and(|h| served_host(&state, h)) {
        return Problem::new(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            format!(
                "this server runs without API keys (--no-auth) and answers only requests to a loopback host or to --public-url's, not to `{}`",
                host.unwrap_or_default().escape_debug()
            ),
        )
        .into_response();
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && !same_origin(&state, req.headers()) {
        return Problem::new(
            StatusCode::FORBIDDEN,
            "cross_origin",
            "this server runs without API keys (--no-auth) and takes no request a browser sent from another site",
        )
        .into_response();
    }
    next.run(req).await
}

/// Whether a server without keys serves requests addressed to `authority`: a loopback host,
/// or the public URL's host.
fn served_host(state: &AppState, authority: &str) -> bool {
    let Some(host) = duet_net::authority_host(authority) else {
        return false;
    };
    duet_net::is_loopback(&host)
        || state
            .options()
            .public_url
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.host().map(|h| h.to_owned()))
            .is_some_and(|public| public == host)
}

/// Whether a browser would say this request came from this server's own pages: no `Origin`
/// (not a browser, or a navigation) and no `Sec-Fetch-Site` naming another site, or an
/// `Origin` that is `http(s)://` + the request's `Host`, or the public URL's origin.
pub(crate) fn same_origin(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_none_or(|site| matches!(site, "same-origin" | "none"));
    };
    let origin = origin.to_str().unwrap_or_default();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let ours = |candidate: &str| {
        url::Url::parse(candidate).is_ok_and(|u| u.origin().ascii_serialization() == origin)
    };
    host.is_some_and(|h| ours(&format!("http://{h}")) || ours(&format!("https://{h}")))
        || state.options().public_url.as_deref().is_some_and(ours)
}
