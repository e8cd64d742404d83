//! The timers' half of the shared store implementation (`TimerStore`), stamped out inside
//! `store_impl!`. (Interim: slice `store` builds it; until then every call says so.)

/// `impl TimerStore for $store` (see `store_impl!`).
macro_rules! timers_impl {
    ($store:ident) => {
        #[async_trait]
        impl duet_runtime::TimerStore for $store {
            async fn timers(
                &self,
                _q: &duet_runtime::TimerQuery<'_>,
            ) -> Result<Vec<duet_runtime::Timer>, StoreError> {
                Err(StoreError::Corrupt("timers: not built yet".into()))
            }
            async fn timer(
                &self,
                _id: uuid::Uuid,
            ) -> Result<Option<duet_runtime::Timer>, StoreError> {
                Err(StoreError::Corrupt("timers: not built yet".into()))
            }
            async fn cancel_timer(
                &self,
                _id: uuid::Uuid,
                _now: i64,
            ) -> Result<duet_runtime::CancelOutcome, StoreError> {
                Err(StoreError::Corrupt("timers: not built yet".into()))
            }
            async fn next_due(&self) -> Result<Option<i64>, StoreError> {
                Ok(None)
            }
            async fn claim_due(
                &self,
                _owner: uuid::Uuid,
                _until: i64,
                _now: i64,
                _limit: usize,
            ) -> Result<Vec<duet_runtime::Timer>, StoreError> {
                Ok(Vec::new())
            }
            async fn finish_timer(
                &self,
                _id: uuid::Uuid,
                _owner: uuid::Uuid,
                _outcome: duet_runtime::TimerOutcome,
                _now: i64,
            ) -> Result<bool, StoreError> {
                Ok(false)
            }
            async fn timer_counts(
                &self,
                _now: i64,
            ) -> Result<duet_runtime::TimerCounts, StoreError> {
                Ok(duet_runtime::TimerCounts::default())
            }
            fn timer_wakeups(
                &self,
            ) -> futures::stream::BoxStream<'static, duet_runtime::TimerWake> {
                futures::StreamExt::boxed(futures::stream::pending())
            }
        }
    };
}
pub(crate) use timers_impl;
