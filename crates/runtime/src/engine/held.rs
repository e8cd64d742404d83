//! Writes held for their run's next commit: a drain of plain messages, and the commits of model
//! steps that waited on nothing, written with the run's next commit rather than each on its
//! own (a crossing to the store fewer for each) — only for as long as the run does nothing but
//! compute, and for a few steps at most. Plain data the runtime holds, keyed by the thread and
//! the run that holds its lease (a run's held writes are never another run's, even of the same
//! thread); it names nothing of the engine.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::event::EventSink;
use crate::store::Commit;
use crate::types::{Thread, ThreadId};

/// The most model steps' commits a run holds at once: past it the next one is written with
/// them (so a run that never waits still writes at least every `MAX_STEPS + 1` turns).
const MAX_STEPS: usize = 8;

/// The longest a run holds a step's commit: past it the next commit is written with it, so
/// the events it holds back arrive at most this late (a few steps' computing, at most).
const MAX_AGE: Duration = Duration::from_millis(2);

/// What a run holds: the thread as the held writes left it, their commit (in order, as one),
/// and the run's events, held back until it is written (what comes meanwhile must not arrive
/// before it).
pub(super) struct Drain {
    pub(super) thread: Thread,
    pub(super) commit: Commit,
    pub(super) events: EventSink,
    /// How many model steps' commits it holds (none: a drain alone, written by the next step's
    /// commit or when the step ends).
    pub(super) steps: usize,
    /// When it began holding a step's commit.
    since: Option<Instant>,
}

/// What each run holds for its next commit, and which runs are writing now.
#[derive(Default)]
pub(super) struct Held(
    Mutex<HashMap<(ThreadId, Uuid), Drain>>,
    Mutex<std::collections::HashSet<(ThreadId, Uuid)>>,
);

/// A run's write in flight ([`Held::writing`]), until dropped.
pub(super) struct Writing<'a> {
    held: &'a Held,
    key: Option<(ThreadId, Uuid)>,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.held
                .1
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
        }
    }
}

impl Held {
    /// Holds `commit`, written for `t` as it stands (`t` as the commit left it), for the next
    /// commit of the run that holds `t`'s lease (after what that run holds already, in one
    /// commit), and holds back `events` until it is written. `step`: a model step's commit (a
    /// drain's otherwise). With no lease, or [`MAX_STEPS`] steps held, or held for
    /// [`MAX_AGE`], it comes back (`Some`): the caller writes it (with what is held).
    pub(super) fn hold(
        &self,
        t: &Thread,
        commit: Commit,
        events: &EventSink,
        step: bool,
    ) -> Option<Commit> {
        let Some(owner) = t.lease_owner else {
            return Some(commit);
        };
        // The map is left whole by every critical section: a poisoned lock is still sound.
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match held.entry((t.id, owner)) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                events.hold();
                slot.insert(Drain {
                    thread: t.clone(),
                    commit,
                    events: events.clone(),
                    steps: usize::from(step),
                    since: step.then(Instant::now),
                });
                None
            }
            std::collections::hash_map::Entry::Occupied(mut slot) => {
                let d = slot.get_mut();
                let young = d.since.is_none_or(|since| since.elapsed() < MAX_AGE);
                if d.steps >= MAX_STEPS || !young {
                    return Some(commit);
                }
                d.commit = std::mem::take(&mut d.commit).then(commit);
                d.thread = t.clone();
                if step {
                    d.steps += 1;
                    d.since.get_or_insert_with(Instant::now);
                }
                None
            }
        }
    }

    /// Whether anything is held for the run of `owner` on `id`.
    pub(super) fn holds(&self, id: ThreadId, owner: Option<Uuid>) -> bool {
        owner.is_some_and(|owner| {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&(id, owner))
        })
    }

    /// Whether a model step's commit is held for the run of `owner` on `id`.
    pub(super) fn holds_steps(&self, id: ThreadId, owner: Option<Uuid>) -> bool {
        owner.is_some_and(|owner| {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&(id, owner))
                .is_some_and(|d| d.steps > 0)
        })
    }

    /// Marks the run of `owner` on `id` as writing until the guard is dropped: a step that
    /// waits on its own write has not waited on anything outside the run.
    pub(super) fn writing(&self, id: ThreadId, owner: Option<Uuid>) -> Writing<'_> {
        let key = owner.map(|owner| (id, owner));
        if let Some(key) = key {
            self.1
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key);
        }
        Writing { held: self, key }
    }

    /// Whether the run of `owner` on `id` is writing now ([`Held::writing`]).
    pub(super) fn is_writing(&self, id: ThreadId, owner: Option<Uuid>) -> bool {
        owner.is_some_and(|owner| {
            self.1
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&(id, owner))
        })
    }

    /// What is held for the run of `owner` on `id`, taken (its events are still held back).
    pub(super) fn take(&self, id: ThreadId, owner: Option<Uuid>) -> Option<Drain> {
        let key = (id, owner?);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
    }
}
