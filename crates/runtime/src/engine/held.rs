//! A drain held for its run's next commit: plain messages moved from the queue into the run's
//! history, their commit written with the step's rather than on its own (one crossing to the
//! store fewer per answer) — only for as long as the run does nothing but compute. Plain data
//! the runtime holds, keyed by the thread and the run that holds its lease (a run's drain is
//! never another run's, even of the same thread); it names nothing of the engine.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use uuid::Uuid;

use crate::event::EventSink;
use crate::store::Commit;
use crate::types::{Thread, ThreadId};

/// A drain held: the thread as it left it, its commit, and the run's events, held back until
/// the drain is written (what the step streams meanwhile must not arrive before it).
pub(super) struct Drain {
    pub(super) thread: Thread,
    pub(super) commit: Commit,
    pub(super) events: EventSink,
}

/// Drains waiting for their run's next commit.
#[derive(Default)]
pub(super) struct Held(Mutex<HashMap<(ThreadId, Uuid), Drain>>);

impl Held {
    /// Holds `drain`, written for `t` as it stands (`t` as the drain left it), for the next
    /// commit of the run that holds `t`'s lease, and holds back `events` until it is written.
    /// With no lease, or a drain held already, it comes back (`Some`): the caller writes it.
    pub(super) fn hold(&self, t: &Thread, drain: Commit, events: &EventSink) -> Option<Commit> {
        let Some(owner) = t.lease_owner else {
            return Some(drain);
        };
        // The map is left whole by every critical section: a poisoned lock is still sound.
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match held.entry((t.id, owner)) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                events.hold();
                slot.insert(Drain {
                    thread: t.clone(),
                    commit: drain,
                    events: events.clone(),
                });
                None
            }
            std::collections::hash_map::Entry::Occupied(_) => Some(drain),
        }
    }

    /// Whether a drain is held for the run of `owner` on `id`.
    pub(super) fn holds(&self, id: ThreadId, owner: Option<Uuid>) -> bool {
        owner.is_some_and(|owner| {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&(id, owner))
        })
    }

    /// The drain held for the run of `owner` on `id`, taken (its events are still held back).
    pub(super) fn take(&self, id: ThreadId, owner: Option<Uuid>) -> Option<Drain> {
        let key = (id, owner?);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
    }
}
