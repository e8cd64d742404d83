//! The push configs and outbox of [`MemoryServerStore`].

use async_trait::async_trait;

use duet_runtime::{StoreError, ThreadId};

use super::MemoryServerStore;
use crate::{PushConfig, PushDelivery, PushStore};

fn same(c: &PushConfig, thread: ThreadId, session: i64, id: &str) -> bool {
    c.thread == thread && c.session == session && c.id == id
}

#[async_trait]
impl PushStore for MemoryServerStore {
    async fn put_push_config(&self, config: &PushConfig) -> Result<(), StoreError> {
        let mut state = self.state();
        let configs = &mut state.push_configs;
        match configs
            .iter_mut()
            .find(|c| same(c, config.thread, config.session, &config.id))
        {
            Some(c) => {
                *c = PushConfig {
                    watermark: c.watermark,
                    last_state: c.last_state.clone(),
                    ended_at: c.ended_at,
                    ..config.clone()
                }
            }
            None => configs.push(config.clone()),
        }
        Ok(())
    }

    async fn push_config(
        &self,
        thread: ThreadId,
        session: i64,
        id: &str,
    ) -> Result<Option<PushConfig>, StoreError> {
        let state = self.state();
        Ok(state
            .push_configs
            .iter()
            .find(|c| same(c, thread, session, id))
            .cloned())
    }

    async fn push_configs(
        &self,
        thread: ThreadId,
        session: i64,
    ) -> Result<Vec<PushConfig>, StoreError> {
        let state = self.state();
        Ok(state
            .push_configs
            .iter()
            .filter(|c| c.thread == thread && c.session == session)
            .cloned()
            .collect())
    }

    async fn all_push_configs(&self) -> Result<Vec<PushConfig>, StoreError> {
        Ok(self
            .state()
            .push_configs
            .iter()
            .filter(|c| c.ended_at.is_none())
            .cloned()
            .collect())
    }

    async fn delete_push_config(
        &self,
        thread: ThreadId,
        session: i64,
        id: &str,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let before = state.push_configs.len();
        state.push_configs.retain(|c| !same(c, thread, session, id));
        state
            .push_outbox
            .retain(|_, (d, _, _)| !(d.thread == thread && d.config == id));
        Ok(state.push_configs.len() != before)
    }

    async fn enqueue_pushes(
        &self,
        config: &PushConfig,
        from: i64,
        to: i64,
        state_name: &str,
        bodies: &[String],
        done: bool,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let Some(at) = state
            .push_configs
            .iter()
            .position(|c| same(c, config.thread, config.session, &config.id))
        else {
            return Ok(false);
        };
        if state.push_configs[at].watermark != from {
            return Ok(false);
        }
        for body in bodies {
            state.push_ids += 1;
            let id = state.push_ids;
            let delivery = PushDelivery {
                id,
                thread: config.thread,
                config: config.id.clone(),
                url: config.url.clone(),
                token: config.token.clone(),
                auth_scheme: config.auth_scheme.clone(),
                auth_credentials: config.auth_credentials.clone(),
                body: body.clone(),
                attempts: 0,
            };
            state.push_outbox.insert(id, (delivery, now, false));
        }
        let c = &mut state.push_configs[at];
        c.watermark = to;
        c.last_state = Some(state_name.to_owned());
        if done {
            c.ended_at = Some(now);
        }
        Ok(true)
    }

    async fn claim_pushes(
        &self,
        now: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<PushDelivery>, StoreError> {
        let mut state = self.state();
        let mut claimed = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (delivery, next_at, gave_up) in state.push_outbox.values_mut() {
            if claimed.len() == limit {
                break;
            }
            if *gave_up {
                continue;
            }
            // A config's oldest pending notification goes first, and alone.
            if !seen.insert((delivery.thread, delivery.config.clone())) {
                continue;
            }
            if *next_at <= now {
                *next_at = now + lease_ms;
                claimed.push(delivery.clone());
            }
        }
        Ok(claimed)
    }

    async fn push_sent(&self, id: i64) -> Result<(), StoreError> {
        self.state().push_outbox.remove(&id);
        Ok(())
    }

    async fn push_failed(
        &self,
        id: i64,
        next_at: Option<i64>,
        _error: &str,
        _now: i64,
    ) -> Result<(), StoreError> {
        if let Some((delivery, due, gave_up)) = self.state().push_outbox.get_mut(&id) {
            delivery.attempts += 1;
            match next_at {
                Some(at) => *due = at,
                None => *gave_up = true,
            }
        }
        Ok(())
    }
}
