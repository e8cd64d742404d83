//! `/threads`: create a thread with its first message, list threads, read one, terminate one.

use axum::extract::State;

use crate::body::Path;
use axum::http::HeaderMap;
use axum::response::Response;
use duet_runtime::{ParentFilter, ThreadStatus};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::deliver::{self, Image, Inbound, Wait};
use crate::auth::Caller;
use crate::body::{Json, Query};
use crate::input;
use crate::problem::Problem;
use crate::service::threads::{self, Listing, Slot};
use crate::state::AppState;
use crate::views::{AcceptedView, ChildView, Page, ThreadView};

/// A new thread and its first message.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NewThreadBody {
    /// The agent it runs.
    pub agent: String,
    /// Its key (yours to choose; a UUID when absent).
    #[serde(default)]
    pub key: Option<String>,
    /// The first message.
    pub text: String,
    /// Images with it.
    #[serde(default)]
    pub images: Vec<Image>,
}

/// Creates a thread of `agent` with its first message, and runs it. A key that exists is a
/// 409 — unless the request carries the `Idempotency-Key` its first delivery had, which makes a
/// retried create safe (200, nothing written).
#[utoipa::path(post, path = "/threads", tag = "threads", request_body = NewThreadBody,
    params(Wait, ("Idempotency-Key" = Option<String>, Header, description = "The message id")),
    responses(
        (status = 202, description = "Stored; running", body = AcceptedView),
        (status = 200, description = "Settled (`?wait=true`), or a replayed create", body = ThreadView),
        (status = 409, description = "The key is taken", body = crate::problem::ProblemBody),
        (status = 422, description = "Unknown agent or empty text", body = crate::problem::ProblemBody)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Query(wait): Query<Wait>,
    headers: HeaderMap,
    Json(body): Json<NewThreadBody>,
) -> Result<Response, Problem> {
    let message_id = deliver::message_id(&headers)?;
    deliver::check_text(&body.text, &body.images)?;
    let key = body.key.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    input::key("key", &key)?;
    if !state.runtime().project().agents.contains_key(&body.agent) {
        return Err(Problem::unprocessable(
            "unknown_agent",
            crate::problem::no_agent(state.runtime().project(), &body.agent),
        ));
    }
    let stored = caller.stored_key(&key);
    // Another principal's thread is not there; one's own is a conflict — unless this is a
    // retried create, whose message id that thread already has (then nothing is written).
    let existing = match threads::slot(&state, &caller, &key, message_id.as_deref()).await? {
        Slot::Free => None,
        Slot::Replay(t) => Some(*t),
        Slot::Taken => {
            return Err(Problem::new(
                axum::http::StatusCode::CONFLICT,
                "thread_exists",
                format!("a thread `{key}` exists: post to /threads/{{key}}/messages"),
            ));
        }
    };
    let images = deliver::images(&body.images);
    let inbound = Inbound {
        key: &stored,
        agent: Some(&body.agent),
        thread: existing.as_ref(),
        text: &body.text,
        images: &images,
        attachments: &[],
        answers: None,
        message_id: message_id.as_deref(),
        wait: wait.wait,
        for_owner: false,
    };
    deliver::deliver(&state, &caller, inbound).await
}

/// Filters and a cursor for listing threads.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only threads of this agent.
    pub agent: Option<String>,
    /// Only threads with this status: `awaiting_human`, `waiting`, `running`, `idle`,
    /// `terminated`.
    pub status: Option<String>,
    /// Only children of this thread (its key), or `none` for top-level threads.
    pub parent: Option<String>,
    /// `oldest` (default) or `newest` first.
    pub order: Option<String>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<usize>,
}

/// Reads a listing's page size: 1–500, default 50.
pub(crate) fn page_size(limit: Option<usize>) -> Result<usize, Problem> {
    match limit {
        None => Ok(50),
        Some(n) if (1..=500).contains(&n) => Ok(n),
        Some(n) => Err(Problem::bad_request(
            "invalid_query",
            format!("limit {n}: use 1–500"),
        )),
    }
}

/// Reads `order`.
pub(crate) fn newest_first(order: Option<&str>) -> Result<bool, Problem> {
    match order {
        None | Some("oldest") => Ok(false),
        Some("newest") => Ok(true),
        Some(other) => Err(Problem::bad_request(
            "invalid_query",
            format!("order `{other}`: use `oldest` or `newest`"),
        )),
    }
}

/// Reads a cursor (a thread id).
pub(crate) fn cursor(cursor: Option<&str>) -> Result<Option<uuid::Uuid>, Problem> {
    cursor
        .map(|c| {
            c.parse().map_err(|_| {
                Problem::bad_request(
                    "invalid_cursor",
                    format!("cursor `{c}` is not one this server gave"),
                )
            })
        })
        .transpose()
}

/// Lists the caller's threads, a page at a time.
#[utoipa::path(get, path = "/threads", tag = "threads", params(ListQuery),
    responses((status = 200, description = "A page of threads", body = Page<ThreadView>)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<ThreadView>>, Problem> {
    input::filter("agent", q.agent.as_deref().unwrap_or_default())?;
    input::filter("parent", q.parent.as_deref().unwrap_or_default())?;
    let status = q
        .status
        .as_deref()
        .map(|s| {
            ThreadStatus::parse(s).ok_or_else(|| {
                Problem::bad_request(
                    "invalid_query",
                    format!("status `{s}` is not a thread status"),
                )
            })
        })
        .transpose()?;
    let parent = match q.parent.as_deref() {
        None => ParentFilter::Any,
        Some("none") => ParentFilter::TopLevel,
        Some(key) => ParentFilter::Of(threads::find(&state, &caller, key).await?.id),
    };
    let limit = page_size(q.limit)?;
    let listing = Listing {
        agent: q.agent.as_deref(),
        status,
        parent,
        after: cursor(q.cursor.as_deref())?,
        newest_first: newest_first(q.order.as_deref())?,
        limit,
    };
    let page = threads::list(&state, &caller, &listing).await?;
    let next_cursor = (page.len() == limit)
        .then(|| page.last().map(|(t, _)| t.id.to_string()))
        .flatten();
    let items = page
        .iter()
        .map(|(t, parent)| ThreadView::of(t, &caller, parent.as_ref()))
        .collect();
    Ok(axum::Json(Page { items, next_cursor }))
}

/// One thread, with its subagents.
#[utoipa::path(get, path = "/threads/{key}", tag = "threads",
    params(("key" = String, Path, description = "The thread's key (percent-encoded)")),
    responses((status = 200, description = "The thread", body = ThreadView),
        (status = 404, description = "No such thread", body = crate::problem::ProblemBody)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<axum::Json<ThreadView>, Problem> {
    let d = threads::detail(&state, &caller, &key).await?;
    let mut view = ThreadView::of(&d.thread, &caller, d.parent.as_ref());
    let children = d
        .children
        .iter()
        .map(|(c, key)| ChildView::of(c, key, &caller))
        .collect();
    view.children = Some(children);
    Ok(axum::Json(view))
}

/// How many threads a termination ended.
#[derive(Serialize, ToSchema)]
pub(crate) struct Terminated {
    /// The thread and its descendants.
    pub terminated: usize,
}

/// Terminates a thread and every descendant: runs stop, queues are dropped, nothing more is
/// delivered.
#[utoipa::path(post, path = "/threads/{key}/terminate", tag = "threads",
    params(("key" = String, Path, description = "The thread's key (percent-encoded)")),
    responses((status = 200, description = "Terminated", body = Terminated),
        (status = 404, description = "No such thread", body = crate::problem::ProblemBody)))]
pub(crate) async fn terminate(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<axum::Json<Terminated>, Problem> {
    let t = threads::find(&state, &caller, &key).await?;
    let n = threads::terminate(&state, &t)
        .await
        .map_err(|e| Problem::internal(&e))?;
    Ok(axum::Json(Terminated { terminated: n }))
}
