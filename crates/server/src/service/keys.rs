//! API keys and the browser sign-ins that stand for them, on the server's own tables
//! (`duet_server_store::KeyStore`). A key is read through the state's cache, so a revocation
//! takes effect on every process within the cache's few seconds.

use duet_runtime::StoreError;
use duet_server_store::ApiKey;

use crate::state::AppState;

/// The key whose secret hashes to `hash` (revoked or not: the caller checks), through the cache.
pub(crate) async fn by_hash(state: &AppState, hash: &str) -> Result<Option<ApiKey>, StoreError> {
    state.keys().find(state.server_store().as_ref(), hash).await
}

/// The key whose secret hashes to `hash`, read now (a sign-in checks the key it is given).
pub(crate) async fn by_hash_now(
    state: &AppState,
    hash: &str,
) -> Result<Option<ApiKey>, StoreError> {
    state.server_store().key_by_hash(hash).await
}

/// The key a sign-in (its cookie secret hashing to `hash`) stands for, if not expired by `now`.
pub(crate) async fn signed_in(
    state: &AppState,
    hash: &str,
    now: i64,
) -> Result<Option<ApiKey>, StoreError> {
    state.server_store().sign_in_key(hash, now).await
}

/// Records a sign-in: `hash` (of the cookie secret) stands for the key hashing to `key_hash`
/// until `expires_at`.
pub(crate) async fn sign_in(
    state: &AppState,
    hash: &str,
    key_hash: &str,
    now: i64,
    expires_at: i64,
) -> Result<(), StoreError> {
    state
        .server_store()
        .create_sign_in(hash, key_hash, now, expires_at)
        .await
}

/// Ends a sign-in; whether there was one.
pub(crate) async fn sign_out(state: &AppState, hash: &str) -> Result<bool, StoreError> {
    state.server_store().end_sign_in(hash).await
}
