//! Time comes through a [`Clock`], so decisions never read the wall clock directly and tests can
//! run on a manual one. A clock also says when a time has come ([`Clock::sleep_until`]): the
//! timers wait on it, so a test moves time forward instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};

use futures::future::BoxFuture;

/// Milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// Now, in ms since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Resolves once `now_ms() >= at_ms` (at once if it is already).
    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'static, ()>;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }

    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'static, ()> {
        let wait = at_ms.saturating_sub(self.now_ms()).max(0);
        let wait = std::time::Duration::from_millis(u64::try_from(wait).unwrap_or(0));
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A clock that only moves when told to; whoever sleeps on it wakes when it is moved past their
/// time.
#[derive(Debug, Default)]
pub struct ManualClock {
    /// Shared with sleepers, which cannot borrow the clock.
    now: std::sync::Arc<AtomicI64>,
    moved: std::sync::Arc<tokio::sync::Notify>,
}

impl ManualClock {
    /// A clock stopped at `start_ms` (ms since the Unix epoch).
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            now: std::sync::Arc::new(AtomicI64::new(start_ms)),
            moved: std::sync::Arc::default(),
        }
    }

    /// Moves the clock forward by `ms` milliseconds, waking whoever sleeps until then.
    pub fn advance(&self, ms: i64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
        self.moved.notify_waiters();
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'static, ()> {
        let moved = self.moved.clone();
        let now = self.now.clone();
        Box::pin(async move {
            loop {
                let notified = moved.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if now.load(Ordering::SeqCst) >= at_ms {
                    return;
                }
                notified.await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sleeper_on_a_manual_clock_wakes_when_the_clock_passes_its_time_and_not_before() {
        let clock = ManualClock::new(1_000);
        let mut sleeper = tokio::spawn(clock.sleep_until(1_500));
        clock.advance(499);
        tokio::task::yield_now().await;
        assert!(
            futures::poll!(&mut sleeper).is_pending(),
            "499 ms short of its time"
        );
        clock.advance(1);
        sleeper.await.expect("woken at its time");
        // A time already past resolves at once.
        clock.sleep_until(0).await;
    }
}
