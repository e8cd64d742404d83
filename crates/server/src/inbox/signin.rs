//! Who is looking at the inbox: a person signs in with an API key once, and the browser keeps a
//! session cookie (`HttpOnly`, `SameSite=Strict`, `Secure` behind https) that stands for that
//! key. The cookie's secret is never stored, only its SHA-256 (as for keys), so a database dump
//! signs nobody in; revoking the key, or signing out, ends the session on every process.
//!
//! Every form post is CSRF-checked twice: the `Origin` a browser sends must be this server's, and
//! the form carries a token derived from the session's secret (which no other site can read).

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

use super::form::Form;
use super::layout;
use super::viewer::Viewer;
use crate::auth::{self, Caller};
use crate::service;
use crate::state::AppState;

/// The session cookie's name.
const COOKIE: &str = "duet_inbox";

/// How long a sign-in lasts.
const SIGN_IN_FOR_MS: i64 = 12 * 60 * 60 * 1000;

/// The session cookie's value in `headers`, if any.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The token a session's forms carry: not the secret, but derived from it.
fn csrf_of(secret: &str) -> String {
    hex(&Sha256::digest(
        format!("duet-inbox-csrf:{secret}").as_bytes(),
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why there is no viewer: not signed in.
pub(crate) struct SignedOut {
    /// Where they were going.
    next: String,
    /// Whether the request was a page load (sent to the sign-in page) or a script's (401).
    page: bool,
}

impl IntoResponse for SignedOut {
    fn into_response(self) -> Response {
        if self.page {
            let to = format!("/inbox/sign-in?next={}", crate::views::segment(&self.next));
            Redirect::to(&to).into_response()
        } else {
            (StatusCode::UNAUTHORIZED, "sign in at /inbox/sign-in").into_response()
        }
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = SignedOut;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, SignedOut> {
        if !state.options().auth {
            return Ok(Viewer {
                caller: Caller::anonymous(),
                csrf: None,
            });
        }
        let page = parts.method == axum::http::Method::GET
            && !parts
                .headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|a| a.contains("text/event-stream"));
        let signed_out = || SignedOut {
            next: parts
                .uri
                .path_and_query()
                .map_or("/inbox".into(), |p| p.to_string()),
            page,
        };
        let Some(secret) = cookie(&parts.headers) else {
            return Err(signed_out());
        };
        let now = state.runtime().now_ms();
        let hashed = auth::hash(&secret);
        match service::keys::signed_in(state, &hashed, now).await {
            Ok(Some(key)) if key.revoked_at.is_none() => Ok(Viewer {
                caller: Caller::of(&key, auth::Credential::SignIn(hashed)),
                csrf: Some(csrf_of(&secret)),
            }),
            Ok(_) => Err(signed_out()),
            Err(e) => {
                tracing::warn!(error = %e, "reading a sign-in failed");
                Err(signed_out())
            }
        }
    }
}

/// Whether a form post is this server's own page's: the browser's `Origin` (when it sends one)
/// names this host, and the form's token is the session's.
pub(crate) fn check_post(
    state: &AppState,
    headers: &HeaderMap,
    viewer: Option<&Viewer>,
    form: &Form,
) -> Result<(), Refused> {
    if !crate::auth::loopback::same_origin(state, headers) {
        return Err(Refused("this form was posted from another site"));
    }
    match viewer.and_then(|v| v.csrf.as_deref()) {
        Some(token) if form.get("csrf") != Some(token) => Err(Refused(
            "this form is out of date (its token is not this session's): reload the page",
        )),
        _ => Ok(()),
    }
}

/// A form post refused by [`check_post`]: a 403 page saying why.
pub(crate) struct Refused(&'static str);

impl Refused {
    /// Why.
    pub(crate) fn reason(&self) -> &'static str {
        self.0
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        layout::error_page(StatusCode::FORBIDDEN, self.0)
    }
}

/// `GET /inbox/sign-in`: the sign-in form.
pub(crate) async fn page(
    State(state): State<AppState>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    if !state.options().auth {
        return Redirect::to("/inbox").into_response();
    }
    let next = safe_next(q.get("next").map(String::as_str));
    layout::sign_in(&next, None).into_response()
}

/// Only a path under `/inbox` is somewhere to go after signing in (never another site), and
/// only one a `Location` header can carry (no control characters: a CR/LF would split it).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with("/inbox")
                && !n.contains("//")
                && !n.contains('\\')
                && !n.chars().any(char::is_control) =>
        {
            n.to_owned()
        }
        _ => "/inbox".to_owned(),
    }
}

/// `POST /inbox/sign-in`: checks the key, starts a session, sets its cookie.
pub(crate) async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    form: Form,
) -> Response {
    if let Err(refused) = check_post(&state, &headers, None, &form) {
        return refused.into_response();
    }
    let next = safe_next(form.get("next"));
    let token = form.get("key").unwrap_or_default().trim();
    let again = |why: &str| {
        let mut page = layout::sign_in(&next, Some(why)).into_response();
        *page.status_mut() = StatusCode::UNAUTHORIZED;
        page
    };
    if token.is_empty() {
        return again("Enter your API key.");
    }
    let key_hash = auth::hash(token);
    match service::keys::by_hash_now(&state, &key_hash).await {
        Ok(Some(key)) if key.revoked_at.is_none() => {}
        Ok(Some(_)) => return again("This API key was revoked."),
        Ok(None) => return again("This API key is not known."),
        Err(e) => return layout::error_page(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
    let mut bytes = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut bytes) {
        return layout::error_page(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    let secret = hex(&bytes);
    let now = state.runtime().now_ms();
    let expires = now + SIGN_IN_FOR_MS;
    if let Err(e) =
        service::keys::sign_in(&state, &auth::hash(&secret), &key_hash, now, expires).await
    {
        return layout::error_page(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
    }
    let mut response = Redirect::to(&next).into_response();
    let cookie = format!(
        "{COOKIE}={secret}; Path=/inbox; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SIGN_IN_FOR_MS / 1000,
        if secure(&state, &headers) {
            "; Secure"
        } else {
            ""
        }
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Whether the browser reached this server over https (directly as `--public-url` says, or
/// through a proxy that says so).
fn secure(state: &AppState, headers: &HeaderMap) -> bool {
    state
        .options()
        .public_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"))
        || headers
            .get("x-forwarded-proto")
            .is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// `POST /inbox/sign-out`: ends the session everywhere and clears the cookie.
pub(crate) async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    viewer: Viewer,
    form: Form,
) -> Response {
    if let Err(refused) = check_post(&state, &headers, Some(&viewer), &form) {
        return refused.into_response();
    }
    if let Some(secret) = cookie(&headers)
        && let Err(e) = service::keys::sign_out(&state, &auth::hash(&secret)).await
    {
        return layout::error_page(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
    }
    let mut response = Redirect::to("/inbox/sign-in").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("duet_inbox=; Path=/inbox; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_path_under_the_inbox_is_somewhere_to_go_next() {
        for (next, to) in [
            (Some("/inbox/items/x"), "/inbox/items/x"),
            (Some("/inbox?agent=a"), "/inbox?agent=a"),
            (None, "/inbox"),
            (Some("https://evil.example/inbox"), "/inbox"),
            (Some("//evil.example/inbox"), "/inbox"),
            (Some("/inbox//evil.example"), "/inbox"),
            (Some("/inbox\\evil"), "/inbox"),
            (Some("/inbox\r\nSet-Cookie: x=1"), "/inbox"),
            (Some("/inbox\u{7f}"), "/inbox"),
        ] {
            assert_eq!(super::safe_next(next), to, "{next:?}");
        }
    }
}
