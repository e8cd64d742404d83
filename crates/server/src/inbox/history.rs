//! `/inbox/history`: the questions answered, newest first — who answered, when, and what — an
//! audit trail read from the store's record of each park's answer, a page at a time.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;

use super::layout::{self, Nav};
use super::viewer::Viewer;
use crate::auth::Caller;
use crate::service::approvals;
use crate::state::AppState;
use crate::views::ApprovalId;

/// Answers per page.
const PAGE: usize = 50;

/// The page asked for.
#[derive(Deserialize)]
pub(crate) struct HistoryQuery {
    /// The last answer of the previous page: `AT.THREAD-ID:SESSION:SEQ`.
    pub before: Option<String>,
}

fn cursor(s: &str) -> Option<(i64, ApprovalId)> {
    let (at, approval) = s.split_once('.')?;
    Some((at.parse().ok()?, approval.parse().ok()?))
}

/// `GET /inbox/history`.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<HistoryQuery>,
) -> Response {
    let before = match q.before.as_deref().map(cursor) {
        Some(None) => {
            return layout::error_page(
                axum::http::StatusCode::BAD_REQUEST,
                "`before` is not a history cursor",
            );
        }
        Some(Some((at, a))) => Some((at, a.thread, a.park)),
        None => None,
    };
    let answered = match approvals::answered(&state, &viewer.caller, before, PAGE).await {
        Ok(a) => a,
        Err(e) => {
            return layout::error_page(axum::http::StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
        }
    };
    let now = state.runtime().now_ms();
    let next = (answered.len() == PAGE)
        .then(|| answered.last())
        .flatten()
        .map(|a| {
            let id = ApprovalId {
                thread: a.thread,
                park: a.park,
            };
            format!("/inbox/history?before={}.{id}", a.answer.at)
        });
    let body = html! {
        h1 { "Answered" }
        @if answered.is_empty() {
            p.count { "Nothing was answered yet." }
        } @else {
            div.table-wrap {
                table.history {
                    caption.visually-hidden { "Answered questions, newest first" }
                    thead { tr { th scope="col" { "When" } th scope="col" { "Question" } th scope="col" { "Answer" } th scope="col" { "By" } } }
                    tbody {
                        @for a in &answered {
                            @let id = ApprovalId { thread: a.thread, park: a.park };
                            tr.answered-item data-id=(id.to_string()) {
                                td { (layout::ago(a.answer.at, now)) }
                                td {
                                    a href=(format!("/inbox/items/{id}")) { strong { (a.agent) } " · " (viewer.caller.visible_key(&a.key)) }
                                    br;
                                    span.question { (layout::excerpt(a.question.as_deref().unwrap_or("(no message)"), 140)) }
                                }
                                td.answer-text { (layout::excerpt(&a.answer.content, 200)) }
                                td.by { (a.answer.author.as_deref().map(Caller::author_name).unwrap_or_else(|| "—".into())) }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(next) = next {
            p { a href=(next) rel="next" { "Older answers →" } }
        }
    };
    layout::page("History", Some(&viewer), Nav::History, body).into_response()
}
