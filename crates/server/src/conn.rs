//! The server's connections, owned here rather than by `axum::serve` (which has no header or idle
//! timeout and no cap): a request head must arrive within the header timeout, a connection with
//! no request in flight closes after the idle timeout (an event stream in flight is never idle),
//! at most `max_connections` are served — past the cap the connection idle the longest makes
//! room (or one that has sent nothing for a second or more), and when none can a
//! new one is answered `503` with `Retry-After` (health checks answered as usual) or, past a few
//! such answers, closed — and
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

/// How long a connection must have sent nothing before it may be evicted to make room: a new
/// connection's request is usually on its way, and evicting it would lose it (a refusal says to
/// retry instead).
const PENDING_GRACE: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` under `max` connections and the `header` and `idle`
/// timeouts until `stop.graceful`; returns once every connection has ended.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    (max, header, idle): (usize, Duration, Duration),
    metrics: Metrics,
    stop: Stop,
) {
    let registry = registry::Registry::new(max, PENDING_GRACE.min(header), metrics);
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
/// limit of 1024 if it cannot be read or is unlimited; and at most 10,000.
pub fn default_max_connections() -> usize {
    max_connections_for(nofile())
}

/// The most connections served by default, whatever the descriptor limit: an idle HTTP/1.1
/// connection holds about 20 KB (hyper's two 8 KiB buffers, its state, the socket's), so 10,000
/// are about 200 MB; a container's limit of 1,048,576 would otherwise allow some 15 GB of them.
pub(crate) const MAX_DEFAULT: usize = 10_000;

fn max_connections_for(nofile: Option<u64>) -> usize {
    let nofile = nofile.unwrap_or(1024);
    let served = (nofile / 4 * 3).saturating_sub(registry::REFUSALS as u64);
    usize::try_from(served)
        .unwrap_or(usize::MAX)
        .clamp(16, MAX_DEFAULT)
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
        assert_eq!(max_connections_for(Some(8_192)), 6_112);
        assert_eq!(
            max_connections_for(Some(20_000)),
            10_000,
            "at most MAX_DEFAULT"
        );
        assert_eq!(max_connections_for(None), 736);
        assert_eq!(max_connections_for(Some(40)), 16, "never fewer than 16");
    }
}
