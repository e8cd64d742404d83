//! A notification's one-time link (`/links/{token}`): `GET` shows what it would decide and asks
//! to confirm (with a reason, for a reject) — it never decides, since mail scanners and chat
//! unfurlers fetch links on their own —, `POST` decides through the link's approver
//! (`notify::links::follow`), first answer wins. No sign-in: the signed, one-time token is the
//! credential.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::form::Form;
use super::layout::{self, Nav};
use crate::notify::links::{self, Refused};
use crate::notify::router;
use crate::state::AppState;

/// The longest reason kept.
const MAX_REASON: usize = 4_000;

/// `GET /links/{token}`: the confirmation page.
pub(crate) async fn page(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    match links::inspect(&state, &token).await {
        Ok(link) => confirm(&state, &token, &link, None, StatusCode::OK).await,
        Err(why) => refused(&why),
    }
}

/// `POST /links/{token}`: decides.
pub(crate) async fn follow(
    State(state): State<AppState>,
    Path(token): Path<String>,
    form: Form,
) -> Response {
    let reason = form.get("reason").map(str::trim).unwrap_or_default();
    let link = match links::inspect(&state, &token).await {
        Ok(link) => link,
        Err(why) => return refused(&why),
    };
    if link.action == "reject" && reason.is_empty() {
        let error = Some("Say why you reject it: the agent is told.");
        return confirm(
            &state,
            &token,
            &link,
            error,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    if reason.len() > MAX_REASON {
        let error = Some("That reason is too long (4,000 characters at most).");
        return confirm(
            &state,
            &token,
            &link,
            error,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let reason = (!reason.is_empty()).then_some(reason);
    match links::follow(&state, &token, "", reason).await {
        Ok(done) => {
            let verb = past(&done.action);
            let body = html! {
                h1 { (verb) }
                p role="status" { (format!("{verb} by {}. The thread goes on without you.", done.by)) }
                p { a href=(format!("/inbox/items/{}", crate::views::segment(&done.approval))) { "See it in the inbox" } }
            };
            layout::page(verb, None, Nav::Other, body).into_response()
        }
        Err(why) => refused(&why),
    }
}

fn past(action: &str) -> &'static str {
    match action {
        "approve" => "Approved",
        "reject" => "Rejected",
        _ => "Decided",
    }
}

fn refused(why: &Refused) -> Response {
    layout::error_page(why.status(), &why.sentence())
}

/// The page asking to confirm `link`'s decision.
async fn confirm(
    state: &AppState,
    token: &str,
    link: &duet_server_store::Link,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let question = router::describe(state, &link.approval).await;
    let (title, button) = match link.action.as_str() {
        "approve" => ("Approve this call?", "Approve"),
        "reject" => ("Reject this call?", "Reject"),
        _ => ("Decide?", "Decide"),
    };
    let body: Markup = html! {
        h1 { (title) }
        @if let Some(q) = &question {
            @if let Some(call) = &q.call {
                p { "The agent wants to run " code { (call.tool) } " with:" }
                pre { code { (serde_json::to_string_pretty(&call.args).unwrap_or_default()) } }
            } @else {
                p { (q.text) }
            }
            @if let Some(d) = &q.deadline { p.muted { (d) } }
        }
        @if let Some(error) = error { p.error role="alert" { (error) } }
        form.stack method="post" action=(format!("/links/{token}")) {
            @if link.action == "reject" {
                label for="reason" { "Why (the agent is told)" }
                textarea #reason name="reason" required maxlength="4000" rows="4" {}
            }
            button.primary type="submit" { (button) }
        }
        p.muted { "This link works once, until " (layout::iso(link.expires_at)) "." }
    };
    (status, layout::page(title, None, Nav::Other, body)).into_response()
}
