//! Durable time in a process: claiming due timers and firing them ([`Runtime::run_due_timers`]),
//! the retry policy ([`retry_delay_ms`]), and the task that sleeps until the next one is due
//! ([`Runtime::serve_timers`]).
//!
//! A claim is not renewed (the timer port has no such call): it lasts
//! [`crate::RuntimeBuilder::timer_claim_ms`], and a fire still running when four fifths of it are
//! gone is dropped and counted as a failed attempt, so a timer is never run by two processes at
//! once unless one of them stalls for the last fifth. Whatever a dropped fire had not committed
//! is not kept; if its commit landed, the timer is `completed` and the retry is refused.

use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::Runtime;
use super::fire::Fired;
use crate::error::RunError;
use crate::store::{StoreError, Timer, TimerOutcome, TimerWake};
use crate::telemetry;

/// How many timers one claim takes, all fired at once (a fire mostly waits on the database or a
/// tool). No more than fire at once: a timer claimed and left waiting for a slot would see its
/// claim's cut-off come before it ever started (an attempt spent without a run), and one
/// process would hold timers other processes could be firing.
const CLAIM_BATCH: usize = 8;
/// The longest the loop sleeps without reading `next_due` again, whatever the wakeups say: a
/// timer written by another process on the same SQLite file (whose wakeups stay in process), or
/// a notification lost on the way, is fired at most this late.
const LONGEST_SLEEP_MS: i64 = 60_000;
/// The first retry's delay; each later one doubles it.
const RETRY_FIRST_MS: i64 = 1_000;
/// The longest delay between two attempts.
const RETRY_CAP_MS: i64 = 300_000;
/// The first pause after a store error (real time: the database, not the clock, is the
/// trouble), doubled on each error in a row up to [`ERROR_PAUSE_CAP`].
const ERROR_PAUSE_FIRST: Duration = Duration::from_millis(250);
const ERROR_PAUSE_CAP: Duration = Duration::from_secs(30);

/// How long after attempt `attempt` (1 for the first) of timer `timer` failed the next one is
/// tried: 1 s doubled per attempt, capped at 5 min, less up to a quarter of that as jitter. The
/// jitter comes from the timer's id and the attempt, not a random source: timers that failed
/// together spread out, and the same timer and attempt always wait the same time (a test on a
/// manual clock knows when to look).
pub fn retry_delay_ms(timer: Uuid, attempt: u32) -> i64 {
    let doublings = attempt.saturating_sub(1).min(20);
    let base = (RETRY_FIRST_MS << doublings).min(RETRY_CAP_MS);
    let jitter = mix(timer.as_u128() ^ u128::from(attempt)) % (base / 4 + 1).unsigned_abs();
    base - i64::try_from(jitter).unwrap_or(0)
}

/// SplitMix64 over the two halves of `x`: a fixed, well-spread hash.
fn mix(x: u128) -> u64 {
    // Truncation is the point: the low and the high half, each folded in.
    #[allow(clippy::cast_possible_truncation)]
    let (lo, hi) = (x as u64, (x >> 64) as u64);
    let mut z = lo ^ hi.rotate_left(32);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `claimed` in groups, one per thread, each in due order: a thread's timers fire one after
/// another (each takes the thread's lease: fired at once, all but one would be deferred, and a
/// reminder would land after the default it was due before), different threads' side by side.
fn by_thread(mut claimed: Vec<Timer>) -> Vec<Vec<Timer>> {
    claimed.sort_by_key(|t| (t.thread, t.due_at, t.id));
    let mut groups: Vec<Vec<Timer>> = Vec::new();
    for timer in claimed {
        match groups.last_mut() {
            Some(group) if group.last().is_some_and(|t| t.thread == timer.thread) => {
                group.push(timer);
            }
            _ => groups.push(vec![timer]),
        }
    }
    groups.sort_by_key(|g| g.first().map(|t| (t.due_at, t.id)));
    groups
}

impl Runtime {
    /// Claims up to one batch of the timers due now (or whose claim ran out), fires them a few
    /// at a time, and records what each came to; how many it claimed. Safe from any number of
    /// processes: each timer is claimed by one.
    pub async fn run_due_timers(&self) -> Result<usize, RunError> {
        Ok(self.timers_due_at(self.now()).await?)
    }

    /// [`Runtime::run_due_timers`] as of `now`.
    async fn timers_due_at(&self, now: i64) -> Result<usize, StoreError> {
        let store = self.store();
        let owner = Uuid::now_v7();
        let until = now + self.inner.timer_claim_ms;
        let claimed = store.claim_due(owner, until, now, CLAIM_BATCH).await?;
        let n = claimed.len();
        let finished: Vec<Result<(), StoreError>> = futures::stream::iter(by_thread(claimed))
            .map(|timers| async move {
                for timer in &timers {
                    self.fire_claimed(timer, owner, until).await?;
                }
                Ok(())
            })
            .buffer_unordered(CLAIM_BATCH)
            .collect()
            .await;
        finished.into_iter().collect::<Result<(), _>>()?;
        Ok(n)
    }

    /// Fires `timer` (claimed by `owner` until `until`) inside its `timer` span and records the
    /// outcome, a retry's time set by [`retry_delay_ms`].
    async fn fire_claimed(&self, timer: &Timer, owner: Uuid, until: i64) -> Result<(), StoreError> {
        let started = self.now();
        let span = telemetry::timer(timer, started - timer.due_at);
        let cutoff = until - self.inner.timer_claim_ms / 5;
        let fired = tokio::select! {
            biased;
            fired = self.fire(timer, owner).instrument(span.clone()) => Some(fired),
            () = self.inner.clock.sleep_until(cutoff) => None,
        };
        let outcome = match fired {
            Some(Fired::Finished) => {
                span.record(telemetry::attr::OUTCOME, "completed");
                return Ok(());
            }
            Some(Fired::Outcome(outcome)) => outcome,
            None => TimerOutcome::Retry {
                at: 0,
                error: format!(
                    "still running after {} ms: stopped before its claim ran out",
                    cutoff - started
                ),
            },
        };
        let (outcome, said) = match outcome {
            TimerOutcome::Retry { error, .. } => {
                let at = self.now() + retry_delay_ms(timer.id, timer.attempts);
                let said = if timer.attempts >= timer.max_attempts {
                    "failed"
                } else {
                    "retried"
                };
                span.record(telemetry::attr::ERROR_TYPE, error.as_str());
                (TimerOutcome::Retry { at, error }, said)
            }
            TimerOutcome::Failed { error } => {
                span.record(telemetry::attr::ERROR_TYPE, error.as_str());
                (TimerOutcome::Failed { error }, "failed")
            }
            TimerOutcome::Completed => (TimerOutcome::Completed, "completed"),
            defer @ TimerOutcome::Defer { .. } => (defer, "deferred"),
        };
        let held = self
            .store()
            .finish_timer(timer.id, owner, outcome, self.now())
            .await?;
        // Not held: another process took the timer over, or the fire's own commit finished it.
        span.record(telemetry::attr::OUTCOME, if held { said } else { "lost" });
        Ok(())
    }

    /// Runs this process's share of the timers until `stop` is cancelled or the runtime shuts
    /// down: fires what is due, then sleeps (on the runtime's clock) until the next timer needs
    /// a process, waking early when a timer is written (by this runtime or, through the store's
    /// wakeups, by any process), and reading `next_due` again after a minute at most (a timer
    /// another process wrote to the same SQLite file is not heard of). A store error
    /// pauses it (250 ms, doubling to 30 s) rather than retrying at once. Run it once per
    /// process, beside recovery.
    pub async fn serve_timers(&self, stop: CancellationToken) {
        // Ends with the runtime's shutdown as well as with the caller's token (the watcher ends
        // when this returns: the guard cancels its token).
        let stop = stop.child_token();
        let _ends_watcher = stop.clone().drop_guard();
        let (detached, halt) = (self.inner.detached.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = detached.cancelled() => halt.cancel(),
                () = halt.cancelled() => {}
            }
        });
        let mut pause = ERROR_PAUSE_FIRST;
        while !stop.is_cancelled() {
            match self.timers_round(&stop).await {
                Ok(()) => pause = ERROR_PAUSE_FIRST,
                Err(e) => {
                    tracing::warn!(error = %e, pause_ms = pause.as_millis(), "running timers failed; trying again after a pause");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(ERROR_PAUSE_CAP);
                }
            }
        }
    }

    /// One wake of [`Runtime::serve_timers`]: subscribe, fire what is due, sleep until the next
    /// due time or an earlier wakeup; returns to be called again.
    async fn timers_round(&self, stop: &CancellationToken) -> Result<(), RunError> {
        // Subscribed before reading the table, so a timer written in between still wakes us.
        let mut wakes = futures::stream::select(
            self.store().timer_wakeups(),
            self.inner.timer_wakes.subscribe(),
        );
        // Each subscription opens with a `Resync`: the read below is that resync.
        let mut idle = 0u32;
        loop {
            let (mut claimed, mut as_of) = (0, self.now());
            while !stop.is_cancelled() {
                as_of = self.now();
                let n = self.timers_due_at(as_of).await?;
                claimed += n;
                if n < CLAIM_BATCH {
                    break;
                }
            }
            let at = match self.store().next_due().await? {
                // More came due while these fired (or the clock moved): claim again.
                Some(at) if at <= as_of && claimed > 0 => continue,
                Some(at) if at > as_of && at <= self.now() => continue,
                // Due as of the claim, yet nothing was claimable (a claim that runs out at
                // `as_of` is taken only after it): a short pause on the clock, growing, so this
                // never spins.
                Some(at) if at <= as_of => {
                    idle = (idle + 1).min(10);
                    Some(as_of + (1i64 << idle))
                }
                other => {
                    idle = 0;
                    other
                }
            };
            // Sleeps until `at` (or for good), re-armed by an earlier wakeup; returns when a
            // resync or an earlier timer asks for the table to be read again.
            let longest = self.now() + LONGEST_SLEEP_MS;
            let sleep = self
                .inner
                .clock
                .sleep_until(at.map_or(longest, |at| at.min(longest)));
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    () = &mut sleep => break,
                    wake = wakes.next() => match wake {
                        Some(TimerWake::Due(due)) if at.is_some_and(|at| due >= at) => {}
                        Some(_) => break,
                        // The subscription ended: subscribe again, after the pause an error gets.
                        None => {
                            return Err(RunError::Store(StoreError::backend(
                                std::io::Error::other("the timer wakeups ended"),
                            )));
                        }
                    },
                }
            }
        }
    }
}
