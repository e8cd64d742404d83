//! What the engine's tests share: the backends (`duet_store::testing`, with the memory store),
//! the repository's project, a runtime with this build's providers, handlers and hooks, and the
//! test kit of `duet_runtime::testing`.

#![allow(dead_code, unreachable_pub, unused_imports)]

use std::sync::Arc;

use duet_runtime::{Runtime, Store};

pub use duet_runtime::testing::{
    Scratch, Slow, kill_mid_step, must_load as project, repo, send, texts,
};
pub use duet_store::testing::{Backend, psql};

/// A fresh store on every backend: SQLite, Postgres when `DATABASE_URL` is set, and the
/// in-memory store (the port's reference semantics).
pub async fn backends() -> Vec<Backend> {
    duet_store::testing::store_backends().await
}

/// A runtime with this build's model providers, handlers and hooks.
pub fn runtime(
    project: Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
) -> duet_runtime::RuntimeBuilder {
    let providers = duet_models::providers_for(&project);
    Runtime::builder(project, store)
        .providers(providers)
        .handlers(duet_handlers::handlers())
        .hooks(duet_handlers::hooks())
        .effects(duet_handlers::effects())
}
