//! A question's or a pending call's deadline, acted on when its timer falls due (slice
//! `deadlines` builds it).

use uuid::Uuid;

use super::Runtime;
use super::fire::Fired;
use crate::store::{Timer, TimerOutcome};

impl Runtime {
    /// Acts on the deadline `timer` stands for.
    pub(crate) async fn fire_deadline(&self, timer: &Timer, _owner: Uuid) -> Fired {
        Fired::Outcome(TimerOutcome::Failed {
            error: format!("deadline action `{}`: deadlines cannot run yet", timer.name),
        })
    }
}
