//! Looked-up API keys, by hash, for a few seconds: the server's state keeps one, and the
//! `Caller` extractor (`auth.rs`) reads keys through it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use duet_runtime::StoreError;
use duet_server_store::{ApiKey, KeyStore};

/// How long a looked-up key is trusted before it is read again (a revocation takes effect
/// within this long on every server process).
const CACHE_FOR: Duration = Duration::from_secs(5);

/// Looked-up keys, by hash, for a few seconds.
#[derive(Default)]
pub(crate) struct KeyCache(Mutex<HashMap<String, (Option<ApiKey>, Instant)>>);

impl KeyCache {
    /// The key whose hash is `hash`: from the cache if it was read in the last few seconds,
    /// else from `store`.
    pub(crate) async fn find(
        &self,
        store: &dyn KeyStore,
        hash: &str,
    ) -> Result<Option<ApiKey>, StoreError> {
        if let Ok(cache) = self.0.lock()
            && let Some((key, at)) = cache.get(hash)
            && at.elapsed() < CACHE_FOR
        {
            return Ok(key.clone());
        }
        let key = store.key_by_hash(hash).await?;
        if let Ok(mut cache) = self.0.lock() {
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(hash.to_owned(), (key.clone(), Instant::now()));
        }
        Ok(key)
    }
}
