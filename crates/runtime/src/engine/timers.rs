//! Durable time in a process: claiming due timers and firing them, and the task that wakes when
//! the next one is due (slice `loop` builds it).

use uuid::Uuid;

use super::Runtime;
use super::fire::Fired;
use crate::error::RunError;
use crate::store::TimerOutcome;

impl Runtime {
    /// Claims the timers due now and fires them; how many it fired.
    pub async fn run_due_timers(&self) -> Result<usize, RunError> {
        let store = self.store();
        let now = self.now();
        let owner = Uuid::now_v7();
        let claimed = store
            .claim_due(owner, now + self.inner.lease_ms, now, 64)
            .await?;
        let n = claimed.len();
        for timer in claimed {
            if let Fired::Outcome(outcome) = self.fire(&timer, owner).await {
                let outcome = match outcome {
                    TimerOutcome::Retry { error, .. } => TimerOutcome::Retry {
                        at: self.now() + 1_000,
                        error,
                    },
                    other => other,
                };
                store
                    .finish_timer(timer.id, owner, outcome, self.now())
                    .await?;
            }
        }
        Ok(n)
    }
}
