//! Many sessions at once (a documented command, not a test):
//!
//! ```sh
//! cargo bench -p duet-cli --bench sessions                     # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench sessions                   # Postgres (a fresh database)
//! BENCH_SESSIONS=64 BENCH_TURNS=100 BENCH_GATES=1000 cargo bench -p duet-cli --bench sessions
//! DATABASE_URL=postgres://root@127.0.0.1:5432/shared BENCH_SHARED_DB=1 \
//!   cargo bench -p duet-cli --bench sessions                   # that database, kept (N processes)
//! ```
//!
//! (d) `BENCH_SESSIONS` (default `64,1000`) concurrent prompt × prompt ping-pong sessions of
//!     `BENCH_TURNS` (default 100) turns each, on a two-worker runtime: aggregate durable turns/s,
//!     and the per-turn p50/p99 (the gap between one message's start and the next's in a
//!     session: a commit and a model call); (e) `BENCH_GATES` (default 1,000) approval gates
//!     parked at once, then all answered at once: park and resume p50/p99.
//!
//! `BENCH_CALLS=1` also prints the driver calls per turn, by statement.

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Cleanup, env, key_prefix, ms, percentile, project, store};
use duet_runtime::{
    AgentEvent, CancellationToken, Delivered, EventSink, Runtime, Store, ThreadStatus,
};

/// Sends `text` to `key` and returns how it settled, with the instants its messages started.
async fn timed(
    rt: &Runtime,
    key: &str,
    agent: Option<&str>,
    text: &str,
) -> (ThreadStatus, Vec<Instant>) {
    let (sink, mut rx) = EventSink::channel();
    let starts = tokio::spawn(async move {
        let mut at = Vec::new();
        while let Some(event) = rx.recv().await {
            // The scripted model says each message in one piece: every text event opens one.
            if let AgentEvent::Text { .. } = event {
                at.push(Instant::now());
            }
        }
        at
    });
    let done = rt
        .send(key, agent, text, &sink, &CancellationToken::new())
        .await;
    drop(sink);
    let status = match done {
        Ok(Delivered::Settled(s)) => s.status,
        other => panic!("{key}: {other:?}"),
    };
    (status, starts.await.expect("the reader"))
}

/// `n` ping-pong sessions at once, the `round`th such run (each run's threads are new):
/// (wall time, per-turn gaps).
async fn sessions(rt: &Runtime, round: usize, n: usize, turns: usize) -> (Duration, Vec<Duration>) {
    let start = Instant::now();
    let runs: Vec<_> = (0..n)
        .map(|i| {
            let rt = rt.clone();
            tokio::spawn(async move {
                let key = format!("{}pingpong-{round}-{n}-{i}", key_prefix());
                let (status, starts) = timed(&rt, &key, Some("pingpong"), "Start.").await;
                assert_eq!(status, ThreadStatus::Idle, "{key}");
                assert_eq!(starts.len(), turns, "{key}: {} turns", starts.len());
                starts.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut gaps = Vec::with_capacity(n * turns);
    for run in runs {
        gaps.extend(run.await.expect("a session"));
    }
    (start.elapsed(), gaps)
}

/// Sends `text` to each of `keys` at once; each delivery's latency, sorted.
async fn all_at_once(
    rt: &Runtime,
    keys: Vec<String>,
    agent: Option<&'static str>,
    text: &'static str,
    expect: ThreadStatus,
) -> (Duration, Vec<Duration>) {
    let start = Instant::now();
    let runs: Vec<_> = keys
        .into_iter()
        .map(|key| {
            let rt = rt.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                let done = rt
                    .send(
                        &key,
                        agent,
                        text,
                        &EventSink::discard(),
                        &CancellationToken::new(),
                    )
                    .await;
                match done {
                    Ok(Delivered::Settled(s)) => assert_eq!(s.status, expect, "{key}"),
                    other => panic!("{key}: {other:?}"),
                }
                t.elapsed()
            })
        })
        .collect();
    let mut lat = Vec::new();
    for run in runs {
        lat.push(run.await.expect("a delivery"));
    }
    lat.sort();
    (start.elapsed(), lat)
}

fn main() {
    let _cleanup = Cleanup;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run());
}

async fn run() {
    let turns = env("BENCH_TURNS", 100);
    let gates = env("BENCH_GATES", 1_000);
    let counts: Vec<usize> = std::env::var("BENCH_SESSIONS")
        .unwrap_or_else(|_| "64,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let project = project(turns);
    let (store, backend) = store().await;
    let rt = Runtime::builder(project, store.clone() as Arc<dyn Store>)
        .providers(duet_models::providers())
        .build();
    println!("backend: {backend}");
    common::calls::counter();

    for (round, n) in counts.into_iter().enumerate() {
        let (took, mut gaps) = sessions(&rt, round, n, turns).await;
        gaps.sort();
        println!(
            "(d) {n} concurrent ping-pong sessions x {turns} turns: {:.0} durable turns/s aggregate in {:.2} s; turn p50 {:.2} ms p99 {:.2} ms",
            (n * turns) as f64 / took.as_secs_f64(),
            took.as_secs_f64(),
            ms(percentile(&gaps, 0.5)),
            ms(percentile(&gaps, 0.99)),
        );
        common::calls::report("a turn", n * turns);
    }

    let keys = |n| {
        (0..n)
            .map(|i| format!("{}gate-{i}", key_prefix()))
            .collect::<Vec<_>>()
    };
    let (parking, park) = all_at_once(
        &rt,
        keys(gates),
        Some("gate"),
        "Change the firewall?",
        ThreadStatus::AwaitingHuman,
    )
    .await;
    let (resuming, resume) =
        all_at_once(&rt, keys(gates), None, "Approved.", ThreadStatus::Idle).await;
    println!(
        "(e) {gates} approval gates at once: parked in {:.2} s, park p50 {:.2} ms p99 {:.2} ms; answered in {:.2} s, resume p50 {:.2} ms p99 {:.2} ms",
        parking.as_secs_f64(),
        ms(percentile(&park, 0.5)),
        ms(percentile(&park, 0.99)),
        resuming.as_secs_f64(),
        ms(percentile(&resume, 0.5)),
        ms(percentile(&resume, 0.99)),
    );
}
