//! `/threads/{key}/effects`: a thread's scheduled effects (and, asked for, its deadlines) with
//! their status, attempts and last error; cancelling a pending one.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use duet_runtime::{Timer, TimerKind, TimerStatus};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::body::{Path, Query};
use crate::problem::Problem;
use crate::service::threads;
use crate::service::timers::{self, Cancelled};
use crate::state::AppState;

/// A timer of a thread: a scheduled effect, or a question's deadline.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EffectView {
    /// Its id (what scheduling it returned).
    pub id: String,
    /// `effect` or `deadline`.
    pub kind: &'static str,
    /// The effect's name, or the deadline's action (`remind`, `escalate`, `default`).
    pub name: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// `pending`, `processing`, `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// When it falls due (its next attempt's time while it is retried), ms since the epoch.
    pub due_at: i64,
    /// How many times it was tried.
    pub attempts: u32,
    /// How many times it may be.
    pub max_attempts: u32,
    /// The last attempt's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// What it belongs to (a deadline's question).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// When it was scheduled (ms).
    pub created_at: i64,
    /// When its status last changed (ms).
    pub updated_at: i64,
}

impl From<Timer> for EffectView {
    fn from(t: Timer) -> Self {
        EffectView {
            id: t.id.to_string(),
            kind: t.kind.as_str(),
            name: t.name,
            args: t.args,
            status: t.status.as_str(),
            due_at: t.due_at,
            attempts: t.attempts,
            max_attempts: t.max_attempts,
            last_error: t.last_error,
            subject: t.subject,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

/// A thread's effects.
#[derive(Serialize, ToSchema)]
pub(crate) struct EffectList {
    /// The latest due first.
    pub items: Vec<EffectView>,
}

/// Which of a thread's timers to list.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct EffectQuery {
    /// `effect` (default): the effects it scheduled; `deadline`: its questions' deadlines.
    pub kind: Option<String>,
    /// Only those with this status: `pending`, `processing`, `completed`, `failed`,
    /// `cancelled`.
    pub status: Option<String>,
    /// At most this many, 1–500 (default 50).
    pub limit: Option<usize>,
}

/// A thread's scheduled effects (or deadlines, `?kind=deadline`), the latest due first.
#[utoipa::path(get, path = "/threads/{key}/effects", tag = "threads", params(
        ("key" = String, Path, description = "The thread's key (percent-encoded)"), EffectQuery),
    responses((status = 200, description = "The thread's effects", body = EffectList),
        (status = 400, description = "A filter that is not one", body = crate::problem::ProblemBody),
        (status = 404, description = "No such thread", body = crate::problem::ProblemBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
    Query(q): Query<EffectQuery>,
) -> Result<axum::Json<EffectList>, Problem> {
    let kind = match q.kind.as_deref() {
        None => TimerKind::Effect,
        Some(k) => TimerKind::parse(k).ok_or_else(|| {
            Problem::bad_request(
                "invalid_query",
                format!("kind `{k}`: use `effect` or `deadline`"),
            )
        })?,
    };
    let status = q
        .status
        .as_deref()
        .map(|s| {
            TimerStatus::parse(s).ok_or_else(|| {
                Problem::bad_request(
                    "invalid_query",
                    format!(
                        "status `{s}`: use `pending`, `processing`, `completed`, `failed` or `cancelled`"
                    ),
                )
            })
        })
        .transpose()?;
    let limit = super::threads::page_size(q.limit)?;
    let t = threads::find(&state, &caller, &key).await?;
    let items = timers::list(&state, &t, kind, status, limit)
        .await?
        .into_iter()
        .map(EffectView::from)
        .collect();
    Ok(axum::Json(EffectList { items }))
}

/// Cancels a thread's pending effect (or deadline): it will not run. One that runs now or is
/// done with is a 409 naming its status.
#[utoipa::path(delete, path = "/threads/{key}/effects/{id}", tag = "threads", params(
        ("key" = String, Path, description = "The thread's key (percent-encoded)"),
        ("id" = String, Path, description = "The effect's id")),
    responses((status = 204, description = "Cancelled"),
        (status = 404, description = "No such thread, or no such effect on it", body = crate::problem::ProblemBody),
        (status = 409, description = "Not pending (`not_pending`, with its `status`), or a question's deadline, which only an answer ends (`not_an_effect`)", body = crate::problem::ProblemBody)))]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    Path((key, id)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let t = threads::find(&state, &caller, &key).await?;
    let Ok(id) = id.parse::<uuid::Uuid>() else {
        return Err(Problem::not_found(format!(
            "thread `{key}` has no effect `{id}`"
        )));
    };
    match timers::cancel(&state, &t, id).await? {
        Cancelled::Done => Ok(StatusCode::NO_CONTENT.into_response()),
        Cancelled::NotPending(status) => Err(Problem::new(
            StatusCode::CONFLICT,
            "not_pending",
            format!(
                "effect {id} is {}: only a pending one can be cancelled",
                status.as_str()
            ),
        )
        .with("status", status.as_str().into())),
        Cancelled::Deadline => Err(Problem::new(
            StatusCode::CONFLICT,
            "not_an_effect",
            format!(
                "{id} is a question's deadline, not an effect: it ends when the question is \
                 answered, and cannot be cancelled"
            ),
        )),
    }
}
