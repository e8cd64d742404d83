//! `/notifications`: the deliveries of notifications the caller may see (sent to it, or about
//! its threads; an admin: all), newest first, with their status, attempts and last error; one
//! by id; a failed one retried (an admin's); and `DELETE /approvals/{id}/links`, revoking the
//! one-time links sent about an approval. Subscriptions are `subscriptions.rs`.

use axum::extract::State;
use axum::http::StatusCode;
use duet_server_store::{DeliveryQuery, DeliveryStatus};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::body::{Path, Query};
use crate::notify::shown::{CHANNELS, DeliveryView};
use crate::problem::Problem;
use crate::service::{notify, threads};
use crate::state::AppState;

/// Filters and a cursor for the deliveries.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only those with this status: `pending`, `delivered` or `failed`.
    pub status: Option<String>,
    /// Only about this thread (its key, as the caller names it).
    pub thread: Option<String>,
    /// Only about this approval (its id).
    pub approval: Option<String>,
    /// Only on this channel: `webhook`, `slack`, `email` or `a2a_push`.
    pub channel: Option<String>,
    /// The `nextCursor` of the previous page: only deliveries older than it.
    pub before: Option<i64>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<usize>,
}

/// A page of deliveries.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeliveryPage {
    /// This page, newest first.
    pub items: Vec<DeliveryView>,
    /// Pass as `before` for the next page; absent on the last. (A page may hold fewer than
    /// `limit` items and still have a next one.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The approval's links revoked.
#[derive(Serialize, ToSchema)]
pub(crate) struct Revoked {
    /// How many links stopped working now (those used, expired or revoked before not counted).
    pub revoked: u64,
}

fn bad(detail: String) -> Problem {
    Problem::bad_request("invalid_query", detail)
}

/// The deliveries of notifications the caller may see — those sent to it, and those about its
/// threads (an admin: every one) — newest first: where each went (a URL without its userinfo
/// and query), its status, attempts and last error. Never a body, a secret or a channel's meta.
#[utoipa::path(get, path = "/notifications", tag = "notifications", params(ListQuery),
    responses((status = 200, description = "A page of deliveries", body = DeliveryPage),
        (status = 400, description = "A filter that is not one", body = crate::problem::ProblemBody),
        (status = 404, description = "`thread`: no such thread the caller may see", body = crate::problem::ProblemBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<DeliveryPage>, Problem> {
    let status = match q.status.as_deref() {
        None => Vec::new(),
        Some(s) => vec![DeliveryStatus::parse(s).ok_or_else(|| {
            bad(format!(
                "status `{s}`: use `pending`, `delivered` or `failed`"
            ))
        })?],
    };
    if let Some(c) = q.channel.as_deref()
        && !CHANNELS.contains(&c)
    {
        return Err(bad(format!(
            "channel `{c}`: use `webhook`, `slack`, `email` or `a2a_push`"
        )));
    }
    for (field, value) in [("approval", &q.approval), ("thread", &q.thread)] {
        crate::input::filter(field, value.as_deref().unwrap_or_default())?;
    }
    let limit = super::threads::page_size(q.limit)?;
    let thread = match q.thread.as_deref() {
        Some(key) => Some(threads::find(&state, &caller, key).await?.id),
        None => None,
    };
    let query = DeliveryQuery {
        status,
        thread,
        subject: q.approval,
        channel: q.channel,
        before: q.before,
        limit,
        ..DeliveryQuery::default()
    };
    let (seen, next) = notify::page(&state, &caller, &query).await?;
    let items = seen
        .into_iter()
        .map(|s| DeliveryView::of(&s.delivery, s.thread))
        .collect();
    Ok(axum::Json(DeliveryPage {
        items,
        next_cursor: next.map(|n| n.to_string()),
    }))
}

/// Delivery `id` read as `caller` may see it (anything else: absent).
async fn seen(state: &AppState, caller: &Caller, id: &str) -> Result<DeliveryView, Problem> {
    let Ok(n) = id.parse::<i64>() else {
        return Err(Problem::not_found(format!(
            "no notification delivery `{id}`"
        )));
    };
    let s = notify::one(state, caller, n).await?;
    Ok(DeliveryView::of(&s.delivery, s.thread))
}

/// One delivery, if the caller may see it.
#[utoipa::path(get, path = "/notifications/{id}", tag = "notifications",
    params(("id" = String, Path, description = "The delivery's id")),
    responses((status = 200, description = "The delivery", body = DeliveryView),
        (status = 404, description = "No such delivery the caller may see", body = crate::problem::ProblemBody)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<DeliveryView>, Problem> {
    Ok(axum::Json(seen(&state, &caller, &id).await?))
}

/// Puts a failed delivery back in the outbox, due now, its attempts counted afresh (an
/// admin's: it sends again).
#[utoipa::path(post, path = "/notifications/{id}/retry", tag = "notifications",
    params(("id" = String, Path, description = "The delivery's id")),
    responses((status = 200, description = "Back in the outbox (`pending`, or already `delivered` by the time it was read)", body = DeliveryView),
        (status = 403, description = "Not an admin", body = crate::problem::ProblemBody),
        (status = 404, description = "No such delivery the caller may see", body = crate::problem::ProblemBody),
        (status = 409, description = "`not_failed`: it is pending or delivered", body = crate::problem::ProblemBody)))]
pub(crate) async fn retry(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<DeliveryView>, Problem> {
    let view = seen(&state, &caller, &id).await?;
    if !caller.admin {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "retrying a delivery sends it again: an admin's to do",
        ));
    }
    notify::retry(&state, &caller, view.id).await?;
    Ok(axum::Json(seen(&state, &caller, &id).await?))
}

/// Revokes the one-time links sent about an approval (those not used yet): following one is
/// refused from now on (410). An admin's, or whoever may decide it.
#[utoipa::path(delete, path = "/approvals/{id}/links", tag = "approvals",
    params(("id" = String, Path, description = "The approval id")),
    responses((status = 200, description = "How many links were revoked", body = Revoked),
        (status = 404, description = "No such approval the caller may decide", body = crate::problem::ProblemBody)))]
pub(crate) async fn revoke_links(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Revoked>, Problem> {
    let revoked = notify::revoke(&state, &caller, &id).await?;
    Ok(axum::Json(Revoked { revoked }))
}
