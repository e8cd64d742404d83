//! `/inbox/history`: the decisions on tool calls and the questions answered, newest first — who
//! decided or answered, when, and what (the decision, its reason, the response, the edited
//! arguments) — an audit trail read from the journal's `approval_decided` records and the
//! store's record of each park's answer, each list a page at a time.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use duet_runtime::{DecisionEntry, Park, ThreadId};
use maud::{Markup, html};
use serde::Deserialize;

use super::decision;
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
    /// The last decision of the previous page: `AT.THREAD-ID.SEQ` (the record's seq).
    pub decisions_before: Option<String>,
}

fn decision_cursor(s: &str) -> Option<(i64, ThreadId, i64)> {
    let (at, rest) = s.split_once('.')?;
    let (thread, seq) = rest.split_once('.')?;
    Some((at.parse().ok()?, thread.parse().ok()?, seq.parse().ok()?))
}

/// The decisions table, and the link to the older ones.
fn decisions(list: &[DecisionEntry], viewer: &Viewer, now: i64, more: bool) -> Markup {
    let next = more.then(|| list.last()).flatten().map(|d| {
        format!(
            "/inbox/history?decisions_before={}.{}.{}",
            d.written_at, d.thread, d.seq
        )
    });
    html! {
        h2 #decisions { "Decisions on tool calls" }
        @if list.is_empty() {
            p.note.none-decided { "Nothing was decided yet." }
        } @else {
            div.table-wrap {
                table.history.decisions {
                    caption.visually-hidden { "Decisions on tool calls, newest first" }
                    thead { tr { th scope="col" { "When" } th scope="col" { "Call" } th scope="col" { "Decision" } th scope="col" { "By" } } }
                    tbody {
                        @for d in list {
                            @let id = ApprovalId { thread: d.thread, park: Park { session: d.session, seq: d.decided.approval } };
                            tr.decided-item data-id=(id.to_string()) data-decision=(d.decided.decision.as_str()) {
                                td { (layout::ago(d.decided.at, now)) }
                                td {
                                    a href=(format!("/inbox/items/{id}")) { strong { (d.agent) } " · " (viewer.caller.visible_key(&d.key)) }
                                    br;
                                    code { (d.decided.tool) }
                                }
                                td.decision {
                                    strong { (decision::decided_word(&d.decided)) }
                                    @if let Some(scope) = d.decided.remember { " (for the rest of this " (scope.as_str()) ")" }
                                    @if let Some(reason) = &d.decided.reason { br; span.reason { (layout::excerpt(reason, 200)) } }
                                    @if let Some(text) = &d.decided.text { br; span.response { (layout::excerpt(text, 200)) } }
                                    @if let Some(args) = &d.decided.args { br; code.edited { (layout::excerpt(&args.to_string(), 200)) } }
                                }
                                td.by { (decision::who(d.decided.author.as_deref())) }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(next) = next {
            p { a href=(next) rel="next" { "Older decisions →" } }
        }
    }
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
    let decisions_before = match q.decisions_before.as_deref().map(decision_cursor) {
        Some(None) => {
            return layout::error_page(
                axum::http::StatusCode::BAD_REQUEST,
                "`decisions_before` is not a history cursor",
            );
        }
        Some(cursor) => cursor,
        None => None,
    };
    let decided = match approvals::decisions(&state, &viewer.caller, decisions_before, PAGE).await {
        Ok(d) => d,
        Err(e) => {
            return layout::error_page(axum::http::StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
        }
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
        h1 { "History" }
        (decisions(&decided, &viewer, now, decided.len() == PAGE))
        h2 #answered { "Questions answered" }
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
