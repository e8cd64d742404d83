//! A scheduled effect, run when its timer falls due (slice `effects` builds it).

use uuid::Uuid;

use super::Runtime;
use super::fire::Fired;
use crate::store::{Timer, TimerOutcome};

impl Runtime {
    /// Runs the effect `timer` names, with its thread's state.
    pub(crate) async fn fire_effect(&self, timer: &Timer, _owner: Uuid) -> Fired {
        if self.inner.effects.names().next().is_none() {
            return Fired::Finished;
        }
        Fired::Outcome(TimerOutcome::Failed {
            error: format!("effect `{}`: effects cannot run yet", timer.name),
        })
    }
}
