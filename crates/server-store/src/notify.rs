//! Notifications (issue #31): what a person needs to know, and the one durable outbox every
//! outbound notification goes through (A2A push, webhooks, Slack, email).
//!
//! - A **notice** is one fact of a thread's journal that someone may need to hear of (a park, a
//!   pending tool call, an answer or a decision, a reminder, an escalation, a session's end),
//!   written by the database in the transaction that writes the fact (triggers on `journal` and
//!   `answers`), so it exists exactly when the fact does. The server's router reads the notices
//!   not routed yet, oldest first, and routes each once ([`NotifyStore::route_notice`]).
//! - A **delivery** is one send to one target on one channel, in the outbox until its target
//!   takes it or it is given up on; kept afterwards with its status, for `duet notifications
//!   list` and the API. Deliveries of one **stream** (a subscription's target, an A2A push
//!   config) are sent in order: only a stream's oldest undelivered row is ever claimed.
//! - A **link** is a one-time, expiring answer to one approval (approve, reject, …) bound to
//!   the approver it was sent to.
//! - A **subscription** is a principal's own, made over the API (the project's are definitions
//!   under `agents/notifications/`, never stored here).

use async_trait::async_trait;

use duet_runtime::StoreError;
use duet_runtime::ThreadId;

/// One fact someone may need to hear of, as the database copied it from the journal (or the
/// `answers` table) in the fact's own transaction. The router decides what it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// Its place among notices (ascending in commit order per thread).
    pub id: i64,
    /// The thread.
    pub thread: ThreadId,
    /// The journal seq of the fact; for an answer, the seq of the park it answers (the
    /// thread's next seq while parked: its `stopped` record's seq + 1).
    pub seq: i64,
    /// The session: an answer's; for a record (whose journal row has none), the session of the
    /// thread's last message before it (as `QueueStore::decisions` reads it); `None` when there
    /// is no such message.
    pub session: Option<i64>,
    /// What the fact is: the journal record's kind (`stopped`, `approval_requested`,
    /// `approval_decided`, `question_reminded`, `question_escalated`, `session_ended`), or
    /// `answer` for a park's accepted answer.
    pub fact: String,
    /// The fact's fields as stored: the record's JSON `data`; for an answer, a JSON object with
    /// `author`, `messageId` and `content`.
    pub data: String,
    /// When it was written (ms).
    pub created_at: i64,
}

/// A delivery's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeliveryStatus {
    /// Waiting to be sent, or being sent, or failed and due again.
    Pending,
    /// The target took it.
    Delivered,
    /// Given up on after its last attempt (kept, with its last error; `retry` puts it back).
    Failed,
}

impl DeliveryStatus {
    /// The name on the wire and in the database's reading of it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    /// The status named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [
            DeliveryStatus::Pending,
            DeliveryStatus::Delivered,
            DeliveryStatus::Failed,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// A delivery to put in the outbox.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NewDelivery {
    /// `a2a_push`, `webhook`, `slack` or `email`.
    pub channel: String,
    /// The ordering key: a stream's deliveries are sent one at a time, in id order.
    pub stream: String,
    /// Where it goes: a URL, a Slack channel id, an email address.
    pub target: String,
    /// The notice it was routed from (none for A2A push, which reads the journal itself).
    pub notice: Option<i64>,
    /// The thread it is about.
    pub thread: Option<ThreadId>,
    /// The event's name (`question.parked`, …; A2A push: `task.update`).
    pub event: String,
    /// The approval it is about (`THREAD:SESSION:SEQ`), for the `question.*` events.
    pub subject: Option<String>,
    /// The project subscription (`agents/notifications/NAME`) or stored subscription's id it
    /// came from.
    pub subscription: Option<String>,
    /// The person it is for (a principal's subject), when it is for one.
    pub recipient: Option<String>,
    /// The body, as sent (the channel's format).
    pub body: String,
    /// What the channel needs besides the body, as JSON (headers, a token, the secret's name, a
    /// Slack message to update …); opaque here.
    pub meta: Option<String>,
    /// Sent with every attempt so a receiver can drop repeats: unique per delivery.
    pub idempotency_key: String,
    /// When it is first due (ms).
    pub due_at: i64,
}

/// One delivery, as the outbox holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Its place in the outbox.
    pub id: i64,
    /// `a2a_push`, `webhook`, `slack` or `email`.
    pub channel: String,
    /// Its ordering key.
    pub stream: String,
    /// Where it goes.
    pub target: String,
    /// The notice it was routed from.
    pub notice: Option<i64>,
    /// The thread it is about.
    pub thread: Option<ThreadId>,
    /// The event's name.
    pub event: String,
    /// The approval it is about.
    pub subject: Option<String>,
    /// The subscription it came from.
    pub subscription: Option<String>,
    /// The person it is for.
    pub recipient: Option<String>,
    /// The body.
    pub body: String,
    /// The channel's extra, as JSON.
    pub meta: Option<String>,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Failed attempts so far.
    pub attempts: i64,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// When it is next due (pending), or was last tried.
    pub next_at: i64,
    /// The last failure's text.
    pub last_error: Option<String>,
    /// What the target answered when it took it, if the channel keeps that (Slack's message
    /// `channel` and `ts`, for updating it later).
    pub response: Option<String>,
    /// When it was made (ms).
    pub created_at: i64,
    /// When it was delivered or given up on (ms).
    pub finished_at: Option<i64>,
}

/// Which deliveries to list, newest first.
#[derive(Clone, Debug, Default)]
pub struct DeliveryQuery {
    /// Only these statuses (all when empty).
    pub status: Vec<DeliveryStatus>,
    /// Only about this thread.
    pub thread: Option<ThreadId>,
    /// Only routed from this notice.
    pub notice: Option<i64>,
    /// Only about this approval (`subject`).
    pub subject: Option<String>,
    /// Only on this channel.
    pub channel: Option<String>,
    /// Only for this recipient.
    pub recipient: Option<String>,
    /// Only ids below this one (the next page).
    pub before: Option<i64>,
    /// At most this many (0: none).
    pub limit: usize,
}

/// A one-time answer to an approval, sent in a notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Its id (random; the signed token carries it).
    pub id: String,
    /// The approval it answers (`THREAD:SESSION:SEQ`).
    pub approval: String,
    /// What following it does: a decision (`approve`, `reject`) or `open` (the inbox).
    pub action: String,
    /// Who it was sent to: the principal subject that decides through it.
    pub approver: String,
    /// The roles it decides with (JSON array).
    pub roles: String,
    /// The delivery it was sent in.
    pub delivery: Option<i64>,
    /// When it stops working (ms).
    pub expires_at: i64,
    /// When it was followed, and by whom (canonical principal JSON or a channel's user).
    pub used_at: Option<i64>,
    /// Who followed it.
    pub used_by: Option<String>,
    /// When it was revoked.
    pub revoked_at: Option<i64>,
    /// When it was made (ms).
    pub created_at: i64,
}

/// What following a link came to ([`NotifyStore::use_link`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkUse {
    /// This use is the first: the link is now used.
    First(Link),
    /// Used before (the stored link says when and by whom).
    Used(Link),
    /// Past its `expires_at`.
    Expired(Link),
    /// Revoked.
    Revoked(Link),
    /// No such link.
    Unknown,
}

/// A principal's own subscription, made over the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Its id.
    pub id: String,
    /// Whose it is (the principal's subject).
    pub principal: String,
    /// `webhook`, `slack` or `email`.
    pub channel: String,
    /// A URL, a Slack channel id, an email address.
    pub target: String,
    /// The events it wants (JSON array of names; empty: every event).
    pub events: String,
    /// The agents it wants (JSON array; empty: every agent).
    pub agents: String,
    /// A webhook's signing secret (`whsec_…`).
    pub secret: Option<String>,
    /// When it was made (ms).
    pub created_at: i64,
}

/// Storing notices, the outbox, links and subscriptions.
#[async_trait]
pub trait NotifyStore: Send + Sync {
    /// Up to `limit` notices not routed yet, oldest first.
    async fn notices(&self, limit: usize) -> Result<Vec<Notice>, StoreError>;

    /// Routes notice `id`, in one transaction: marks it routed at `now`, puts `deliveries` in
    /// the outbox and stores `links` (a link's `delivery` is the index of its delivery in
    /// `deliveries`, turned into that row's id). Nothing is written, and `false` comes back,
    /// when it was routed already (another process got there first). A notice routed to no
    /// delivery is deleted. Deliveries are made at `now`; a link naming a delivery index out of
    /// range, or a taken idempotency key or link id, is a [`StoreError::Conflict`] (nothing
    /// written).
    async fn route_notice(
        &self,
        id: i64,
        deliveries: &[NewDelivery],
        links: &[(Link, Option<usize>)],
        now: i64,
    ) -> Result<bool, StoreError>;

    /// Routes each of notices `ids` to nobody (deletes it), as [`NotifyStore::route_notice`]
    /// with no deliveries does one at a time: what a router with no recipient to find does
    /// with a pass's notices. One not there or routed already is left as it is; how many were
    /// routed here.
    async fn route_to_nobody(&self, ids: &[i64], now: i64) -> Result<usize, StoreError> {
        let mut routed = 0;
        for &id in ids {
            if self.route_notice(id, &[], &[], now).await? {
                routed += 1;
            }
        }
        Ok(routed)
    }

    /// Holds off the database's copies of facts into notices until `until` (ms): a fact
    /// written at or after it is copied again, and one written while a subscription exists is
    /// copied whatever the hold. Not set while a subscription exists, nor while a router said
    /// it needs them ([`NotifyStore::need_notices`]) until a time after `now`. Whether it was
    /// set. What a router with nobody to tell renews; a store that copies no facts itself (in
    /// memory) holds nothing.
    async fn hold_notices(&self, until: i64, now: i64) -> Result<bool, StoreError> {
        let _ = (until, now);
        Ok(false)
    }

    /// Ends any hold and keeps one from being set before `until` (ms): what a router with
    /// notification definitions renews, so routers of one database with different definitions
    /// never silence each other.
    async fn need_notices(&self, until: i64) -> Result<(), StoreError> {
        let _ = until;
        Ok(())
    }

    /// Puts `deliveries` in the outbox (what is not routed from a notice: A2A push, a retry of
    /// a Slack message's update), in one transaction, each made at its `due_at`; their ids, in
    /// order. A taken idempotency key is a [`StoreError::Conflict`] (nothing written).
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> Result<Vec<i64>, StoreError>;

    /// Up to `limit` deliveries due by `now`, oldest first, each claimed until `now + lease_ms`
    /// (no other claim gets it before then). Only a stream's oldest pending delivery is ever
    /// due, so a stream's deliveries arrive in order (one that is retried holds back those after
    /// it; one given up on does not).
    async fn claim_deliveries(
        &self,
        now: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError>;

    /// Delivery `id` was taken at `now`; `response` is kept when the channel needs it later,
    /// its `meta` (what it was sent with: a secret, credentials) is not.
    async fn delivered(&self, id: i64, response: Option<&str>, now: i64) -> Result<(), StoreError>;

    /// Delivery `id` failed at `now`: due again at `next_at`, or given up on (kept, `failed`)
    /// when `next_at` is `None`.
    async fn delivery_failed(
        &self,
        id: i64,
        next_at: Option<i64>,
        error: &str,
        now: i64,
    ) -> Result<(), StoreError>;

    /// Puts a failed delivery back, due at `now` (its attempts start again); `false` when it
    /// is not failed (or not there).
    async fn retry_delivery(&self, id: i64, now: i64) -> Result<bool, StoreError>;

    /// Delivery `id`.
    async fn delivery(&self, id: i64) -> Result<Option<Delivery>, StoreError>;

    /// The deliveries `query` selects, newest first.
    async fn deliveries(&self, query: &DeliveryQuery) -> Result<Vec<Delivery>, StoreError>;

    /// How many deliveries each channel has in each status (for `/metrics`).
    async fn delivery_counts(&self) -> Result<Vec<(String, DeliveryStatus, i64)>, StoreError>;

    /// Link `id`.
    async fn link(&self, id: &str) -> Result<Option<Link>, StoreError>;

    /// Follows link `id` at `now` on behalf of `by`: the first use of a live link marks it used
    /// (in one statement: two followers, one `First`).
    async fn use_link(&self, id: &str, by: &str, now: i64) -> Result<LinkUse, StoreError>;

    /// Revokes the links to `approval` that are neither used nor revoked; how many.
    async fn revoke_links(&self, approval: &str, now: i64) -> Result<u64, StoreError>;

    /// Stores `subscription` (a new id).
    async fn put_subscription(&self, subscription: &Subscription) -> Result<(), StoreError>;

    /// The subscriptions of `principal`, or every one, oldest first.
    async fn subscriptions(&self, principal: Option<&str>)
    -> Result<Vec<Subscription>, StoreError>;

    /// Deletes `principal`'s subscription `id` (any principal's when `None`); whether there was
    /// one. Its pending deliveries stay (they were routed while it stood).
    async fn delete_subscription(
        &self,
        principal: Option<&str>,
        id: &str,
    ) -> Result<bool, StoreError>;

    /// The secret named `name`, shared by every process on this database: the stored one, or
    /// `fresh` stored now when there is none (the first writer wins; everyone reads its).
    async fn secret(&self, name: &str, fresh: &str) -> Result<String, StoreError>;
}
