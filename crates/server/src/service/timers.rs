//! A thread's timers as its caller sees them (`GET /threads/{key}/effects`), and cancelling one
//! (`DELETE /threads/{key}/effects/{id}`, effects only: a deadline ends when its question is
//! answered): only the timers of a thread the caller may see
//! ([`super::threads::find`]); a timer of another thread is not there.

use duet_runtime::{CancelOutcome, Thread, Timer, TimerKind, TimerQuery, TimerStatus};
use uuid::Uuid;

use super::ServiceError;
use crate::state::AppState;

/// The timers of `t` of `kind` (with `status`, when given), the latest due first: one index
/// read of `limit` rows, however many finished timers the thread has kept.
pub(crate) async fn list(
    state: &AppState,
    t: &Thread,
    kind: TimerKind,
    status: Option<TimerStatus>,
    limit: usize,
) -> Result<Vec<Timer>, ServiceError> {
    let query = TimerQuery {
        thread: Some(t.id),
        status,
        kind: Some(kind),
        name: None,
        after: None,
        newest_first: true,
        limit,
    };
    Ok(state.runtime().store().timers(&query).await?)
}

/// What cancelling a thread's timer came to.
pub(crate) enum Cancelled {
    /// It was pending and is cancelled.
    Done,
    /// It is not pending: it runs, or is done with (its status said).
    NotPending(TimerStatus),
    /// It is a question's deadline, not an effect: only answering the question ends it (so
    /// whoever may see a thread cannot take away its approval's default or escalation).
    Deadline,
}

/// Cancels timer `id` of `t`, if it is pending. [`ServiceError::NotFound`]: no such timer on
/// this thread (another thread's is not there).
pub(crate) async fn cancel(
    state: &AppState,
    t: &Thread,
    id: Uuid,
) -> Result<Cancelled, ServiceError> {
    let store = state.runtime().store();
    let gone = || ServiceError::NotFound(format!("thread `{}` has no timer {id}", t.key));
    match store.timer(id).await? {
        Some(timer) if timer.thread == t.id && timer.kind == TimerKind::Deadline => {
            return Ok(Cancelled::Deadline);
        }
        Some(timer) if timer.thread == t.id => {}
        _ => return Err(gone()),
    }
    match store.cancel_timer(id, state.runtime().now_ms()).await? {
        CancelOutcome::Cancelled(_) => Ok(Cancelled::Done),
        CancelOutcome::NotPending(timer) => Ok(Cancelled::NotPending(timer.status)),
        CancelOutcome::NotFound => Err(gone()),
    }
}

/// The timers by state as of now, for `/metrics`.
pub(crate) async fn counts(state: &AppState) -> Result<duet_runtime::TimerCounts, ServiceError> {
    let rt = state.runtime();
    Ok(rt.store().timer_counts(rt.now_ms()).await?)
}
