//! Timers across real `duet serve` processes (issue #30), their side effects counted where they
//! land: the effect `call` is the built-in `invoke_tool` running the `http` tool `hit`, which
//! POSTs `{"timer": ID}` (the timer's own id, so each request names its timer) to a counting
//! server this test runs on 127.0.0.1. Timers are written the way a step writes them — in a
//! commit under the thread's lease — by this test's own store, before or while the processes
//! run.
//!
//! - A process SIGKILLed while it holds a claimed timer (its request held open by the counter)
//!   leaves it to another process once the claim runs out (`DUET_TIMER_CLAIM_MS`): the timer
//!   ends `completed`. Firing is at least once, and this is the one case the design sends
//!   twice: the request in flight when the process died, sent again with the same
//!   `Idempotency-Key` (a receiver that honours the key applies it once).
//! - Two processes on one Postgres, 200 timers due at once on 200 threads: each timer's id
//!   reaches the counter exactly once, and every timer is `completed` after one attempt.
//! - A restart with 10,000 timers pending far ahead: the new process fires the one due soon.
//!
//! On SQLite and on Postgres when `DATABASE_URL` is set; the two-process test needs Postgres
//! (without `DATABASE_URL` it says so and passes, as `scale_out.rs` does).

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use duet_runtime::{
    Commit, Lease, NewThread, NewTimer, Store, Timer, TimerKind, TimerQuery, TimerStatus,
};
use duet_store::testing::Backend;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader as AsyncBufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use uuid::Uuid;

/// One request the counter received: its `Idempotency-Key` and the `timer` its body named.
#[derive(Clone, Debug)]
struct Hit {
    key: String,
    timer: String,
}

/// The counting server: its URL, what it received, and a tick per request as it arrives.
struct Counter {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    arrived: mpsc::UnboundedReceiver<()>,
}

impl Counter {
    /// A one-route HTTP server on 127.0.0.1. With `hang_first`, the first request is counted
    /// and never answered (its sender dies waiting).
    fn start(hang_first: bool) -> Counter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/hit", listener.local_addr().expect("addr"));
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let (tx, arrived) = mpsc::unbounded_channel();
        let seen = hits.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let (mut key, mut length, mut line) = (String::new(), 0usize, String::new());
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    let l = line.trim_end().to_owned();
                    line.clear();
                    if l.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = l.split_once(':') {
                        match name.to_ascii_lowercase().as_str() {
                            "idempotency-key" => key = value.trim().to_owned(),
                            "content-length" => length = value.trim().parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let timer = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|b| b["timer"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                let first = {
                    let mut hits = seen.lock().expect("hits");
                    hits.push(Hit { key, timer });
                    hits.len() == 1
                };
                let _ = tx.send(());
                if hang_first && first {
                    held.push(stream);
                    continue;
                }
                let answer = r#"{"ok":true}"#;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        Counter { url, hits, arrived }
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("hits").clone()
    }

    /// Waits for `n` more requests to arrive (at most a minute).
    async fn arrivals(&mut self, n: usize) {
        for i in 0..n {
            let got = tokio::time::timeout(Duration::from_secs(60), self.arrived.recv()).await;
            assert!(
                matches!(got, Ok(Some(()))),
                "{i} of {n} requests arrived; received: {:?}",
                self.hits().len()
            );
        }
    }
}

/// `desk` (its model never runs here: effects run at rest), the `hit` tool and the `call`
/// effect (`invoke_tool`, up to 5 attempts).
fn project(url: &str) -> support::Scratch {
    let p = support::Scratch::new("timers-processes");
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [hit]\n",
    );
    p.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: Done.\n",
    );
    p.write(
        "agents/tools/hit.yaml",
        &format!(
            "description: Tells the counter a timer ran.\nargs: {{ type: object, properties: {{ timer: {{ type: string }} }}, required: [timer] }}\nhttp:\n  method: POST\n  url: \"{url}\"\n"
        ),
    );
    p.write(
        "agents/effects/call.yaml",
        "description: Runs a tool later.\nbuiltin: invoke_tool\nmaxAttempts: 5\n",
    );
    p
}

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("ms fit")
}

/// A `call` timer due at `due_at` whose request names its own id.
fn call(due_at: i64) -> NewTimer {
    let id = Uuid::now_v7();
    NewTimer {
        id,
        kind: TimerKind::Effect,
        name: "call".into(),
        args: json!({"tool": "hit", "args": {"timer": id.to_string()}}),
        subject: None,
        due_at,
        max_attempts: 5,
    }
}

/// Opens thread `key` (agent `desk`) and writes `timers` on it in one commit under its lease,
/// which the commit then gives back: what a step that scheduled them writes.
async fn seed(store: &Arc<dyn Store>, key: &str, timers: Vec<NewTimer>) {
    let now = now_ms();
    let new = NewThread {
        id: Uuid::now_v7(),
        agent: "desk",
        parent: None,
        principal: None,
        source: None,
        now,
    };
    let mut t = store.open_thread(key, new).await.expect("thread");
    let owner = Uuid::now_v7();
    let lease = Lease {
        owner,
        until: now + 30_000,
        now,
    };
    assert!(
        store.claim(t.id, lease).await.expect("claim"),
        "{key}: free"
    );
    t.updated_at = now;
    let commit = Commit {
        timers,
        settle: true,
        ..Commit::default()
    };
    store.commit(&t, owner, commit).await.expect("scheduled");
}

async fn timer(store: &Arc<dyn Store>, id: Uuid) -> Timer {
    store.timer(id).await.expect("read").expect("the timer")
}

/// Reads the store until `done` holds (at most two minutes): what is awaited is another
/// process's write to the database, which this process hears of no other way on SQLite.
async fn until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "still waiting: {what}"
        );
        // tidy:allow-sleep: the condition is a row another process writes; this reads it again
        // after a pause ("wait until", never a timed assertion).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn db_arg(backend: &Backend) -> String {
    match backend {
        Backend::Sqlite(p) => p.display().to_string(),
        Backend::Postgres(url) => url.clone(),
        Backend::Memory(..) => unreachable!("a process cannot open another's memory store"),
    }
}

/// `duet serve` on 127.0.0.1 with timer claims of `claim_ms`, once it listens (its timer loop
/// runs from the start). Killed when dropped.
async fn serve(project: &Path, db: &str, claim_ms: u32) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["serve", "--listen", "127.0.0.1:0", "--project"])
        .arg(project)
        .arg("--db")
        .arg(db)
        .env("DUET_LEASE_MS", "600")
        .env("DUET_TIMER_CLAIM_MS", claim_ms.to_string())
        .env("RUST_LOG", "warn")
        .env_remove("DUET_DATABASE_URL")
        .env_remove("DUET_CRASH_AT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("duet serve starts");
    let mut lines = AsyncBufReader::new(child.stderr.take().expect("stderr")).lines();
    loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr")
            .expect("serve printed its address");
        if line.starts_with("duet serve: listening on ") {
            break;
        }
    }
    // Keep draining its stderr so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

async fn sigkill(mut child: Child) {
    child.start_kill().expect("SIGKILL");
    let _ = child.wait().await;
}

#[tokio::test]
async fn a_process_killed_holding_a_timer_leaves_it_to_another_once_the_claim_runs_out() {
    for backend in support::backends().await {
        let at = backend.name();
        let db = db_arg(&backend);
        let store = backend.open().await;
        let mut counter = Counter::start(true);
        let dir = project(&counter.url);
        let scheduled = call(now_ms());
        let id = scheduled.id;
        seed(&store, "killed", vec![scheduled]).await;

        let first = serve(dir.root(), &db, 4_000).await;
        counter.arrivals(1).await;
        let held = timer(&store, id).await;
        assert_eq!(held.status, TimerStatus::Processing, "{at}: claimed");
        assert!(held.claimed_by.is_some(), "{at}: {held:?}");
        sigkill(first).await;
        assert_eq!(
            timer(&store, id).await.status,
            TimerStatus::Processing,
            "{at}: the dead process's claim holds until it runs out"
        );

        let second = serve(dir.root(), &db, 4_000).await;
        until(&format!("{at}: the timer finished"), || async {
            timer(&store, id).await.status.is_final()
        })
        .await;
        let done = timer(&store, id).await;
        assert_eq!(done.status, TimerStatus::Completed, "{at}: {done:?}");
        assert_eq!(
            done.attempts, 2,
            "{at}: the killed attempt, then the one that ran"
        );
        let hits = counter.hits();
        assert_eq!(
            hits.len(),
            2,
            "{at}: the request in flight when the process died, sent again: {hits:?}"
        );
        assert!(
            hits.iter().all(|h| h.timer == id.to_string()),
            "{at}: {hits:?}"
        );
        assert!(
            !hits[0].key.is_empty() && hits[0].key == hits[1].key,
            "{at}: one Idempotency-Key for both: {hits:?}"
        );
        sigkill(second).await;
    }
}

#[tokio::test]
async fn two_processes_on_one_postgres_run_each_of_200_timers_exactly_once() {
    let Some(backend) = support::backends()
        .await
        .into_iter()
        .find(|b| matches!(b, Backend::Postgres(_)))
    else {
        eprintln!("two processes on one database: no DATABASE_URL; skipped");
        return;
    };
    const N: usize = 200;
    let db = db_arg(&backend);
    let store = backend.open().await;
    let mut counter = Counter::start(false);
    let dir = project(&counter.url);
    let (a, b) = tokio::join!(
        serve(dir.root(), &db, 60_000),
        serve(dir.root(), &db, 60_000)
    );
    // Both processes run and listen for wakeups; the timers are written from here, each on a
    // thread of its own, all due at one moment.
    let due = now_ms() + 1_000;
    let mut ids = Vec::with_capacity(N);
    for i in 0..N {
        let t = call(due);
        ids.push(t.id);
        seed(&store, &format!("t{i}"), vec![t]).await;
    }
    counter.arrivals(N).await;
    until("every timer finished", || async {
        let counts = store.timer_counts(now_ms()).await.expect("counts");
        counts.pending + counts.processing == 0
    })
    .await;

    let mut seen: HashMap<String, usize> = HashMap::new();
    for hit in counter.hits() {
        *seen.entry(hit.timer).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "timers sent more than once: {twice:?}");
    assert_eq!(seen.len(), N, "one request per timer");
    for id in &ids {
        assert_eq!(seen.get(&id.to_string()), Some(&1), "timer {id}");
        let t = timer(&store, *id).await;
        assert_eq!((t.status, t.attempts), (TimerStatus::Completed, 1), "{t:?}");
    }
    sigkill(a).await;
    sigkill(b).await;
}

#[tokio::test]
async fn a_restart_with_10000_pending_timers_fires_the_one_due() {
    const PENDING: usize = 10_000;
    const PER_THREAD: usize = 1_000;
    for backend in support::backends().await {
        let at = backend.name();
        let db = db_arg(&backend);
        let store = backend.open().await;
        let mut counter = Counter::start(false);
        let dir = project(&counter.url);

        // A process runs while 10,000 timers are written a day ahead, and dies.
        let before = serve(dir.root(), &db, 60_000).await;
        let later = now_ms() + 86_400_000;
        for n in 0..PENDING / PER_THREAD {
            let timers = (0..PER_THREAD).map(|_| call(later)).collect();
            seed(&store, &format!("later{n}"), timers).await;
        }
        sigkill(before).await;

        // One more falls due a second from now; the next process fires it.
        let soon = call(now_ms() + 1_000);
        let (id, due_at) = (soon.id, soon.due_at);
        seed(&store, "soon", vec![soon]).await;
        let after = serve(dir.root(), &db, 60_000).await;
        counter.arrivals(1).await;
        let fired = now_ms();
        until(&format!("{at}: the due timer finished"), || async {
            timer(&store, id).await.status.is_final()
        })
        .await;
        assert_eq!(
            timer(&store, id).await.status,
            TimerStatus::Completed,
            "{at}"
        );
        let hits = counter.hits();
        assert_eq!(hits.len(), 1, "{at}: {hits:?}");
        assert_eq!(hits[0].timer, id.to_string(), "{at}");
        eprintln!(
            "{at}: fired {} ms after its due time, {PENDING} pending",
            fired - due_at
        );
        let counts = store.timer_counts(now_ms()).await.expect("counts");
        assert_eq!(
            (counts.pending, counts.due, counts.processing),
            (PENDING as u64, 0, 0),
            "{at}: the far ones wait"
        );
        let left = TimerQuery {
            status: Some(TimerStatus::Pending),
            limit: 1,
            ..TimerQuery::default()
        };
        let next = store.timers(&left).await.expect("list");
        assert_eq!(next.first().map(|t| t.due_at), Some(later), "{at}");
        sigkill(after).await;
    }
}
