//! Following a task as its thread moves: waiting until it settles (terminal or interrupted),
//! and streaming its updates — the agent's messages as `WORKING` status messages, then the
//! final status (and the result artifact). Woken by the store's change feed, so a run in any
//! process is followed.

use duet_a2a::{A2aError, StreamSink, Task, TaskState, TaskStatus};
use duet_runtime::{Thread, ThreadId};
use futures::StreamExt;

use super::tasks::{self, TaskRef, View};
use crate::service;
use crate::service::events::Feed;
use crate::state::AppState;

/// Reads the thread and the task as they are now.
pub(crate) async fn read(
    state: &AppState,
    r: TaskRef,
    view: &View,
) -> Result<(Thread, Task, i64), A2aError> {
    let (t, task, last_seq, _) = read_seqs(state, r, view).await?;
    Ok((t, task, last_seq))
}

/// [`read`], with the journal seq of each message of the task's history, in its order.
pub(crate) async fn read_seqs(
    state: &AppState,
    r: TaskRef,
    view: &View,
) -> Result<(Thread, Task, i64, Vec<i64>), A2aError> {
    let (t, mut facts) = service::tasks::session(state, r.thread, r.session)
        .await
        .map_err(A2aError::internal)?
        .ok_or_else(|| A2aError::task_not_found(&r.id()))?;
    with_files(state, &t, r, &mut facts, view).await?;
    let task = tasks::task(&t, r, &facts, view);
    let seqs = tasks::history_seqs(&facts, view);
    Ok((t, task, facts.last_seq, seqs))
}

/// [`read`] on thread `t` as the caller read it a moment ago (its journal read up to where
/// `t` saw it): the thread is not read again.
pub(crate) async fn read_on(
    state: &AppState,
    t: Thread,
    r: TaskRef,
    view: &View,
) -> Result<(Thread, Task, i64), A2aError> {
    read_from(state, t, None, r, view).await
}

/// [`read_on`], with the task's entries too when `read` holds them (as the write that left
/// `t` read them): then nothing is read.
async fn read_from(
    state: &AppState,
    t: Thread,
    read: Option<Vec<duet_runtime::JournalEntry>>,
    r: TaskRef,
    view: &View,
) -> Result<(Thread, Task, i64), A2aError> {
    let mut facts = service::tasks::facts_of(state, &t, r.session, read)
        .await
        .map_err(A2aError::internal)?;
    with_files(state, &t, r, &mut facts, view).await?;
    let task = tasks::task(&t, r, &facts, view);
    Ok((t, task, facts.last_seq))
}

/// Reads the files a completed task's result names into `facts`, when `view` shows artifacts.
pub(crate) async fn with_files(
    state: &AppState,
    t: &Thread,
    r: TaskRef,
    facts: &mut service::tasks::SessionFacts,
    view: &View,
) -> Result<(), A2aError> {
    if view.artifacts && tasks::state(t, r.session, facts) == TaskState::Completed {
        facts.files = service::tasks::result_files(state, r.thread, facts, view.client)
            .await
            .map_err(A2aError::internal)?;
    }
    Ok(())
}

/// The end of a run this process started for a message (see `AppState::spawn_run`).
pub(crate) type RunEnd =
    tokio::sync::oneshot::Receiver<Result<duet_runtime::Settled, duet_runtime::RunError>>;

/// How long a blocking request waits for the end of the run it started before following the
/// task on the change feed instead: a run can outlive its task (messages queued behind it open
/// the next session in the same run), and a long run's commits are few beside its work.
const RUN_END_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Waits until the task is terminal or interrupted with its journal past `floor` (so a state
/// read before the run took the message does not count), or the server begins shutting down;
/// the task as it then is. With `run`, the run this request started, that run's end comes
/// first, for at most [`RUN_END_WAIT`]: a quick run's task is read once it is over rather than
/// again on each of its commits; past that, or for a run that ended with a message queued
/// behind it, the task is followed on the change feed.
pub(crate) async fn settled(
    state: &AppState,
    r: TaskRef,
    view: &View,
    floor: Option<i64>,
    run: Option<RunEnd>,
) -> Result<Task, A2aError> {
    // Whether the queue is known to hold nothing runnable: the run this request started
    // settled, and a run settles only when nothing it could run waits.
    let mut settled_empty = false;
    // The thread as that run left it, and the task's entries when its settling write read
    // them: the task's first read need not read them again.
    let mut last = None;
    // Subscribed before the run's end is awaited: the first read may be the thread as the run
    // left it, so what changed since must be announced.
    let mut changes = Feed::of(state).changes();
    if let Some(run) = run {
        tokio::select! {
            () = state.closing().cancelled() => {}
            () = tokio::time::sleep(RUN_END_WAIT) => {}
            // However else it ended (failed, lost its lease): the task says the rest.
            ended = run => if let Ok(Ok(s)) = ended {
                settled_empty = true;
                let read = s.session_entries.filter(|_| s.session == r.session);
                last = Some((*s.last, read)).filter(|(t, _)| t.id == r.thread);
            },
        }
    }
    loop {
        // The queue before the journal: a message moves from one to the other in one
        // transaction, so an empty queue now means the journal read next has it.
        let queued = !std::mem::take(&mut settled_empty) && pending(state, r).await?;
        let (_, task, last_seq) = match last.take() {
            Some((t, read)) => read_from(state, t, read, r, view).await?,
            None => read(state, r, view).await?,
        };
        if done(task.status.state)
            && past(floor, last_seq)
            && (task.status.state.is_terminal() || !queued)
        {
            return Ok(task);
        }
        if !wait(state, &mut changes, r.thread).await {
            return Ok(task);
        }
    }
}

fn done(s: TaskState) -> bool {
    s.is_terminal() || s.is_interrupted()
}

/// Whether a message waits in the thread's queue: an interrupted task with one (a follow-up
/// sent while it worked) is about to continue, not settled. (A terminal task is settled
/// whatever comes after it: that is another task.)
async fn pending(state: &AppState, r: TaskRef) -> Result<bool, A2aError> {
    service::tasks::queued(state, r.thread)
        .await
        .map_err(A2aError::internal)
}

/// Whether the journal has moved past `floor` (the next seq when the message was delivered):
/// the message and at least one entry after it.
fn past(floor: Option<i64>, last_seq: i64) -> bool {
    floor.is_none_or(|f| last_seq > f)
}

/// Waits for a change to `thread`: `false` when the feed ended or the server is closing.
async fn wait(
    state: &AppState,
    changes: &mut futures::stream::BoxStream<'static, duet_runtime::FeedEvent>,
    thread: ThreadId,
) -> bool {
    loop {
        let event = tokio::select! {
            () = state.closing().cancelled() => return false,
            event = changes.next() => event,
        };
        match event {
            Some(e) if e.concerns(thread) => return true,
            Some(_) => {}
            None => return false,
        }
    }
}

/// Streams the task from `snapshot` (already sent, with the journal seqs of its history) on:
/// each new message of the agent, then the state it settles in (past `floor`, as
/// [`settled`]). A stream that began interrupted waits for the task to move first.
pub(crate) async fn stream(
    state: AppState,
    r: TaskRef,
    view: View,
    mut sink: StreamSink,
    snapshot: (Task, Vec<i64>),
    (mut seen, floor): (i64, Option<i64>),
) -> Result<(), A2aError> {
    // What was reported, by journal seq, not message id: a client chooses its messages' ids.
    let (snapshot, mut reported) = snapshot;
    let mut changes = Feed::of(&state).changes();
    let mut last = snapshot.status.state;
    let mut moved = !done(last);
    loop {
        let queued = pending(&state, r).await?;
        let (_, task, last_seq, seqs) = read_seqs(&state, r, &view).await?;
        // A settled state read before the run took the message, or with a message still
        // queued, is not news yet.
        let s = match task.status.state {
            s if done(s) && !(past(floor, last_seq) && (s.is_terminal() || !queued)) => last,
            s => s,
        };
        if last_seq != seen || s != last {
            seen = last_seq;
            if s != last && !done(s) {
                moved = true;
            }
            let settled = done(s) && (moved || s.is_terminal());
            let closing = task.status.message.as_ref().map(|m| &m.message_id);
            for (m, seq) in task.history.iter().zip(&seqs) {
                if reported.contains(seq) {
                    continue;
                }
                reported.push(*seq);
                // The agent's messages as they come; the one a settled status carries waits
                // for that status.
                let agent = m.role == duet_a2a::Role::Agent;
                if agent && !(settled && closing == Some(&m.message_id)) {
                    sink.status(TaskStatus {
                        state: TaskState::Working,
                        message: Some(m.clone()),
                        timestamp: task.status.timestamp.clone(),
                    })
                    .await?;
                }
            }
            if settled {
                return finish(&mut sink, task).await;
            }
            if s != last {
                last = s;
                sink.status(task.status.clone()).await?;
            }
        }
        // A client that left ends the following (the task goes on without it).
        let woke = tokio::select! {
            woke = wait(&state, &mut changes, r.thread) => woke,
            () = sink.client_gone() => false,
        };
        if !woke {
            return Ok(());
        }
    }
}

/// The last events of a stream: the result artifact, then the final status.
async fn finish(sink: &mut StreamSink, task: Task) -> Result<(), A2aError> {
    for artifact in task.artifacts {
        sink.artifact(artifact, false, true).await?;
    }
    sink.status(task.status).await
}
