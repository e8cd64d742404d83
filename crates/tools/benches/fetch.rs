//! The fetch benchmark (a documented command, not a test): code's `fetch` ([`CodeFetcher`])
//! against a tiny server on 127.0.0.1 in this process.
//!
//! ```sh
//! cargo bench -p duet-tools --bench fetch
//! BENCH_RUNS=5000 cargo bench -p duet-tools --bench fetch
//! ```
//!
//! (a) `BENCH_RUNS` (default 2,000) warm GETs one after another through an exact `IP:port`
//!     grant (the shared client; the server closes each connection, so every request
//!     connects): p50/p99;
//! (b) the same as POSTs of a 1 KiB body (the `Idempotency-Key` added);
//! (c) what a pinned client costs to build (a name's first request, or one that resolved to
//!     other addresses): the cost the fetcher's cache of pinned clients saves the requests
//!     after it. p50/p99 over 50.

// The tests' server; the bench uses part of it.
#[allow(dead_code)]
#[path = "../tests/fetch/responder.rs"]
mod responder;

use std::time::{Duration, Instant};

use duet_runtime::{FetchRequest, Fetcher};
use duet_tools::{CodeFetcher, FetchPolicy};
use responder::{Received, Reply, Responder};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort_unstable();
    println!(
        "{what}: p50 {:.3} ms, p99 {:.3} ms over {}",
        percentile(&times, 0.5).as_secs_f64() * 1000.0,
        percentile(&times, 0.99).as_secs_f64() * 1000.0,
        times.len()
    );
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut server = Responder::start(|_: &Received| Reply::ok("ok")).await;
    let fetcher = CodeFetcher::new(FetchPolicy {
        allow: vec![format!("127.0.0.1:{}", server.port)],
        ..FetchPolicy::default()
    });
    let url = format!("{}/bench?q=1", server.base);
    for (what, method, body) in [
        ("(a) GET", "GET", None),
        ("(b) POST 1 KiB", "POST", Some(vec![b'x'; 1024])),
    ] {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let request = FetchRequest {
                method: method.to_owned(),
                url: url.clone(),
                headers: vec![("Accept".into(), "text/plain".into())],
                body: body.clone(),
                idempotency_key: "thread:call_1".into(),
            };
            let started = Instant::now();
            let response = fetcher.fetch(request).await.expect("an answer");
            times.push(started.elapsed());
            assert_eq!(response.status, 200);
            server.next().await;
        }
        report(what, times);
    }
    let addrs = ["93.184.215.14:443".parse().expect("an address")];
    let mut times = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .resolve_to_addrs("api.example.com", &addrs)
            .build()
            .expect("a client");
        times.push(started.elapsed());
        drop(client);
    }
    report("(c) building a pinned client", times);
}
