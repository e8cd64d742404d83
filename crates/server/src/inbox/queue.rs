//! `/inbox`: every question waiting for this person — top-level threads and children at any
//! depth — filtered by agent and by how long it has waited, oldest or newest first, with a count
//! per agent; and `/inbox/events`, which sends the list, then what changes in it (a question
//! arrives, or one is answered, from whichever process made the change): the thread that
//! changed, read again alone.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use duet_runtime::{FeedEvent, Listed, ThreadId, ThreadStatus};
use futures::StreamExt;
use futures::stream::BoxStream;
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, Nav};
use super::viewer::Viewer;
use crate::auth::Caller;
use crate::problem::Problem;
use crate::service;
use crate::service::events::Feed;
use crate::service::waiting::{self, Waiting};
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

/// The counts above the queue: every agent's, how many items it shows, how many threads it
/// lists, and whether more wait than it lists.
pub(crate) struct Counts {
    pub by_agent: BTreeMap<String, usize>,
    pub shown: usize,
    pub total: usize,
    pub more: bool,
}

/// What the queue shows: the questions that pass the filters, and every agent's count.
pub(crate) struct Queue {
    pub items: Vec<ApprovalView>,
    pub counts: BTreeMap<String, usize>,
    pub total: usize,
    /// Whether there were more waiting than [`MAX_LISTED`].
    pub more: bool,
}

impl Queue {
    /// Its counts.
    fn counts(&self) -> Counts {
        Counts {
            by_agent: self.counts.clone(),
            shown: self.items.len(),
            total: self.total,
            more: self.more,
        }
    }
}

/// One listed thread: its agent, and the items it shows under the filters (none when they hide
/// it; it still counts).
struct Entry {
    agent: String,
    items: Vec<ApprovalView>,
}

/// The queue as a live inbox keeps it between changes: the listed threads (the first
/// [`MAX_LISTED`] waiting, in id order), each with its items, so that a change re-reads only
/// the thread it names ([`Listing::update`]).
pub(crate) struct Listing {
    threads: BTreeMap<ThreadId, Entry>,
    /// Whether more than [`MAX_LISTED`] wait: a thread past the last listed one is not shown.
    more: bool,
}

/// What a listing reads under `filters`, `limit` threads after `after`.
fn waiting_for(filters: &Filters, after: Option<ThreadId>, limit: usize) -> Waiting<'static> {
    Waiting {
        after,
        limit,
        all: filters.all == "true",
        tool_calls: true,
        ..Waiting::default()
    }
}

impl Entry {
    /// `l` as the queue lists it under `filters`.
    async fn of(
        state: &AppState,
        caller: &Caller,
        filters: &Filters,
        l: &Listed,
    ) -> Result<Entry, Problem> {
        let t = &l.thread;
        let now = state.runtime().now_ms();
        let hidden = (!filters.agent.is_empty() && t.agent != filters.agent)
            || now - t.updated_at < filters.min_age_ms();
        let items = match hidden {
            true => Vec::new(),
            false => waiting::views(state, caller, l).await?,
        };
        Ok(Entry {
            agent: t.agent.clone(),
            items,
        })
    }
}

impl Listing {
    /// Reads the listing `caller` sees under `filters`: one store read for a page of its own
    /// questions.
    pub(crate) async fn load(
        state: &AppState,
        caller: &Caller,
        filters: &Filters,
    ) -> Result<Listing, Problem> {
        let w = waiting_for(filters, None, MAX_LISTED + 1);
        let mut listed = waiting::waiting(state, caller, &w).await?;
        let more = listed.len() > MAX_LISTED;
        listed.truncate(MAX_LISTED);
        let mut threads = BTreeMap::new();
        for l in &listed {
            threads.insert(l.thread.id, Entry::of(state, caller, filters, l).await?);
        }
        Ok(Listing { threads, more })
    }

    /// Whether thread `id` is listed.
    fn holds(&self, id: ThreadId) -> bool {
        self.threads.contains_key(&id)
    }

    /// Reads thread `id` again after a change and puts it in, replaces it or takes it out: the
    /// threads whose items changed (with, at the [`MAX_LISTED`] edge, the one that left the end
    /// of the listing or came into it).
    pub(crate) async fn update(
        &mut self,
        state: &AppState,
        caller: &Caller,
        filters: &Filters,
        id: ThreadId,
    ) -> Result<Vec<ThreadId>, Problem> {
        let w = waiting_for(filters, None, 1);
        let mut touched = Vec::new();
        match waiting::one(state, caller, &w, id).await? {
            Some(l) => {
                // Past the last listed thread of a listing cut at MAX_LISTED: not shown.
                let last = self.threads.keys().next_back().copied();
                if self.more && last.is_some_and(|last| id > last) {
                    return Ok(touched);
                }
                let entry = Entry::of(state, caller, filters, &l).await?;
                self.threads.insert(id, entry);
                touched.push(id);
                if self.threads.len() > MAX_LISTED
                    && let Some((cut, _)) = self.threads.pop_last()
                {
                    self.more = true;
                    touched.push(cut);
                }
            }
            None => {
                if self.threads.remove(&id).is_none() {
                    return Ok(touched);
                }
                touched.push(id);
                // The first one past the end comes in, if there is one.
                if let (true, Some(&last)) = (self.more, self.threads.keys().next_back()) {
                    let next =
                        waiting::waiting(state, caller, &waiting_for(filters, Some(last), 2))
                            .await?;
                    self.more = next.len() > 1;
                    if let Some(l) = next.first() {
                        let entry = Entry::of(state, caller, filters, l).await?;
                        self.threads.insert(l.thread.id, entry);
                        touched.push(l.thread.id);
                    }
                }
            }
        }
        Ok(touched)
    }

    /// The queue it shows, in the filters' order: who waited longest (or newest) first.
    pub(crate) fn queue(&self, filters: &Filters) -> Queue {
        let mut counts = BTreeMap::new();
        let mut items = Vec::new();
        for e in self.threads.values() {
            *counts.entry(e.agent.clone()).or_insert(0) += 1;
            items.extend(e.items.iter().cloned());
        }
        if filters.order == "newest" {
            items.sort_by_key(|i| std::cmp::Reverse(i.since));
        } else {
            items.sort_by_key(|i| i.since);
        }
        Queue {
            items,
            counts,
            total: self.threads.len(),
            more: self.more,
        }
    }

    /// The counts of [`Listing::queue`], without its items.
    fn counts(&self) -> Counts {
        let mut by_agent = BTreeMap::new();
        let mut shown = 0;
        for e in self.threads.values() {
            *by_agent.entry(e.agent.clone()).or_insert(0) += 1;
            shown += e.items.len();
        }
        Counts {
            by_agent,
            shown,
            total: self.threads.len(),
            more: self.more,
        }
    }

    /// Thread `id`'s items, as listed now.
    fn items(&self, id: ThreadId) -> &[ApprovalView] {
        self.threads.get(&id).map_or(&[], |e| e.items.as_slice())
    }
}

/// Reads the queue `caller` sees under `filters`.
pub(crate) async fn load(
    state: &AppState,
    caller: &Caller,
    filters: &Filters,
) -> Result<Queue, Problem> {
    Ok(Listing::load(state, caller, filters).await?.queue(filters))
}

/// One line of what item `i` asks: its question, or the tool it would call and with what.
pub(crate) fn summary(i: &ApprovalView) -> String {
    match (&i.tool, &i.arguments) {
        (Some(tool), Some(args)) => layout::excerpt(&format!("calls {tool} {args}"), 180),
        _ => layout::excerpt(i.question.as_deref().unwrap_or("(no message)"), 180),
    }
}

/// The list itself (what `/inbox/events` sends whole at first and after a resync).
pub(crate) fn list(queue: &Queue, now: i64, filters: &Filters) -> Markup {
    let order = if filters.order == "newest" {
        "newest"
    } else {
        "oldest"
    };
    html! {
        (head(&queue.counts()))
        ol.items aria-label="Questions waiting" data-order=(order) {
            (items(&queue.items, now))
        }
    }
}

/// The counts above the list: by agent, and how many it shows.
fn head(queue: &Counts) -> Markup {
    html! {
        div #queue-head {
            @if queue.by_agent.len() > 1 {
                p.counts {
                    "By agent: "
                    @for (n, (agent, count)) in queue.by_agent.iter().enumerate() {
                        @if n > 0 { " · " }
                        a href=(format!("/inbox?agent={}", crate::views::segment(agent))) { (agent) " " span.n { (count) } }
                    }
                }
            }
            p.count #count {
                @match queue.shown {
                    0 => "Nothing waits for you.",
                    1 => "1 question waits for you.",
                    n => (format!("{n} questions wait for you.")),
                }
                @if queue.shown < queue.total { " (" (queue.total) " in all; the filters hide the rest)" }
                @if queue.more { " (showing the first 500)" }
            }
        }
    }
}

/// The list's items, each with its thread and how long it has waited (where the page's script
/// puts one that changed).
fn items(items: &[ApprovalView], now: i64) -> Markup {
    html! {
        @for item in items {
            li.item data-id=(item.id) data-agent=(item.agent)
                data-thread=(item.id.split(':').next().unwrap_or_default()) data-since=(item.since) {
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
            (list(&queue, now, &filters))
        }
    };
    layout::page("Waiting", Some(&viewer), Nav::Queue, body).into_response()
}

/// `GET /inbox/events`: the list as an SSE `queue` event, then what changes: a thread's items
/// in an `item` event (put in, or in place of its old ones), or a `remove` event for one that
/// left, each with the counts; the whole list again after a resync. A change re-reads only the
/// thread it names.
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
        let state = stream_state;
        // Subscribed before the first read, so whatever changes after it is seen.
        let mut changes = feed.changes();
        // The whole list last sent, while nothing was sent since (a resync that finds the list
        // as it was sends nothing).
        let mut sent: Option<String> = None;
        'whole: loop {
            let Ok(mut listing) = Listing::load(&state, &caller, &filters).await else { return };
            let queue = listing.queue(&filters);
            let mut sent_head = head(&queue.counts()).into_string();
            let html = list(&queue, state.runtime().now_ms(), &filters).into_string();
            if sent.as_ref() != Some(&html) {
                yield Ok::<_, Infallible>(Event::default().event("queue").data(html.clone()));
                sent = Some(html);
            }
            // Each change that could alter the list: a thread that parks or waits, or one
            // listed.
            loop {
                let id = match changes.next().await {
                    Some(FeedEvent::Resync) => continue 'whole,
                    Some(FeedEvent::Changed(c))
                        if matches!(c.status, ThreadStatus::AwaitingHuman | ThreadStatus::Waiting)
                            || listing.holds(c.thread) => c.thread,
                    Some(_) => continue,
                    None => return,
                };
                let now = state.runtime().now_ms();
                let was = items(listing.items(id), now).into_string();
                let Ok(touched) = listing.update(&state, &caller, &filters, id).await else { return };
                let head_now = head(&listing.counts()).into_string();
                for t in touched {
                    let shown = items(listing.items(t), now).into_string();
                    if t == id && shown == was && head_now == sent_head {
                        continue;
                    }
                    let kind = if shown.is_empty() { "remove" } else { "item" };
                    let data = format!("{head_now}<ol data-thread=\"{t}\">{shown}</ol>");
                    yield Ok(Event::default().event(kind).data(data));
                    sent = None;
                    sent_head.clone_from(&head_now);
                }
            }
        }
    };
    let events: BoxStream<'static, Result<Event, Infallible>> =
        events.take_until(closing.cancelled_owned()).boxed();
    state.sse(service::keys::while_admitted(&state, credential, events))
}
