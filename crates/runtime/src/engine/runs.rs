//! This process's runs: those in flight by thread (so the control plane's `abort` reaches a
//! local run at once), and the count of background runs with a signal when it drops (what
//! `quiesce` waits on). Plain data the runtime holds; it names nothing of the engine.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;

use crate::types::ThreadId;

/// This process's runs in flight, by thread.
#[derive(Default)]
pub(super) struct Runs(Mutex<HashMap<ThreadId, CancellationToken>>);

impl Runs {
    pub(super) fn insert(&self, id: ThreadId, token: CancellationToken) {
        if let Ok(mut runs) = self.0.lock() {
            runs.insert(id, token);
        }
    }

    pub(super) fn remove(&self, id: ThreadId) {
        if let Ok(mut runs) = self.0.lock() {
            runs.remove(&id);
        }
    }

    /// How many runs are in flight.
    pub(super) fn len(&self) -> usize {
        self.0.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// Cancels the run of `id`; whether there was one.
    pub(super) fn cancel(&self, id: ThreadId) -> bool {
        let token = self.0.lock().ok().and_then(|r| r.get(&id).cloned());
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
