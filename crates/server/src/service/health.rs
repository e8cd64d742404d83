//! What the probes and the scrape read of the store: readiness (`/readyz`, and `duet serve`
//! before it starts) — one row read and the heartbeat row written, within a bound, the outcome
//! kept for [`crate::Options::ready_cache`] so a load balancer's polling costs the database one
//! write a second — and the threads by status with the oldest question's wait (`/metrics`). Both
//! span every principal: the routes decide who may ask.

use std::time::{Duration, Instant};

use duet_runtime::{StatusCounts, ThreadQuery};

use super::ServiceError;
use crate::state::AppState;

/// How long `/readyz` waits for the database: past it, not ready (an unreachable Postgres is
/// said at once instead of after the pool's own 5 s).
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(1);

/// How long `duet serve` waits for its first write before it refuses to start.
const START_WITHIN: Duration = Duration::from_secs(5);

/// Why the server is not ready, in words.
pub(crate) type NotReady = String;

/// Whether the database answers a read and takes a write, within `within`.
async fn probe(state: &AppState, within: Duration) -> Result<(), NotReady> {
    let read = async {
        let one = ThreadQuery {
            limit: 1,
            ..ThreadQuery::default()
        };
        state
            .runtime()
            .store()
            .list_threads(&one)
            .await
            .map(drop)
            .map_err(|e| format!("the database does not answer: {e}"))
    };
    let write = async {
        state
            .server_store()
            .heartbeat(state.runtime().now_ms())
            .await
            .map_err(|e| format!("the database does not take writes: {e}"))
    };
    match tokio::time::timeout(within, async { tokio::try_join!(read, write) }).await {
        Ok(outcome) => outcome.map(drop),
        Err(_) => Err(format!(
            "the database did not answer within {} ms",
            within.as_millis()
        )),
    }
}

/// Whether the server is ready: [`probe`] within [`READY_WITHIN`], or its outcome of the last
/// [`crate::Options::ready_cache`]. Callers that come while a probe runs wait for it and share
/// its outcome.
pub(crate) async fn ready(state: &AppState) -> Result<(), NotReady> {
    let mut last = state.readiness().lock().await;
    if let Some((at, outcome)) = last.as_ref()
        && at.elapsed() < state.options().ready_cache
    {
        return outcome.clone();
    }
    let outcome = probe(state, READY_WITHIN).await;
    *last = Some((Instant::now(), outcome.clone()));
    outcome
}

/// Whether the database takes writes now, waiting at most 5 s: what `duet serve` checks before
/// it listens, so a database it could only read (a read-only file) stops it at start.
pub async fn check_writable(state: &AppState) -> Result<(), String> {
    probe(state, START_WITHIN).await
}

/// Every thread counted by status, and since when the longest-waiting question waits.
pub(crate) async fn counts(state: &AppState) -> Result<StatusCounts, ServiceError> {
    Ok(state.runtime().store().status_counts().await?)
}
