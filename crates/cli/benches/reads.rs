//! The reads benchmark (a documented command, not a test; issue #35): how the reads of one
//! thread, and the approvals queue, cost as a thread's history and a person's queue grow.
//! `duet serve` runs in this process on 127.0.0.1, driven over HTTP by a client in the same
//! process under one API key.
//!
//! ```sh
//! cargo bench -p duet-cli --bench reads                          # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench reads                        # Postgres (a fresh database)
//! BENCH_HISTORY=10,10000 BENCH_SESSIONS=100 BENCH_OPEN=1000 BENCH_READS=100 \
//!   cargo bench -p duet-cli --bench reads                        # smaller
//! ```
//!
//! (1) Threads whose journals hold about `BENCH_HISTORY` (default `10,10000,100000`) entries,
//!     and one with `BENCH_SESSIONS` (default 1,000) sessions, written through the server as a
//!     client would: each session is a message, a model that works (tool calls in parallel, a
//!     step at a time, each step a commit) and then asks a person, the person's answer
//!     (`POST /approvals/{id}`), and the model's decision that ends the session; the last
//!     session stays parked on its question. Each such thread is its own agent (an approval
//!     gate with a long history), so `GET /approvals?agent=` lists exactly that one question.
//! (2) For each such thread, `BENCH_READS` (default 200) requests one at a time of each read:
//!     `GET /threads/{key}`, A2A `GetTask` (JSON-RPC on `/a2a/{agent}`), `/control/state`,
//!     the opening of `/control/events` (to its response head), the inbox page of its question
//!     (`/inbox/items/{id}`, signed in) and `GET /approvals?agent=`: p50/p99 in a table, one
//!     line per (read, history). A row stops early (at least 10 reads) once it has run for
//!     `BENCH_BUDGET` seconds (default 20); the table says how many reads it took.
//! (3) `BENCH_OPEN` (default 10,000) gate threads parked for the same principal: `GET
//!     /approvals` (the first page, and the page in the middle of the list by cursor), p50/p99;
//!     then the live inbox (`GET /inbox/events?order=newest`) while one more question parks,
//!     `BENCH_LIVE` (default 50) times: the park's commit (the store's change feed, in this
//!     process) to the queue event received.

#[path = "common/mod.rs"]
mod common;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Cleanup, Client, env, gate, load, ms, percentile, scratch, stores_at, write};
use duet_runtime::{FeedEvent, Runtime, ThreadStatus};
use futures::StreamExt;
use serde_json::{Value, json};

/// Parallel tool calls per working step.
const CALLS: usize = 100;

/// The journal entries a session takes besides its working steps (measured: the message, the
/// question, the answer, the decision and their records).
const BASE: usize = 8;

/// The shape of one long-history thread: its agent and how its sessions are written.
struct Shape {
    /// The row's name in the table.
    label: String,
    /// The agent (and thread key) it runs.
    agent: String,
    sessions: usize,
    /// Working steps per session.
    steps: usize,
    /// Tool calls per working step.
    calls: usize,
}

impl Shape {
    /// About `entries` journal entries in up to 10 sessions.
    fn history(entries: usize) -> Self {
        let sessions = (entries / 1_000).clamp(1, 10);
        let work = (entries / sessions).saturating_sub(BASE);
        let (steps, calls) = if work >= 2 {
            let calls = CALLS.min(work - 1);
            (((work as f64) / (calls + 1) as f64).round() as usize, calls)
        } else {
            (0, 0)
        };
        Shape {
            label: format!("{entries} entries"),
            agent: format!("hist{entries}"),
            sessions,
            steps,
            calls,
        }
    }

    /// `sessions` short sessions (no working steps).
    fn sessions(sessions: usize) -> Self {
        Shape {
            label: format!("{sessions} sessions"),
            agent: format!("sessions{sessions}"),
            sessions,
            steps: 0,
            calls: 0,
        }
    }

    /// Writes its agent, prompt and scripted model into `dir`.
    fn write(&self, dir: &Path) {
        let Shape { agent, steps, .. } = self;
        write(
            dir,
            &format!("agents/agents/{agent}.yaml"),
            &format!(
                "name: {agent}\nexposeAsTool: true\ntoolDescription: An approval gate with a long history.\nsideA:\n  prompt: {agent}\n  maxSteps: {}\n  sessionStop: {{ name: decide, messageProperty: decision }}\nsideB: {{ human: true, approver: true }}\n",
                steps + 4
            ),
        );
        write(
            dir,
            &format!("agents/prompts/{agent}.yaml"),
            &format!(
                "name: {agent}\ntoolDescription: d\nmodel: {agent}_model\nprompt: Work, then ask for approval.\ntools: [work, decide]\n"
            ),
        );
        let mut script = format!("name: {agent}_model\nprovider: scripted\nmodel: demo\nscript:\n");
        for s in 0..self.sessions {
            if *steps > 0 {
                // The session's working steps: one entry, repeated (a definition's file holds
                // at most 4 MiB and 200,000 YAML nodes, three to a call).
                let calls = vec!["{name: work}"; self.calls];
                script.push_str(&format!(
                    "  - tool_calls: [{}]\n    repeat: {steps}\n",
                    calls.join(",")
                ));
            }
            script.push_str(&format!("  - text: \"Approve change {s}?\"\n"));
            script.push_str(
                "  - tool_calls: [{ name: decide, arguments: { decision: approved } }]\n",
            );
        }
        write(dir, &format!("agents/models/{agent}_model.yaml"), &script);
    }
}

/// The project: `gate`, the `work` tool, and one agent per shape.
fn project(shapes: &[Shape]) -> Arc<duet_spec::Project> {
    let dir = scratch();
    gate(&dir);
    write(
        &dir,
        "agents/tools/work.yaml",
        "description: Do one piece of the work.\nargs: { type: object, properties: {} }\nresult: Done.\n",
    );
    for s in shapes {
        s.write(&dir);
    }
    load(&dir)
}

impl Client {
    /// GETs `path` (with `cookie`, if any): the answer's body, which must be a success.
    async fn get(&self, path: &str, cookie: Option<&str>) -> bytes::Bytes {
        let mut req = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status();
        let body = resp.bytes().await.expect("body");
        assert!(
            status.is_success(),
            "{path}: {status} {}",
            String::from_utf8_lossy(&body)
        );
        body
    }

    async fn get_json(&self, path: &str) -> Value {
        serde_json::from_slice(&self.get(path, None).await).expect("json")
    }

    /// A2A `GetTask` of task `id` on `agent`.
    async fn get_task(&self, agent: &str, id: &str) -> Value {
        let body: Value = self
            .http
            .post(format!("{}/a2a/{agent}", self.base))
            .bearer_auth(&self.token)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}}))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json");
        assert!(body.get("error").is_none(), "{body}");
        body["result"].clone()
    }

    /// Opens `/control/events` of `session` on `agent`: returns once the response head is in.
    async fn open_events(&self, agent: &str, session: &str) {
        let resp = self
            .http
            .get(format!(
                "{}/agents/{agent}/control/events?session={session}",
                self.base
            ))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("request");
        assert!(resp.status().is_success(), "{}", resp.status());
    }

    /// Signs in to the inbox with this key: the session cookie.
    async fn sign_in(&self) -> String {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let resp = http
            .post(format!("{}/inbox/sign-in", self.base))
            .form(&[("key", self.token.as_str()), ("next", "/inbox")])
            .send()
            .await
            .expect("sign in");
        let cookie = resp
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .expect("a session cookie");
        cookie.to_owned()
    }

    /// Creates gate thread `key`, parked on its question.
    async fn park(&self, key: &str) {
        let t = self
            .post(
                "/threads?wait=true",
                json!({"agent": "gate", "key": key, "text": "Change the firewall?"}),
            )
            .await;
        assert_eq!(t["status"], "awaiting_human", "{t}");
    }

    /// Writes `shape`'s thread through the API: every session asked, answered and decided but
    /// the last, which waits on its question. The thread, as `GET /threads/{key}` shows it.
    async fn build(&self, shape: &Shape) -> Value {
        let key = &shape.agent;
        let mut t = self
            .post(
                "/threads?wait=true",
                json!({"agent": key, "key": key, "text": "Start 0."}),
            )
            .await;
        for s in 1..shape.sessions {
            assert_eq!(t["status"], "awaiting_human", "{t}");
            let approval = t["approval"].as_str().expect("approval");
            let done = self
                .post(
                    &format!("/approvals/{approval}?wait=true"),
                    json!({"text": "approved"}),
                )
                .await;
            assert_eq!(done["status"], "idle", "{done}");
            t = self
                .post(
                    &format!("/threads/{key}/messages?wait=true"),
                    json!({"text": format!("Start {s}.")}),
                )
                .await;
        }
        assert_eq!(t["status"], "awaiting_human", "{t}");
        self.get_json(&format!("/threads/{key}")).await
    }
}

/// How many runs a row takes: `BENCH_READS`, or fewer (at least [`MIN_READS`]) once a row
/// has run for `BENCH_BUDGET` seconds (default 20), so a slow read on a long history does not
/// hold the run for minutes. The table says how many.
struct Runs {
    n: usize,
    budget: Duration,
}

const MIN_READS: usize = 10;

/// Up to `runs.n` runs of `read`, one at a time (after one untimed): sorted latencies.
async fn time<F: Future<Output = ()>>(runs: &Runs, mut read: impl FnMut() -> F) -> Vec<Duration> {
    read().await;
    let mut took = Vec::with_capacity(runs.n);
    let began = Instant::now();
    for i in 0..runs.n {
        if i >= MIN_READS && began.elapsed() > runs.budget {
            break;
        }
        let start = Instant::now();
        read().await;
        took.push(start.elapsed());
    }
    took.sort();
    took
}

fn header(what: &str) {
    println!();
    println!("| read                       | {what:<24} | reads | p50 (ms)  | p99 (ms)  |");
    println!(
        "| -------------------------- | ------------------------ | ----- | --------- | --------- |"
    );
}

fn row(read: &str, of: &str, took: &[Duration]) {
    println!(
        "| {read:<26} | {of:<24} | {:>5} | {:>9.2} | {:>9.2} |",
        took.len(),
        ms(percentile(took, 0.5)),
        ms(percentile(took, 0.99))
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(run());
}

async fn run() {
    let _cleanup = Cleanup;
    let history: Vec<usize> = std::env::var("BENCH_HISTORY")
        .unwrap_or_else(|_| "10,10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let sessions = env("BENCH_SESSIONS", 1_000);
    let reads = env("BENCH_READS", 200);
    let runs = Runs {
        n: reads,
        budget: Duration::from_secs(env("BENCH_BUDGET", 20) as u64),
    };
    let open = env("BENCH_OPEN", 10_000);
    let live = env("BENCH_LIVE", 50);
    let mut shapes: Vec<Shape> = history.iter().map(|&n| Shape::history(n)).collect();
    if sessions > 0 {
        shapes.push(Shape::sessions(sessions));
    }
    let (stores, backend, _) = stores_at().await;
    let store = stores.engine.clone();
    let runtime = Runtime::builder(project(&shapes), store.clone())
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
    let state = duet_server::AppState::new(
        runtime,
        stores.server.clone(),
        duet_server::Options::default(),
    );
    tokio::spawn(duet_server::serve(state, listener, std::future::pending()));
    let client = Arc::new(Client {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(8)
            .build()
            .expect("client"),
        base,
        token: key.token,
    });
    let cookie = client.sign_in().await;
    println!(
        "backend: {backend}; {reads} reads of each, one at a time (fewer past {} s a row)",
        runs.budget.as_secs()
    );

    // (1) the threads.
    let mut built = Vec::new();
    for shape in &shapes {
        let start = Instant::now();
        let t = client.build(shape).await;
        println!(
            "(1) {}: {} sessions, journal of {} entries, written in {:.1} s",
            shape.agent,
            t["session"],
            t["seq"],
            start.elapsed().as_secs_f64()
        );
        built.push(t);
    }

    // (2) the reads of each.
    header("thread (journal entries)");
    for (shape, t) in shapes.iter().zip(&built) {
        let agent = shape.agent.as_str();
        let of = format!("{} ({})", shape.label, t["seq"]);
        let thread = format!("/threads/{agent}");
        let took = time(&runs, || async {
            client.get(&thread, None).await;
        })
        .await;
        row("GET /threads/{key}", &of, &took);
        let task = format!(
            "{}.{}",
            t["id"].as_str().expect("id"),
            t["session"].as_i64().expect("session")
        );
        let took = time(&runs, || async {
            let task = client.get_task(agent, &task).await;
            assert_eq!(
                task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
                "{task}"
            );
        })
        .await;
        row("A2A GetTask", &of, &took);
        let state = format!("/agents/{agent}/control/state?session={agent}");
        let took = time(&runs, || async {
            client.get(&state, None).await;
        })
        .await;
        row("/control/state", &of, &took);
        let took = time(&runs, || client.open_events(agent, agent)).await;
        row("/control/events (open)", &of, &took);
        let approval = t["approval"].as_str().expect("approval");
        let item = format!("/inbox/items/{}", segment(approval));
        let took = time(&runs, || async {
            client.get(&item, Some(&cookie)).await;
        })
        .await;
        row("inbox question page", &of, &took);
        let approvals = format!("/approvals?agent={agent}");
        let took = time(&runs, || async {
            let page = client.get_json(&approvals).await;
            assert_eq!(page["items"].as_array().map(Vec::len), Some(1), "{page}");
        })
        .await;
        row("GET /approvals?agent=", &of, &took);
    }

    // (3) a person with `open` questions.
    if open == 0 {
        return;
    }
    println!();
    let start = Instant::now();
    futures::stream::iter(0..open)
        .map(|i| {
            let c = client.clone();
            async move { c.park(&format!("open-{i}")).await }
        })
        .buffer_unordered(8)
        .for_each(|()| async {})
        .await;
    println!(
        "(3) {open} gate threads parked in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    // The cursors of every page, oldest first.
    let mut cursors = Vec::new();
    let mut listed = 0;
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/approvals?cursor={c}"),
            None => "/approvals".to_owned(),
        };
        let page = client.get_json(&path).await;
        listed += page["items"].as_array().map_or(0, Vec::len);
        match page["nextCursor"].as_str() {
            Some(c) => {
                cursors.push(c.to_owned());
                cursor = Some(c.to_owned());
            }
            None => break,
        }
    }
    println!(
        "    GET /approvals lists {listed} questions in {} pages of 50",
        cursors.len() + 1
    );
    header("open questions");
    let of = format!("{listed} listed");
    let took = time(&runs, || async {
        client.get("/approvals", None).await;
    })
    .await;
    row("GET /approvals (first)", &of, &took);
    if let Some(middle) = cursors.get(cursors.len() / 2) {
        let path = format!("/approvals?cursor={middle}");
        let took = time(&runs, || async {
            client.get(&path, None).await;
        })
        .await;
        row("GET /approvals (middle)", &of, &took);
    }
    let took = time(&runs, || async {
        client.get("/inbox", Some(&cookie)).await;
    })
    .await;
    row("inbox queue page", &of, &took);

    // The live inbox: a commit, as the change feed publishes it, to the inbox's event. With
    // fewer than 500 listed, a new question parks; with more, the queue (the oldest 500) does
    // not change when one more parks, so the oldest question is answered instead.
    let answers = listed >= 500;
    let mut feed = store.changes();
    let (commits, mut committed) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(e) = feed.next().await {
            if let FeedEvent::Changed(c) = e {
                let _ = commits.send((c.thread.to_string(), c.status, Instant::now()));
            }
        }
    });
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let resp = client
        .http
        .get(format!("{}/inbox/events?order=newest", client.base))
        .header("cookie", &cookie)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("inbox events");
    assert!(resp.status().is_success(), "{}", resp.status());
    tokio::spawn(async move {
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                // The whole list (`queue`: the first, and after a resync) or what changed in it
                // (`item`, `remove`).
                if event
                    .lines()
                    .any(|l| matches!(l, "event: queue" | "event: item" | "event: remove"))
                {
                    let _ = events.send(Instant::now());
                }
            }
        }
    });
    // The list as it is, first.
    received.recv().await.expect("the first queue event");
    let mut updates = Vec::with_capacity(live);
    for i in 0..live {
        while committed.try_recv().is_ok() {}
        while received.try_recv().is_ok() {}
        let target = if answers {
            let page = client.get_json("/approvals?limit=1").await;
            let id = page["items"][0]["id"].as_str().expect("an open question");
            let thread = id.split(':').next().unwrap_or_default().to_owned();
            client
                .post(
                    &format!("/approvals/{}?wait=true", segment(id)),
                    json!({"text": "approved"}),
                )
                .await;
            Some(thread)
        } else {
            client.park(&format!("live-{i}")).await;
            None
        };
        let at = loop {
            let (thread, status, at) = committed.recv().await.expect("the change feed");
            match &target {
                Some(t) if *t == thread => break at,
                None if status == ThreadStatus::AwaitingHuman => break at,
                _ => {}
            }
        };
        match tokio::time::timeout(Duration::from_secs(60), received.recv()).await {
            Ok(Some(got)) => updates.push(got.saturating_duration_since(at)),
            _ => {
                println!("    no queue event within a minute of change {i}: stopped");
                break;
            }
        }
    }
    updates.sort();
    if !updates.is_empty() {
        let what = if answers {
            "live inbox (an answer)"
        } else {
            "live inbox (a new park)"
        };
        row(what, &format!("{listed}+ open"), &updates);
    }
}

/// `s` as one path segment.
fn segment(s: &str) -> String {
    s.replace('%', "%25")
        .replace('/', "%2F")
        .replace(':', "%3A")
}
