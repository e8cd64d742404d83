//! The server benchmark (a documented command, not a test): `duet serve` in this process on
//! 127.0.0.1, driven over HTTP by a client in the same process.
//!
//! ```sh
//! cargo bench -p duet-cli --bench server                        # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench server                      # Postgres (a fresh database)
//! BENCH_SERVER_PARKED=10000 cargo bench -p duet-cli --bench server   # fewer parked threads
//! ```
//!
//! (a) 1,000 approval-gate threads created and parked (`POST /threads?wait=true`), `BENCH_
//!     CONCURRENCY` (default 8) requests at a time; (a2) 1,000 tasks asked over A2A (JSON-RPC
//!     `SendMessage` to `/a2a/gate`, blocking), as many at a time;
//! then every approval answered through `POST /approvals/{id}?wait=true` (park → answer →
//!     settled) and every task answered over A2A with its `taskId` (answer → `COMPLETED`), as
//!     many at a time, in `BENCH_ROUNDS` (default 8) rounds that alternate the two (a slice of
//!     each per round, which goes first swapped each round), so a slow second of a shared
//!     machine falls on both: answered approvals/s, answered tasks/s, their ratio, latency;
//!     then 200 of each parked (asked) and answered one at a time;
//! (b) `BENCH_SERVER_PARKED` (default 100,000) parked threads: the server process's RSS as they
//!     accumulate (it must stay flat: a parked thread holds no memory).
//!
//! `BENCH_WORKERS` sets the tokio worker threads (default 2; the client runs on the main
//! thread beside them).
//!
//! `BENCH_CALLS=1` also prints the driver calls per park, answer and ask, by statement (not with
//! the timed numbers of a run without it: counting costs a little on every call).
//!
//! `BENCH_MARKS=1` prints a line `MARK start rest|a2a` as each round of answers starts and
//! `MARK end` as it ends, for a profiler to cut the run at (`docs/benchmarks.md`).

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    Cleanup, Client, cpu_ns, cpu_per, env, gate, load, ms, percentile, rss_kib, scratch, stores_at,
};
use duet_runtime::Runtime;
use futures::StreamExt;
use serde_json::{Value, json};

/// `gate`: a model asks, a person answers, the model records the decision.
fn project() -> Arc<duet_spec::Project> {
    let dir = scratch();
    gate(&dir);
    load(&dir)
}

impl Client {
    /// Creates a parked gate thread: its approval id and how long it took.
    async fn park(&self, key: &str) -> (String, Duration) {
        let start = Instant::now();
        let t = self
            .post(
                "/threads?wait=true",
                json!({"agent": "gate", "key": key, "text": "Change the firewall?"}),
            )
            .await;
        assert_eq!(t["status"], "awaiting_human", "{t}");
        (
            t["approval"].as_str().expect("approval").to_owned(),
            start.elapsed(),
        )
    }

    /// A blocking A2A `SendMessage` to the gate: the task.
    async fn a2a(&self, message: Value) -> Value {
        let mut body: Value = self
            .http
            .post(format!("{}/a2a/gate", self.base))
            .bearer_auth(&self.token)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json");
        assert!(body.get("error").is_none(), "{body}");
        body["result"]["task"].take()
    }

    /// Asks the gate over A2A (the task waits for input): the task's id.
    async fn a2a_ask(&self, n: usize) -> String {
        let asked = self
            .a2a(json!({"messageId": format!("ask-{n}"), "role": "ROLE_USER",
                "parts": [{"text": "Change the firewall?"}]}))
            .await;
        assert_eq!(
            asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{asked}"
        );
        asked["id"].as_str().expect("task id").to_owned()
    }

    /// Answers task `id` with its `taskId`: how long the answer took to come back `COMPLETED`.
    async fn a2a_answer(&self, id: &str, n: usize) -> Duration {
        let start = Instant::now();
        let done = self
            .a2a(
                json!({"messageId": format!("answer-{n}"), "role": "ROLE_USER",
                "taskId": id, "parts": [{"text": "approved"}]}),
            )
            .await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        start.elapsed()
    }

    /// Answers `approval` and waits until its thread settled: how long it took.
    async fn answer(&self, approval: &str) -> Duration {
        let start = Instant::now();
        let t = self
            .post(
                &format!("/approvals/{approval}?wait=true"),
                json!({"text": "approved"}),
            )
            .await;
        assert_eq!(t["status"], "idle", "{t}");
        start.elapsed()
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(env("BENCH_WORKERS", 2))
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(run());
}

async fn run() {
    let _cleanup = Cleanup;
    let n = env("BENCH_APPROVALS", 1_000);
    let concurrency = env("BENCH_CONCURRENCY", 8);
    let parked = env("BENCH_SERVER_PARKED", 100_000);
    let rounds = env("BENCH_ROUNDS", 8).max(1);
    let (stores, backend, _) = stores_at().await;
    let store = stores.engine.clone();
    let runtime = Runtime::builder(project(), store.clone())
        .providers(duet_models::providers())
        .build();
    let key = duet_server::auth::new_key("bench", false, None, 0).expect("key");
    stores
        .server
        .create_key(&key.key, &key.hash)
        .await
        .expect("store key");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let options = duet_server::Options {
        default_agent: Some("gate".into()),
        ..duet_server::Options::default()
    };
    let state = duet_server::AppState::new(runtime, stores.server.clone(), options);
    tokio::spawn(duet_server::serve(state, listener, std::future::pending()));
    let client = Arc::new(Client {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .build()
            .expect("client"),
        base,
        token: key.token,
    });
    println!("backend: {backend}; {concurrency} requests at a time");
    common::calls::counter();

    // (a) park; (a2) ask over A2A.
    let start = Instant::now();
    let cpu = cpu_ns();
    let parks: Vec<(String, Duration)> = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            async move { c.park(&format!("gate-{i}")).await }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let took = start.elapsed();
    let cpu = cpu_per(cpu, n);
    let mut park: Vec<Duration> = parks.iter().map(|p| p.1).collect();
    park.sort();
    println!(
        "(a) {n} threads created and parked in {:.0} ms = {:.0}/s; park p50 {:.2} ms, p99 {:.2} ms; CPU {cpu:.3} ms a park",
        ms(took),
        n as f64 / took.as_secs_f64(),
        ms(percentile(&park, 0.5)),
        ms(percentile(&park, 0.99))
    );
    common::calls::report("a park", n);
    let start = Instant::now();
    let cpu = cpu_ns();
    let tasks: Vec<String> = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            async move { c.a2a_ask(i).await }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let took = start.elapsed();
    let cpu = cpu_per(cpu, n);
    println!(
        "(a2) over A2A: {n} tasks asked in {:.0} ms = {:.0}/s; CPU {cpu:.3} ms an ask",
        ms(took),
        n as f64 / took.as_secs_f64()
    );
    common::calls::report("an ask", n);

    // Every approval answered over REST, and every task over A2A, in alternating rounds.
    let mut rest = Answers::default();
    let mut a2a = Answers::default();
    let approvals: Vec<String> = parks.into_iter().map(|p| p.0).collect();
    let per_round = n.div_ceil(rounds);
    for round in 0..rounds {
        let slice = round * per_round..((round + 1) * per_round).min(n);
        // Which goes first alternates: neither always follows the other's writes.
        for a2a_turn in [round % 2 == 1, round % 2 == 0] {
            let slice = slice.clone();
            common::calls::take();
            if std::env::var_os("BENCH_MARKS").is_some() {
                println!("MARK start {}", if a2a_turn { "a2a" } else { "rest" });
            }
            let start = Instant::now();
            let cpu = cpu_ns();
            let latencies: Vec<Duration> = if a2a_turn {
                futures::stream::iter(slice.map(|i| (i, tasks[i].clone())))
                    .map(|(i, id)| {
                        let c = client.clone();
                        async move { c.a2a_answer(&id, i).await }
                    })
                    .buffer_unordered(concurrency)
                    .collect()
                    .await
            } else {
                futures::stream::iter(slice.map(|i| approvals[i].clone()))
                    .map(|approval| {
                        let c = client.clone();
                        async move { c.answer(&approval).await }
                    })
                    .buffer_unordered(concurrency)
                    .collect()
                    .await
            };
            let kind = if a2a_turn { &mut a2a } else { &mut rest };
            kind.took += start.elapsed();
            kind.cpu_ns += cpu_ns().saturating_sub(cpu);
            if std::env::var_os("BENCH_MARKS").is_some() {
                println!("MARK end");
            }
            kind.latencies.extend(latencies);
            common::calls::add(&mut kind.calls, common::calls::take());
        }
    }
    let rest_rate = rest.print(
        "   ",
        "approvals answered",
        "answered approvals/s",
        "answer→settled",
    );
    common::calls::print("an answer", n, &rest.calls);
    let a2a_rate = a2a.print(
        "    ",
        "tasks answered over A2A",
        "answered tasks/s",
        "answer→COMPLETED",
    );
    common::calls::print("an answer over A2A", n, &a2a.calls);
    println!(
        "    answered approvals/s over answered tasks/s: {:.2} ({rounds} rounds each, alternating)",
        rest_rate / a2a_rate
    );

    // One at a time: the latency a person sees on an idle server.
    let mut single = Vec::new();
    for i in 0..200 {
        let (approval, _) = client.park(&format!("single-{i}")).await;
        single.push(client.answer(&approval).await);
    }
    single.sort();
    println!(
        "    one at a time: answer→settled p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&single, 0.5)),
        ms(percentile(&single, 0.99))
    );
    common::calls::report("one at a time, a park and its answer", single.len());
    let mut single = Vec::new();
    for i in 0..200 {
        let id = client.a2a_ask(n + i).await;
        single.push(client.a2a_answer(&id, n + i).await);
    }
    single.sort();
    println!(
        "     one at a time over A2A: answer→COMPLETED p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&single, 0.5)),
        ms(percentile(&single, 0.99))
    );

    // (b) RSS as parked threads accumulate.
    let before = rss_kib();
    let mut made = 0;
    let mut checkpoint = 1_000;
    let start = Instant::now();
    while made < parked {
        let batch = (checkpoint - made).min(parked - made);
        futures::stream::iter(made..made + batch)
            .map(|i| {
                let c = client.clone();
                async move { c.park(&format!("parked-{i}")).await }
            })
            .buffer_unordered(concurrency)
            .for_each(|_| async {})
            .await;
        made += batch;
        println!(
            "(b) {made:>7} parked threads: RSS {} KiB (started at {before} KiB), {:.0} s",
            rss_kib(),
            start.elapsed().as_secs_f64()
        );
        checkpoint *= 10;
        checkpoint = checkpoint.min(parked);
    }
}

/// One kind of answer's rounds: their time, CPU and latencies.
#[derive(Default)]
struct Answers {
    took: Duration,
    cpu_ns: u64,
    latencies: Vec<Duration>,
    /// The driver calls of its rounds, by statement (`BENCH_CALLS=1`).
    calls: std::collections::BTreeMap<String, u64>,
}

impl Answers {
    /// Prints the line of this kind: `what` answered, the rate as `rate`, the latency of
    /// `latency`; returns the rate.
    fn print(&mut self, indent: &str, what: &str, rate: &str, latency: &str) -> f64 {
        let n = self.latencies.len();
        self.latencies.sort();
        let per_s = n as f64 / self.took.as_secs_f64();
        println!(
            "{indent} {n} {what} in {:.0} ms = {per_s:.0} {rate}; {latency} p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; CPU {:.3} ms an answer",
            ms(self.took),
            ms(percentile(&self.latencies, 0.5)),
            ms(percentile(&self.latencies, 0.9)),
            ms(percentile(&self.latencies, 0.99)),
            ms(percentile(&self.latencies, 1.0)),
            self.cpu_ns as f64 / 1e6 / n.max(1) as f64
        );
        per_s
    }
}
