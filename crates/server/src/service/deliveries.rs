//! One inbound message, whichever door brings it (a new thread, a message, an approval's
//! answer): written durably before the caller is answered, then run in a task of its own, and
//! — when the caller asked to wait — followed until the thread settles.

use duet_runtime::{
    Accepted, Delivery, ImageRef, Origin, Park, Thread, ThreadId, ThreadStatus, WhenBusy,
};
use futures::StreamExt;

use super::{ServiceError, threads};
use crate::auth::Caller;
use crate::state::AppState;

/// One inbound message.
pub(crate) struct Inbound<'a> {
    /// The stored key of the thread.
    pub key: &'a str,
    /// The agent, for a thread that may be created.
    pub agent: Option<&'a str>,
    /// The thread under `key` as the door read it a moment ago (none: there was none, and
    /// this delivery may create it).
    pub thread: Option<&'a Thread>,
    pub text: &'a str,
    pub images: &'a [ImageRef],
    /// Paths of the thread's files that come with it (each must be one).
    pub attachments: &'a [String],
    /// The park this message answers, if it is an answer.
    pub answers: Option<Park>,
    pub message_id: Option<&'a str>,
    /// Follow the run until the thread settles before answering.
    pub wait: bool,
    /// Answered by a caller a question's deadline escalated to, who does not own the thread:
    /// delivered for its owner (recorded as the caller's answer), and the caller told nothing
    /// of the thread.
    pub for_owner: bool,
}

/// How a delivery landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Landed {
    /// Stored, and this process runs the thread.
    Accepted,
    /// Stored; a run elsewhere (or already here) takes it.
    Queued,
    /// Its message id was delivered before: nothing was written.
    Duplicate,
}

impl Landed {
    /// Its name on the wire (`delivery` in the API's answer).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Landed::Accepted => "accepted",
            Landed::Queued => "queued",
            Landed::Duplicate => "duplicate",
        }
    }
}

/// A delivery that was stored (or replayed).
pub(crate) struct Delivered {
    pub landed: Landed,
    /// The thread's key as the caller names it.
    pub visible: String,
    /// The journal's last seq before this delivery: where a follower starts.
    pub since: i64,
    /// The thread as it stands now, with its parent — read when the caller waited and the
    /// thread settled, and for a duplicate; `None` when the caller is answered at once.
    pub now: Option<(Thread, Option<Thread>)>,
    /// Whether the caller sees the thread (not one answering for its owner).
    pub seeing: bool,
}

/// Delivers `inbound` for `caller`.
pub(crate) async fn deliver(
    state: &AppState,
    caller: &Caller,
    inbound: Inbound<'_>,
) -> Result<Delivered, ServiceError> {
    let visible = caller.visible_key(inbound.key);
    let delivery = Delivery {
        key: inbound.key,
        agent: inbound.agent,
        text: inbound.text,
        images: inbound.images,
        attachments: inbound.attachments,
        origin: Origin {
            principal: match inbound.thread {
                Some(t) if inbound.for_owner => t.principal.as_deref(),
                thread => caller.acting_for(thread),
            },
            author: caller.canonical.as_deref(),
            source: Some("http"),
            ..Origin::default()
        },
        when_busy: WhenBusy::Queue,
        answers: inbound.answers,
        message_id: inbound.message_id,
        trace: None,
    };
    let since = inbound.thread.map_or(0, |t| t.next_seq - 1);
    // Every door read the thread under the key a moment ago (or found none): not read again.
    let accepted = state
        .runtime()
        .accept_to(inbound.thread, delivery)
        .await
        .map_err(|e| ServiceError::run(e, &visible))?;
    // The message is stored: from here on, whatever happens to the run, the caller is told
    // where to follow it rather than an error it might retry into a second message.
    let mut waited = inbound.wait;
    // The thread as the run this delivery started left it, when waited for: not read again.
    let mut last = None;
    let (thread, landed) = match accepted {
        Accepted::Claimed(claim) => {
            let thread = claim.thread();
            let outcome = state.spawn_run(claim);
            if inbound.wait {
                match outcome.await {
                    Ok(Ok(settled)) => last = Some(*settled.last),
                    Ok(Err(e)) => {
                        tracing::info!(error = %e, "a waited-for run did not settle here");
                        waited = false;
                    }
                    Err(_) => waited = false,
                }
            }
            (thread, Landed::Accepted)
        }
        Accepted::Queued { thread } => {
            if inbound.wait {
                waited = settled(state, thread).await?;
            }
            (thread, Landed::Queued)
        }
        // The engine read the thread to find the replay: not read again.
        Accepted::Duplicate(settled) => {
            let thread = settled.thread;
            last = Some(*settled.last);
            (thread, Landed::Duplicate)
        }
    };
    let now = if waited || landed == Landed::Duplicate {
        Some(threads::settled_with_parent(state, last, thread, &visible).await?)
    } else {
        None
    };
    Ok(Delivered {
        landed,
        visible,
        since,
        now,
        seeing: !inbound.for_owner,
    })
}

/// Waits until thread `id` is not running (a run elsewhere took the message and settled):
/// whether it did (`false` when the server began shutting down first).
pub(crate) async fn settled(state: &AppState, id: ThreadId) -> Result<bool, ServiceError> {
    let store = state.runtime().store();
    // Subscribed before the first read, so a settle after it is announced.
    let mut changes = store.changes();
    loop {
        let t = store
            .thread_by_id(id)
            .await?
            .ok_or_else(|| ServiceError::NotFound("the thread is gone".to_owned()))?;
        if t.status != ThreadStatus::Running {
            return Ok(true);
        }
        loop {
            let event = tokio::select! {
                () = state.closing().cancelled() => return Ok(false),
                event = changes.next() => event,
            };
            match event {
                Some(event) if event.concerns(id) => break,
                Some(_) => {}
                None => return Ok(false),
            }
        }
    }
}
