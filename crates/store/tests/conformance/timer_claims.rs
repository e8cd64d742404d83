//! The timer table's claims: the earliest due first, one process at a time (on Postgres, many
//! claimers at once each taking different timers), a claim that runs out taken over, finished by
//! its holder only (retried, failed, deferred), counted, and announced to subscribers (on
//! Postgres, across processes); with ten thousand pending, still the earliest.

use super::timers::{all, claim, effect, get, ids, leased, schedule};
use super::*;
use std::collections::BTreeSet;
use std::time::Duration;

use duet_runtime::{
    CancelOutcome, NewTimer, TimerCounts, TimerOutcome, TimerQuery, TimerStatus, TimerWake,
};
use futures::StreamExt;

#[tokio::test]
async fn claim_due_takes_the_earliest_due_first_up_to_its_limit() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "k").await;
        let tied = [effect("tie", 20), effect("tie", 20)];
        let timers = [
            effect("c", 30),
            effect("a", 10),
            tied[1].clone(),
            tied[0].clone(),
            effect("later", 50),
        ];
        schedule(&store, &mut t, owner, &timers).await;
        let claimer = Uuid::now_v7();
        let mut ties: Vec<Uuid> = tied.iter().map(|t| t.id).collect();
        ties.sort();
        let first = claim(&store, claimer, 1_040, 40, 3).await;
        assert_eq!(
            ids(&first),
            [timers[1].id, ties[0], ties[1]],
            "{name}: by due time, then id"
        );
        for c in &first {
            assert_eq!(c.status, TimerStatus::Processing, "{name}");
            assert_eq!(
                (c.attempts, c.claimed_by, c.claimed_until, c.updated_at),
                (1, Some(claimer), Some(1_040), 40),
                "{name}"
            );
            assert_eq!(&get(&store, c.id).await, c, "{name}: as stored");
        }
        assert_eq!(
            ids(&claim(&store, claimer, 1_040, 40, 10).await),
            [timers[0].id],
            "{name}: not the one due later"
        );
        assert!(
            claim(&store, claimer, 1_040, 40, 10).await.is_empty(),
            "{name}"
        );
        assert!(
            claim(&store, claimer, 1_040, 40, 0).await.is_empty(),
            "{name}"
        );
        assert_eq!(
            ids(&claim(&store, claimer, 1_050, 50, 10).await),
            [timers[4].id],
            "{name}: due at 50 is due at 50"
        );
    })
    .await;
}

#[tokio::test]
async fn a_claim_that_runs_out_is_taken_over_and_only_the_holder_finishes() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "k").await;
        let timer = effect("slow", 10);
        schedule(&store, &mut t, owner, std::slice::from_ref(&timer)).await;
        let (dead, alive) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(claim(&store, dead, 100, 50, 10).await.len(), 1);
        for now in [60, 100] {
            assert!(
                claim(&store, alive, now + 100, now, 10).await.is_empty(),
                "{name}: held until 100"
            );
        }
        let taken = claim(&store, alive, 201, 101, 10).await;
        assert_eq!(ids(&taken), [timer.id], "{name}");
        assert_eq!(
            (taken[0].attempts, taken[0].claimed_by),
            (2, Some(alive)),
            "{name}: the attempt counted"
        );
        assert!(
            !store
                .finish_timer(timer.id, dead, TimerOutcome::Completed, 150)
                .await
                .expect("finish"),
            "{name}: the dead claim is gone"
        );
        assert_eq!(
            get(&store, timer.id).await.status,
            TimerStatus::Processing,
            "{name}"
        );
        assert!(
            store
                .finish_timer(timer.id, alive, TimerOutcome::Completed, 160)
                .await
                .expect("finish"),
            "{name}"
        );
        let done = get(&store, timer.id).await;
        assert_eq!(
            (
                done.status,
                done.claimed_by,
                done.claimed_until,
                done.updated_at
            ),
            (TimerStatus::Completed, None, None, 160),
            "{name}"
        );
        assert!(
            !store
                .finish_timer(timer.id, alive, TimerOutcome::Completed, 170)
                .await
                .expect("finish"),
            "{name}: once"
        );
        assert!(
            !store
                .finish_timer(Uuid::now_v7(), alive, TimerOutcome::Completed, 170)
                .await
                .expect("finish"),
            "{name}"
        );
    })
    .await;
}

#[tokio::test]
async fn retries_come_back_pending_until_the_last_attempt_fails_and_a_deferral_costs_none() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "k").await;
        let flaky = NewTimer {
            max_attempts: 2,
            ..effect("flaky", 10)
        };
        let broken = effect("broken", 10);
        let busy = NewTimer {
            max_attempts: 1,
            ..effect("busy", 10)
        };
        schedule(
            &store,
            &mut t,
            owner,
            &[flaky.clone(), broken.clone(), busy.clone()],
        )
        .await;
        let run = Uuid::now_v7();
        assert_eq!(claim(&store, run, 1_000, 20, 10).await.len(), 3);
        let retry = |at, error: &str| TimerOutcome::Retry {
            at,
            error: error.into(),
        };
        assert!(
            store
                .finish_timer(flaky.id, run, retry(500, "first"), 30)
                .await
                .expect("finish")
        );
        let back = get(&store, flaky.id).await;
        assert_eq!(
            (
                back.status,
                back.due_at,
                back.attempts,
                back.last_error.as_deref(),
                back.claimed_by,
                back.updated_at
            ),
            (TimerStatus::Pending, 500, 1, Some("first"), None, 30),
            "{name}"
        );
        assert!(
            store
                .finish_timer(
                    broken.id,
                    run,
                    TimerOutcome::Failed {
                        error: "never".into()
                    },
                    30
                )
                .await
                .expect("finish")
        );
        let failed = get(&store, broken.id).await;
        assert_eq!(
            (failed.status, failed.last_error.as_deref()),
            (TimerStatus::Failed, Some("never")),
            "{name}"
        );
        // The attempt given back: it may still run once.
        assert!(
            store
                .finish_timer(busy.id, run, TimerOutcome::Defer { at: 400 }, 30)
                .await
                .expect("finish")
        );
        let deferred = get(&store, busy.id).await;
        assert_eq!(
            (deferred.status, deferred.due_at, deferred.attempts),
            (TimerStatus::Pending, 400, 0),
            "{name}"
        );

        let again = claim(&store, run, 2_000, 600, 10).await;
        assert_eq!(ids(&again), [busy.id, flaky.id], "{name}");
        assert!(
            store
                .finish_timer(flaky.id, run, retry(900, "second"), 610)
                .await
                .expect("finish")
        );
        let last = get(&store, flaky.id).await;
        assert_eq!(
            (
                last.status,
                last.due_at,
                last.attempts,
                last.last_error.as_deref()
            ),
            (TimerStatus::Failed, 500, 2, Some("second")),
            "{name}: its last attempt failed"
        );
        assert!(
            store
                .finish_timer(busy.id, run, retry(900, "once"), 610)
                .await
                .expect("finish")
        );
        assert_eq!(
            get(&store, busy.id).await.status,
            TimerStatus::Failed,
            "{name}"
        );
        assert_eq!(
            store.next_due().await.expect("next"),
            None,
            "{name}: nothing waits"
        );
    })
    .await;
}

#[tokio::test]
async fn counts_and_the_next_due_time_follow_the_table() {
    each(async |store, name| {
        assert_eq!(store.next_due().await.expect("next"), None, "{name}");
        assert_eq!(
            store.timer_counts(0).await.expect("counts"),
            TimerCounts::default(),
            "{name}"
        );
        let (mut t, owner) = leased(&store, "k").await;
        let timers = [
            effect("a", 100),
            effect("b", 200),
            effect("c", 300),
            effect("d", 400),
        ];
        schedule(&store, &mut t, owner, &timers).await;
        assert_eq!(store.next_due().await.expect("next"), Some(100), "{name}");
        let counts = |pending, due, processing, failed| TimerCounts {
            pending,
            due,
            processing,
            failed,
        };
        assert_eq!(
            store.timer_counts(250).await.expect("counts"),
            counts(2, 2, 0, 0),
            "{name}"
        );
        // Claimed: the claim's end is when it needs a process again.
        let run = Uuid::now_v7();
        assert_eq!(claim(&store, run, 150, 100, 1).await.len(), 1);
        assert_eq!(store.next_due().await.expect("next"), Some(150), "{name}");
        assert!(
            store
                .finish_timer(
                    timers[0].id,
                    run,
                    TimerOutcome::Failed { error: "x".into() },
                    120
                )
                .await
                .expect("finish")
        );
        assert_eq!(store.next_due().await.expect("next"), Some(200), "{name}");
        assert!(matches!(
            store.cancel_timer(timers[1].id, 130).await.expect("cancel"),
            CancelOutcome::Cancelled(_)
        ));
        assert_eq!(store.next_due().await.expect("next"), Some(300), "{name}");
        assert_eq!(claim(&store, run, 5_000, 300, 1).await.len(), 1);
        assert_eq!(
            store.next_due().await.expect("next"),
            Some(400),
            "{name}: the pending one is earlier than the claim's end"
        );
        assert_eq!(
            store.timer_counts(350).await.expect("counts"),
            counts(1, 0, 1, 1),
            "{name}"
        );
        assert_eq!(
            store.timer_counts(400).await.expect("counts"),
            counts(0, 1, 1, 1),
            "{name}"
        );
    })
    .await;
}

/// Waits for `Due(at)` on `wakes`, skipping anything else; fails the test after 10 s.
async fn hear_due(wakes: &mut futures::stream::BoxStream<'static, TimerWake>, at: i64, what: &str) {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), wakes.next()).await {
            Ok(Some(TimerWake::Due(due))) if due == at => return,
            Ok(Some(_)) => {}
            Ok(None) => panic!("{what}: the wakeups ended"),
            Err(_) => panic!("{what}: no wakeup for {at} within 10 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_written_or_put_back_wake_subscribers_in_other_processes_too() {
    for backend in support::store_backends().await {
        let name = backend.name();
        let store = backend.open().await;
        // On Postgres a second store on the database: another process. (A SQLite store hears
        // its own process's writes, as its change feed does.)
        let listener = match backend {
            support::Backend::Postgres(_) => backend.open().await,
            _ => store.clone(),
        };
        let mut wakes = listener.timer_wakeups();
        match tokio::time::timeout(Duration::from_secs(10), wakes.next()).await {
            Ok(Some(TimerWake::Resync)) => {}
            other => panic!("{name}: a subscription opens with a resync, not {other:?}"),
        }
        let (mut t, owner) = leased(&store, "k").await;
        let (late, early) = (effect("late", 9_000), effect("early", 3_000));
        schedule(&store, &mut t, owner, &[late, early.clone()]).await;
        hear_due(&mut wakes, 3_000, name).await;
        let run = Uuid::now_v7();
        assert_eq!(claim(&store, run, 9_000, 3_000, 1).await.len(), 1);
        let retry = TimerOutcome::Retry {
            at: 4_000,
            error: "again".into(),
        };
        assert!(
            store
                .finish_timer(early.id, run, retry, 3_100)
                .await
                .expect("finish")
        );
        hear_due(&mut wakes, 4_000, name).await;
        assert_eq!(claim(&store, run, 9_000, 4_000, 1).await.len(), 1);
        assert!(
            store
                .finish_timer(early.id, run, TimerOutcome::Defer { at: 5_000 }, 4_100)
                .await
                .expect("finish")
        );
        hear_due(&mut wakes, 5_000, name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_claim_every_due_timer_exactly_once() {
    for backend in support::store_backends().await {
        let name = backend.name();
        // Two stores on one database: two processes, four claimers each.
        let (one, two) = (backend.open().await, backend.open().await);
        let (mut t, owner) = leased(&one, "k").await;
        let due: Vec<NewTimer> = (0..500).map(|i| effect("due", i % 37)).collect();
        schedule(&one, &mut t, owner, &due).await;
        let later = effect("later", 10_000);
        schedule(&one, &mut t, owner, std::slice::from_ref(&later)).await;
        let claimers: Vec<_> = (0..8)
            .map(|i| {
                let store = if i % 2 == 0 { one.clone() } else { two.clone() };
                tokio::spawn(async move {
                    let me = Uuid::now_v7();
                    let mut mine = Vec::new();
                    loop {
                        let got = claim(&store, me, 60_000, 1_000, 16).await;
                        if got.is_empty() {
                            return mine;
                        }
                        assert!(
                            got.iter()
                                .all(|t| t.claimed_by == Some(me) && t.attempts == 1)
                        );
                        mine.extend(got.into_iter().map(|t| t.id));
                    }
                })
            })
            .collect();
        let mut claimed = Vec::new();
        for c in claimers {
            claimed.extend(c.await.expect("joins"));
        }
        let unique: BTreeSet<Uuid> = claimed.iter().copied().collect();
        assert_eq!(unique.len(), claimed.len(), "{name}: a timer claimed twice");
        assert_eq!(
            unique,
            due.iter().map(|t| t.id).collect(),
            "{name}: every due timer, only those"
        );
        assert_eq!(
            get(&one, later.id).await.status,
            TimerStatus::Pending,
            "{name}"
        );
    }
}

#[tokio::test]
async fn with_ten_thousand_pending_the_next_due_and_the_first_claimed_are_the_earliest() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "k").await;
        // Due times spread out of order: 10,000 distinct ones, written in ten commits.
        let timers: Vec<NewTimer> = (0..10_000i64)
            .map(|i| effect("bulk", 1_000 + (i * 7_919) % 10_000))
            .collect();
        for chunk in timers.chunks(1_000) {
            schedule(&store, &mut t, owner, chunk).await;
        }
        assert_eq!(store.next_due().await.expect("next"), Some(1_000), "{name}");
        let counts = store.timer_counts(1_499).await.expect("counts");
        assert_eq!((counts.due, counts.pending), (500, 9_500), "{name}");
        let claimed = claim(&store, Uuid::now_v7(), 90_000, 5_000, 5).await;
        assert_eq!(
            claimed.iter().map(|t| t.due_at).collect::<Vec<_>>(),
            [1_000, 1_001, 1_002, 1_003, 1_004],
            "{name}"
        );
        assert_eq!(store.next_due().await.expect("next"), Some(1_005), "{name}");
        let last = store
            .timers(&TimerQuery {
                after: Some((10_998, Uuid::max())),
                ..all(10)
            })
            .await
            .expect("list");
        assert_eq!(
            last.iter().map(|t| t.due_at).collect::<Vec<_>>(),
            [10_999],
            "{name}"
        );
    })
    .await;
}
