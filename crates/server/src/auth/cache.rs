//! Looked-up API keys, by hash, for a few seconds: the server's state keeps one, and the
//! `Caller` extractor (`auth.rs`) reads keys through it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use duet_runtime::StoreError;
use duet_server_store::{ApiKey, KeyStore};

/// How long a looked-up key is trusted before it is read again. With an open stream's check
/// every [`RECHECK`], a revocation or sign-out takes effect within 5 s on every server process.
const CACHE_FOR: Duration = Duration::from_secs(4);

/// How often an open stream checks that what admitted its caller still does.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// Looked-up keys and sign-ins, by hash, for a few seconds.
#[derive(Default)]
pub(crate) struct KeyCache(Mutex<HashMap<Looked, (Option<ApiKey>, Instant)>>);

/// What a cached entry was looked up as.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Looked {
    Key(String),
    SignIn(String),
}

impl KeyCache {
    /// The key whose hash is `hash`: from the cache if it was read in the last few seconds,
    /// else from `store`.
    pub(crate) async fn find(
        &self,
        store: &dyn KeyStore,
        hash: &str,
    ) -> Result<Option<ApiKey>, StoreError> {
        let looked = Looked::Key(hash.to_owned());
        if let Some(key) = self.cached(&looked) {
            return Ok(key);
        }
        let key = store.key_by_hash(hash).await?;
        self.keep(looked, &key);
        Ok(key)
    }

    /// The key the sign-in whose hash is `hash` stands for, unexpired at `now`: cached like
    /// [`KeyCache::find`] (an open stream checks it every second).
    pub(crate) async fn sign_in(
        &self,
        store: &dyn KeyStore,
        hash: &str,
        now: i64,
    ) -> Result<Option<ApiKey>, StoreError> {
        let looked = Looked::SignIn(hash.to_owned());
        if let Some(key) = self.cached(&looked) {
            return Ok(key);
        }
        let key = store.sign_in_key(hash, now).await?;
        self.keep(looked, &key);
        Ok(key)
    }

    fn cached(&self, looked: &Looked) -> Option<Option<ApiKey>> {
        let cache = self.0.lock().ok()?;
        let (key, at) = cache.get(looked)?;
        (at.elapsed() < CACHE_FOR).then(|| key.clone())
    }

    fn keep(&self, looked: Looked, key: &Option<ApiKey>) {
        if let Ok(mut cache) = self.0.lock() {
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(looked, (key.clone(), Instant::now()));
        }
    }

    /// Forgets what was looked up as sign-in `hash` (it was just ended here).
    pub(crate) fn forget_sign_in(&self, hash: &str) {
        if let Ok(mut cache) = self.0.lock() {
            cache.remove(&Looked::SignIn(hash.to_owned()));
        }
    }
}
