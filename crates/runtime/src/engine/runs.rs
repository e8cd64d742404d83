//! This process's runs: those in flight by thread (so the control plane's `abort` reaches a
//! local run at once, and a run's commits find the deadline override it knows), and the count
//! of background runs with a signal when it drops (what `quiesce` waits on). Plain data the
//! runtime holds; it names nothing of the engine.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::store::ReadBack;
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
    /// Whether its caller asked for its session's entries (`Claim::reporting_session`), and
    /// those its settling commit read: the session and its entries.
    report: Option<Option<(i64, Vec<ReadBack>)>>,
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
                    report: None,
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

    /// The run `run` of `id` reports its session's entries.
    pub(super) fn report_session(&self, id: ThreadId, run: Uuid) {
        if let Ok(mut runs) = self.0.lock()
            && let Some(r) = runs.get_mut(&id).filter(|r| r.run == run)
        {
            r.report = Some(None);
        }
    }

    /// Whether the run `run` of `id` reports its session's entries.
    pub(super) fn reports_session(&self, id: ThreadId, run: Uuid) -> bool {
        self.0.lock().ok().is_some_and(|runs| {
            runs.get(&id)
                .is_some_and(|r| r.run == run && r.report.is_some())
        })
    }

    /// What the last commit of the run `run` of `id` read of its session (`None`: nothing,
    /// as a commit that did not settle, or a store that reads nothing with a commit).
    pub(super) fn read_session(&self, id: ThreadId, run: Uuid, read: Option<(i64, Vec<ReadBack>)>) {
        if let Ok(mut runs) = self.0.lock()
            && let Some(r) = runs
                .get_mut(&id)
                .filter(|r| r.run == run && r.report.is_some())
        {
            r.report = Some(read);
        }
    }

    /// Takes what [`Runs::read_session`] left for the run `run` of `id`.
    pub(super) fn take_session(&self, id: ThreadId, run: Uuid) -> Option<(i64, Vec<ReadBack>)> {
        let mut runs = self.0.lock().ok()?;
        let r = runs.get_mut(&id).filter(|r| r.run == run)?;
        r.report.as_mut()?.take()
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
    /// With [`Background::holding`]: work that waits for a `quiesce` to start it.
    held: Option<Mutex<Held>>,
}

/// Background work held back, and how many `quiesce` calls let it through meanwhile.
#[derive(Default)]
struct Held {
    open: usize,
    work: Vec<BoxFuture<'static, ()>>,
}

impl Background {
    /// Background runs that start only while a `quiesce` waits for them, never beside the
    /// call that asked for them.
    pub(super) fn holding() -> Self {
        Self {
            held: Some(Mutex::new(Held::default())),
            ..Self::default()
        }
    }

    /// `work` back to be started now, or `None`: it is held until a `quiesce`.
    pub(super) fn hold(&self, work: BoxFuture<'static, ()>) -> Option<BoxFuture<'static, ()>> {
        let Some(held) = &self.held else {
            return Some(work);
        };
        let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.open > 0 {
            return Some(work);
        }
        held.work.push(work);
        None
    }

    /// A `quiesce` begins: what was held, to be started; until [`Background::close`], nothing
    /// more is held.
    pub(super) fn open(&self) -> Vec<BoxFuture<'static, ()>> {
        let Some(held) = &self.held else {
            return Vec::new();
        };
        let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
        held.open += 1;
        std::mem::take(&mut held.work)
    }

    /// A `quiesce` ended (or was dropped).
    pub(super) fn close(&self) {
        if let Some(held) = &self.held {
            let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
            held.open = held.open.saturating_sub(1);
        }
    }

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

#[cfg(test)]
mod tests {
    use super::Background;

    fn work() -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    #[test]
    fn held_work_waits_for_an_open_and_passes_while_one_lasts() {
        let plain = Background::default();
        assert!(plain.hold(work()).is_some(), "nothing held by default");
        let b = Background::holding();
        assert!(b.hold(work()).is_none());
        assert!(b.hold(work()).is_none());
        assert_eq!(b.open().len(), 2, "an open releases what was held");
        assert!(b.hold(work()).is_some(), "started at once while open");
        assert_eq!(b.open().len(), 0);
        b.close();
        assert!(b.hold(work()).is_some(), "one open still lasts");
        b.close();
        assert!(b.hold(work()).is_none(), "held again once all closed");
    }
}
