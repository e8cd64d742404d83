//! Delivering push notifications, in every server process: the notifier turns each task's new
//! journal entries into A2A events in the outbox (moving the config's watermark in the same
//! transaction), and the sender POSTs the outbox, retrying with backoff until the endpoint
//! takes each one — so a notification survives a restart, and is sent at least once.

use std::time::Duration;

use duet_a2a::{
    A2aError, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use duet_net::Target;
use duet_server_store::{Delivery, PUSH_CHANNEL, PushConfig, PushMeta};
use std::collections::BTreeSet;

use duet_runtime::{FeedEvent, ThreadId};
use futures::{FutureExt, StreamExt};

use super::follow;
use super::push::target_allowed;
use super::tasks::{TaskRef, View};
use crate::auth::Caller;
use crate::service;
use crate::service::events::Feed;
use crate::service::threads;
use crate::state::AppState;

/// How long a claimed notification is ours before another sender may take it.
const CLAIM_MS: i64 = 30_000;
/// Notifications sent per claim.
const BATCH: usize = 16;
/// Failures before a notification is given up on (kept in the outbox, marked).
const MAX_ATTEMPTS: i64 = 10;

/// Runs the notifier and the sender until the server closes.
pub(crate) async fn run(state: AppState) {
    tokio::join!(notifier(state.clone()), sender(state));
}

/// Turns task updates into outbox rows whenever anything changes (and every recovery period,
/// for what another process changed).
async fn notifier(state: AppState) {
    let every = state.options().recover_every.max(Duration::from_millis(50));
    let closing = state.closing().clone();
    let mut changes = Feed::of(&state).changes();
    // The threads with configs, as the last full pass found them. A change to any other thread
    // costs nothing here (no query); a config made on this process asks for a full pass at
    // once, one made on another is found at the next tick (its updates are caught up from its
    // watermark, so that is a delay, never a loss).
    let mut watched: BTreeSet<ThreadId> = BTreeSet::new();
    let mut only: Option<BTreeSet<ThreadId>> = None;
    loop {
        let due = match &only {
            None => true,
            Some(threads) => threads.iter().any(|t| watched.contains(t)),
        };
        if due {
            match pass(&state, only.as_ref()).await {
                Ok(Some(all)) => watched = all,
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "push notifier: a pass failed; trying again"),
            }
        }
        let first = tokio::select! {
            () = closing.cancelled() => return,
            () = state.push_configs_changed() => None,
            event = changes.next() => event,
            () = tokio::time::sleep(every) => None,
        };
        only = match first {
            None => None,
            Some(event) => {
                let mut threads = BTreeSet::new();
                let mut all = false;
                let mut next = Some(event);
                while let Some(event) = next {
                    match event {
                        FeedEvent::Changed(c) => {
                            threads.insert(c.thread);
                        }
                        FeedEvent::Resync => all = true,
                    }
                    next = changes.next().now_or_never().flatten();
                }
                (!all).then_some(threads)
            }
        };
    }
}

/// One look at every config (or those of the threads in `only`): what each task did since its
/// watermark goes in the outbox. A full pass says which threads have configs.
async fn pass(
    state: &AppState,
    only: Option<&BTreeSet<ThreadId>>,
) -> Result<Option<BTreeSet<ThreadId>>, String> {
    let configs = service::push::all(state).await.map_err(|e| e.to_string())?;
    let found = only
        .is_none()
        .then(|| configs.iter().map(|c| c.thread).collect());
    let mut queued = false;
    for c in configs {
        if only.is_some_and(|o| !o.contains(&c.thread)) {
            continue;
        }
        match updates(state, &c).await {
            Ok(Some((to, task_state, bodies, done))) => {
                let now = state.runtime().now_ms();
                let span = (c.watermark, to);
                let moved = service::push::enqueue(
                    state,
                    &c,
                    span,
                    task_state.as_str(),
                    &bodies,
                    done,
                    now,
                )
                .await
                .map_err(|e| e.to_string())?;
                queued |= moved && !bodies.is_empty();
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(task = %TaskRef { thread: c.thread, session: c.session }.id(), error = %e.message(), "push notifier: cannot read the task")
            }
        }
    }
    if queued {
        state.push_wake();
    }
    Ok(found)
}

/// What config `c` has not been told: the watermark to move to, the task's state, the events,
/// and whether the task ended (the config's last update). `None`: nothing new.
async fn updates(
    state: &AppState,
    c: &PushConfig,
) -> Result<Option<(i64, TaskState, Vec<String>, bool)>, A2aError> {
    let r = TaskRef {
        thread: c.thread,
        session: c.session,
    };
    // Nothing new (one row read, no journal): the thread has not moved past the watermark and
    // its state is the one last told.
    let Some(t) = threads::reread(state, c.thread)
        .await
        .map_err(A2aError::internal)?
    else {
        return Err(A2aError::task_not_found(&r.id()));
    };
    if t.next_seq - 1 <= c.watermark
        && t.session == c.session
        && c.last_state.as_deref() == Some(super::tasks::current_state(&t).as_str())
    {
        return Ok(None);
    }
    let client = state
        .runtime()
        .project()
        .agents
        .get(&t.agent)
        .map_or(duet_runtime::SideId::B, |a| super::client_side(&a.def));
    let view = View {
        context: Caller::owner(c.principal.as_deref()).visible_key(&t.key),
        client,
        history: usize::MAX,
        artifacts: true,
    };
    let (_, task, last_seq, seqs) = follow::read_seqs(state, r, &view).await?;
    let s = task.status.state;
    let changed = c.last_state.as_deref() != Some(s.as_str());
    if last_seq <= c.watermark && !changed {
        return Ok(None);
    }
    let done = s.is_terminal();
    let mut events = Vec::new();
    let closing = task.status.message.as_ref().map(|m| m.message_id.clone());
    for (m, &seq) in task.history.iter().zip(&seqs) {
        if seq <= c.watermark || m.role != Role::Agent {
            continue;
        }
        if changed && closing.as_deref() == Some(m.message_id.as_str()) {
            continue;
        }
        events.push(status_event(
            &task,
            TaskStatus {
                state: TaskState::Working,
                message: Some(m.clone()),
                timestamp: task.status.timestamp.clone(),
            },
        ));
    }
    if changed {
        if done {
            for artifact in &task.artifacts {
                events.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: task.id.clone(),
                    context_id: task.context_id.clone(),
                    artifact: artifact.clone(),
                    append: false,
                    last_chunk: true,
                    metadata: None,
                }));
            }
        }
        events.push(status_event(&task, task.status.clone()));
    }
    let bodies = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap_or_default())
        .collect();
    Ok(Some((last_seq.max(c.watermark), s, bodies, done)))
}

fn status_event(task: &Task, status: TaskStatus) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status,
        metadata: None,
    })
}

/// Sends what is due in the outbox, whenever the notifier queued something (and every
/// recovery period, for retries and other processes' rows).
async fn sender(state: AppState) {
    let every = state.options().recover_every.max(Duration::from_millis(50));
    let closing = state.closing().clone();
    let http = match crate::notify::http::client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "push sender: no HTTP client; push notifications are not sent");
            return;
        }
    };
    loop {
        loop {
            let now = state.runtime().now_ms();
            let due = match service::push::claim(&state, now, CLAIM_MS, BATCH).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(error = %e, "push sender: cannot read the outbox");
                    break;
                }
            };
            if due.is_empty() {
                break;
            }
            // At once: one slow endpoint holds up no other, and the batch ends well inside
            // its claim.
            futures::future::join_all(due.into_iter().map(|d| deliver(&state, &http, d))).await;
        }
        tokio::select! {
            () = closing.cancelled() => return,
            () = state.push_woken() => {}
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Sends one delivery and records how it went. Only A2A push's are sent here; any other
/// channel's is given up on at once (the generic sender replaces this one).
async fn deliver(state: &AppState, http: &reqwest::Client, d: Delivery) {
    let now = state.runtime().now_ms();
    if d.channel != PUSH_CHANNEL {
        let error = format!("no sender for channel `{}`", d.channel);
        tracing::warn!(id = d.id, error = %error, "outbox delivery given up on");
        if let Err(e) = service::push::failed(state, d.id, None, &error, now).await {
            tracing::warn!(error = %e, "push sender: cannot record a delivery");
        }
        return;
    }
    let outcome = match serde_json::from_str::<PushMeta>(d.meta.as_deref().unwrap_or("{}")) {
        Err(e) => Err(format!("unreadable push settings: {e}")),
        Ok(meta) => match target_allowed(&d.target, state.options().allow_private_push).await {
            Err(why) => Err(format!("target refused: {why}")),
            Ok(target) => send(http, &target, &d, &meta).await,
        },
    };
    let now = state.runtime().now_ms();
    let recorded = match outcome {
        Ok(()) => service::push::sent(state, d.id, now).await,
        Err(error) => {
            let attempts = d.attempts + 1;
            let next = (attempts < MAX_ATTEMPTS).then(|| now + backoff_ms(attempts));
            if next.is_none() {
                tracing::warn!(url = %d.target, error = %error, attempts, "push notification given up on");
            } else {
                tracing::info!(url = %d.target, error = %error, attempts, "push notification failed; retrying");
            }
            service::push::failed(state, d.id, next, &error, now).await
        }
    };
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "push sender: cannot record a delivery (it will be sent again)");
    }
}

/// POSTs `d` to `target` with `meta`'s headers, connecting only to the addresses it was
/// checked at.
async fn send(
    http: &reqwest::Client,
    target: &Target,
    d: &Delivery,
    meta: &PushMeta,
) -> Result<(), String> {
    let mut req = crate::notify::http::pinned(http, target)?
        .post(target.url.clone())
        .header("content-type", "application/a2a+json")
        .body(d.body.clone());
    if let Some(scheme) = &meta.auth_scheme {
        let value = match &meta.auth_credentials {
            Some(c) => format!("{scheme} {c}"),
            None => scheme.clone(),
        };
        req = req.header("authorization", value);
    }
    if let Some(token) = &meta.token {
        req = req.header("x-a2a-notification-token", token);
    }
    match req.send().await {
        Ok(resp) if resp.status().is_success() => Ok(()),
        Ok(resp) => Err(format!("HTTP {}", resp.status().as_u16())),
        Err(e) => Err(e.to_string()),
    }
}

/// The wait before attempt `n + 1`: 1 s, doubling, at most 5 min.
fn backoff_ms(n: i64) -> i64 {
    let exp = u32::try_from(n.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    (1_000i64 << exp).min(300_000)
}

#[cfg(test)]
mod tests {
    #[test]
    fn backoff_doubles_to_a_ceiling() {
        let waits: Vec<i64> = (1..=11).map(super::backoff_ms).collect();
        assert_eq!(&waits[..4], [1_000, 2_000, 4_000, 8_000]);
        assert_eq!(waits[10], 300_000);
    }
}
