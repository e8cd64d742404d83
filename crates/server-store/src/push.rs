//! Push notifications: where to send a task's updates (a config per task, a task being one
//! session of a thread) and the outbox of notifications to send. The payloads are opaque here
//! (the server writes A2A's); delivery is at least once: a notification leaves the outbox only
//! when its endpoint took it.

use async_trait::async_trait;

use duet_runtime::StoreError;
use duet_runtime::ThreadId;

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

/// One notification in the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushDelivery {
    /// Its place in the outbox.
    pub id: i64,
    /// The task's thread.
    pub thread: ThreadId,
    /// The config it is for.
    pub config: String,
    /// Where it is sent (copied from the config, which may be gone by then).
    pub url: String,
    /// The config's token.
    pub token: Option<String>,
    /// The config's `Authorization` scheme.
    pub auth_scheme: Option<String>,
    /// The config's `Authorization` credentials.
    pub auth_credentials: Option<String>,
    /// The body, as sent.
    pub body: String,
    /// How many sends failed so far.
    pub attempts: i64,
}

/// Storing push configs and the outbox.
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
    /// Deletes the task's config `id`, and its notifications not sent yet; whether there was
    /// one.
    async fn delete_push_config(
        &self,
        thread: ThreadId,
        session: i64,
        id: &str,
    ) -> Result<bool, StoreError>;
    /// Puts `bodies` in the outbox for `config` and moves its watermark from `from` to
    /// `to` (and its last state to `state`), in one transaction; with `done` (its task ended), the
    /// config is also marked ended at `now`: still read by id and per task, no longer in
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
    /// Up to `limit` notifications due by `now`, oldest first, each claimed until
    /// `now + lease_ms` (no other claim gets it before then). Only a config's oldest pending
    /// notification is ever due, so a config's notifications arrive in order (one that is
    /// retried holds back those after it).
    async fn claim_pushes(
        &self,
        now: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<PushDelivery>, StoreError>;
    /// Notification `id` was taken: it leaves the outbox.
    async fn push_sent(&self, id: i64) -> Result<(), StoreError>;
    /// Notification `id` failed: due again at `next_at`, or given up on (kept, not sent again)
    /// when `next_at` is `None`.
    async fn push_failed(
        &self,
        id: i64,
        next_at: Option<i64>,
        error: &str,
        now: i64,
    ) -> Result<(), StoreError>;
}
