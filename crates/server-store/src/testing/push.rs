//! The push configs of [`MemoryServerStore`] (their notifications go in its outbox).

use async_trait::async_trait;

use duet_runtime::{StoreError, ThreadId};

use super::MemoryServerStore;
use crate::{DeliveryStatus, PushConfig, PushStore};

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
        let stream = crate::push_stream(thread, id);
        state
            .outbox
            .retain(|_, d| !(d.stream == stream && d.status == DeliveryStatus::Pending));
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
        let deliveries = crate::push_deliveries(config, bodies, now);
        state.check_deliveries(&deliveries)?;
        for d in &deliveries {
            state.insert_delivery(d, now);
        }
        let c = &mut state.push_configs[at];
        c.watermark = to;
        c.last_state = Some(state_name.to_owned());
        if done {
            c.ended_at = Some(now);
        }
        Ok(true)
    }
}
