//! The thread-endpoint benchmark (a documented command, not a test): what duet adds around an
//! endpoint's code, with a code host that answers at once (the JavaScript's own cost is the
//! host's benchmark), on the memory store, SQLite, and Postgres when `DATABASE_URL` is set.
//!
//! ```sh
//! cargo bench -p duet-server --bench endpoints
//! BENCH_RUNS=5000 DATABASE_URL=postgres://… cargo bench -p duet-server --bench endpoints
//! ```
//!
//! Per backend, `BENCH_RUNS` (default 2,000) calls one after another on an idle thread:
//! (a) `Runtime::call_endpoint` of a `GET` whose code reads one value (the lease claimed, the
//!     thread and its history read, a settle that writes nothing);
//! (b) the same for a `POST` whose code sets one value (committed with the settle);
//! (c) (a) over HTTP on 127.0.0.1 with an API key (keys looked up once, then cached);
//! (d) (a) while another run holds the thread: read-only, no lease, no write.
//! Each p50/p99.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use duet_runtime::testing::Scratch;
use duet_runtime::{
    Bridge, CodeCall, CodeError, CodeErrorKind, CodeHost, EndpointRequest, Handler, HandlerError,
    Lease, Message, Runtime, Store, ThreadState,
};
use serde_json::{Value, json};

/// Reads (`GET`) or sets (`POST`) the value `n`.
struct Counter;

#[async_trait]
impl CodeHost for Counter {
    async fn call(&self, call: CodeCall, bridge: &mut dyn Bridge) -> Result<Value, CodeError> {
        let thrown = |m: String| CodeError::new(CodeErrorKind::Thrown, m);
        if call.file.ends_with(".post.ts") {
            let set = json!({ "key": "n", "value": 1 });
            bridge.call("setValue", set).await.map_err(thrown)?;
            return Ok(json!({ "$response": { "status": 204 } }));
        }
        let n = bridge
            .call("getValue", json!({ "key": "n" }))
            .await
            .map_err(thrown)?;
        Ok(json!({ "n": n }))
    }
}

struct Clerk;

#[async_trait]
impl Handler for Clerk {
    async fn handle(&self, state: &mut ThreadState<'_>, _: &Message) -> Result<(), HandlerError> {
        state.reply("ok");
        Ok(())
    }
}

fn project() -> Arc<duet_spec::Project> {
    let dir = Scratch::new("bench-endpoints");
    dir.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { handler: clerk }\nsideB: { human: true }\n",
    );
    dir.write("agents/handlers/clerk.yaml", "description: Answers.\n");
    let code = "import { defineThreadEndpoint } from '@standardagents/spec';\n\
                export default defineThreadEndpoint(async (req, state) => Response.json({}));\n";
    dir.write("agents/api/n.get.ts", code);
    dir.write("agents/api/n.post.ts", code);
    dir.project()
}

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

fn request(method: &str) -> EndpointRequest {
    EndpointRequest {
        method: method.into(),
        path: "/n".into(),
        query: None,
        url: "http://127.0.0.1/threads/t/api/n".into(),
        headers: Vec::new(),
        body: Vec::new(),
    }
}

async fn direct(rt: &Runtime, key: &str, method: &str, runs: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let at = Instant::now();
        let answer = rt.call_endpoint(key, request(method)).await;
        times.push(at.elapsed());
        assert!(answer.is_ok(), "{answer:?}");
    }
    times
}

async fn bench(
    name: &str,
    store: Arc<dyn Store>,
    tables: Arc<dyn duet_server_store::ServerStore>,
    runs: usize,
) {
    let rt = Runtime::builder(project(), store.clone())
        .handler("clerk", Clerk)
        .code_host(Arc::new(Counter))
        .build();
    // A principal of its own: a database used before keeps its threads.
    let principal = format!("bench-{}", uuid::Uuid::now_v7().simple());
    let key = duet_server::auth::new_key(&principal, false, None, 0).expect("key");
    tables
        .create_key(&key.key, &key.hash)
        .await
        .expect("store key");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let state = duet_server::AppState::new(rt.clone(), tables, duet_server::Options::default());
    let stop = tokio_util::sync::CancellationToken::new();
    let signal = stop.clone();
    tokio::spawn(duet_server::serve(state, listener, async move {
        signal.cancelled().await;
    }));
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{base}/threads?wait=true"))
        .bearer_auth(&key.token)
        .json(&json!({ "agent": "desk", "key": "t", "text": "hello" }))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 200);

    let stored = format!("{principal}/t");
    report(
        &format!("{name} (a) GET, reads a value"),
        direct(&rt, &stored, "GET", runs).await,
    );
    report(
        &format!("{name} (b) POST, sets a value"),
        direct(&rt, &stored, "POST", runs).await,
    );
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let at = Instant::now();
        let resp = http
            .get(format!("{base}/threads/t/api/n"))
            .bearer_auth(&key.token)
            .send()
            .await
            .expect("GET");
        let status = resp.status();
        resp.bytes().await.expect("body");
        times.push(at.elapsed());
        assert_eq!(status, 200);
    }
    report(&format!("{name} (c) GET over HTTP"), times);
    let t = store.thread(&stored).await.expect("read").expect("thread");
    let now = rt.now_ms();
    let lease = Lease {
        owner: uuid::Uuid::now_v7(),
        until: now + 3_600_000,
        now,
    };
    assert!(store.claim(t.id, lease).await.expect("claim"));
    report(
        &format!("{name} (d) GET, the thread held elsewhere"),
        direct(&rt, &stored, "GET", runs).await,
    );
    stop.cancel();
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let memory: Arc<dyn Store> = Arc::new(duet_runtime::testing::MemoryStore::new());
    let tables = Arc::new(duet_server_store::testing::MemoryServerStore::default());
    bench("memory", memory, tables, runs).await;
    let dir = std::env::temp_dir().join(format!("duet-bench-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let file = dir.join("bench.db");
    let stores = duet_store::open(&file.display().to_string())
        .await
        .expect("sqlite");
    bench("sqlite", stores.engine, stores.server, runs).await;
    std::fs::remove_dir_all(&dir).ok();
    if let Ok(url) = std::env::var("DATABASE_URL") {
        let stores = duet_store::open(&url).await.expect("postgres");
        bench("postgres", stores.engine, stores.server, runs).await;
    }
}
