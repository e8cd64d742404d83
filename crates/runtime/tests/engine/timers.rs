//! Durable time in a process: the timer loop (`Runtime::serve_timers`) on a manual clock fires a
//! timer once the clock passes its due time and not before, re-arms when an earlier timer is
//! written while it sleeps, and a new runtime on the same store fires what an old one left
//! (pending, or claimed by a process that died); a failing timer's next attempt follows the
//! backoff policy (`retry_delay_ms`). On every backend. Nothing here sleeps: the tests wait on
//! what the effects report.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::{
    CancellationToken, Commit, Effect, HandlerError, Lease, ManualClock, NewThread, NewTimer,
    Runtime, Store, ThreadState, TimerKind, TimerStatus, retry_delay_ms,
};
use tokio::sync::mpsc;
use uuid::Uuid;

/// A hang guard, not a timing: far longer than any of these takes.
const HANG: Duration = Duration::from_secs(30);

/// One agent, and the effects `ping` (reports its `n` argument) and `fail` (always fails).
fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("timers");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/a.yaml",
        "name: a\nsideA: { prompt: p }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/p.yaml",
        "name: p\ntoolDescription: d\nmodel: m\nprompt: p\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript: []\n",
    );
    write(
        "agents/effects/ping.yaml",
        "description: Reports that it ran.\nbuiltin: ping\n",
    );
    write(
        "agents/effects/fail.yaml",
        "description: Always fails.\nbuiltin: fail\nmaxAttempts: 3\n",
    );
    dir.project()
}

/// Reports each run's `n`.
struct Ping(mpsc::UnboundedSender<i64>);

#[async_trait]
impl Effect for Ping {
    async fn run(
        &self,
        _state: &mut ThreadState<'_>,
        args: &serde_json::Value,
    ) -> Result<(), HandlerError> {
        let _ = self.0.send(args["n"].as_i64().unwrap_or(-1));
        Ok(())
    }
}

/// Fails every run.
struct Fail;

#[async_trait]
impl Effect for Fail {
    async fn run(
        &self,
        _: &mut ThreadState<'_>,
        _: &serde_json::Value,
    ) -> Result<(), HandlerError> {
        Err(HandlerError::new("it broke"))
    }
}

struct Setup {
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    pings: mpsc::UnboundedReceiver<i64>,
    rt: Runtime,
}

const START: i64 = 1_000_000;

fn runtime(
    store: &Arc<dyn Store>,
    clock: &Arc<ManualClock>,
) -> (Runtime, mpsc::UnboundedReceiver<i64>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let rt = support::runtime(project(), store.clone())
        .clock(clock.clone())
        .timer_claim_ms(60_000)
        .effect("ping", Ping(tx))
        .effect("fail", Fail)
        .build();
    (rt, rx)
}

async fn setup(store: Arc<dyn Store>) -> Setup {
    let clock = Arc::new(ManualClock::new(START));
    let (rt, pings) = runtime(&store, &clock);
    Setup {
        store,
        clock,
        pings,
        rt,
    }
}

/// An effect timer `name` with argument `n`, due at `at`.
fn timer(name: &str, n: i64, at: i64, max_attempts: u32) -> NewTimer {
    NewTimer {
        id: Uuid::now_v7(),
        kind: TimerKind::Effect,
        name: name.to_owned(),
        args: serde_json::json!({ "n": n }),
        subject: None,
        due_at: at,
        max_attempts,
    }
}

/// Writes `timers` on thread `key` (opened if new) in one commit, as a step that scheduled them
/// would, and gives the thread's lease back.
async fn schedule(store: &Arc<dyn Store>, key: &str, timers: Vec<NewTimer>, now: i64) {
    let t = store
        .open_thread(
            key,
            NewThread {
                id: Uuid::now_v7(),
                agent: "a",
                parent: None,
                principal: None,
                source: None,
                now,
            },
        )
        .await
        .expect("open");
    let owner = Uuid::now_v7();
    let lease = Lease {
        owner,
        until: now + 10_000,
        now,
    };
    assert!(
        store.claim(t.id, lease).await.expect("claim"),
        "thread free"
    );
    let commit = Commit {
        timers,
        settle: true,
        ..Commit::default()
    };
    store.commit(&t, owner, commit).await.expect("commit");
}

async fn next(pings: &mut mpsc::UnboundedReceiver<i64>, what: &str) -> i64 {
    let Ok(got) = tokio::time::timeout(HANG, pings.recv()).await else {
        panic!("{what}: no timer fired");
    };
    got.expect("the runtime lives")
}

/// Starts the loop; cancel the token to stop it.
fn serve(rt: &Runtime) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let (rt, token) = (rt.clone(), stop.clone());
    (
        stop,
        tokio::spawn(async move { rt.serve_timers(token).await }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_fires_a_timer_once_the_clock_passes_its_due_time_and_not_before() {
    for backend in support::backends().await {
        let name = backend.name();
        let mut s = setup(backend.open().await).await;
        let (stop, task) = serve(&s.rt);
        schedule(
            &s.store,
            "k",
            vec![timer("ping", 1, START + 60_000, 1)],
            START,
        )
        .await;
        // One millisecond short: a marker due now fires; the timer, in due order after it, not.
        s.clock.advance(59_999);
        schedule(&s.store, "m", vec![timer("ping", 0, START, 1)], START).await;
        assert_eq!(
            next(&mut s.pings, &format!("{name}: the marker")).await,
            0,
            "{name}: the marker"
        );
        assert!(s.pings.try_recv().is_err(), "{name}: not yet due");
        s.clock.advance(1);
        assert_eq!(
            next(&mut s.pings, &format!("{name}: due, fired")).await,
            1,
            "{name}: due, fired"
        );
        stop.cancel();
        task.await.expect("the loop ends when stopped");
        assert!(s.pings.try_recv().is_err(), "{name}: fired once");
        let done = s
            .store
            .timers(&duet_runtime::TimerQuery {
                status: Some(TimerStatus::Completed),
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("timers");
        assert_eq!(done.len(), 2, "{name}: both completed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_timer_written_while_the_loop_sleeps_re_arms_it() {
    for backend in support::backends().await {
        let name = backend.name();
        let mut s = setup(backend.open().await).await;
        let (stop, task) = serve(&s.rt);
        // The loop sleeps until an hour from now…
        schedule(
            &s.store,
            "late",
            vec![timer("ping", 2, START + 3_600_000, 1)],
            START,
        )
        .await;
        schedule(&s.store, "m", vec![timer("ping", 0, START, 1)], START).await;
        assert_eq!(
            next(&mut s.pings, &format!("{name}: the marker")).await,
            0,
            "{name}: the marker"
        );
        // …until a timer due in a minute is written; the clock moves only that minute.
        schedule(
            &s.store,
            "soon",
            vec![timer("ping", 1, START + 60_000, 1)],
            START,
        )
        .await;
        s.clock.advance(60_000);
        assert_eq!(
            next(
                &mut s.pings,
                &format!("{name}: re-armed for the earlier one")
            )
            .await,
            1,
            "{name}: re-armed for the earlier one"
        );
        assert!(s.pings.try_recv().is_err(), "{name}: the later one waits");
        s.clock.advance(3_540_000);
        assert_eq!(
            next(&mut s.pings, &format!("{name}: then the later one")).await,
            2,
            "{name}: then the later one"
        );
        stop.cancel();
        task.await.expect("the loop ends");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_runtime_fires_what_the_last_one_left_pending_or_claimed() {
    for backend in support::backends().await {
        let name = backend.name();
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(START));
        schedule(&store, "k", vec![timer("ping", 1, START + 1_000, 3)], START).await;
        schedule(&store, "j", vec![timer("ping", 2, START + 2_000, 1)], START).await;
        // A process claimed the first one and died holding it (its claim runs out in 60 s).
        clock.advance(1_000);
        let dead = store
            .claim_due(Uuid::now_v7(), START + 61_000, START + 1_000, 1)
            .await
            .expect("claim");
        assert_eq!(dead.len(), 1, "{name}: claimed by the dead process");
        // A restart: a new runtime reads the next due time from the table.
        let (rt, mut pings) = runtime(&store, &clock);
        let (stop, task) = serve(&rt);
        clock.advance(1_000);
        assert_eq!(
            next(&mut pings, &format!("{name}: the pending one")).await,
            2,
            "{name}: the pending one"
        );
        assert!(
            pings.try_recv().is_err(),
            "{name}: the claimed one waits for its claim"
        );
        clock.advance(60_000);
        assert_eq!(
            next(
                &mut pings,
                &format!("{name}: taken over once the claim ran out")
            )
            .await,
            1,
            "{name}: taken over once the claim ran out"
        );
        // Stopped, the loop has finished its fires (the effect reports before its commit).
        stop.cancel();
        task.await.expect("the loop ends");
        let t = store.timer(dead[0].id).await.expect("read").expect("there");
        assert_eq!(
            (t.status, t.attempts),
            (TimerStatus::Completed, 2),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_failing_timer_is_tried_again_on_the_backoff_policy_then_failed() {
    for backend in support::backends().await {
        let name = backend.name();
        let s = setup(backend.open().await).await;
        let failing = timer("fail", 0, START, 3);
        let id = failing.id;
        schedule(&s.store, "k", vec![failing], START).await;
        for attempt in 1..=3u32 {
            assert_eq!(s.rt.run_due_timers().await.expect("run"), 1, "{name}");
            let t = s.store.timer(id).await.expect("read").expect("there");
            assert_eq!(t.attempts, attempt, "{name}");
            assert!(
                t.last_error
                    .as_deref()
                    .is_some_and(|e| e.contains("it broke")),
                "{name}: {:?}",
                t.last_error
            );
            if attempt == 3 {
                assert_eq!(t.status, TimerStatus::Failed, "{name}: out of attempts");
                break;
            }
            let wait = retry_delay_ms(id, attempt);
            assert_eq!(t.status, TimerStatus::Pending, "{name}");
            assert_eq!(t.due_at, s.rt.now_ms() + wait, "{name}: attempt {attempt}");
            // Not a moment before.
            s.clock.advance(wait - 1);
            assert_eq!(s.rt.run_due_timers().await.expect("run"), 0, "{name}");
            s.clock.advance(1);
        }
    }
}

/// The policy itself: 1 s doubled per attempt, capped at 5 min, less at most a quarter of
/// jitter that depends only on the timer and the attempt.
#[test]
fn the_retry_delay_doubles_from_a_second_to_five_minutes_with_bounded_jitter() {
    for _ in 0..50 {
        let id = Uuid::now_v7();
        for attempt in 1..=30u32 {
            let base = (1_000i64 << (attempt - 1).min(20)).min(300_000);
            let wait = retry_delay_ms(id, attempt);
            assert!(
                wait <= base && wait >= base - base / 4,
                "attempt {attempt}: {wait} against {base}"
            );
            assert_eq!(wait, retry_delay_ms(id, attempt), "deterministic");
        }
    }
    // Timers that failed together do not all come back at once.
    let spread: std::collections::BTreeSet<i64> =
        (0..20).map(|_| retry_delay_ms(Uuid::now_v7(), 4)).collect();
    assert!(spread.len() > 10, "{spread:?}");
}
