//! `GET /threads/{key}/events`: the thread's journal as Server-Sent Events — every entry as it
//! commits, its seq as the SSE `id`, and a `status` event whenever the thread's status changes.
//! A client that reconnects with `Last-Event-ID` (or `?after=SEQ`) gets exactly the entries it
//! missed, then the live tail, from whichever server process it reaches: the journal is the
//! replay buffer and the store's change feed the wake-up. No polling.

use std::convert::Infallible;

use axum::extract::State;

use crate::body::Path;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::response::sse::Event;
use duet_runtime::control::Entry;
use duet_runtime::{Thread, ThreadStatus};
use futures::stream::{BoxStream, StreamExt};
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;

use crate::auth::Caller;
use crate::body::Query;
use crate::problem::Problem;
use crate::service::events::Feed;
use crate::service::{self, threads};
use crate::state::AppState;
use crate::views::{ApprovalId, EntryView};

/// Entries read per journal page while catching up.
const PAGE: usize = 500;

/// Where to start.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    /// Only entries after this seq (`Last-Event-ID` wins when both are given).
    pub after: Option<i64>,
}

/// The `status` event's data for `t`.
fn status(t: &Thread) -> serde_json::Value {
    json!({
        "status": t.status.as_str(),
        "stopReason": t.stop_reason.map(|r| r.as_str()),
        "result": t.result,
        "session": t.session,
        "park": t.park().map(|p| p.to_string()),
        "approval": t.park().map(|park| ApprovalId { thread: t.id, park }.to_string()),
    })
}

/// Follows the thread: its entries after the cursor, then each as it commits.
#[utoipa::path(get, path = "/threads/{key}/events", tag = "events",
    params(("key" = String, Path, description = "The thread's key (percent-encoded)"), EventsQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "The last seq received")),
    responses((status = 200, description = "An SSE stream: `event:` the entry's kind (or `status`), `id:` its seq, `data:` JSON", content_type = "text/event-stream", body = String),
        (status = 404, description = "No such thread", body = crate::problem::ProblemBody)))]
pub(crate) async fn follow(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let last = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .ok_or_else(|| {
                    Problem::bad_request("invalid_last_event_id", "Last-Event-ID is not a seq")
                })
        })
        .transpose()?;
    let after = last.or(q.after).unwrap_or(0).max(0);
    let t = threads::find(&state, &caller, &key).await?;
    let credential = caller.credential.clone();
    let feed = Feed::of(&state);
    let id = t.id;
    let closing = state.closing().clone();
    // Subscribed before the first read, so whatever commits after that read is announced.
    let mut changes = feed.changes();
    let events = async_stream::stream! {
        let mut cursor = after;
        let mut sent: Option<serde_json::Value> = None;
        loop {
            // The thread first, then its journal up to (at least) the thread's seq: a status is
            // sent only after every entry it reflects.
            let Ok(Some(t)) = feed.thread(id).await else { return };
            while cursor < t.next_seq - 1 {
                let Ok(page) = feed.journal_page(id, cursor, PAGE).await else { return };
                if page.is_empty() {
                    break;
                }
                for entry in page {
                    cursor = entry.seq();
                    let view = EntryView::from(Entry::from(entry));
                    let event = Event::default().id(view.seq.to_string()).event(view.kind.clone());
                    if let Ok(event) = event.json_data(&view) {
                        yield Ok(event);
                    }
                }
            }
            if cursor > t.next_seq - 1 {
                // The page held entries committed after the thread was read: read it again, so
                // the status sent is never older than the entries before it.
                continue;
            }
            let now = status(&t);
            if sent.as_ref() != Some(&now) {
                yield Ok(Event::default().event("status").data(now.to_string()));
                sent = Some(now);
            }
            if t.status == ThreadStatus::Terminated {
                return;
            }
            loop {
                match changes.next().await {
                    Some(event) if event.concerns(id) => break,
                    Some(_) => {}
                    None => return,
                }
            }
        }
    };
    let events: BoxStream<'static, Result<Event, Infallible>> =
        events.take_until(closing.cancelled_owned()).boxed();
    Ok(state.sse(service::keys::while_admitted(&state, credential, events)))
}
