//! `/inbox`: every question waiting for this person — top-level threads and children at any
//! depth — filtered by agent and by how long it has waited, oldest or newest first, with a count
//! per agent; and `/inbox/events`, which sends the list again whenever it changes (a question
//! arrives, or one is answered), from whichever process made the change.

use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use duet_runtime::{FeedEvent, ThreadStatus};
use futures::StreamExt;
use futures::stream::BoxStream;
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, Nav};
use super::viewer::Viewer;
use crate::auth::Caller;
use crate::problem::Problem;
use crate::service;
use crate::service::approvals::{self, Waiting};
use crate::service::events::Feed;
use crate::state::AppState;
use crate::views::ApprovalView;

/// At most this many questions are listed (the count says when there are more).
const MAX_LISTED: usize = 500;

/// The queue's filters, as the form sends them.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Filters {
    /// Only this agent's questions (empty: all).
    #[serde(default)]
    pub agent: String,
    /// Only questions waiting at least this long: `1h`, `1d`, `7d` (empty: any).
    #[serde(default)]
    pub age: String,
    /// `newest` first, or (default) `oldest`: who has waited longest.
    #[serde(default)]
    pub order: String,
    /// `true`: also threads waiting for their end user's next message (agents whose human
    /// side is not an approver). Default: approvals only.
    #[serde(default)]
    pub all: String,
}

impl Filters {
    fn min_age_ms(&self) -> i64 {
        match self.age.as_str() {
            "1h" => 3_600_000,
            "1d" => 86_400_000,
            "7d" => 7 * 86_400_000,
            _ => 0,
        }
    }

    /// The query string that carries these filters.
    fn query(&self) -> String {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("agent", &self.agent)
            .append_pair("age", &self.age)
            .append_pair("order", &self.order)
            .append_pair("all", &self.all)
            .finish()
    }
}

/// What the queue shows: the questions that pass the filters, and every agent's count.
pub(crate) struct Queue {
    pub items: Vec<ApprovalView>,
    pub counts: BTreeMap<String, usize>,
    pub total: usize,
    /// Whether there were more waiting than [`MAX_LISTED`].
    pub more: bool,
}

/// Reads the queue `caller` sees under `filters`.
pub(crate) async fn load(
    state: &AppState,
    caller: &Caller,
    filters: &Filters,
) -> Result<Queue, Problem> {
    let w = Waiting {
        limit: MAX_LISTED + 1,
        all: filters.all == "true",
        tool_calls: true,
        ..Waiting::default()
    };
    let mut threads = approvals::waiting(state, caller, &w).await?;
    let more = threads.len() > MAX_LISTED;
    threads.truncate(MAX_LISTED);
    let now = state.runtime().now_ms();
    let min_age = filters.min_age_ms();
    let mut counts = BTreeMap::new();
    let mut items = Vec::new();
    let total = threads.len();
    for t in &threads {
        *counts.entry(t.agent.clone()).or_insert(0) += 1;
        if (!filters.agent.is_empty() && t.agent != filters.agent) || now - t.updated_at < min_age {
            continue;
        }
        items.extend(approvals::views(state, caller, t).await?);
    }
    if filters.order == "newest" {
        items.sort_by_key(|i| std::cmp::Reverse(i.since));
    } else {
        items.sort_by_key(|i| i.since);
    }
    Ok(Queue {
        items,
        counts,
        total,
        more,
    })
}

/// One line of what item `i` asks: its question, or the tool it would call and with what.
pub(crate) fn summary(i: &ApprovalView) -> String {
    match (&i.tool, &i.arguments) {
        (Some(tool), Some(args)) => layout::excerpt(&format!("calls {tool} {args}"), 180),
        _ => layout::excerpt(i.question.as_deref().unwrap_or("(no message)"), 180),
    }
}

/// The list itself (what `/inbox/events` sends again when it changes).
pub(crate) fn list(queue: &Queue, now: i64) -> Markup {
    html! {
        @if queue.counts.len() > 1 {
            p.counts {
                "By agent: "
                @for (n, (agent, count)) in queue.counts.iter().enumerate() {
                    @if n > 0 { " · " }
                    a href=(format!("/inbox?agent={}", crate::views::segment(agent))) { (agent) " " span.n { (count) } }
                }
            }
        }
        p.count #count {
            @match queue.items.len() {
                0 => "Nothing waits for you.",
                1 => "1 question waits for you.",
                n => (format!("{n} questions wait for you.")),
            }
            @if queue.items.len() < queue.total { " (" (queue.total) " in all; the filters hide the rest)" }
            @if queue.more { " (showing the first 500)" }
        }
        ol.items aria-label="Questions waiting" {
            @for item in &queue.items {
                li.item data-id=(item.id) data-agent=(item.agent) {
                    a.item-link href=(format!("/inbox/items/{}", item.id)) {
                        span.item-head {
                            (layout::chain(item.parents.iter().map(|p| p.agent.as_str()), &item.agent))
                            span.thread { (item.thread) }
                        }
                        span.question data-kind=(item.kind) { (summary(item)) }
                        span.waited { "waiting " (layout::waited(item.since, now)) }
                        @if let Some(d) = &item.deadline { (layout::deadline(d, now)) }
                    }
                }
            }
        }
    }
}

/// `GET /inbox`: the queue page.
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(filters): Query<Filters>,
) -> Response {
    let queue = match load(&state, &viewer.caller, &filters).await {
        Ok(q) => q,
        Err(p) => return layout::error_page(p.status, &p.detail),
    };
    let now = state.runtime().now_ms();
    let body = html! {
        h1 { "Waiting for you" }
        form.filters #filters method="get" action="/inbox" role="search" {
            label { "Agent"
                select name="agent" {
                    option value="" selected[filters.agent.is_empty()] { "All" }
                    @for agent in state.runtime().project().agents.keys() {
                        option value=(agent) selected[&filters.agent == agent] { (agent) }
                    }
                }
            }
            label { "Waiting at least"
                select name="age" {
                    @for (value, text) in [("", "any time"), ("1h", "1 hour"), ("1d", "1 day"), ("7d", "7 days")] {
                        option value=(value) selected[filters.age == value] { (text) }
                    }
                }
            }
            label { "Order"
                select name="order" {
                    option value="oldest" selected[filters.order != "newest"] { "Oldest first" }
                    option value="newest" selected[filters.order == "newest"] { "Newest first" }
                }
            }
            label { input type="checkbox" name="all" value="true" checked[filters.all == "true"];
                " Also chats waiting for their user" }
            button type="submit" { "Apply" }
            label.find { span { "Find " kbd { "/" } }
                input #find type="search" name="find" placeholder="in these questions" autocomplete="off";
            }
        }
        p.keys { "Keys: " kbd { "j" } " / " kbd { "k" } " move, " kbd { "Enter" } " open, "
            kbd { "a" } " approve, " kbd { "r" } " reject, " kbd { "/" } " find." }
        div #queue aria-live="polite" data-live=(format!("/inbox/events?{}", filters.query())) {
            (list(&queue, now))
        }
    };
    layout::page("Waiting", Some(&viewer), Nav::Queue, body).into_response()
}

/// `GET /inbox/events`: the list as an SSE `queue` event, again each time it changes.
pub(crate) async fn events(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(filters): Query<Filters>,
) -> Response {
    let feed = Feed::of(&state);
    let closing = state.closing().clone();
    let credential = viewer.caller.credential.clone();
    let caller = viewer.caller;
    let stream_state = state.clone();
    let events = async_stream::stream! {
        // Subscribed before the first read, so whatever changes after it is seen.
        let mut changes = feed.changes();
        let mut sent = String::new();
        loop {
            let Ok(queue) = load(&stream_state, &caller, &filters).await else { return };
            let html = list(&queue, stream_state.runtime().now_ms()).into_string();
            // The listed threads' ids (an approval id begins with its thread's).
            let ids: HashSet<String> = queue
                .items
                .iter()
                .filter_map(|i| i.id.split(':').next().map(str::to_owned))
                .collect();
            if html != sent {
                yield Ok::<_, Infallible>(Event::default().event("queue").data(html.clone()));
                sent = html;
            }
            // Wait for a change that could alter the list: a thread that parks, or one listed.
            loop {
                match changes.next().await {
                    Some(FeedEvent::Resync) => break,
                    Some(FeedEvent::Changed(c))
                        if matches!(c.status, ThreadStatus::AwaitingHuman | ThreadStatus::Waiting)
                            || ids.contains(&c.thread.to_string()) => break,
                    Some(_) => {}
                    None => return,
                }
            }
        }
    };
    let events: BoxStream<'static, Result<Event, Infallible>> =
        events.take_until(closing.cancelled_owned()).boxed();
    state.sse(service::keys::while_admitted(&state, credential, events))
}
