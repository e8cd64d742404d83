//! The server's tables in memory (feature `test-util`), with the SQL stores' semantics (the
//! conformance suite checks all three): keys found by their hash, sign-ins that expire, push
//! configs per task with their watermark, notices (put in by [`MemoryServerStore::push_notice`]:
//! no journal here, so no triggers), and an outbox claimed in id order, one stream's oldest
//! pending row at a time.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

mod keys;
mod notify;
mod push;

/// The server's tables in memory. Clones of an `Arc<MemoryServerStore>` are the same database.
#[derive(Debug, Default)]
pub struct MemoryServerStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// API keys with the hash they are found by.
    keys: Vec<(String, crate::ApiKey)>,
    /// Browser sign-ins: hash → (the key's hash, expires at).
    sign_ins: HashMap<String, (String, i64)>,
    /// Push configs.
    push_configs: Vec<crate::PushConfig>,
    /// Notices by id, each with when it was routed; the last id given.
    notices: BTreeMap<i64, (crate::Notice, Option<i64>)>,
    notice_ids: i64,
    /// The outbox by id; the last id given.
    outbox: BTreeMap<i64, crate::Delivery>,
    outbox_ids: i64,
    /// Links by id.
    links: BTreeMap<String, crate::Link>,
    /// Stored subscriptions, oldest first.
    subscriptions: Vec<crate::Subscription>,
    /// Shared secrets by name.
    secrets: HashMap<String, String>,
    /// The heartbeat row's `at`.
    heartbeat: Option<i64>,
}

impl MemoryServerStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryServerStore::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves consistent data: every method checks
        // before it writes.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait::async_trait]
impl crate::HealthStore for MemoryServerStore {
    async fn heartbeat(&self, at: i64) -> Result<(), duet_runtime::StoreError> {
        self.state().heartbeat = Some(at);
        Ok(())
    }
}
