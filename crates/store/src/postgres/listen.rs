//! The receiving end of the Postgres change feed: a task per store that `LISTEN`s on
//! [`CHANNEL`] while the store has subscribers (and only then: delivering notifications to a
//! listener costs every notifying commit, so a store nobody follows does not listen) and fans
//! the notifications out to them. Its connection lost, it reconnects (backing off up to 5 s) and
//! sends a resync, since what was notified meanwhile is gone.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use duet_runtime::{Change, ChangeHub, FeedEvent, ThreadStatus};
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::Notify;
use uuid::Uuid;

/// The notification channel of the change feed.
pub(crate) const CHANNEL: &str = "duet_changes";

/// A store's end of the change feed: its subscribers' hub and the task listening for them. The
/// task stops when the feed is dropped.
#[derive(Debug)]
pub(crate) struct Feed {
    hub: ChangeHub,
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

impl Drop for Feed {
    fn drop(&mut self) {
        self.relay.abort();
    }
}

impl Feed {
    /// The feed of the database `options` connect to; it listens once it has a subscriber.
    pub(crate) fn start(options: PgConnectOptions) -> Self {
        let hub = ChangeHub::default();
        let shared = Arc::new(Shared::default());
        let relay = tokio::spawn(relay(options, hub.clone(), shared.clone()));
        Feed { hub, shared, relay }
    }

    /// A subscription: its opening resync comes at once if the relay is listening, else from the
    /// relay once it is.
    pub(crate) fn subscribe(&self) -> BoxStream<'static, FeedEvent> {
        let live = self.shared.live();
        let rx = self.hub.subscribe_silently();
        if *live {
            stream::once(async { FeedEvent::Resync }).chain(rx).boxed()
        } else {
            self.shared.wanted.notify_one();
            rx
        }
    }
}

/// A listener on [`CHANNEL`], on a connection of its own (a pool of one, which is how
/// `PgListener` reconnects); retried until it connects.
async fn listener(options: &PgConnectOptions) -> PgListener {
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
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        match attempt.await {
            Ok(listener) => return listener,
            Err(e) => {
                tracing::warn!(target: "duet::store", "change feed: cannot listen ({e}); retrying");
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

/// Waits for subscribers, listens while there are any, and relays what it hears. A payload that
/// is not a change (a foreign writer on the channel) is a resync: re-reading is always safe.
async fn relay(options: PgConnectOptions, hub: ChangeHub, shared: Arc<Shared>) {
    loop {
        while hub.subscribers() == 0 {
            shared.wanted.notified().await;
        }
        let mut listening = listener(&options).await;
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
                    match parse_change(n.payload()) {
                        Some(change) => hub.publish(change),
                        None => hub.resync(),
                    }
                }
                // The connection was lost; the listener has reconnected and listens again.
                Ok(None) => hub.resync(),
                Err(e) => {
                    tracing::warn!(target: "duet::store", "change feed: listener failed ({e}); reconnecting");
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
