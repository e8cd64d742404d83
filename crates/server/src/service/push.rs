//! A2A push notifications on the server's own tables (`duet_server_store::PushStore`): a
//! task's configs, and the outbox (`NotifyStore`'s, every channel's) the sender drains. Who may touch a task's configs is decided
//! by the A2A agent before it calls here (the task is read with the caller's visibility).

use duet_runtime::{StoreError, ThreadId};
use duet_server_store::PushConfig;

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
