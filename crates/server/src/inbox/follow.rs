//! `/inbox/items/{id}/follow`: what happens to a question while its page is open, as SSE — each
//! new message of the parked thread and of its parents (`message`, rendered), the answer once
//! the park has one (`answered`, saying who, what and when, whoever gave it), and `settled` when
//! every thread of the chain has stopped running after the answer (the orchestrator's next
//! message has been written, or it parked again). It opens with `ready`: the page sends its answer
//! only then, so nothing the answer causes can be missed.
//!
//! For a tool call (a step's page, `decision.rs`) it sends `changed` each time the thread or a
//! parent commits, whoever decided: the page's script then reads the page again.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::Response;
use axum::response::sse::Event;
use duet_runtime::{JournalEntry, RecordBody, ThreadId, ThreadStatus};
use futures::StreamExt;
use futures::stream::BoxStream;

use super::attachments::Where;
use super::viewer::Viewer;
use super::{conversation, item};
use crate::body::Path;
use crate::problem::Problem;
use crate::service;
use crate::service::approvals;
use crate::service::events::Feed;
use crate::service::steps as step;
use crate::state::AppState;

/// `GET /inbox/items/{id}/follow`.
pub(crate) async fn follow(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let (approval, thread) = approvals::find(&state, &viewer.caller, &id).await?;
    let credential = viewer.caller.credential.clone();
    let feed = Feed::of(&state);
    if thread.park() != Some(approval.park)
        && step::load(&state, &viewer.caller, &id).await?.is_some()
    {
        return changes(&state, &thread, credential, feed).await;
    }
    // Where the question stands (a deadline's reminder moves the park past the id's), and
    // moves while the page is open: each deadline record written at it.
    let mut park = approvals::question_now(&state, &thread, approval.park).await?;
    // The chain, parked thread first: (id, agent, the last seq shown).
    let mut chain: Vec<(ThreadId, String, i64)> =
        vec![(thread.id, thread.agent.clone(), thread.next_seq - 1)];
    chain.extend(
        approvals::parents(&state, &thread)
            .await?
            .into_iter()
            .map(|p| (p.id, p.agent, p.next_seq - 1)),
    );
    let closing = state.closing().clone();
    let clock = state.clone();
    let events = async_stream::stream! {
        // Subscribed before the first read: whatever commits after it is announced.
        let mut changes = feed.changes();
        yield Ok::<_, Infallible>(Event::default().event("ready").data("{}"));
        let mut told_answer = false;
        loop {
            let mut all_stopped = true;
            let mut parked_moved = false;
            for (n, (tid, agent, shown)) in chain.iter_mut().enumerate() {
                let Ok(Some(t)) = feed.thread(*tid).await else { return };
                let Ok(entries) = feed.journal_since(*tid, *shown).await else { return };
                for entry in entries {
                    *shown = (*shown).max(entry.seq());
                    if n == 0 && entry.seq() == park.seq {
                        if moves_park(&entry) {
                            park.seq += 1;
                        } else {
                            // The answer (or what ended the park) is written where it stood.
                            parked_moved = true;
                        }
                    }
                    if let JournalEntry::Message(m) = entry
                        && !m.silent
                    {
                        let by = conversation::author(&clock, &m, agent);
                        let at = Where { item: &id, thread: *tid };
                        let html = conversation::message(&m, &by, at).into_string();
                        yield Ok(Event::default().event("message").id(format!("{tid}:{}", m.seq)).data(html));
                    }
                }
                if matches!(t.status, ThreadStatus::Running | ThreadStatus::Waiting) {
                    all_stopped = false;
                }
                // Read before the journal: parked further on is a deadline's record not read
                // yet (its change is announced), not a new question.
                let waits = t.park().is_some_and(|p| p.session == park.session && p.seq >= park.seq);
                if n == 0 && !waits {
                    parked_moved = true;
                }
            }
            if parked_moved && !told_answer {
                told_answer = true;
                let answer = approvals::answer_to(&clock, thread.id, park).await.ok().flatten();
                let html = match answer {
                    Some(a) => item::answered(&a, clock.runtime().now_ms()).into_string(),
                    None => "<p class=\"answered\" role=\"status\">This question no longer waits.</p>".to_owned(),
                };
                yield Ok(Event::default().event("answered").data(html));
            }
            if told_answer && all_stopped {
                let Ok(Some(top)) = feed.thread(chain[chain.len() - 1].0).await else { return };
                let html = maud::html! {
                    span data-status=(top.status.as_str()) {
                        (top.agent) " is " (top.status.as_str().replace('_', " ")) "."
                    }
                };
                yield Ok(Event::default().event("settled").data(html.into_string()));
                return;
            }
            loop {
                match changes.next().await {
                    Some(event) if chain.iter().any(|(tid, _, _)| event.concerns(*tid)) => break,
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

/// Whether `entry` is a deadline's record at a parked question (it moves the park by one).
fn moves_park(entry: &JournalEntry) -> bool {
    matches!(entry, JournalEntry::Record(r) if matches!(&r.body,
        RecordBody::QuestionReminded { subject, .. } | RecordBody::QuestionEscalated { subject, .. }
            if subject.starts_with("question:")))
}

/// A step's page's follow: `ready`, then `changed` (the thread's status) on each commit of the
/// thread or of a parent.
async fn changes(
    state: &AppState,
    thread: &duet_runtime::Thread,
    credential: crate::auth::Credential,
    feed: Feed,
) -> Result<Response, Problem> {
    let mut chain: Vec<ThreadId> = vec![thread.id];
    chain.extend(
        approvals::parents(state, thread)
            .await?
            .iter()
            .map(|p| p.id),
    );
    let closing = state.closing().clone();
    let events = async_stream::stream! {
        let mut changes = feed.changes();
        yield Ok::<_, Infallible>(Event::default().event("ready").data("{}"));
        while let Some(event) = changes.next().await {
            if let Some(tid) = chain.iter().find(|t| event.concerns(**t)) {
                let status = match feed.thread(*tid).await {
                    Ok(Some(t)) => t.status.as_str().to_owned(),
                    _ => return,
                };
                yield Ok(Event::default().event("changed").data(status));
            }
        }
    };
    let events: BoxStream<'static, Result<Event, Infallible>> =
        events.take_until(closing.cancelled_owned()).boxed();
    Ok(state.sse(service::keys::while_admitted(state, credential, events)))
}
