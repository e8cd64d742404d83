//! Push notifications: where to send a task's updates (a config per task, a task being one
//! session of a thread). Its notifications go in the one outbox ([`crate::NotifyStore`]), as
//! channel [`PUSH_CHANNEL`] rows, one stream per config; the payloads are opaque here (the
//! server writes A2A's); delivery is at least once: a notification is done only when its
//! endpoint took it.

use async_trait::async_trait;

use duet_runtime::StoreError;
use duet_runtime::ThreadId;
use serde::{Deserialize, Serialize};

use crate::NewDelivery;

/// Where one task's updates go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushConfig {
    /// The task's thread.
    pub thread: ThreadId,
    /// The task's session.
    pub session: i64,
    /// The config's id (unique within its task).
    pub id: String,
    /// The endpoint notifications are POSTed to.
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`, for the endpoint to check.
    pub token: Option<String>,
    /// `Authorization: {scheme} {credentials}` on every notification: the scheme…
    pub auth_scheme: Option<String>,
    /// … and the credentials.
    pub auth_credentials: Option<String>,
    /// Who made it (canonical JSON of a principal), if anyone.
    pub principal: Option<String>,
    /// The journal seq up to which updates are in the outbox.
    pub watermark: i64,
    /// The last task state put in the outbox.
    pub last_state: Option<String>,
    /// When it was made (ms).
    pub created_at: i64,
    /// When its task ended and its last update went in the outbox (ms): the config is kept,
    /// for reads, and no longer watched. `None` while the task goes on.
    pub ended_at: Option<i64>,
}

/// The channel A2A push notifications go out on, in the generic outbox.
pub const PUSH_CHANNEL: &str = "a2a_push";

/// What an A2A push notification's outbox row carries besides its body and URL (its `meta`,
/// as JSON; absent ones left out): the config's delivery settings, copied when it was enqueued
/// (the config may be gone by the time it is sent).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushMeta {
    /// Sent as `X-A2A-Notification-Token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// `Authorization: {scheme} {credentials}`: the scheme…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_scheme: Option<String>,
    /// … and the credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_credentials: Option<String>,
    /// The config's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// The outbox stream of config `config` of a task of `thread`: its notifications are sent in
/// order, one at a time.
pub fn push_stream(thread: ThreadId, config: &str) -> String {
    format!("{PUSH_CHANNEL}:{thread}:{config}")
}

/// The outbox rows of `bodies` for config `c`, due at `now` (what [`PushStore::enqueue_pushes`]
/// writes): channel [`PUSH_CHANNEL`], the config's stream, event `task.update`, the config's
/// settings as [`PushMeta`], and a fresh idempotency key each.
pub fn push_deliveries(c: &PushConfig, bodies: &[String], now: i64) -> Vec<NewDelivery> {
    let meta = PushMeta {
        token: c.token.clone(),
        auth_scheme: c.auth_scheme.clone(),
        auth_credentials: c.auth_credentials.clone(),
        config: Some(c.id.clone()),
    };
    let meta = serde_json::to_string(&meta).ok();
    bodies
        .iter()
        .map(|body| NewDelivery {
            channel: PUSH_CHANNEL.to_owned(),
            stream: push_stream(c.thread, &c.id),
            target: c.url.clone(),
            notice: None,
            thread: Some(c.thread),
            event: "task.update".to_owned(),
            subject: None,
            subscription: None,
            recipient: None,
            body: body.clone(),
            meta: meta.clone(),
            // Unique per row: a state change with no new journal entry moves no watermark,
            // so nothing about the update itself tells two of them apart.
            idempotency_key: format!("{PUSH_CHANNEL}:{}", uuid::Uuid::now_v7()),
            due_at: now,
        })
        .collect()
}

/// Storing push configs, and putting their notifications in the outbox.
#[async_trait]
pub trait PushStore: Send + Sync {
    /// Stores `config`, replacing the task's config of the same id (its watermark kept).
    async fn put_push_config(&self, config: &PushConfig) -> Result<(), StoreError>;
    /// The task's config `id`.
    async fn push_config(
        &self,
        thread: ThreadId,
        session: i64,
        id: &str,
    ) -> Result<Option<PushConfig>, StoreError>;
    /// The task's configs, oldest first.
    async fn push_configs(
        &self,
        thread: ThreadId,
        session: i64,
    ) -> Result<Vec<PushConfig>, StoreError>;
    /// Every config whose task has not ended (the notifier's work list).
    async fn all_push_configs(&self) -> Result<Vec<PushConfig>, StoreError>;
    /// Deletes the task's config `id`, and its notifications not sent yet (its stream's
    /// pending outbox rows); whether there was one.
    async fn delete_push_config(
        &self,
        thread: ThreadId,
        session: i64,
        id: &str,
    ) -> Result<bool, StoreError>;
    /// Puts `bodies` in the outbox for `config` ([`push_deliveries`]) and moves its watermark
    /// from `from` to `to` (and its last state to `state`), in one transaction; with `done` (its
    /// task ended), the config is also marked ended at `now`: still read by id and per task, no longer in
    /// [`PushStore::all_push_configs`]. Nothing is written, and `false` comes back, when the
    /// watermark is no longer `from` (another process got there first).
    #[allow(clippy::too_many_arguments)]
    async fn enqueue_pushes(
        &self,
        config: &PushConfig,
        from: i64,
        to: i64,
        state: &str,
        bodies: &[String],
        done: bool,
        now: i64,
    ) -> Result<bool, StoreError>;
}
