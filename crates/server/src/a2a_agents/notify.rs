//! A2A push notifications, in every server process: the notifier turns each task's new journal
//! entries into A2A events in the one outbox (moving the config's watermark in the same
//! transaction), and the outbox's sender (`notify/sender.rs`) POSTs them with [`send_push`],
//! retrying with backoff until the endpoint takes each one — so a notification survives a
//! restart, and is sent at least once.

use std::time::Duration;

use duet_a2a::{
    A2aError, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use duet_server_store::{Delivery, PushConfig, PushMeta};
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

/// Runs the notifier until the server closes (the outbox's sender, `notify/sender.rs`, sends
/// what it queues).
pub(crate) async fn run(state: AppState) {
    notifier(state).await;
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
        origin: Some(super::files_out::origin(state, None)),
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

/// Sends A2A push delivery `d` (for the outbox's sender, `notify/sender.rs`): the config's
/// settings from its meta, the target checked (private addresses only when `allow_private`) and
/// connected to at the checked addresses only.
pub(crate) async fn send_push(
    http: &reqwest::Client,
    allow_private: bool,
    d: &Delivery,
) -> Result<(), String> {
    let meta: PushMeta = serde_json::from_str(d.meta.as_deref().unwrap_or("{}"))
        .map_err(|e| format!("permanent: unreadable push settings: {e}"))?;
    let target = target_allowed(&d.target, allow_private)
        .await
        .map_err(|why| format!("target refused: {why}"))?;
    let mut req = crate::notify::http::pinned(http, &target)?
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
        Err(e) => Err(e.without_url().to_string()),
    }
}
