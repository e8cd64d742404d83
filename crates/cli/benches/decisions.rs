//! The decisions benchmark (a documented command, not a test): `duet serve` in this process on
//! 127.0.0.1, driven over HTTP by a client in the same process; tool-call decisions measured
//! beside today's text answers to parks, in the same run.
//!
//! ```sh
//! cargo bench -p duet-cli --bench decisions                     # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench decisions                   # Postgres (a fresh database)
//! ```
//!
//! (a) answers: `BENCH_APPROVALS` (default 1,000) approval-gate threads parked, then each
//!     answered with text (`POST /approvals/{id}?wait=true`, `{"text": "approved"}`),
//!     `BENCH_CONCURRENCY` (default 8) at a time: answers/s and answer→settled p50/p99;
//! (b) decisions: as many desk threads waiting on a `refund` call that needs approval (an `http`
//!     tool POSTing to a receiver this process runs on 127.0.0.1), each decided
//!     (`POST /approvals/{id}?wait=true`, `{"decision": "approve"}`): decisions/s,
//!     decision→settled p50/p99, and decision→tool started (the request reaching the receiver)
//!     p50/p99;
//! then both one at a time (200 each), the latency a person sees on an idle server.

#[path = "common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Cleanup, Client, env, gate, load, ms, percentile, scratch, stores_at, write};
use duet_runtime::Runtime;
use futures::StreamExt;
use serde_json::{Value, json};

/// When each refund reached the receiver, by thread id (its `Idempotency-Key` is
/// `THREAD:CALL`).
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

/// A receiver for the refund tool's requests: records when each thread's arrives.
async fn receiver() -> (String, Arrivals) {
    let arrivals = Arrivals::default();
    let seen = arrivals.clone();
    let app = axum::Router::new().route(
        "/refund",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                let at = Instant::now();
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|k| k.split(':').next())
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().expect("arrivals").insert(key, at);
                axum::Json(json!({"refunded": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/refund", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, arrivals)
}

/// `gate` (text answers) and `desk`, whose model calls `refund` (approval always), then says
/// `Done.`.
fn project(refund_url: &str) -> Arc<duet_spec::Project> {
    let dir = scratch();
    gate(&dir);
    write(
        &dir,
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    write(
        &dir,
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: desk_model\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    write(
        &dir,
        "agents/tools/refund.yaml",
        &format!(
            "description: Refunds an order.\nargs: {{ type: object, properties: {{ order: {{ type: string }} }}, required: [order] }}\nhttp:\n  method: POST\n  url: \"{refund_url}\"\napproval: {{ decisions: [approve, reject] }}\n"
        ),
    );
    write(
        &dir,
        "agents/models/desk_model.yaml",
        "name: desk_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1 } }]\n  - text: Done.\n",
    );
    load(&dir)
}

impl Client {
    /// A thread of `agent` keyed `key`, run until it waits for a person (`status`): its id,
    /// and the approval's id when it is parked at a question.
    async fn waiting(&self, agent: &str, key: &str, status: &str) -> (String, Option<String>) {
        let t = self
            .post(
                "/threads?wait=true",
                json!({"agent": agent, "key": key, "text": "Please."}),
            )
            .await;
        assert_eq!(t["status"], status, "{t}");
        let id = t["id"].as_str().expect("id").to_owned();
        (id, t["approval"].as_str().map(str::to_owned))
    }

    /// The ids of the tool calls that wait for a decision, by thread key.
    async fn pending(&self) -> HashMap<String, String> {
        let mut out = HashMap::new();
        let mut cursor = String::new();
        loop {
            let page: Value = self
                .http
                .get(format!(
                    "{}/approvals?agent=desk&limit=500{cursor}",
                    self.base
                ))
                .bearer_auth(&self.token)
                .send()
                .await
                .expect("request")
                .json()
                .await
                .expect("json");
            for item in page["items"].as_array().into_iter().flatten() {
                let (Some(key), Some(id)) = (item["thread"].as_str(), item["id"].as_str()) else {
                    continue;
                };
                out.insert(key.to_owned(), id.to_owned());
            }
            match page["nextCursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => return out,
            }
        }
    }

    /// Answers or decides `approval` with `body` and waits until its thread settled: when it
    /// was sent and how long it took.
    async fn settle(&self, approval: &str, body: Value, settled: &str) -> (Instant, Duration) {
        let start = Instant::now();
        let t = self
            .post(&format!("/approvals/{approval}?wait=true"), body)
            .await;
        let status = t["status"].as_str().or(t["thread"]["status"].as_str());
        assert_eq!(status, Some(settled), "{t}");
        (start, start.elapsed())
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(run());
}

fn line(what: &str, n: usize, took: Duration, unit: &str, lat: &mut [Duration], of: &str) {
    lat.sort();
    println!(
        "{what}: {n} in {:.0} ms = {:.0} {unit}/s; {of} p50 {:.2} ms, p99 {:.2} ms",
        ms(took),
        n as f64 / took.as_secs_f64(),
        ms(percentile(lat, 0.5)),
        ms(percentile(lat, 0.99)),
    );
}

fn started(arrivals: &Arrivals, sent: &[(String, Instant)]) -> Vec<Duration> {
    let arrivals = arrivals.lock().expect("arrivals");
    sent.iter()
        .map(|(key, at)| {
            arrivals
                .get(key)
                .unwrap_or_else(|| panic!("thread {key}: the approved refund never arrived"))
                .duration_since(*at)
        })
        .collect()
}

async fn run() {
    let _cleanup = Cleanup;
    let n = env("BENCH_APPROVALS", 1_000);
    let concurrency = env("BENCH_CONCURRENCY", 8);
    let (url, arrivals) = receiver().await;
    let (stores, backend, _) = stores_at().await;
    let project = project(&url);
    let builder = Runtime::builder(project.clone(), stores.engine.clone())
        .providers(duet_models::providers());
    let runtime = duet_tools::register(builder, &project, &scratch()).build();
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
    let state = duet_server::AppState::new(
        runtime,
        stores.server.clone(),
        duet_server::Options::default(),
    );
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

    let answer = || json!({"text": "approved"});
    let approve = || json!({"decision": "approve"});

    // (a) text answers to parks.
    let parked: Vec<String> = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            async move {
                let (_, approval) = c
                    .waiting("gate", &format!("gate-{i}"), "awaiting_human")
                    .await;
                approval.expect("parked")
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let start = Instant::now();
    let mut answered: Vec<Duration> = futures::stream::iter(parked)
        .map(|id| {
            let c = client.clone();
            async move { c.settle(&id, answer(), "idle").await.1 }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    line(
        "(a) text answers",
        n,
        start.elapsed(),
        "answers",
        &mut answered,
        "answer→settled",
    );

    // (b) decisions on pending tool calls.
    let threads: Vec<(String, String)> = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            async move {
                let key = format!("desk-{i}");
                let (id, _) = c.waiting("desk", &key, "waiting").await;
                (key, id)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let pending = client.pending().await;
    let waiting: Vec<(String, String)> = threads
        .into_iter()
        .map(|(key, id)| (id, pending.get(&key).expect("pending").clone()))
        .collect();
    assert!(
        arrivals.lock().expect("arrivals").is_empty(),
        "nothing sent before a decision"
    );
    let start = Instant::now();
    let decided: Vec<(String, Instant, Duration)> = futures::stream::iter(waiting)
        .map(|(thread, id)| {
            let c = client.clone();
            async move {
                let (at, took) = c.settle(&id, approve(), "awaiting_human").await;
                (thread, at, took)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let took = start.elapsed();
    let mut settled: Vec<Duration> = decided.iter().map(|d| d.2).collect();
    let sent: Vec<(String, Instant)> = decided.into_iter().map(|d| (d.0, d.1)).collect();
    line(
        "(b) decisions",
        n,
        took,
        "decisions",
        &mut settled,
        "decision→settled",
    );
    let mut tool = started(&arrivals, &sent);
    tool.sort();
    println!(
        "    decision→tool started p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&tool, 0.5)),
        ms(percentile(&tool, 0.99))
    );

    // One at a time: the latency a person sees on an idle server.
    let (mut answers, mut decisions, mut sent) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..200 {
        let (_, approval) = client
            .waiting("gate", &format!("gate-one-{i}"), "awaiting_human")
            .await;
        let approval = approval.expect("parked");
        answers.push(client.settle(&approval, answer(), "idle").await.1);
        let key = format!("desk-one-{i}");
        let (thread, _) = client.waiting("desk", &key, "waiting").await;
        let approval = client.pending().await.remove(&key).expect("pending");
        let (at, took) = client.settle(&approval, approve(), "awaiting_human").await;
        decisions.push(took);
        sent.push((thread, at));
    }
    let mut tool = started(&arrivals, &sent);
    for (what, lat) in [
        ("answer→settled", &mut answers),
        ("decision→settled", &mut decisions),
        ("decision→tool started", &mut tool),
    ] {
        lat.sort();
        println!(
            "    one at a time: {what} p50 {:.2} ms, p99 {:.2} ms",
            ms(percentile(lat, 0.5)),
            ms(percentile(lat, 0.99))
        );
    }
}
