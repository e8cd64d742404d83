//! A claimed timer, fired: what its kind does, and what that came to for the timer table.

use uuid::Uuid;

use super::Runtime;
use crate::store::{Timer, TimerKind, TimerOutcome};

/// What firing a timer came to.
#[derive(Debug)]
pub(crate) enum Fired {
    /// Finished already: the commit that wrote its work marked it `completed`
    /// ([`crate::store::Commit::timers_done`]).
    Finished,
    /// Record this with [`crate::store::TimerStore::finish_timer`].
    Outcome(TimerOutcome),
}

impl Runtime {
    /// Fires `timer`, claimed by `owner`.
    pub(crate) async fn fire(&self, timer: &Timer, owner: Uuid) -> Fired {
        match timer.kind {
            TimerKind::Effect => self.fire_effect(timer, owner).await,
            TimerKind::Deadline => self.fire_deadline(timer, owner).await,
        }
    }
}
