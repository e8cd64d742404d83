//! The receiving end of Postgres notifications: a task per store and channel that `LISTEN`s
//! while the store has subscribers on it (and only then: delivering notifications to a listener
//! costs every notifying commit, so a store nobody follows does not listen) and fans the
//! notifications out to them. Its connection lost, it reconnects (backing off up to 5 s) and
//! sends a resync, since what was notified meanwhile is gone. Two channels: the change feed
//! ([`ChangeHub`], `duet_changes`) and timer wakeups ([`WakeHub`], `duet_timers`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use duet_runtime::{Change, ChangeHub, FeedEvent, ThreadStatus, TimerWake, WakeHub};
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::Notify;
use uuid::Uuid;

/// An in-process fan-out that a listener relays one channel's notifications to.
pub(crate) trait Hub: Clone + Send + Sync + 'static {
    /// What a subscriber hears.
    type Event: Send + 'static;
    /// The notification channel.
    const CHANNEL: &'static str;
    /// What a subscriber hears first once live: read everything again.
    fn resync_event() -> Self::Event;
    /// How many subscribers it has.
    fn subscribers(&self) -> usize;
    /// Tells every subscriber to read everything again.
    fn resync(&self);
    /// A subscriber that hears nothing until the relay says it is live.
    fn subscribe_silently(&self) -> BoxStream<'static, Self::Event>;
    /// Relays a notification's payload: what it says, or a resync if it says nothing this hub
    /// knows (a foreign writer on the channel: re-reading is always safe).
    fn relay(&self, payload: &str);
}

impl Hub for ChangeHub {
    type Event = FeedEvent;
    const CHANNEL: &'static str = "duet_changes";

    fn resync_event() -> FeedEvent {
        FeedEvent::Resync
    }

    fn subscribers(&self) -> usize {
        ChangeHub::subscribers(self)
    }

    fn resync(&self) {
        ChangeHub::resync(self);
    }

    fn subscribe_silently(&self) -> BoxStream<'static, FeedEvent> {
        ChangeHub::subscribe_silently(self)
    }

    fn relay(&self, payload: &str) {
        match parse_change(payload) {
            Some(change) => self.publish(change),
            None => ChangeHub::resync(self),
        }
    }
}

impl Hub for WakeHub {
    type Event = TimerWake;
    const CHANNEL: &'static str = "duet_timers";

    fn resync_event() -> TimerWake {
        TimerWake::Resync
    }

    fn subscribers(&self) -> usize {
        WakeHub::subscribers(self)
    }

    fn resync(&self) {
        WakeHub::resync(self);
    }

    fn subscribe_silently(&self) -> BoxStream<'static, TimerWake> {
        WakeHub::subscribe_silently(self)
    }

    fn relay(&self, payload: &str) {
        match payload.parse::<i64>() {
            Ok(at) => self.due(at),
            Err(_) => WakeHub::resync(self),
        }
    }
}

/// A store's end of one channel: its subscribers' hub and the task listening for them. The
/// task stops when the feed is dropped.
#[derive(Debug)]
pub(crate) struct Feed<H> {
    hub: H,
    shared: Arc<Shared>,
    relay: tokio::task::JoinHandle<()>,
}

/// What subscribing and relaying share.
#[derive(Debug, Default)]
struct Shared {
    /// Woken when a subscriber arrives.
    wanted: Notify,
    /// Whether the relay is listening. Subscribing and the relay's decision to stop take it in
    /// turn, so a subscriber that finds it `true` is live.
    live: Mutex<bool>,
}

impl Shared {
    fn live(&self) -> std::sync::MutexGuard<'_, bool> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<H> Drop for Feed<H> {
    fn drop(&mut self) {
        self.relay.abort();
    }
}

impl<H: Hub + Default> Feed<H> {
    /// The feed of the database `options` connect to; it listens once it has a subscriber.
    pub(crate) fn start(options: PgConnectOptions) -> Self {
        let hub = H::default();
        let shared = Arc::new(Shared::default());
        let relay = tokio::spawn(relay(options, hub.clone(), shared.clone()));
        Feed { hub, shared, relay }
    }

    /// A subscription: its opening resync comes at once if the relay is listening, else from the
    /// relay once it is.
    pub(crate) fn subscribe(&self) -> BoxStream<'static, H::Event> {
        let live = self.shared.live();
        let rx = self.hub.subscribe_silently();
        if *live {
            stream::once(async { H::resync_event() }).chain(rx).boxed()
        } else {
            self.shared.wanted.notify_one();
            rx
        }
    }
}

/// A listener on `channel`, on a connection of its own (a pool of one, which is how
/// `PgListener` reconnects); retried until it connects.
async fn listener(options: &PgConnectOptions, channel: &str) -> PgListener {
    let mut delay = Duration::from_millis(50);
    loop {
        let attempt = async {
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .max_lifetime(None)
                .idle_timeout(None)
                .connect_with(options.clone())
                .await?;
            let mut listener = PgListener::connect_with(&pool).await?;
            // The pool is the listener's own: nothing else closes it.
            listener.ignore_pool_close_event(true);
            listener.listen(channel).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        match attempt.await {
            Ok(listener) => return listener,
            Err(e) => {
                tracing::warn!(target: "duet::store", "{channel}: cannot listen ({e}); retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// A notification's payload, `ID SEQ STATUS`, as a change; `None` if it is not one.
pub(crate) fn parse_change(payload: &str) -> Option<Change> {
    let mut parts = payload.split(' ');
    let change = Change {
        thread: Uuid::parse_str(parts.next()?).ok()?,
        seq: parts.next()?.parse().ok()?,
        status: ThreadStatus::parse(parts.next()?)?,
    };
    parts.next().is_none().then_some(change)
}

/// Waits for subscribers, listens while there are any, and relays what it hears.
async fn relay<H: Hub>(options: PgConnectOptions, hub: H, shared: Arc<Shared>) {
    loop {
        while hub.subscribers() == 0 {
            shared.wanted.notified().await;
        }
        let mut listening = listener(&options, H::CHANNEL).await;
        *shared.live() = true;
        hub.resync();
        loop {
            match listening.try_recv().await {
                Ok(Some(n)) => {
                    let mut live = shared.live();
                    if hub.subscribers() == 0 {
                        *live = false;
                        break;
                    }
                    hub.relay(n.payload());
                }
                // The connection was lost; the listener has reconnected and listens again.
                Ok(None) => hub.resync(),
                Err(e) => {
                    tracing::warn!(target: "duet::store", "{}: listener failed ({e}); reconnecting", H::CHANNEL);
                    *shared.live() = false;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_changes_or_nothing() {
        let id = Uuid::now_v7();
        assert_eq!(
            parse_change(&format!("{id} 12 awaiting_human")),
            Some(Change {
                thread: id,
                seq: 12,
                status: ThreadStatus::AwaitingHuman
            })
        );
        for bad in [
            String::new(),
            format!("{id} 12"),
            format!("{id} x idle"),
            format!("{id} 1 idle extra"),
            "nope 1 idle".into(),
            format!("{id} 1 sleeping"),
        ] {
            assert_eq!(parse_change(&bad), None, "{bad:?}");
        }
    }
}
