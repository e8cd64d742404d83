//! The notifications benchmark (a documented command, not a test): parked questions delivered
//! as signed webhooks through the real pipeline of a `duet serve` in this process (the
//! database's notices, the router, the one outbox, its sender) to a receiver this process runs
//! on 127.0.0.1, which checks each signature, notes when it arrived and answers 200.
//!
//! ```sh
//! cargo bench -p duet-cli --bench notifications                 # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench notifications               # Postgres (a fresh database)
//! BENCH_NOTIFY=500 BENCH_RATE=20 BENCH_SECONDS=10 cargo bench -p duet-cli --bench notifications
//! BENCH_HOOKS=4 cargo bench -p duet-cli --bench notifications   # 4 subscriptions (streams)
//! ```
//!
//! The project: the approval `gate` (a model asks, a person answers) and one webhook
//! subscription on `question.parked` (`BENCH_HOOKS` of them: `agents/notifications/hook-N.yaml`,
//! a `whsec_` secret), each a stream of its own: the outbox sends a stream's deliveries one at
//! a time, in order. Threads park through the runtime the server runs (`Runtime::send`, 16 at
//! a time), so the server's router hears of each commit as it would of a request's.
//!
//! (a) burst: `BENCH_NOTIFY` (default 2,000) threads parked as fast as the runtime parks them
//!     while the server runs: deliveries/s from the first park to the last receipt, when the
//!     last park committed, and park commit → receipt p50/p99 (mostly the wait in line);
//! (a2) backlog: as many parked while no server runs (a restart's backlog; measured first), then
//!     `duet serve` started: deliveries/s from its start to the last receipt;
//! (b) steady: `BENCH_RATE` parks a second (default 50) for `BENCH_SECONDS` (default 20): park
//!     commit → receipt p50/p99/max, when the pipeline keeps up.
//!
//! A park's commit time is its notice's (the journal record's `created_at`, in ms, the
//! webhook's `at`); a receipt's is the receiver's clock when the request reached its handler,
//! in µs: a latency reads up to 1 ms long. Every delivery must arrive, signed, exactly once.

#[path = "common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Cleanup, env, gate, load, scratch, stores_at, write};
use duet_runtime::{CancellationToken, Delivered, EventSink, Runtime, ThreadStatus};
use duet_server::signatures::{Signed, verify};
use duet_server_store::{DeliveryQuery, DeliveryStatus};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::Notify;

/// The subscriptions' signing secret (Standard Webhooks' `whsec_` + base64 of the key).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Parks in flight at once.
const PARKING: usize = 16;
/// How long the receipts may stop coming before the run is called stuck.
const STALL: Duration = Duration::from_secs(60);

fn now_us() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_micros()).expect("µs fit")
}

/// One webhook as the receiver took it.
#[derive(Clone)]
struct Receipt {
    /// The thread's key (the phase is its prefix).
    key: String,
    /// The park's commit (ms): the notification's `at`.
    at_ms: i64,
    /// When it reached the handler (µs).
    got_us: i64,
}

/// What the receiver took: each delivery by its `webhook-id`, how many per phase (the thread
/// key's part before its `-`), the repeats and the refusals.
#[derive(Clone, Default)]
struct Receipts {
    by_id: Arc<Mutex<HashMap<String, Receipt>>>,
    per_phase: Arc<Mutex<HashMap<String, usize>>>,
    repeats: Arc<Mutex<usize>>,
    refused: Arc<Mutex<Vec<String>>>,
    came: Arc<Notify>,
}

impl Receipts {
    /// The receipts of threads whose key starts with `prefix`.
    fn of(&self, prefix: &str) -> Vec<Receipt> {
        self.by_id
            .lock()
            .expect("receipts")
            .values()
            .filter(|r| r.key.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// How many deliveries about threads of `phase` arrived.
    fn count(&self, phase: &str) -> usize {
        let counts = self.per_phase.lock().expect("counts");
        counts.get(phase).copied().unwrap_or(0)
    }

    /// Waits until `n` deliveries about threads of `phase` arrived; they, in arrival order.
    /// Panics when none came for [`STALL`], or when one was refused.
    async fn until(&self, phase: &str, n: usize) -> Vec<Receipt> {
        loop {
            let came = self.came.notified();
            let refused = self.refused.lock().expect("refused").clone();
            assert!(refused.is_empty(), "the receiver refused: {refused:?}");
            let got = self.count(phase);
            if got >= n {
                let mut got = self.of(&format!("{phase}-"));
                got.sort_by_key(|r| r.got_us);
                return got;
            }
            if tokio::time::timeout(STALL, came).await.is_err() {
                panic!(
                    "{got} of {n} `{phase}` deliveries arrived, then none for {} s",
                    STALL.as_secs()
                );
            }
        }
    }
}

/// The webhook receiver on 127.0.0.1: checks each request's Standard Webhooks signature, notes
/// it and answers 200 (401 to a bad one). Its URL.
async fn receiver(receipts: Receipts) -> String {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let receipts = receipts.clone();
                async move {
                    let got_us = now_us();
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let id = header("webhook-id");
                    let signed = Signed {
                        id: &id,
                        timestamp: &header("webhook-timestamp"),
                        signature: &header("webhook-signature"),
                    };
                    let event: Value = serde_json::from_slice(&body).unwrap_or_default();
                    if let Err(e) = verify(SECRET, signed, &body, got_us / 1_000_000, 300) {
                        receipts
                            .refused
                            .lock()
                            .expect("refused")
                            .push(format!("{id}: {e:?}"));
                        receipts.came.notify_waiters();
                        return axum::http::StatusCode::UNAUTHORIZED;
                    }
                    let receipt = Receipt {
                        key: event["thread"]["key"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        at_ms: event["at"].as_i64().unwrap_or_default(),
                        got_us,
                    };
                    let phase = receipt.key.split('-').next().unwrap_or_default().to_owned();
                    let first = receipts
                        .by_id
                        .lock()
                        .expect("receipts")
                        .insert(id, receipt)
                        .is_none();
                    if first {
                        *receipts
                            .per_phase
                            .lock()
                            .expect("counts")
                            .entry(phase)
                            .or_default() += 1;
                    } else {
                        *receipts.repeats.lock().expect("repeats") += 1;
                    }
                    receipts.came.notify_waiters();
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// `gate`, and `hooks` webhook subscriptions on its parks, all to `url`.
fn project(dir: &Path, url: &str, hooks: usize) -> Arc<duet_spec::Project> {
    gate(dir);
    for i in 0..hooks {
        write(
            dir,
            &format!("agents/notifications/hook-{i}.yaml"),
            &format!(
                "description: The bench's receiver hears of every park.\nevents: [question.parked]\nagents: [gate]\nwebhook: {{ url: \"{url}\", secretEnv: BENCH_HOOK_SECRET }}\n"
            ),
        );
    }
    load(dir)
}

/// Parks thread `key` at the gate (a question waits).
async fn park(rt: &Runtime, key: &str) {
    match rt
        .send(
            key,
            Some("gate"),
            "Change the firewall?",
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await
    {
        Ok(Delivered::Settled(s)) => assert_eq!(s.status, ThreadStatus::AwaitingHuman, "{key}"),
        other => panic!("{key}: {other:?}"),
    }
}

/// Parks `n` threads keyed `prefix-I`, [`PARKING`] at a time; when the last one committed.
async fn park_all(rt: &Runtime, prefix: &str, n: usize) -> Instant {
    futures::stream::iter(0..n)
        .map(|i| async move { park(rt, &format!("{prefix}-{i}")).await })
        .buffer_unordered(PARKING)
        .collect::<Vec<()>>()
        .await;
    Instant::now()
}

/// When the newest delivery was put in the outbox (µs; its notice routed).
async fn last_routed_us(stores: &duet_store::Stores) -> i64 {
    let query = DeliveryQuery {
        limit: 1,
        ..DeliveryQuery::default()
    };
    let newest = stores.server.deliveries(&query).await.expect("deliveries");
    newest.first().map_or(0, |d| d.created_at * 1_000)
}

/// The outbox's counts (channel, status, n) once nothing in it is pending (at most
/// [`STALL`]).
async fn settled(stores: &duet_store::Stores) -> Vec<(String, DeliveryStatus, i64)> {
    let deadline = Instant::now() + STALL;
    loop {
        let counts = stores.server.delivery_counts().await.expect("counts");
        let pending = counts
            .iter()
            .any(|c| c.1 == DeliveryStatus::Pending && c.2 > 0);
        if !pending || Instant::now() > deadline {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Park commit → receipt of each, sorted (ms).
fn latencies(got: &[Receipt]) -> Vec<f64> {
    let mut lat: Vec<f64> = got
        .iter()
        .map(|r| (r.got_us - r.at_ms * 1_000) as f64 / 1_000.0)
        .collect();
    lat.sort_by(f64::total_cmp);
    lat
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The machine, for the record: cores and load.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    format!("{cores} cores, load {load}")
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(run());
}

/// Starts `duet serve` (its routes and background work) on a loopback listener for `runtime`.
async fn start_server(
    runtime: Runtime,
    stores: &duet_store::Stores,
) -> tokio::task::JoinHandle<std::io::Result<()>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let options = duet_server::Options {
        // The receiver is on loopback.
        allow_private_push: true,
        env: duet_server::Env::from_map(BTreeMap::from([(
            "BENCH_HOOK_SECRET".to_owned(),
            SECRET.to_owned(),
        )])),
        ..duet_server::Options::default()
    };
    let state = duet_server::AppState::new(runtime, stores.server.clone(), options);
    tokio::spawn(duet_server::serve(state, listener, std::future::pending()))
}

async fn run() {
    let _cleanup = Cleanup;
    let n = env("BENCH_NOTIFY", 2_000);
    let hooks = env("BENCH_HOOKS", 1).max(1);
    let rate = env("BENCH_RATE", 50).max(1);
    let seconds = env("BENCH_SECONDS", 20);
    let receipts = Receipts::default();
    let url = receiver(receipts.clone()).await;
    let project = project(&scratch(), &url, hooks);
    let (stores, backend, _) = stores_at().await;
    let runtime = Runtime::builder(project, stores.engine.clone())
        .providers(duet_models::providers())
        .build();
    println!(
        "backend: {backend}; {hooks} webhook subscription(s) on question.parked; {}",
        machine()
    );

    // (a2)'s backlog first, while no server runs.
    let start = Instant::now();
    park_all(&runtime, "backlog", n).await;
    let parking = start.elapsed();

    let server = start_server(runtime.clone(), &stores).await;
    let started = now_us();
    let got = receipts.until("backlog", n * hooks).await;
    let last = got.last().map_or(started, |r| r.got_us);
    let drained = (last - started) as f64 / 1e6;
    let backlog = format!(
        "(a2) backlog: {n} parked while no server ran (in {:.1} s), then `duet serve` started: {} deliveries in {drained:.2} s = {:.0} deliveries/s; the last notice routed at {:.2} s",
        parking.as_secs_f64(),
        n * hooks,
        (n * hooks) as f64 / drained,
        (last_routed_us(&stores).await - started) as f64 / 1e6
    );

    // (a) burst, the server running.
    let first = now_us();
    let start = Instant::now();
    let parked = park_all(&runtime, "burst", n).await;
    let by_then = receipts.count("burst");
    let parked_us = first + i64::try_from(parked.duration_since(start).as_micros()).unwrap_or(0);
    let got = receipts.until("burst", n * hooks).await;
    let last = got.last().map_or(first, |r| r.got_us);
    let took = (last - first) as f64 / 1e6;
    let lat = latencies(&got);
    println!(
        "(a) burst: {n} parks, {} deliveries: first park → last receipt {took:.2} s = {:.0} deliveries/s; commit → receipt p50 {:.1} ms p99 {:.1} ms",
        n * hooks,
        (n * hooks) as f64 / took,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
    );
    println!(
        "    the last park committed at {:.2} s ({:.0} parks/s), {by_then} delivered by then; the last notice routed at {:.2} s",
        (parked_us - first) as f64 / 1e6,
        n as f64 / parked.duration_since(start).as_secs_f64(),
        (last_routed_us(&stores).await - first) as f64 / 1e6
    );
    println!("{backlog}");

    // (b) steady.
    let total = rate * seconds;
    let every = Duration::from_secs_f64(1.0 / rate as f64);
    let begin = tokio::time::Instant::now() + Duration::from_millis(100);
    let parks: Vec<_> = (0..total)
        .map(|i| {
            let rt = runtime.clone();
            let at = begin + every * u32::try_from(i).unwrap_or(u32::MAX);
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                park(&rt, &format!("steady-{i}")).await;
            })
        })
        .collect();
    for p in parks {
        p.await.expect("a park");
    }
    let got = receipts.until("steady", total * hooks).await;
    let lat = latencies(&got);
    println!(
        "(b) steady: {rate} parks/s for {seconds} s ({total} parks, {} deliveries): commit → receipt p50 {:.1} ms p99 {:.1} ms max {:.1} ms",
        total * hooks,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat.last().copied().unwrap_or(f64::NAN),
    );

    // Every delivery arrived once and the outbox says so (once the sender recorded the last
    // receipt's answer, a moment after the receiver took it).
    let want = (2 * n + total) * hooks;
    let counts = settled(&stores).await;
    let delivered: i64 = counts
        .iter()
        .filter(|c| c.0 == "webhook" && c.1 == DeliveryStatus::Delivered)
        .map(|c| c.2)
        .sum();
    assert_eq!(
        usize::try_from(delivered).unwrap_or(0),
        want,
        "the outbox: {counts:?}"
    );
    assert!(
        counts
            .iter()
            .all(|c| c.1 == DeliveryStatus::Delivered || c.2 == 0),
        "nothing pending or failed: {counts:?}"
    );
    let repeats = *receipts.repeats.lock().expect("repeats");
    println!("    {want} deliveries, all signed and delivered; repeats at the receiver: {repeats}");
    server.abort();
}
