//! `/approvals`: every question waiting for a person, across all threads and children at any
//! depth, and the answer to one. One question, one answer: the first answer wins, a second gets
//! 409 naming the one that won, and nothing of it is written. A tool call whose `approvers` name
//! a role or principal is the business of the keys they name, on whoever's thread
//! (`service::approvers`).

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
use crate::service::approvals;
use crate::service::deliveries::Landed;
use crate::service::waiting::{self, Waiting};
use crate::state::AppState;
use crate::views::{ApprovalView, Page, ThreadView, segment};
use duet_runtime::DecisionInput;
use duet_runtime::approval::{Decision, RememberScope};

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
    /// `true`: also threads waiting for their end user's next message (parked agents whose
    /// human side is not declared `approver`). Default: approvals only — tool calls waiting
    /// for a decision, and questions of approver agents.
    #[serde(default)]
    pub all: bool,
}

/// What waits for the caller's decision, a page at a time: tool calls that need approval (its
/// own threads', and any principal's whose `approvers` name its role or principal), and
/// questions of its threads' agents whose human side is an approver (`?all=true`: every parked
/// thread).
#[utoipa::path(get, path = "/approvals", tag = "approvals", params(ListQuery),
    responses((status = 200, description = "A page of approvals", body = Page<ApprovalView>)))]
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
        tool_calls: true,
        all: q.all,
    };
    let threads = waiting::waiting(&state, &caller, &w).await?;
    let next_cursor = (threads.len() == limit)
        .then(|| threads.last().map(|l| l.thread.id.to_string()))
        .flatten();
    let mut items = Vec::with_capacity(threads.len());
    for l in &threads {
        items.extend(waiting::views(&state, &caller, l).await?);
    }
    Ok(axum::Json(Page { items, next_cursor }))
}

/// One question, while it waits; one tool call, while it waits and once decided (with its
/// decision as recorded in `decided`).
#[utoipa::path(get, path = "/approvals/{id}", tag = "approvals",
    params(("id" = String, Path, description = "The approval id")),
    responses((status = 200, description = "The question, or the tool call (`decided`: its decision, once taken)", body = ApprovalView),
        (status = 404, description = "No such approval, a question that was answered, or a call its thread's abort ended undecided", body = crate::problem::ProblemBody)))]
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

/// An answer to a question (`{"text": …}`), or a decision on a tool call that waits for one:
/// `{"decision": "approve"}`, `{"decision": "edit", "args": {…}}`,
/// `{"decision": "reject", "reason": "…"}`, `{"decision": "respond", "text": "…"}`; `remember`
/// (`session` or `thread`) with `approve` skips approval for later calls of the tool there.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AnswerBody {
    /// What the person says (a question's answer, or a `respond` decision's result).
    #[serde(default)]
    pub text: Option<String>,
    /// Images with an answer.
    #[serde(default)]
    pub images: Vec<Image>,
    /// Paths of the thread's files that come with an answer (`/attachments/report.pdf`,
    /// uploaded to `/threads/{key}/files` first): each must be a file of the thread, or the
    /// answer is refused (422 `invalid_attachment`, naming the path) and nothing is written.
    #[serde(default)]
    pub attachments: Vec<String>,
    /// `approve`, `edit`, `reject` or `respond`: a decision on a tool call.
    #[serde(default)]
    pub decision: Option<String>,
    /// `edit`: the arguments the tool runs with (checked against its `args`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub args: Option<serde_json::Value>,
    /// `reject`: why (the model sees it).
    #[serde(default)]
    pub reason: Option<String>,
    /// With `approve`: remember it for the rest of this `session` or `thread`.
    #[serde(default)]
    pub remember: Option<String>,
}

/// A decision taken, and the thread once it settled (`?wait=true`, or a replayed
/// `Idempotency-Key`).
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DecidedView {
    /// The approval.
    pub id: String,
    /// The decision as recorded (approval, call, tool, decision, args, reason, text, remember,
    /// author, at, messageId).
    #[schema(value_type = Object)]
    pub decided: serde_json::Value,
    /// The thread after the decision (it ran on until it settled); not shown to an approver
    /// who does not own the thread (a key whose role or principal the call's approvers name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadView>,
}

/// An answer or a decision stored; the thread runs on (answered at once, without
/// `?wait=true`). `id` and `decided` come with a decision only.
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DecisionAcceptedView {
    /// The approval (a decision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The decision as recorded (a decision).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub decided: Option<serde_json::Value>,
    /// The thread's key.
    pub thread: String,
    /// `accepted` (this server runs the thread now) or `queued` (a run in flight takes it).
    pub delivery: &'static str,
    /// Where to follow it: the thread's events after the journal's seq at the decision; not
    /// for an approver who does not own the thread (it follows `GET /approvals/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<String>,
}

/// The API's answer to a decision: `200` with the thread when the caller waited for it to
/// settle (or replayed an `Idempotency-Key`), else `202` with where to follow it — as for an
/// answer ([`deliver::respond`]). An approver who does not own the thread is told the decision
/// and its approval, nothing of the thread.
fn decided_response(caller: &Caller, id: String, d: approvals::Decision) -> Response {
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::IntoResponse;
    let thread_at = format!("/threads/{}", segment(&d.visible));
    let location = match d.seeing {
        true => thread_at.clone(),
        false => format!("/approvals/{id}"),
    };
    let decided = crate::views::decided(&d.decided);
    let mut response = match d.settled {
        true => {
            let view = DecidedView {
                id,
                decided,
                thread: d
                    .now
                    .as_ref()
                    .map(|(t, parent)| ThreadView::of(t, caller, parent.as_ref())),
            };
            (StatusCode::OK, axum::Json(view)).into_response()
        }
        false => {
            let view = DecisionAcceptedView {
                id: Some(id),
                decided: Some(decided),
                thread: d.visible.clone(),
                delivery: d.landed.as_str(),
                events: d
                    .seeing
                    .then(|| format!("{thread_at}/events?after={}", d.since)),
            };
            (StatusCode::ACCEPTED, axum::Json(view)).into_response()
        }
    };
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    if d.landed == Landed::Duplicate {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// Answers a question, or decides a tool call. The first answer (decision) wins; a later one
/// gets 409 naming it.
#[utoipa::path(post, path = "/approvals/{id}", tag = "approvals", request_body = AnswerBody,
    params(("id" = String, Path, description = "The approval id"), Wait,
        ("Idempotency-Key" = Option<String>, Header, description = "The message id: a retried answer or decision writes nothing and is answered as the first was (`Idempotent-Replayed: true`)")),
    responses(
        (status = 202, description = "Stored; the thread resumes: where to follow it, and for a decision the decision as recorded", body = DecisionAcceptedView),
        (status = 200, description = "Settled (`?wait=true`) or replayed (`Idempotency-Key`): the thread for an answer, `DecidedView` for a decision", body = DecidedView),
        (status = 400, description = "A body that is neither an answer nor a decision; nothing was written", body = crate::problem::ProblemBody),
        (status = 403, description = "`not_an_approver`: the thread's owner, on a call whose `approvers` name others; nothing was written", body = crate::problem::ProblemBody),
        (status = 404, description = "No such approval, or one the caller may neither see nor decide", body = crate::problem::ProblemBody),
        (status = 409, description = "Answered (decided) first by someone else; nothing was written", body = crate::problem::ProblemBody),
        (status = 422, description = "An answer's attachment that is not a file of the thread (`invalid_attachment`), a decision not offered, an edit the tool's `args` refuse (`field`), or definitions that changed under it (`stale_definition`); nothing was written", body = crate::problem::ProblemBody)))]
pub(crate) async fn answer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(wait): Query<Wait>,
    headers: HeaderMap,
    Json(body): Json<AnswerBody>,
) -> Result<Response, Problem> {
    let message_id = deliver::message_id(&headers)?;
    if let Some(decision) = body.decision.clone() {
        let input = decision_input(&decision, body)?;
        let decided = approvals::decide(
            &state,
            &caller,
            &id,
            input,
            message_id.as_deref(),
            wait.wait,
        )
        .await?;
        return Ok(decided_response(&caller, id, decided));
    }
    let Some(text) = body.text.as_deref() else {
        return Err(Problem::bad_request(
            "invalid_body",
            "give `text` (an answer) or `decision` (approve, edit, reject, respond)",
        ));
    };
    if body.args.is_some() || body.reason.is_some() || body.remember.is_some() {
        return Err(Problem::bad_request(
            "invalid_body",
            "`args`, `reason` and `remember` come with a `decision`",
        ));
    }
    deliver::check_text(text, &body.images)?;
    crate::input::attachments("attachments", &body.attachments)?;
    let images = deliver::images(&body.images);
    let answer = approvals::Answer {
        text,
        images: &images,
        attachments: &body.attachments,
        message_id: message_id.as_deref(),
        wait: wait.wait,
    };
    let delivered = approvals::answer(&state, &caller, &id, answer).await?;
    Ok(answered_response(&caller, &id, delivered))
}

/// The API's answer to an answer: as to any delivery ([`deliver::respond`]) — but one a
/// question's deadline escalated to, who does not own the thread, is told the approval and how
/// the answer landed (`200` once settled), nothing of the thread.
pub(crate) fn answered_response(
    caller: &Caller,
    id: &str,
    delivered: crate::service::deliveries::Delivered,
) -> Response {
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::IntoResponse;
    if delivered.seeing {
        return deliver::respond(caller, delivered);
    }
    let status = match delivered.now {
        Some(_) => StatusCode::OK,
        None => StatusCode::ACCEPTED,
    };
    let view = DecisionAcceptedView {
        id: Some(id.to_owned()),
        decided: None,
        thread: delivered.visible,
        delivery: delivered.landed.as_str(),
        events: None,
    };
    let mut response = (status, axum::Json(view)).into_response();
    if let Ok(value) = HeaderValue::from_str(&format!("/approvals/{id}")) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    if delivered.landed == Landed::Duplicate {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// The decision a body carries, or why it is not one (400, nothing written).
pub(crate) fn decision_input(decision: &str, body: AnswerBody) -> Result<DecisionInput, Problem> {
    let bad = |why: String| Problem::bad_request("invalid_decision", why);
    let decision = Decision::parse(decision).ok_or_else(|| {
        bad(format!(
            "`decision` is approve, edit, reject or respond, not `{decision}`"
        ))
    })?;
    if !body.images.is_empty() {
        return Err(bad("a decision carries no images".into()));
    }
    if !body.attachments.is_empty() {
        return Err(bad("a decision carries no attachments".into()));
    }
    let stray = match decision {
        Decision::Approve => body.args.is_some() || body.reason.is_some() || body.text.is_some(),
        Decision::Edit => body.reason.is_some() || body.text.is_some(),
        Decision::Reject => body.args.is_some() || body.text.is_some(),
        Decision::Respond => body.args.is_some() || body.reason.is_some(),
    };
    if stray {
        return Err(bad(format!(
            "`{}` takes {}",
            decision.as_str(),
            match decision {
                Decision::Approve => "no other field but `remember`",
                Decision::Edit => "`args` only",
                Decision::Reject => "`reason` only",
                Decision::Respond => "`text` only",
            }
        )));
    }
    if decision == Decision::Edit && !body.args.as_ref().is_some_and(serde_json::Value::is_object) {
        return Err(bad("`edit` carries `args`, a JSON object".into()));
    }
    if let Some(text) = body.text.as_deref().or(body.reason.as_deref()) {
        crate::input::text(
            if body.text.is_some() {
                "text"
            } else {
                "reason"
            },
            text,
        )
        .map_err(Problem::from)?;
    }
    let remember = match body.remember.as_deref() {
        None => None,
        Some(s) => Some(
            RememberScope::parse(s)
                .ok_or_else(|| bad(format!("`remember` is `session` or `thread`, not `{s}`")))?,
        ),
    };
    if remember.is_some() && decision != Decision::Approve {
        return Err(bad("`remember` comes with `approve` only".into()));
    }
    Ok(DecisionInput {
        decision,
        args: body.args,
        reason: body.reason,
        text: body.text,
        remember,
    })
}
