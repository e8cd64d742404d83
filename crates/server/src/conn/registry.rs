//! The connections a server holds, as data: how many are admitted, which of them the accept loop
//! may evict to make room past the cap — those idle between requests first, oldest first; then
//! those that have sent nothing since their accept, but only once they have waited `grace` (a
//! new connection's request is usually on its way) — never one whose request has begun to
//! arrive (evicting it would lose the request: past its header timeout it is closed anyway),
//! how many are being refused,
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
    grace: Duration,
    metrics: Metrics,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Admitted and not evicted: what counts against `max`.
    open: usize,
    refusing: usize,
    /// Connections idle between requests (keep-alive), by when they became so.
    idle: BTreeMap<u64, Weak<Conn>>,
    /// Connections that have sent nothing since their accept, by when they were accepted.
    silent: BTreeMap<u64, (Instant, Weak<Conn>)>,
    next: u64,
}

/// Which of the registry's sets a connection is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    Idle,
    Silent,
}

impl Inner {
    fn enqueue(&mut self, queue: Queue, conn: Weak<Conn>) -> (Queue, u64) {
        let seq = self.next;
        self.next += 1;
        match queue {
            Queue::Idle => {
                self.idle.insert(seq, conn);
            }
            Queue::Silent => {
                self.silent.insert(seq, (Instant::now(), conn));
            }
        }
        (queue, seq)
    }

    fn dequeue(&mut self, (queue, seq): (Queue, u64)) {
        match queue {
            Queue::Idle => {
                self.idle.remove(&seq);
            }
            Queue::Silent => {
                self.silent.remove(&seq);
            }
        }
    }
}

impl Registry {
    /// A registry of at most `max` connections, where one that has sent nothing may be evicted
    /// once it has waited `grace`.
    pub(crate) fn new(max: usize, grace: Duration, metrics: Metrics) -> Arc<Self> {
        // A count of connections: exact as f64 far past any real number.
        #[allow(clippy::cast_precision_loss)]
        metrics.set("duet_connections_max", &[], max as f64);
        Arc::new(Registry {
            max: max.max(1),
            grace,
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

    /// Admits a new connection if a slot is free or an evictable connection can give up its own
    /// (told to close); else a refusal, if one can be afforded.
    pub(crate) fn admit(self: &Arc<Self>) -> Admission {
        let (slot, evicted) = {
            let mut inner = self.inner();
            let evicted = if inner.open < self.max {
                inner.open += 1;
                None
            } else {
                match self.pop_evictable(&mut inner) {
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
            let conn = Arc::new_cyclic(|me| Conn {
                registry: self.clone(),
                me: me.clone(),
                wake: Notify::new(),
                armed: AtomicBool::new(false),
                counted: AtomicBool::new(true),
                state: Mutex::new(State {
                    in_flight: 0,
                    queued: Some(inner.enqueue(Queue::Silent, me.clone())),
                    since: Instant::now(),
                    head_started: None,
                    served: 0,
                    evicted: false,
                    http2: false,
                }),
            });
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

    /// Tells an evictable connection to close, so its descriptor comes back (after an accept
    /// error such as `EMFILE`). Whether there was one.
    pub(crate) fn evict_one(&self) -> bool {
        let evicted = {
            let mut inner = self.inner();
            let conn = self.pop_evictable(&mut inner);
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

    /// The connection idle the longest, else the one silent the longest if that is `grace` or
    /// more: no longer counted against the cap (its slot goes to whoever asked). Its own state
    /// is the caller's to update, once `inner` is let go.
    fn pop_evictable(&self, inner: &mut Inner) -> Option<Arc<Conn>> {
        // Only one still counted: an entry left by a connection evicted meanwhile is skipped.
        let live = |weak: Weak<Conn>| weak.upgrade().filter(|c| c.counted.load(Ordering::Relaxed));
        let mut found = None;
        while found.is_none()
            && let Some((_, weak)) = inner.idle.pop_first()
        {
            found = live(weak);
        }
        let now = Instant::now();
        while found.is_none()
            && let Some(entry) = inner.silent.first_entry()
            && entry.get().0 + self.grace <= now
        {
            found = live(entry.remove().1);
        }
        let conn = found?;
        conn.counted.store(false, Ordering::Relaxed);
        Some(conn)
    }

    fn enqueue(&self, queue: Queue, conn: Weak<Conn>) -> (Queue, u64) {
        self.inner().enqueue(queue, conn)
    }

    fn dequeue(&self, queued: (Queue, u64)) {
        self.inner().dequeue(queued);
    }

    /// Admitted and counted now, evictable (idle, silent), and refusals being answered (for
    /// tests).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize, usize) {
        let inner = self.inner();
        (
            inner.open,
            inner.idle.len(),
            inner.silent.len(),
            inner.refusing,
        )
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
    /// Where it is in the registry's sets (none while a request is in flight, or once evicted).
    queued: Option<(Queue, u64)>,
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
            self.unqueue(&mut s);
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
            s.queued = Some(self.registry.enqueue(Queue::Idle, self.me.clone()));
        }
        // HTTP/2's own frames (pings, settings) are no request head.
        if !s.http2 {
            self.armed.store(true, Ordering::Relaxed);
        }
        self.wake.notify_one();
    }

    /// Bytes were read from the socket: on an idle HTTP/1 connection, a request head begins
    /// (it times from now, and the connection is no longer evictable).
    pub(crate) fn bytes_arrived(&self) {
        if self.armed.load(Ordering::Relaxed) && self.armed.swap(false, Ordering::Relaxed) {
            let mut s = self.state();
            if s.in_flight == 0 {
                s.head_started = Some(Instant::now());
                self.unqueue(&mut s);
                self.wake.notify_one();
            }
        }
    }

    /// A new connection's first bytes can be read: its request is arriving (and times from its
    /// accept still); it is no longer evictable.
    pub(crate) fn first_bytes(&self) {
        let mut s = self.state();
        self.unqueue(&mut s);
    }

    fn unqueue(&self, s: &mut State) {
        if let Some(queued) = s.queued.take() {
            self.registry.dequeue(queued);
        }
    }

    fn evict(&self) {
        let mut s = self.state();
        s.evicted = true;
        // Idle again between its eviction and now? Out of the set again.
        self.unqueue(&mut s);
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

    /// Whether its slot went to another connection.
    pub(crate) fn evicted(&self) -> bool {
        self.state().evicted
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
        let queued = self.0.state().queued.take();
        let registry = &self.0.registry;
        let counted = {
            let mut inner = registry.inner();
            if let Some(queued) = queued {
                inner.dequeue(queued);
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

    const NONE: Duration = Duration::ZERO;
    const LONG: Duration = Duration::from_secs(3600);

    fn serve(r: &Arc<Registry>) -> Slot {
        match r.admit() {
            Admission::Serve(slot) => slot,
            _ => panic!("not admitted"),
        }
    }

    /// A request on `slot`'s connection, answered: it is idle between requests.
    fn served(slot: &Slot) {
        drop(slot.conn().begin(false));
    }

    fn wait(slot: &Slot) -> Wait {
        slot.conn().wait(NONE, NONE)
    }

    #[test]
    fn past_the_cap_the_longest_idle_connection_makes_room() {
        let r = Registry::new(2, LONG, Metrics::default());
        let (first, second) = (serve(&r), serve(&r));
        served(&second);
        served(&first);
        let third = serve(&r);
        assert_eq!(wait(&second), Wait::Evicted, "idle the longest, it goes");
        assert!(matches!(wait(&first), Wait::Until(_, Reason::IdleTimeout)));
        assert_eq!(r.counts(), (2, 1, 1, 0));
        drop(second);
        assert_eq!(r.counts(), (2, 1, 1, 0), "an evicted slot was counted once");
        drop((first, third));
        assert_eq!(r.counts(), (0, 0, 0, 0));
    }

    #[test]
    fn a_silent_connection_is_evicted_only_past_the_grace_and_one_sending_never() {
        let young = Registry::new(1, LONG, Metrics::default());
        let slot = serve(&young);
        assert!(
            matches!(young.admit(), Admission::Refuse(_)),
            "its request may be on its way"
        );
        assert!(matches!(wait(&slot), Wait::Until(_, Reason::HeaderTimeout)));
        let old = Registry::new(1, NONE, Metrics::default());
        let silent = serve(&old);
        let next = serve(&old);
        assert_eq!(wait(&silent), Wait::Evicted);
        next.conn().first_bytes();
        assert!(
            matches!(old.admit(), Admission::Refuse(_)),
            "its request is arriving"
        );
        assert!(matches!(wait(&next), Wait::Until(_, Reason::HeaderTimeout)));
        drop((slot, silent, next));
        assert_eq!(young.counts(), (0, 0, 0, 0));
        assert_eq!(old.counts(), (0, 0, 0, 0));
    }

    #[test]
    fn with_every_slot_busy_a_connection_is_refused_then_closed() {
        let r = Registry::new(1, NONE, Metrics::default());
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
        assert!(!r.evict_one(), "nothing to evict");
        refusals.pop();
        assert!(matches!(r.admit(), Admission::Refuse(_)));
        // Once the request ends the connection is idle again, and gives way to a new one.
        drop(request);
        assert!(matches!(wait(&slot), Wait::Until(_, Reason::IdleTimeout)));
        let next = serve(&r);
        assert_eq!(wait(&slot), Wait::Evicted);
        drop((slot, next, refusals));
        assert_eq!(r.counts(), (0, 0, 0, 0));
    }

    #[test]
    fn a_request_in_flight_is_never_evicted_and_a_head_restarts_the_clock() {
        let r = Registry::new(1, LONG, Metrics::default());
        let slot = serve(&r);
        let request = slot.conn().begin(false);
        assert_eq!(wait(&slot), Wait::Busy);
        assert!(!r.evict_one());
        drop(request);
        assert_eq!(r.counts(), (1, 1, 0, 0));
        slot.conn().bytes_arrived();
        assert!(matches!(wait(&slot), Wait::Until(_, Reason::HeaderTimeout)));
        assert_eq!(r.counts(), (1, 0, 0, 0), "a head arriving is not evictable");
        assert!(!r.evict_one());
        // HTTP/2 frames between requests start no head.
        served(&slot);
        drop(slot.conn().begin(true));
        slot.conn().bytes_arrived();
        assert!(matches!(wait(&slot), Wait::Until(_, Reason::IdleTimeout)));
        assert!(r.evict_one());
        assert_eq!(wait(&slot), Wait::Evicted);
        drop(slot);
        assert_eq!(r.counts(), (0, 0, 0, 0));
    }
}
