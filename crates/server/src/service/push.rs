//! A2A push notifications on the server's own tables (`duet_server_store::PushStore`): a
//! task's configs, and the outbox (`NotifyStore`'s, every channel's) the sender drains. Who may touch a task's configs is decided
//! by the A2A agent before it calls here (the task is read with the caller's visibility).

use duet_runtime::{StoreError, ThreadId};
use duet_server_store::{Delivery, PushConfig};

use crate::state::AppState;

/// Creates or replaces `config`.
pub(crate) async fn put(state: &AppState, config: &PushConfig) -> Result<(), StoreError> {
    state.server_store().put_push_config(config).await
}

/// The config `id` of task (`thread`, `session`).
pub(crate) async fn get(
    state: &AppState,
    thread: ThreadId,
    session: i64,
    id: &str,
) -> Result<Option<PushConfig>, StoreError> {
    state.server_store().push_config(thread, session, id).await
}

/// Every config of task (`thread`, `session`).
pub(crate) async fn of_task(
    state: &AppState,
    thread: ThreadId,
    session: i64,
) -> Result<Vec<PushConfig>, StoreError> {
    state.server_store().push_configs(thread, session).await
}

/// Every config of every task (what the notifier watches).
pub(crate) async fn all(state: &AppState) -> Result<Vec<PushConfig>, StoreError> {
    state.server_store().all_push_configs().await
}

/// Deletes config `id` of task (`thread`, `session`); whether it existed.
pub(crate) async fn delete(
    state: &AppState,
    thread: ThreadId,
    session: i64,
    id: &str,
) -> Result<bool, StoreError> {
    state
        .server_store()
        .delete_push_config(thread, session, id)
        .await
}

/// The updates of `config` from journal seq `from` to `to`: into the outbox with the config's
/// watermark moved, in one transaction (`false`: the watermark had moved already).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn enqueue(
    state: &AppState,
    config: &PushConfig,
    (from, to): (i64, i64),
    task_state: &str,
    bodies: &[String],
    done: bool,
    now: i64,
) -> Result<bool, StoreError> {
    state
        .server_store()
        .enqueue_pushes(config, from, to, task_state, bodies, done, now)
        .await
}

/// Up to `limit` deliveries of the outbox due by `now`, each held for `lease_ms` (every
/// channel's: the sender sends A2A push's).
pub(crate) async fn claim(
    state: &AppState,
    now: i64,
    lease_ms: i64,
    limit: usize,
) -> Result<Vec<Delivery>, StoreError> {
    state
        .server_store()
        .claim_deliveries(now, lease_ms, limit)
        .await
}

/// Delivery `id` was taken by its endpoint at `now`.
pub(crate) async fn sent(state: &AppState, id: i64, now: i64) -> Result<(), StoreError> {
    state.server_store().delivered(id, None, now).await
}

/// Delivery `id` failed with `error`; tried again at `next_at`, or given up (`None`).
pub(crate) async fn failed(
    state: &AppState,
    id: i64,
    next_at: Option<i64>,
    error: &str,
    now: i64,
) -> Result<(), StoreError> {
    state
        .server_store()
        .delivery_failed(id, next_at, error, now)
        .await
}
