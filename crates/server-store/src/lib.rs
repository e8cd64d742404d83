//! The duet server's own tables, as ports the server owns: API keys and the browser sign-ins
//! that stand for them (`keys`), A2A push-notification configs (`push`), notifications — the
//! notices the database copies from the journal, the one outbox every outbound notification
//! goes through, one-time links, principals' subscriptions (`notify`) — and the heartbeat row
//! readiness writes (`health`).
//! The engine never reads them, so they are not part of the runtime's `Store`: `duet-store`
//! implements [`ServerStore`] on SQLite and Postgres beside the engine's tables (same database,
//! same migrations), and [`testing::MemoryServerStore`] (feature `test-util`) in memory. All
//! three pass the store conformance suite.
//!
//! Errors are the runtime's [`StoreError`](duet_runtime::StoreError) kinds, so a server maps
//! every store failure one way.

#![warn(missing_docs)]

mod health;
mod keys;
mod notify;
mod push;
#[cfg(feature = "test-util")]
pub mod testing;

pub use health::HealthStore;
pub use keys::{ApiKey, KeyStore};
pub use notify::{
    Delivery, DeliveryQuery, DeliveryStatus, Link, LinkUse, NewDelivery, Notice, NotifyStore,
    Subscription,
};
pub use push::{PUSH_CHANNEL, PushConfig, PushMeta, PushStore, push_deliveries, push_stream};

/// Every table the server owns: what `duet serve` holds as `Arc<dyn ServerStore>`.
pub trait ServerStore: KeyStore + PushStore + NotifyStore + HealthStore + 'static {}

impl<T: KeyStore + PushStore + NotifyStore + HealthStore + 'static> ServerStore for T {}
