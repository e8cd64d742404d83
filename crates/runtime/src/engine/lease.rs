//! A run's hold on its thread: the lease renewed in the background for as long as the run's
//! future lives, and this process's registry of runs (so the control plane's `abort` reaches a
//! local run at once; a run elsewhere sees a durable abort request at its next renewal).

use std::time::Duration;

use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

use super::Runtime;
use crate::store::{Lease, Renewal};
use crate::types::ThreadId;

/// Held for the length of one run: renews the lease, turns a remote abort request into
/// `abort`, and a lost lease into `lost`. Dropping it (a run that ended, or whose future was
/// dropped) stops the renewals, unregisters the run and drops a drain it still held (its
/// messages stay queued for the next run).
pub(super) struct LeaseGuard {
    rt: Runtime,
    id: ThreadId,
    run: Uuid,
    /// The run's own cancel: the caller's, plus an abort from the control plane.
    pub(super) abort: CancellationToken,
    /// Cancelled when the lease is lost: the run must stop.
    pub(super) lost: CancellationToken,
    _renewing: DropGuard,
}

impl LeaseGuard {
    pub(super) fn hold(rt: &Runtime, id: ThreadId, run: Uuid, cancel: &CancellationToken) -> Self {
        let abort = cancel.child_token();
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        rt.inner.runs.insert(id, run, abort.clone());
        // Renew often enough that a remote abort request is seen within a second.
        let every = Duration::from_millis(
            u64::try_from((rt.inner.lease_ms / 3).min(1_000))
                .unwrap_or(1)
                .max(1),
        );
        let (renewer, lost_tx, abort_tx, stopped) =
            (rt.clone(), lost.clone(), abort.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stopped.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
                match renewer.inner.store.renew(id, renewer.lease(run)).await {
                    Ok(Renewal::Held {
                        abort_requested: false,
                    }) => {}
                    Ok(Renewal::Held {
                        abort_requested: true,
                    }) => abort_tx.cancel(),
                    Ok(Renewal::Lost) | Err(_) => {
                        lost_tx.cancel();
                        return;
                    }
                }
            }
        });
        LeaseGuard {
            rt: rt.clone(),
            id,
            run,
            abort,
            lost,
            _renewing: stop.drop_guard(),
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.rt.inner.runs.remove(self.id, self.run);
        if let Some(held) = self.rt.inner.held.take(self.id, Some(self.run)) {
            held.events.settle(false);
        }
    }
}

impl Runtime {
    /// A lease for run `owner`. Every run has its own owner id, so two deliveries to one thread
    /// in the same process exclude each other as they would across processes.
    pub(super) fn lease(&self, owner: Uuid) -> Lease {
        let now = self.inner.clock.now_ms();
        Lease {
            owner,
            until: now + self.inner.lease_ms,
            now,
        }
    }
}
