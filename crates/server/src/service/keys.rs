//! API keys and the browser sign-ins that stand for them, on the server's own tables
//! (`duet_server_store::KeyStore`). A key is read through the state's cache, so a revocation
//! takes effect on every process within the cache's few seconds.

use duet_runtime::StoreError;
use duet_server_store::ApiKey;

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::auth::cache::RECHECK;
use crate::auth::credential::Credential;
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
    let ended = state.server_store().end_sign_in(hash).await;
    state.keys().forget_sign_in(hash);
    ended
}

/// Whether `credential` still admits its caller: a key not revoked, or a sign-in neither ended
/// nor expired whose key is not revoked (through the cache).
pub(crate) async fn admits(state: &AppState, credential: &Credential) -> Result<bool, StoreError> {
    let key = match credential {
        Credential::None => return Ok(true),
        Credential::Key(hash) => by_hash(state, hash).await?,
        Credential::SignIn(hash) => {
            let now = state.runtime().now_ms();
            state
                .keys()
                .sign_in(state.server_store().as_ref(), hash, now)
                .await?
        }
    };
    Ok(key.is_some_and(|k| k.revoked_at.is_none()))
}

/// `events` until `credential` (what admitted the stream's caller) no longer admits: a stream
/// opened with a key that is then revoked, or in a sign-in that then ends, stops within 5 s.
pub(crate) fn while_admitted<T: Send + 'static>(
    state: &AppState,
    credential: Credential,
    events: BoxStream<'static, T>,
) -> BoxStream<'static, T> {
    events.take_until(ended(state.clone(), credential)).boxed()
}

/// Resolves once `credential` no longer admits its caller (checked every [`RECHECK`]); never
/// for [`Credential::None`]. A store that cannot answer ends nothing: a stream is not cut by a
/// blip, and the next check decides.
pub(crate) async fn ended(state: AppState, credential: Credential) {
    if credential == Credential::None {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(RECHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match admits(&state, &credential).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot check a stream's credential; checking again")
            }
        }
    }
}
