//! Engine benchmarks (a documented command, not a test):
//!
//! ```sh
//! cargo bench -p duet-cli --bench engine                       # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench engine                     # Postgres (a fresh database)
//! BENCH_PARKED=10000 cargo bench -p duet-cli --bench engine    # fewer parked threads for (c)
//! ```
//!
//! (a) prompt × prompt ping-pong, 1,000 turns in one thread: durable turns/s and database bytes
//!     per turn; (b) approval gate, 1,000 threads: park and resume latency p50/p99;
//! (c) `BENCH_PARKED` (default 100,000) parked threads: database bytes per parked thread, then
//!     a restart (the runtime and the store dropped, the database opened again) and the resume
//!     latency of 1,000 random ones; process RSS before parking, with all parked, after the
//!     restart and after resuming.

#[path = "common/mod.rs"]
mod common;

use std::time::Instant;

use common::{Cleanup, ms, percentile, project, rss_kib, store_at};
use duet_runtime::{CancellationToken, Delivered, EventSink, Runtime, ThreadStatus};

async fn send(rt: &Runtime, key: &str, agent: Option<&str>, text: &str) -> ThreadStatus {
    match rt
        .send(
            key,
            agent,
            text,
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await
    {
        Ok(Delivered::Settled(s)) => s.status,
        other => panic!("{key}: {other:?}"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let _cleanup = Cleanup;
    let turns = 1_000;
    let parked: usize = std::env::var("BENCH_PARKED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let project = project(turns);
    let (store, backend, url) = store_at().await;
    let rt = Runtime::builder(project.clone(), store.clone())
        .providers(duet_models::providers())
        .build();
    println!("backend: {backend}");

    // (a) ping-pong.
    let before = store.size_bytes().await.expect("size");
    let start = Instant::now();
    let status = send(&rt, "pingpong", Some("pingpong"), "Start.").await;
    let took = start.elapsed();
    assert_eq!(status, ThreadStatus::Idle);
    let thread = store
        .thread("pingpong")
        .await
        .expect("read")
        .expect("thread");
    let messages = store.messages(thread.id).await.expect("messages");
    let model_turns = messages.iter().filter(|m| m.model.is_some()).count();
    assert_eq!(model_turns, turns, "the ping-pong ran {model_turns} turns");
    let content: usize = messages
        .iter()
        .filter_map(|m| m.content.as_ref())
        .map(String::len)
        .sum();
    let grown = store.size_bytes().await.expect("size") - before;
    println!(
        "(a) ping-pong: {turns} turns in {:.1} ms = {:.0} durable turns/s; database grew {} bytes = {:.0} bytes/turn (message text {:.1} bytes/turn)",
        ms(took),
        turns as f64 / took.as_secs_f64(),
        grown,
        grown as f64 / turns as f64,
        content as f64 / turns as f64
    );

    // (b) approval gate: park and resume latency.
    let n = 1_000;
    let mut park = Vec::with_capacity(n);
    let mut resume = Vec::with_capacity(n);
    for i in 0..n {
        let key = format!("gate-{i}");
        let t = Instant::now();
        assert_eq!(
            send(&rt, &key, Some("gate"), "Change the firewall?").await,
            ThreadStatus::AwaitingHuman
        );
        park.push(t.elapsed());
    }
    for i in 0..n {
        let key = format!("gate-{i}");
        let t = Instant::now();
        assert_eq!(send(&rt, &key, None, "Approved.").await, ThreadStatus::Idle);
        resume.push(t.elapsed());
    }
    park.sort();
    resume.sort();
    println!(
        "(b) approval gate, {n} threads: park p50 {:.2} ms p99 {:.2} ms; resume p50 {:.2} ms p99 {:.2} ms",
        ms(percentile(&park, 0.5)),
        ms(percentile(&park, 0.99)),
        ms(percentile(&resume, 0.5)),
        ms(percentile(&resume, 0.99))
    );

    // (c) many parked threads.
    let rss_before = rss_kib();
    let size_before = store.size_bytes().await.expect("size");
    let start = Instant::now();
    for i in 0..parked {
        send(
            &rt,
            &format!("parked-{i}"),
            Some("gate"),
            "Change the firewall?",
        )
        .await;
    }
    let parking = start.elapsed();
    let rss_parked = rss_kib();
    let per_thread = store
        .size_bytes()
        .await
        .expect("size")
        .saturating_sub(size_before) as f64
        / parked.max(1) as f64;
    // A restart: nothing of the parked threads is kept but the database.
    drop(rt);
    drop(store);
    let store = duet_store::connect(&url).await.expect("the database again");
    let rt = Runtime::builder(project, store.clone())
        .providers(duet_models::providers())
        .build();
    let rss_restarted = rss_kib();
    let mut lat = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..1_000.min(parked) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("parked-{}", x % parked as u64);
        if store
            .thread(&key)
            .await
            .expect("read")
            .is_some_and(|t| t.status != ThreadStatus::AwaitingHuman)
        {
            continue;
        }
        let t = Instant::now();
        send(&rt, &key, None, "Approved.").await;
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "(c) {parked} parked threads (parked in {:.1} s, {per_thread:.0} database bytes each): after a restart, resume p50 {:.2} ms p99 {:.2} ms over {} random ones; RSS {} MiB before parking, {} MiB with all parked, {} MiB after the restart, {} MiB after resuming",
        parking.as_secs_f64(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        lat.len(),
        rss_before / 1024,
        rss_parked / 1024,
        rss_restarted / 1024,
        rss_kib() / 1024
    );
}
