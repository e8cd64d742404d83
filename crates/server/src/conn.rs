//! The server's connections, owned here rather than by `axum::serve` (which has no header or idle
//! timeout and no cap): a request head must arrive within the header timeout, a connection with
//! no request in flight closes after the idle timeout (an event stream in flight is never idle),
//! at most `max_connections` are served — past the cap the connection idle the longest makes
//! room, and when every one has a request in flight a new one is answered `503` with
//! `Retry-After` (health checks answered as usual) or, past a few such answers, closed — and
//! accept errors such as `EMFILE` pause the loop instead of spinning it or ending it.
//!
//! `registry.rs` is the data (the slots, the idle ones oldest first, each connection's state);
//! `io.rs` what hyper is handed so the connection sees its own activity; `driver.rs` one
//! connection under its deadlines, and the refusal; `accept.rs` the loop.

mod accept;
mod driver;
mod io;
mod registry;

use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

pub(crate) use driver::Stop;

use crate::metrics::Metrics;

/// Serves `router` on `listener` under `max` connections and the `header` and `idle`
/// timeouts until `stop.graceful`; returns once every connection has ended.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    (max, header, idle): (usize, Duration, Duration),
    metrics: Metrics,
    stop: Stop,
) {
    let registry = registry::Registry::new(max, metrics);
    accept::run(
        listener,
        router,
        registry,
        driver::Limits { header, idle },
        stop,
    )
    .await;
}

/// The default of `--max-connections`: three quarters of the file-descriptor limit (the soft
/// `ulimit -n`), less the few refused connections answered at once, so a quarter stays for the
/// database pool, outbound requests (models, tools, MCP servers, push) and files; as for a
/// limit of 1024 if it cannot be read or is unlimited.
pub fn default_max_connections() -> usize {
    max_connections_for(nofile())
}

fn max_connections_for(nofile: Option<u64>) -> usize {
    let nofile = nofile.unwrap_or(1024);
    let served = (nofile / 4 * 3).saturating_sub(registry::REFUSALS as u64);
    usize::try_from(served).unwrap_or(usize::MAX).max(16)
}

#[cfg(unix)]
fn nofile() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn nofile() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_leaves_a_quarter_of_the_descriptors() {
        assert_eq!(max_connections_for(Some(1024)), 736);
        assert_eq!(max_connections_for(Some(20_000)), 14_968);
        assert_eq!(max_connections_for(None), 736);
        assert_eq!(max_connections_for(Some(40)), 16, "never fewer than 16");
    }
}
