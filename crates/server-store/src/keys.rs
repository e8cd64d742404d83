//! The API keys table: who may call a server, stored by a hash of the key (never the key); and
//! the browser sign-ins that stand for a key (the inbox's session cookies, stored by a hash too).

use async_trait::async_trait;

use duet_runtime::StoreError;

/// One API key's stored facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    /// Its public id (shown by `duet keys list`, named by `duet keys revoke`).
    pub id: String,
    /// The principal it acts as (the subject of a `Principal`).
    pub principal: String,
    /// Whether it may see and act on every principal's threads.
    pub admin: bool,
    /// The roles it holds (each 1–64 of `A-Z a-z 0-9 . _ -`, in the order given): a tool's
    /// `approval.approvers.roles` names the keys that may decide its calls.
    pub roles: Vec<String>,
    /// A note for people (what or who it is for).
    pub label: Option<String>,
    /// When it was made (ms since the Unix epoch).
    pub created_at: i64,
    /// When it was revoked, if it was: a revoked key admits nobody.
    pub revoked_at: Option<i64>,
}

/// Storing and finding API keys.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores `key`, found later by `hash` (the hash of the secret; the secret is never stored).
    /// A taken id or hash is a [`StoreError::Conflict`].
    async fn create_key(&self, key: &ApiKey, hash: &str) -> Result<(), StoreError>;
    /// The key whose secret hashes to `hash`, revoked or not.
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError>;
    /// Every key, oldest first.
    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError>;
    /// Revokes key `id` as of `now`; whether a live key had that id.
    async fn revoke_key(&self, id: &str, now: i64) -> Result<bool, StoreError>;
    /// Records a browser sign-in: the cookie secret hashing to `hash` stands for the key whose
    /// secret hashes to `key_hash` until `expires_at` (ms). Sign-ins expired by `now` are dropped.
    async fn create_sign_in(
        &self,
        hash: &str,
        key_hash: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError>;
    /// The key (revoked or not: the caller checks) a sign-in not expired by `now` stands for.
    async fn sign_in_key(&self, hash: &str, now: i64) -> Result<Option<ApiKey>, StoreError>;
    /// Ends a sign-in (signing out); whether there was one.
    async fn end_sign_in(&self, hash: &str) -> Result<bool, StoreError>;
}
