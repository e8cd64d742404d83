//! `/threads/{key}/messages`: a thread's messages, a page at a time, and an inbound message —
//! idempotent by `Idempotency-Key`, and, with a park (`If-Match: "S:N"` or `park`), the answer
//! to that question alone.

use axum::extract::State;

use crate::body::Path;
use axum::http::HeaderMap;
use axum::response::Response;
use duet_runtime::control::Entry;
use duet_runtime::{JournalEntry, Park};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::deliver::{self, Image, Inbound, Wait};
use super::threads::page_size;
use crate::auth::Caller;
use crate::body::{Json, Query};
use crate::problem::Problem;
use crate::service::{messages, threads};
use crate::state::AppState;
use crate::views::{AcceptedView, EntryView, Page, ThreadView};

/// An inbound message.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct MessageBody {
    /// What is said.
    pub text: String,
    /// Images with it.
    #[serde(default)]
    pub images: Vec<Image>,
    /// Paths of the thread's files that come with it (`/attachments/report.pdf`, uploaded to
    /// `/threads/{key}/files` first): each must be a file of the thread, or the message is
    /// refused (422 `invalid_attachment`, naming the path) and nothing is written.
    #[serde(default)]
    pub attachments: Vec<String>,
    /// Whose perspective it is written from: the agent's human side (`a` or `b`). Checked
    /// when given; the human side is the default.
    #[serde(default)]
    pub side: Option<String>,
    /// The park it answers (`SESSION:SEQ`): refused with 409 once someone else answered it.
    /// Also accepted as `If-Match: "SESSION:SEQ"`.
    #[serde(default)]
    pub park: Option<String>,
}

/// The park a message names, from its body or `If-Match`; both must agree.
fn park_of(body: Option<&str>, headers: &HeaderMap) -> Result<Option<Park>, Problem> {
    let header = headers
        .get(axum::http::header::IF_MATCH)
        .map(|v| {
            v.to_str()
                .map(|s| {
                    s.trim()
                        .trim_start_matches("W/")
                        .trim_matches('"')
                        .to_owned()
                })
                .map_err(|_| Problem::bad_request("invalid_park", "If-Match is not text"))
        })
        .transpose()?;
    let parse = |s: &str| {
        s.parse::<Park>()
            .map_err(|e| Problem::bad_request("invalid_park", e))
    };
    match (body, header.as_deref()) {
        (None, None) => Ok(None),
        (Some(b), Some(h)) if parse(b)? != parse(h)? => Err(Problem::bad_request(
            "invalid_park",
            format!("`park` {b} and If-Match {h} disagree"),
        )),
        (Some(p), _) | (None, Some(p)) => parse(p).map(Some),
    }
}

/// Delivers a message to the thread; with a park, as the answer to that question.
#[utoipa::path(post, path = "/threads/{key}/messages", tag = "messages", request_body = MessageBody,
    params(("key" = String, Path, description = "The thread's key (percent-encoded)"), Wait,
        ("Idempotency-Key" = Option<String>, Header, description = "The message id: a second delivery with it writes nothing"),
        ("If-Match" = Option<String>, Header, description = "The park it answers, `\"SESSION:SEQ\"`")),
    responses(
        (status = 202, description = "Stored; running (or queued for the run in flight)", body = AcceptedView),
        (status = 200, description = "Settled (`?wait=true`), or a replayed message id", body = ThreadView),
        (status = 404, description = "No such thread", body = crate::problem::ProblemBody),
        (status = 422, description = "An attachment that is not a file of the thread", body = crate::problem::ProblemBody),
        (status = 409, description = "Someone answered that park first; nothing was written", body = crate::problem::ProblemBody)))]
pub(crate) async fn post(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
    Query(wait): Query<Wait>,
    headers: HeaderMap,
    Json(body): Json<MessageBody>,
) -> Result<Response, Problem> {
    let message_id = deliver::message_id(&headers)?;
    deliver::check_text(&body.text, &body.images)?;
    crate::input::attachments("attachments", &body.attachments)?;
    let answers = park_of(body.park.as_deref(), &headers)?;
    let t = threads::find(&state, &caller, &key).await?;
    if let Some(side) = &body.side {
        let human = state
            .runtime()
            .project()
            .agents
            .get(&t.agent)
            .and_then(|a| {
                a.def
                    .sides
                    .iter()
                    .find(|(_, s)| s.is_human())
                    .map(|(id, _)| id)
            });
        let named = duet_runtime::parse_side(side).ok_or_else(|| {
            Problem::bad_request("invalid_side", format!("side `{side}`: use `a` or `b`"))
        })?;
        if human.is_some_and(|h| h != named)
            || (human.is_none() && named != duet_runtime::SideId::B)
        {
            return Err(Problem::unprocessable(
                "not_human_side",
                format!(
                    "side `{side}` of `{}` is not the side a person writes",
                    t.agent
                ),
            ));
        }
    }
    let stored = t.key.clone();
    let images = deliver::images(&body.images);
    let inbound = Inbound {
        key: &stored,
        agent: None,
        thread: Some(&t),
        text: &body.text,
        images: &images,
        attachments: &body.attachments,
        answers,
        message_id: message_id.as_deref(),
        wait: wait.wait,
        for_owner: false,
    };
    deliver::deliver(&state, &caller, inbound).await
}

/// A cursor over a thread's journal.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageQuery {
    /// Only entries after this seq (the previous page's `nextCursor`).
    pub cursor: Option<i64>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<usize>,
}

/// The thread's messages in order, a page at a time.
#[utoipa::path(get, path = "/threads/{key}/messages", tag = "messages",
    params(("key" = String, Path, description = "The thread's key (percent-encoded)"), PageQuery),
    responses((status = 200, description = "A page of messages", body = Page<EntryView>),
        (status = 404, description = "No such thread", body = crate::problem::ProblemBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<EntryView>>, Problem> {
    let t = threads::find(&state, &caller, &key).await?;
    let limit = page_size(q.limit)?;
    let page = messages::journal(&state, &t, q.cursor.unwrap_or(0), limit).await?;
    let next_cursor = (page.len() == limit)
        .then(|| page.last().map(|e| e.seq().to_string()))
        .flatten();
    let items = page
        .into_iter()
        .filter(|e| matches!(e, JournalEntry::Message(_)))
        .map(|e| EntryView::from(Entry::from(e)))
        .collect();
    Ok(axum::Json(Page { items, next_cursor }))
}
