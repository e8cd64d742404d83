//! `/approvals`: every question waiting for a person, across all threads and children at any
//! depth, and the answer to one. One question, one answer: the first answer wins, a second gets
//! 409 naming the one that won, and nothing of it is written.

use axum::extract::State;

use crate::body::Path;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::deliver::{self, Image, Wait};
use super::threads::{cursor, newest_first, page_size};
use crate::auth::Caller;
use crate::body::{Json, Query};
use crate::problem::Problem;
use crate::service::approvals::{self, Waiting};
use crate::state::AppState;
use crate::views::{AcceptedView, ApprovalView, Page, ThreadView};

/// Filters and a cursor for the approvals.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only questions of this agent's threads.
    pub agent: Option<String>,
    /// `oldest` (default: who has waited longest) or `newest` first.
    pub order: Option<String>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<usize>,
}

/// What waits for a person, a page at a time.
#[utoipa::path(get, path = "/approvals", tag = "approvals", params(ListQuery),
    responses((status = 200, description = "A page of questions", body = Page<ApprovalView>)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<ApprovalView>>, Problem> {
    crate::input::filter("agent", q.agent.as_deref().unwrap_or_default())?;
    let limit = page_size(q.limit)?;
    let w = Waiting {
        agent: q.agent.as_deref(),
        after: cursor(q.cursor.as_deref())?,
        newest_first: newest_first(q.order.as_deref())?,
        limit,
    };
    let threads = approvals::waiting(&state, &caller, &w).await?;
    let next_cursor = (threads.len() == limit)
        .then(|| threads.last().map(|t| t.id.to_string()))
        .flatten();
    let mut items = Vec::with_capacity(threads.len());
    for t in &threads {
        items.extend(approvals::view(&state, &caller, t).await?);
    }
    Ok(axum::Json(Page { items, next_cursor }))
}

/// One question, while it waits.
#[utoipa::path(get, path = "/approvals/{id}", tag = "approvals",
    params(("id" = String, Path, description = "The approval id")),
    responses((status = 200, description = "The question", body = ApprovalView),
        (status = 404, description = "No such approval, or it was answered", body = crate::problem::ProblemBody)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<ApprovalView>, Problem> {
    match approvals::get(&state, &caller, &id).await? {
        Some(v) => Ok(axum::Json(v)),
        None => Err(Problem::not_found(format!(
            "approval `{id}` is no longer waiting"
        ))),
    }
}

/// An answer.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AnswerBody {
    /// What the person says (`approve`, `reject: too risky`, or anything the agent reads).
    pub text: String,
    /// Images with it.
    #[serde(default)]
    pub images: Vec<Image>,
}

/// Answers a question. The first answer wins; a later one gets 409 naming it.
#[utoipa::path(post, path = "/approvals/{id}", tag = "approvals", request_body = AnswerBody,
    params(("id" = String, Path, description = "The approval id"), Wait,
        ("Idempotency-Key" = Option<String>, Header, description = "The message id: a retried answer writes nothing")),
    responses(
        (status = 202, description = "Stored; the thread resumes", body = AcceptedView),
        (status = 200, description = "Settled (`?wait=true`), or a replayed answer", body = ThreadView),
        (status = 404, description = "No such approval", body = crate::problem::ProblemBody),
        (status = 409, description = "Answered first by someone else; nothing was written", body = crate::problem::ProblemBody)))]
pub(crate) async fn answer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(wait): Query<Wait>,
    headers: HeaderMap,
    Json(body): Json<AnswerBody>,
) -> Result<Response, Problem> {
    let message_id = deliver::message_id(&headers)?;
    deliver::check_text(&body.text, &body.images)?;
    let images = deliver::images(&body.images);
    let answer = approvals::Answer {
        text: &body.text,
        images: &images,
        message_id: message_id.as_deref(),
        wait: wait.wait,
    };
    let delivered = approvals::answer(&state, &caller, &id, answer).await?;
    Ok(deliver::respond(&caller, delivered))
}
