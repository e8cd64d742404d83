//! This process's runs: those in flight by thread (so the control plane's `abort` reaches a
//! local run at once, and a run's commits find the deadline override it knows), and the count
//! of background runs with a signal when it drops (what `quiesce` waits on). Plain data the
//! runtime holds; it names nothing of the engine.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::types::ThreadId;

/// This process's runs in flight, by thread.
#[derive(Default)]
pub(super) struct Runs(Mutex<HashMap<ThreadId, Run>>);

/// One run in flight.
struct Run {
    /// Its lease's owner: only this run's guard unregisters it.
    run: Uuid,
    /// Its cancel (the control plane's `abort`).
    token: CancellationToken,
    /// The thread's deadline override as this run knows it (read with its start, then as its
    /// own commits wrote it); `None`: not known.
    deadline_override: Option<Option<serde_json::Value>>,
}

impl Runs {
    pub(super) fn insert(&self, id: ThreadId, run: Uuid, token: CancellationToken) {
        if let Ok(mut runs) = self.0.lock() {
            runs.insert(
                id,
                Run {
                    run,
                    token,
                    deadline_override: None,
                },
            );
        }
    }

    /// The run of `id` knows its thread's deadline override to be `value`.
    pub(super) fn know_override(&self, id: ThreadId, value: Option<serde_json::Value>) {
        if let Ok(mut runs) = self.0.lock()
            && let Some(run) = runs.get_mut(&id)
        {
            run.deadline_override = Some(value);
        }
    }

    /// The thread's deadline override as the run of `id` knows it; `None`: not known.
    pub(super) fn known_override(&self, id: ThreadId) -> Option<Option<serde_json::Value>> {
        self.0.lock().ok()?.get(&id)?.deadline_override.clone()
    }

    /// Unregisters run `run` of `id` (a later run of the same thread, registered since, stays).
    pub(super) fn remove(&self, id: ThreadId, run: Uuid) {
        if let Ok(mut runs) = self.0.lock()
            && runs.get(&id).is_some_and(|r| r.run == run)
        {
            runs.remove(&id);
        }
    }

    /// How many runs are in flight.
    pub(super) fn len(&self) -> usize {
        self.0.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// Cancels the run of `id`; whether there was one.
    pub(super) fn cancel(&self, id: ThreadId) -> bool {
        let token = self
            .0
            .lock()
            .ok()
            .and_then(|r| r.get(&id).map(|run| run.token.clone()));
        token.map(|t| t.cancel()).is_some()
    }
}

/// Background runs in flight, and a signal when the count drops.
#[derive(Default)]
pub(super) struct Background {
    count: AtomicUsize,
    done: tokio::sync::Notify,
}

impl Background {
    /// One more background run.
    pub(super) fn started(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// A background run ended.
    pub(super) fn ended(&self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
        self.done.notify_waiters();
    }

    /// Whether none is in flight.
    pub(super) fn idle(&self) -> bool {
        self.count.load(Ordering::SeqCst) == 0
    }

    /// Resolves at the next [`Background::ended`] (create it before checking [`idle`]).
    ///
    /// [`idle`]: Background::idle
    pub(super) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.done.notified()
    }
}
