//! The API keys of [`MemoryStore`].

use async_trait::async_trait;

use super::MemoryStore;
use crate::store::{ApiKey, KeyStore, StoreError};

#[async_trait]
impl KeyStore for MemoryStore {
    async fn create_key(&self, key: &ApiKey, hash: &str) -> Result<(), StoreError> {
        let mut state = self.state();
        if state.keys.iter().any(|(h, k)| h == hash || k.id == key.id) {
            return Err(StoreError::Conflict(format!("key `{}` exists", key.id)));
        }
        state.keys.push((hash.to_owned(), key.clone()));
        Ok(())
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        Ok(self
            .state()
            .keys
            .iter()
            .find(|(h, _)| h == hash)
            .map(|(_, k)| k.clone()))
    }

    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        // Oldest by `created_at` (then id), as the SQL stores order them, not by insertion.
        let mut keys: Vec<ApiKey> = self.state().keys.iter().map(|(_, k)| k.clone()).collect();
        keys.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(keys)
    }

    async fn revoke_key(&self, id: &str, now: i64) -> Result<bool, StoreError> {
        let mut state = self.state();
        let live = state
            .keys
            .iter_mut()
            .find(|(_, k)| k.id == id && k.revoked_at.is_none());
        Ok(live.map(|(_, k)| k.revoked_at = Some(now)).is_some())
    }
}
