//! The effect port: Rust code registered by id that runs when a scheduled effect falls due
//! (`agents/effects/NAME` names it with `builtin`), with a [`ThreadState`] of its thread at rest.
//! What it writes is committed like a step's writes; an error fails that attempt (nothing it
//! wrote is kept) and the timer is retried with backoff, then `failed`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::handler::{HandlerError, ThreadState};

/// Code that runs a scheduled effect.
#[async_trait]
pub trait Effect: Send + Sync + 'static {
    /// Runs the effect with its (checked) `args`, acting through `state`.
    async fn run(
        &self,
        state: &mut ThreadState<'_>,
        args: &serde_json::Value,
    ) -> Result<(), HandlerError>;
}

/// Effects' code by registered id.
#[derive(Clone, Default)]
pub struct EffectImpls(BTreeMap<String, Arc<dyn Effect>>);

impl EffectImpls {
    /// None.
    pub fn new() -> Self {
        EffectImpls::default()
    }

    /// These and `effect`, registered as `id` (replacing any of that id).
    pub fn with(mut self, id: &str, effect: impl Effect) -> Self {
        self.0.insert(id.to_owned(), Arc::new(effect));
        self
    }

    /// The code registered as `id`.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn Effect>> {
        self.0.get(id)
    }

    /// The registered ids, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}
