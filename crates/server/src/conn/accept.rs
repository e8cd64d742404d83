//! The accept loop: every connection admitted (an idle one evicted to make room past the cap),
//! refused with a `503`, or closed; accept errors (out of file descriptors: `EMFILE`) met with
//! an eviction and a short, growing pause, never a spin or an exit; and at a stop, no new
//! connection, every one told to finish, and all of them awaited.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use super::driver::{self, Limits, Stop};
use super::registry::{Admission, Registry};

/// Accepts on `listener` until `stop.graceful`, then waits for every connection to end (they
/// drop what is left at `stop.now`).
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    registry: Arc<Registry>,
    limits: Limits,
    stop: Stop,
) {
    let connections = TaskTracker::new();
    let served = Arc::new(driver::builder());
    let refused = Arc::new(driver::refusal_builder());
    let mut backoff = Backoff::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.graceful.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.reset();
                stream
            }
            // The peer gave up before it was accepted: nothing to do.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                registry.metrics().add("duet_accept_errors_total", &[], 1.0);
                // Out of descriptors (EMFILE, ENFILE) or buffers: the connection idle the
                // longest gives its descriptor back, and the loop waits a little (the pending
                // connection stays in the backlog) instead of failing again at once — longer
                // each time while nothing could be freed.
                let freed = registry.evict_one();
                let pause = backoff.failed(&e, freed);
                tokio::select! {
                    () = tokio::time::sleep(pause) => continue,
                    () = stop.graceful.cancelled() => break,
                }
            }
        };
        registry
            .metrics()
            .add("duet_connections_accepted_total", &[], 1.0);
        match registry.admit() {
            Admission::Serve(slot) => {
                connections.spawn(driver::serve(
                    stream,
                    slot,
                    served.clone(),
                    router.clone(),
                    limits,
                    stop.clone(),
                ));
            }
            Admission::Refuse(refusal) => {
                connections.spawn(driver::refuse(
                    stream,
                    refusal,
                    refused.clone(),
                    router.clone(),
                    registry.max(),
                    stop.clone(),
                ));
            }
            Admission::Close => drop(stream),
        }
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// Errors of one connection, not of the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// The pause after an accept error: 5 ms when an idle connection was told to close (long enough
/// for it to), else 20 ms doubling with each error that freed nothing, at most a second.
#[derive(Default)]
struct Backoff {
    /// Errors since the last accept.
    streak: u32,
    /// Of those, the ones that freed nothing.
    stuck: u32,
}

impl Backoff {
    fn failed(&mut self, e: &std::io::Error, freed: bool) -> Duration {
        if self.streak == 0 {
            tracing::warn!(
                error = %e,
                "cannot accept a connection; pausing (and closing the connection idle the longest)"
            );
        }
        self.streak = self.streak.saturating_add(1);
        if freed {
            return Duration::from_millis(5);
        }
        self.stuck = self.stuck.saturating_add(1);
        Duration::from_millis((10u64 << self.stuck.min(7)).min(1000))
    }

    fn reset(&mut self) {
        if self.streak > 0 {
            tracing::info!(errors = self.streak, "accepting connections again");
        }
        *self = Backoff::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_grows_to_a_second_while_nothing_is_freed_and_starts_over_after_an_accept() {
        let e = std::io::Error::other("EMFILE");
        let mut b = Backoff::default();
        let pauses: Vec<u64> = (0..9)
            .map(|_| u64::try_from(b.failed(&e, false).as_millis()).unwrap_or(u64::MAX))
            .collect();
        assert_eq!(pauses, [20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        assert_eq!(b.failed(&e, true), Duration::from_millis(5));
        b.reset();
        assert_eq!(b.failed(&e, false), Duration::from_millis(20));
    }
}
