//! The connections a server holds, as data: how many are admitted, which of them have no request
//! in flight (oldest first: what the accept loop evicts to make room), how many are being refused,
//! and each connection's own state — whether a request is in flight, since when it has been
//! idle, whether a request head has begun — from which its driver (`driver.rs`) reads its next
//! deadline.
//!
//! Locks: a connection's own `state`, then the registry's `inner`, never the other way round
//! (the accept loop takes an evicted connection's state only after letting go of `inner`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::metrics::Metrics;

/// How many refused connections may be answered at once (a `503`, or a health check); past
/// them a new connection is closed unanswered.
pub(crate) const REFUSALS: usize = 32;

/// What the accept loop does with a new connection.
pub(crate) enum Admission {
    /// Serve it (an idle one may have been evicted to make room).
    Serve(Slot),
    /// Every slot has a request in flight: answer `503` (health checks are answered).
    Refuse(Refusal),
    /// Not even a refusal can be afforded: close it.
    Close,
}

/// The connections of one server.
pub(crate) struct Registry {
    max: usize,
    metrics: Metrics,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Admitted and not evicted: what counts against `max`.
    open: usize,
    refusing: usize,
    /// The admitted connections with no request in flight, by when they became so.
    idle: BTreeMap<u64, Weak<Conn>>,
    next: u64,
}

impl Registry {
    pub(crate) fn new(max: usize, metrics: Metrics) -> Arc<Self> {
        // A count of connections: exact as f64 far past any real number.
        #[allow(clippy::cast_precision_loss)]
        metrics.set("duet_connections_max", &[], max as f64);
        Arc::new(Registry {
            max: max.max(1),
            metrics,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// The cap.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // The data stays consistent whatever panicked while holding it: every change is one
        // statement.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a new connection if a slot is free or an idle connection can give up its own
    /// (the one idle the longest, told to close); else a refusal, if one can be afforded.
    pub(crate) fn admit(self: &Arc<Self>) -> Admission {
        let (slot, evicted) = {
            let mut inner = self.inner();
            let evicted = if inner.open < self.max {
                inner.open += 1;
                None
            } else {
                match Self::pop_idle(&mut inner) {
                    Some(conn) => Some(conn),
                    None if inner.refusing < REFUSALS => {
                        inner.refusing += 1;
                        drop(inner);
                        self.metrics.add(
                            "duet_connections_refused_total",
                            &[("answer", "503")],
                            1.0,
                        );
                        return Admission::Refuse(Refusal(self.clone()));
                    }
                    None => {
                        drop(inner);
                        self.metrics.add(
                            "duet_connections_refused_total",
                            &[("answer", "closed")],
                            1.0,
                        );
                        return Admission::Close;
                    }
                }
            };
            let seq = inner.next;
            inner.next += 1;
            let conn = Arc::new_cyclic(|me| Conn {
                registry: self.clone(),
                me: me.clone(),
                wake: Notify::new(),
                armed: AtomicBool::new(false),
                counted: AtomicBool::new(true),
                state: Mutex::new(State {
                    in_flight: 0,
                    idle_seq: Some(seq),
                    since: Instant::now(),
                    head_started: None,
                    served: 0,
                    evicted: false,
                    http2: false,
                }),
            });
            inner.idle.insert(seq, Arc::downgrade(&conn));
            (Slot(conn), evicted)
        };
        if let Some(old) = evicted {
            old.evict();
            self.metrics.add(
                "duet_connections_closed_total",
                &[("reason", "evicted")],
                1.0,
            );
        } else {
            self.metrics.add("duet_connections_open", &[], 1.0);
        }
        Admission::Serve(slot)
    }

    /// Tells the connection idle the longest to close, so its descriptor comes back (after an
    /// accept error such as `EMFILE`). Whether there was one.
    pub(crate) fn evict_one(&self) -> bool {
        let evicted = {
            let mut inner = self.inner();
            let conn = Self::pop_idle(&mut inner);
            if conn.is_some() {
                inner.open -= 1;
            }
            conn
        };
        let Some(conn) = evicted else {
            return false;
        };
        conn.evict();
        self.metrics.add("duet_connections_open", &[], -1.0);
        self.metrics.add(
            "duet_connections_closed_total",
            &[("reason", "evicted")],
            1.0,
        );
        true
    }

    /// The connection idle the longest, no longer counted against the cap (its slot goes to
    /// whoever asked).
    fn pop_idle(inner: &mut Inner) -> Option<Arc<Conn>> {
        while let Some((_, weak)) = inner.idle.pop_first() {
            if let Some(conn) = weak.upgrade() {
                conn.counted.store(false, Ordering::Relaxed);
                return Some(conn);
            }
        }
        None
    }

    fn idle(&self, conn: Weak<Conn>) -> u64 {
        let mut inner = self.inner();
        let seq = inner.next;
        inner.next += 1;
        inner.idle.insert(seq, conn);
        seq
    }

    fn busy(&self, seq: u64) {
        self.inner().idle.remove(&seq);
    }

    /// Admitted and counted now, and refusals being answered (for tests).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize) {
        let inner = self.inner();
        (inner.open, inner.idle.len(), inner.refusing)
    }
}

/// Why a connection's driver closes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// No complete request head in time (from its accept, or from a later head's first byte).
    HeaderTimeout,
    /// No request in flight for the idle timeout.
    IdleTimeout,
}

impl Reason {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Reason::HeaderTimeout => "header_timeout",
            Reason::IdleTimeout => "idle_timeout",
        }
    }
}

/// What a connection's driver waits for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A request is in flight (an event stream included): no deadline.
    Busy,
    /// Nothing in flight: closed at this instant, for this reason, unless a request comes.
    Until(Instant, Reason),
    /// Its slot went to another connection: close once nothing is in flight.
    Evicted,
}

/// One admitted connection's shared state.
pub(crate) struct Conn {
    registry: Arc<Registry>,
    me: Weak<Conn>,
    /// Woken when `wait` may have changed.
    pub(crate) wake: Notify,
    /// Set while an HTTP/1 connection is idle: its next byte begins a request head.
    armed: AtomicBool,
    /// Counted against the cap (cleared, under the registry's lock, when evicted).
    counted: AtomicBool,
    state: Mutex<State>,
}

struct State {
    in_flight: u32,
    /// Its key in the registry's idle set, while it has no request in flight.
    idle_seq: Option<u64>,
    /// When it was accepted, or when its last request ended.
    since: Instant,
    /// When the bytes of a request head began to arrive on an idle HTTP/1 connection.
    head_started: Option<Instant>,
    /// Requests begun on it.
    served: u64,
    evicted: bool,
    http2: bool,
}

impl Conn {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A request begins (its head was read): the connection is busy until the returned guard
    /// (which goes with the response's body) is dropped.
    pub(crate) fn begin(&self, http2: bool) -> InFlight {
        let mut s = self.state();
        s.in_flight += 1;
        s.served += 1;
        s.http2 |= http2;
        if s.in_flight == 1 {
            s.head_started = None;
            self.armed.store(false, Ordering::Relaxed);
            if let Some(seq) = s.idle_seq.take() {
                self.registry.busy(seq);
            }
            self.wake.notify_one();
        }
        InFlight(self.me.clone())
    }

    fn end(&self) {
        let mut s = self.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.in_flight > 0 {
            return;
        }
        s.since = Instant::now();
        if !s.evicted {
            s.idle_seq = Some(self.registry.idle(self.me.clone()));
        }
        // HTTP/2's own frames (pings, settings) are no request head.
        if !s.http2 {
            self.armed.store(true, Ordering::Relaxed);
        }
        self.wake.notify_one();
    }

    /// Bytes were read from the socket.
    pub(crate) fn bytes_arrived(&self) {
        if self.armed.load(Ordering::Relaxed) && self.armed.swap(false, Ordering::Relaxed) {
            let mut s = self.state();
            if s.in_flight == 0 {
                s.head_started = Some(Instant::now());
                self.wake.notify_one();
            }
        }
    }

    fn evict(&self) {
        let mut s = self.state();
        s.evicted = true;
        s.idle_seq = None;
        self.wake.notify_one();
    }

    /// What its driver waits for, under `header` and `idle` timeouts.
    pub(crate) fn wait(&self, header: Duration, idle: Duration) -> Wait {
        let s = self.state();
        if s.in_flight > 0 {
            Wait::Busy
        } else if s.evicted {
            Wait::Evicted
        } else if let Some(started) = s.head_started {
            Wait::Until(started + header, Reason::HeaderTimeout)
        } else if s.served == 0 {
            Wait::Until(s.since + header, Reason::HeaderTimeout)
        } else {
            Wait::Until(s.since + idle, Reason::IdleTimeout)
        }
    }

    /// The registry's metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.registry.metrics
    }
}

/// A request in flight on a connection; dropped when its response's body is.
pub(crate) struct InFlight(Weak<Conn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(conn) = self.0.upgrade() {
            conn.end();
        }
    }
}

/// An admitted connection's place: given back when its driver ends.
pub(crate) struct Slot(Arc<Conn>);

impl Slot {
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let seq = self.0.state().idle_seq.take();
        let registry = &self.0.registry;
        let counted = {
            let mut inner = registry.inner();
            if let Some(seq) = seq {
                inner.idle.remove(&seq);
            }
            let counted = self.0.counted.swap(false, Ordering::Relaxed);
            if counted {
                inner.open -= 1;
            }
            counted
        };
        if counted {
            registry.metrics.add("duet_connections_open", &[], -1.0);
        }
    }
}

/// A refused connection being answered: given back when it closes.
pub(crate) struct Refusal(Arc<Registry>);

impl Drop for Refusal {
    fn drop(&mut self) {
        let mut inner = self.0.inner();
        inner.refusing = inner.refusing.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(r: &Arc<Registry>) -> Slot {
        match r.admit() {
            Admission::Serve(slot) => slot,
            _ => panic!("not admitted"),
        }
    }

    #[test]
    fn past_the_cap_the_longest_idle_connection_makes_room() {
        let r = Registry::new(2, Metrics::default());
        let first = serve(&r);
        let second = serve(&r);
        let third = serve(&r);
        assert_eq!(
            first.conn().wait(Duration::ZERO, Duration::ZERO),
            Wait::Evicted,
            "the oldest idle one goes"
        );
        assert!(matches!(
            second.conn().wait(Duration::ZERO, Duration::ZERO),
            Wait::Until(_, Reason::HeaderTimeout)
        ));
        assert_eq!(r.counts(), (2, 2, 0));
        drop(first);
        assert_eq!(r.counts(), (2, 2, 0), "an evicted slot was counted once");
        drop((second, third));
        assert_eq!(r.counts(), (0, 0, 0));
    }

    #[test]
    fn with_every_slot_busy_a_connection_is_refused_then_closed() {
        let r = Registry::new(1, Metrics::default());
        let slot = serve(&r);
        let request = slot.conn().begin(false);
        let mut refusals = Vec::new();
        for _ in 0..REFUSALS {
            match r.admit() {
                Admission::Refuse(refusal) => refusals.push(refusal),
                _ => panic!("not refused"),
            }
        }
        assert!(matches!(r.admit(), Admission::Close));
        assert!(!r.evict_one(), "nothing idle to evict");
        refusals.pop();
        assert!(matches!(r.admit(), Admission::Refuse(_)));
        // Once the request ends the connection is idle again, and gives way to a new one.
        drop(request);
        assert!(matches!(
            slot.conn().wait(Duration::ZERO, Duration::ZERO),
            Wait::Until(_, Reason::IdleTimeout)
        ));
        let next = serve(&r);
        assert_eq!(
            slot.conn().wait(Duration::ZERO, Duration::ZERO),
            Wait::Evicted
        );
        drop((slot, next, refusals));
        assert_eq!(r.counts(), (0, 0, 0));
    }

    #[test]
    fn a_request_in_flight_is_never_evicted_and_a_head_restarts_the_clock() {
        let r = Registry::new(1, Metrics::default());
        let slot = serve(&r);
        let conn = slot.conn().clone();
        let request = conn.begin(false);
        assert_eq!(conn.wait(Duration::ZERO, Duration::ZERO), Wait::Busy);
        assert!(!r.evict_one());
        drop(request);
        conn.bytes_arrived();
        assert!(matches!(
            conn.wait(Duration::ZERO, Duration::ZERO),
            Wait::Until(_, Reason::HeaderTimeout)
        ));
        // HTTP/2 frames between requests start no head.
        let request = conn.begin(true);
        drop(request);
        conn.bytes_arrived();
        assert!(matches!(
            conn.wait(Duration::ZERO, Duration::ZERO),
            Wait::Until(_, Reason::IdleTimeout)
        ));
        assert!(r.evict_one());
        assert_eq!(conn.wait(Duration::ZERO, Duration::ZERO), Wait::Evicted);
        drop(slot);
        assert_eq!(r.counts(), (0, 0, 0));
    }
}
