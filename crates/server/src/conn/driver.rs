//! One connection, driven: hyper-util's auto builder (HTTP/1.1, and HTTP/2 with prior
//! knowledge) under the deadlines its [`Conn`] gives — a request head within the header timeout
//! (from the accept, or from a later head's first byte), no request in flight for longer than
//! the idle timeout — and nothing allocated for it until its first byte arrives. A refused
//! connection is answered `503` (a health check is answered as usual) and closed.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, Response, Version, header};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::io::{Tracked, Watched};
use super::registry::{Conn, Reason, Refusal, Slot, Wait};
use crate::problem::Problem;

/// The timeouts a connection is driven under.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) header: Duration,
    pub(crate) idle: Duration,
}

/// How the server tells its connections to stop: `graceful` (finish what is in flight, take
/// nothing new), then, past the shutdown's grace, `now`.
#[derive(Clone, Default)]
pub(crate) struct Stop {
    pub(crate) graceful: CancellationToken,
    pub(crate) now: CancellationToken,
}

/// How long a connection told to close with nothing in flight (idle, evicted, shutting down)
/// has to do so (an HTTP/2 `GOAWAY` sent) before it is dropped.
const CLOSING: Duration = Duration::from_secs(1);
/// A refused connection's request head must begin within this; its answer must be sent within
/// `REFUSED_LIFETIME`.
const REFUSED_HEAD: Duration = Duration::from_secs(2);
const REFUSED_LIFETIME: Duration = Duration::from_secs(10);
/// The most an HTTP/1 connection buffers (a request head larger than this is refused with 431);
/// hyper's default is 400 KiB.
const MAX_BUF: usize = 64 * 1024;
/// HTTP/2: pings, so a peer that vanished mid-stream is noticed; streams a connection may open.
const H2_PING: Duration = Duration::from_secs(20);
const H2_STREAMS: u32 = 100;
const H2_HEADER_LIST: u32 = 16 * 1024;

/// The builder of admitted connections.
pub(crate) fn builder() -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // The driver times request heads and idle keep-alive itself: hyper's header timer (30 s
        // by default once a timer is set) starts when a response ends, so it would close every
        // idle keep-alive connection then, whatever the idle timeout says.
        .header_read_timeout(None::<Duration>)
        .max_buf_size(MAX_BUF);
    h2(&mut builder);
    builder
}

/// The builder of refused connections: one answer each, its head read within `REFUSED_HEAD`.
pub(crate) fn refusal_builder() -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(REFUSED_HEAD)
        .keep_alive(false)
        .max_buf_size(MAX_BUF);
    h2(&mut builder);
    builder
}

fn h2(builder: &mut Builder<TokioExecutor>) {
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_PING)
        .keep_alive_timeout(H2_PING)
        .max_concurrent_streams(H2_STREAMS)
        .max_header_list_size(H2_HEADER_LIST);
}

/// Serves an admitted connection until it ends, times out, is evicted, or the server stops.
pub(crate) async fn serve(
    stream: TcpStream,
    slot: Slot,
    builder: Arc<Builder<TokioExecutor>>,
    router: Router,
    limits: Limits,
    stop: Stop,
) {
    let conn = slot.conn().clone();
    if !first_byte(&stream, &conn, limits, &stop).await {
        return;
    }
    let service = {
        let conn = conn.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let in_flight = conn.begin(req.version() == Version::HTTP_2);
            let router = router.clone();
            async move {
                let response = match router.oneshot(req).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(response.map(|body| Tracked::new(body, in_flight)))
            }
        })
    };
    let io = TokioIo::new(Watched::new(stream, conn.clone()));
    // Boxed: the task of a socket that never sends a byte stays small.
    let mut connection = Box::pin(builder.serve_connection(io, service));
    let mut closing: Option<Instant> = None;
    loop {
        let wait = conn.wait(limits.header, limits.idle);
        // Evicted (while busy, too: it then takes no further request once this one ends).
        if closing.is_none() && (wait == Wait::Evicted || conn.evicted()) {
            closing = Some(Instant::now() + CLOSING);
            connection.as_mut().graceful_shutdown();
        }
        let deadline = match (wait, closing) {
            (Wait::Busy, _) => None,
            (_, Some(by)) => Some(by),
            (Wait::Until(at, _), None) => Some(at),
            (Wait::Evicted, None) => None,
        };
        tokio::select! {
            // Progress first: a request that has arrived is served, whatever deadline is due.
            biased;
            served = connection.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "a connection ended in an error");
                }
                return;
            }
            () = conn.wake.notified() => {}
            () = sleep(deadline) => {
                if closing.is_some() {
                    return;
                }
                if let Wait::Until(at, reason) = conn.wait(limits.header, limits.idle)
                    && at <= Instant::now()
                {
                    closed(&conn, reason);
                    if reason == Reason::HeaderTimeout {
                        return;
                    }
                    closing = Some(Instant::now() + CLOSING);
                    connection.as_mut().graceful_shutdown();
                }
            }
            () = stop.graceful.cancelled(), if closing.is_none() => {
                closing = Some(Instant::now() + CLOSING);
                connection.as_mut().graceful_shutdown();
            }
            () = stop.now.cancelled() => return,
        }
    }
}

/// Waits for an admitted connection's first byte: whether to go on serving it.
async fn first_byte(stream: &TcpStream, conn: &Conn, limits: Limits, stop: &Stop) -> bool {
    loop {
        let (at, reason) = match conn.wait(limits.header, limits.idle) {
            Wait::Until(at, reason) => (at, reason),
            Wait::Busy => return true,
            Wait::Evicted => return false,
        };
        tokio::select! {
            biased;
            ready = stream.readable() => {
                conn.first_bytes();
                return ready.is_ok();
            }
            () = sleep_until(at) => {
                if matches!(conn.wait(limits.header, limits.idle), Wait::Until(now, _) if now <= Instant::now()) {
                    closed(conn, reason);
                    return false;
                }
            }
            () = conn.wake.notified() => {}
            () = stop.graceful.cancelled() => return false,
            () = stop.now.cancelled() => return false,
        }
    }
}

fn closed(conn: &Conn, reason: Reason) {
    conn.metrics().add(
        "duet_connections_closed_total",
        &[("reason", reason.label())],
        1.0,
    );
}

async fn sleep(deadline: Option<Instant>) {
    match deadline {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Answers a refused connection: `/healthz` and `/readyz` as usual, anything else `503` with
/// `Retry-After`; then closes it.
pub(crate) async fn refuse(
    stream: TcpStream,
    refusal: Refusal,
    builder: Arc<Builder<TokioExecutor>>,
    router: Router,
    max: usize,
    stop: Stop,
) {
    let _refusal = refusal;
    tokio::select! {
        ready = tokio::time::timeout(REFUSED_HEAD, stream.readable()) => {
            if !matches!(ready, Ok(Ok(()))) {
                return;
            }
        }
        () = stop.graceful.cancelled() => return,
    }
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let router = router.clone();
        async move { Ok::<_, Infallible>(answer(req, router, max).await) }
    });
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    // At a stop, a refusal is simply cut: nothing it would have answered was going to be served.
    tokio::select! {
        _ = tokio::time::timeout(REFUSED_LIFETIME, connection) => {}
        () = stop.graceful.cancelled() => {}
    }
}

async fn answer(req: Request<Incoming>, router: Router, max: usize) -> Response<Body> {
    let health = matches!(*req.method(), Method::GET | Method::HEAD)
        && matches!(req.uri().path(), "/healthz" | "/readyz");
    if health {
        return match router.oneshot(req).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    let mut response = Problem::unavailable(
        "too_many_connections",
        format!(
            "the server holds as many connections as it serves ({max}), each with a request in \
             flight; retry shortly"
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}
