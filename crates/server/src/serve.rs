//! Running the server: serve its connections (`conn`: timeouts, the cap), and beside them the
//! [`Background`] work (periodic recovery, the A2A push sender); shut down gracefully — stop
//! accepting, end the event streams, let runs stop at their next commit (giving their leases
//! back), and exit within a bounded time whatever is still in flight.

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::conn::Stop;
use crate::router::router;
use crate::state::AppState;

/// Serves `state` (its runtime, the server's tables, its options: [`AppState::new`]) on
/// `listener` until `shutdown` resolves, then shuts down gracefully.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let options = state.options();
    let grace = options.shutdown_grace;
    let limits = (
        options.max_connections,
        options.header_read_timeout,
        options.idle_timeout,
    );
    let metrics = options.metrics.clone();
    let background = Background::start(&state);
    let app = router(state.clone());
    let stop = Stop::default();
    let mut server = tokio::spawn(crate::conn::serve(
        listener,
        app,
        limits,
        metrics,
        stop.clone(),
    ));
    // Until the signal, the server runs; after it, it gets `grace` to close its connections.
    let ended = tokio::select! {
        ended = &mut server => Some(ended),
        () = shutdown => None,
    };
    tracing::info!("shutting down: no new requests; runs stop at their next commit");
    stop.graceful.cancel();
    background.stop();
    let served = match ended {
        Some(ended) => ended,
        None => match tokio::time::timeout(grace, &mut server).await {
            Ok(ended) => ended,
            Err(_) => {
                tracing::warn!("connections still open after the grace period: closing them");
                stop.now.cancel();
                server.await
            }
        },
    };
    background.shutdown().await;
    served.map_err(std::io::Error::other)
}

/// Notifications, until the server closes: A2A push's notifier, the router of the notices the
/// database writes, and the outbox's sender (which sends both).
async fn notifications(state: AppState) {
    tokio::join!(
        crate::a2a_agents::notify::run(state.clone()),
        crate::notify::router::run(state.clone()),
        crate::notify::sender::run(state),
    );
}

/// The work [`serve`] runs beside the routes, for a server that mounts [`crate::router`] in its
/// own app (and so does not call [`serve`]): every [`crate::Options::recover_every`] it runs the
/// threads whose runner died, it fires the timers as they fall due
/// ([`duet_runtime::Runtime::serve_timers`]: every replica runs it, each timer fired by one), and
/// it routes and sends notifications (A2A push, webhooks, Slack, email) through the outbox, and it
/// sweeps file chunks no file names. Start it once per process;
/// [`Background::shutdown`] when the app stops.
pub struct Background {
    state: AppState,
    recovery: JoinHandle<()>,
    timers: JoinHandle<()>,
    push: JoinHandle<()>,
    sweep: JoinHandle<()>,
}

impl Background {
    /// Starts the periodic recovery, the timer loop and the push sender for `state` (call it
    /// inside the Tokio runtime).
    pub fn start(state: &AppState) -> Self {
        let (runtime, closing) = (state.runtime().clone(), state.closing().clone());
        Background {
            state: state.clone(),
            recovery: tokio::spawn(recover_periodically(state.clone())),
            timers: tokio::spawn(async move { runtime.serve_timers(closing).await }),
            push: tokio::spawn(notifications(state.clone())),
            sweep: tokio::spawn(sweep_files(state.clone())),
        }
    }

    /// The first half of a shutdown: the event streams end (so a graceful server shutdown is not
    /// held open by them), recovery, the timer loop and the push sender stop, and every run stops at its next
    /// commit. Returns at once.
    pub fn stop(&self) {
        stop(&self.state);
    }

    /// `signal`, then [`Background::stop`]: for `axum::serve(…).with_graceful_shutdown`, so that
    /// the event streams end when the shutdown begins (they would hold it open).
    pub fn stop_after(
        &self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let state = self.state.clone();
        async move {
            signal.await;
            stop(&state);
        }
    }

    /// Stops (as [`Background::stop`]) and waits, at most [`crate::Options::shutdown_grace`],
    /// for recovery, the timer loop (its fires in flight), the push sender and the runs to
    /// finish; a run still in flight after that
    /// keeps its lease until it runs out, and another process continues it.
    pub async fn shutdown(self) {
        self.stop();
        let Background {
            state,
            recovery,
            timers,
            push,
            sweep,
        } = self;
        sweep.abort();
        let runtime = state.runtime().clone();
        let runs = state.runs();
        runs.close();
        let settled = tokio::time::timeout(state.options().shutdown_grace, async {
            let _ = recovery.await;
            let _ = timers.await;
            let _ = push.await;
            runs.wait().await;
            runtime.quiesce().await;
        })
        .await;
        if settled.is_err() {
            tracing::warn!(
                runs = runtime.runs_in_flight(),
                "runs still in flight after the grace period: their leases run out and another process continues them"
            );
        }
    }
}

/// Every `recover_every`, runs the threads whose runner died (an expired lease) and those with
/// runnable messages and no runner. Every process does this; on Postgres they split the work.
async fn recover_periodically(state: AppState) {
    let every = state.options().recover_every.max(Duration::from_millis(50));
    let closing = state.closing().clone();
    // The runs recovery starts are never cancelled (a cancel is an abort, journaled for good):
    // at shutdown they stop at their next commit and give their lease back, and no new batch is
    // claimed.
    let runs = CancellationToken::new();
    loop {
        if closing.is_cancelled() {
            return;
        }
        match state.runtime().recover(&runs).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(threads = n, "recovered threads");
                // A count of threads: exact as f64 far past any real number.
                #[allow(clippy::cast_precision_loss)]
                state
                    .options()
                    .metrics
                    .add("duet_recoveries_total", &[], n as f64);
            }
            Err(e) => tracing::warn!(error = %e, "recovery failed; trying again later"),
        }
        tokio::select! {
            () = closing.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Every hour (the first a minute after start), removes the file chunks no file names that were
/// stored over a day ago ([`duet_runtime::ThreadFiles::sweep`]): what refused or broken-off
/// uploads, failed steps and removed files left. Every process may run it; a chunk named again
/// meanwhile has its time renewed, so a sweep never takes one a write is about to name.
async fn sweep_files(state: AppState) {
    let closing = state.closing().clone();
    let mut wait = Duration::from_secs(60);
    loop {
        tokio::select! {
            () = closing.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = Duration::from_secs(3600);
        match state
            .runtime()
            .files()
            .sweep(duet_runtime::SWEEP_GRACE_MS)
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(chunks = n, "swept file chunks no file names"),
            Err(e) => tracing::warn!(error = %e, "the file chunk sweep failed; trying again later"),
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM. The handlers are installed when this is called (not
/// when the future is first polled), so a signal that arrives right after start is a graceful
/// stop, not the default kill. Call it inside the Tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
                match s {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen for a signal");
                        std::future::pending::<()>().await;
                    }
                }
            };
            tokio::select! {
                () = wait(interrupt) => {}
                () = wait(terminate) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Ends the event streams (they would hold a graceful shutdown open) and stops the runtime
/// taking new work.
fn stop(state: &AppState) {
    state.closing().cancel();
    state.runtime().shutdown();
}
