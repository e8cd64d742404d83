//! The API keys and browser sign-ins of [`MemoryServerStore`].

use async_trait::async_trait;

use duet_runtime::StoreError;

use super::MemoryServerStore;
use crate::{ApiKey, KeyStore};

#[async_trait]
impl KeyStore for MemoryServerStore {
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

    async fn create_sign_in(
        &self,
        hash: &str,
        key_hash: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let mut state = self.state();
        state.sign_ins.retain(|_, (_, expires)| *expires > now);
        if state.sign_ins.contains_key(hash) {
            return Err(StoreError::Conflict("sign-in exists".into()));
        }
        state
            .sign_ins
            .insert(hash.to_owned(), (key_hash.to_owned(), expires_at));
        Ok(())
    }

    async fn sign_in_key(&self, hash: &str, now: i64) -> Result<Option<ApiKey>, StoreError> {
        let state = self.state();
        Ok(match state.sign_ins.get(hash) {
            Some((key_hash, expires)) if *expires > now => state
                .keys
                .iter()
                .find(|(h, _)| h == key_hash)
                .map(|(_, k)| k.clone()),
            _ => None,
        })
    }

    async fn end_sign_in(&self, hash: &str) -> Result<bool, StoreError> {
        Ok(self.state().sign_ins.remove(hash).is_some())
    }
}
