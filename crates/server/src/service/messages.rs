//! A thread's messages: its journal a page at a time, and whether a message id was delivered to
//! it. Each takes a thread the caller was already found allowed to ([`super::threads::find`]).

use duet_runtime::{JournalEntry, Thread};

use super::ServiceError;
use crate::state::AppState;

/// The journal of `t` after seq `after`: at most `limit` entries, messages and records alike.
pub(crate) async fn journal(
    state: &AppState,
    t: &Thread,
    after: i64,
    limit: usize,
) -> Result<Vec<JournalEntry>, ServiceError> {
    Ok(state
        .runtime()
        .store()
        .journal_page(t.id, after, limit)
        .await?)
}

/// Whether a delivery with `message_id` was made to `t`.
pub(crate) async fn delivered(
    state: &AppState,
    t: &Thread,
    message_id: &str,
) -> Result<bool, ServiceError> {
    Ok(state.runtime().store().delivered(t.id, message_id).await?)
}
