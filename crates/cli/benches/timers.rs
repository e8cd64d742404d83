//! The timers benchmark (a documented command, not a test): durable time with `BENCH_PENDING`
//! (default 100,000) timers pending a day ahead, as many as a busy deployment keeps.
//!
//! ```sh
//! cargo bench -p duet-cli --bench timers                        # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench timers                      # Postgres (a fresh database)
//! BENCH_PENDING=10000 BENCH_TIMERS=500 cargo bench -p duet-cli --bench timers   # smaller
//! ```
//!
//! Timers are written as a step writes them: in a commit under the thread's lease (the 100,000
//! on 100 threads, 1,000 a commit). Each fires the effect `tick`, Rust code this process
//! registers that notes when it started and does nothing else, so what is measured is the
//! timer machinery: the claim, the thread's lease, its state read, the commit that completes
//! the timer.
//!
//! (a) idle: a real `duet serve` process on the database, nothing due: its CPU time
//!     (utime + stime from `/proc/PID/stat`) over `BENCH_IDLE_S` (default 10) seconds, from a
//!     second after it listens, and its RSS;
//! (b) burst: `BENCH_TIMERS` (default 2,000) timers on as many threads, all due at one moment,
//!     fired by this process's timer loop (`Runtime::serve_timers`, the loop `duet serve`
//!     runs): timers fired/s (from the due moment to the last one completed) and lateness
//!     p50/p99 (the effect's start − its due time; in a burst, mostly the wait in line);
//! (c) steady: `BENCH_STEADY` (default 500) timers due 20 ms apart (50/s) on 50 threads:
//!     lateness p50/p99 when the loop keeps up.

#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use common::{Cleanup, env, load, rss_kib, scratch, store_at, write};
use duet_runtime::{
    CancellationToken, Commit, Effect, HandlerError, Lease, NewThread, NewTimer, Runtime, Store,
    ThreadState, TimerKind,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;
use uuid::Uuid;

/// A day, in ms: how far ahead the pending timers are.
const DAY_MS: i64 = 86_400_000;

fn now_us() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_micros()).expect("µs fit")
}

fn now_ms() -> i64 {
    now_us() / 1_000
}

/// The lateness of each `tick` run (ms), and a wake per run.
#[derive(Clone, Default)]
struct Ticks {
    late: Arc<Mutex<Vec<f64>>>,
    ran: Arc<Notify>,
}

impl Ticks {
    fn count(&self) -> usize {
        self.late.lock().expect("ticks").len()
    }

    /// Waits until `n` ticks ran in all; their lateness, sorted.
    async fn until(&self, n: usize) -> Vec<f64> {
        loop {
            let ran = self.ran.notified();
            if self.count() >= n {
                break;
            }
            ran.await;
        }
        let mut late = self.late.lock().expect("ticks").clone();
        late.sort_by(f64::total_cmp);
        late
    }

    fn clear(&self) {
        self.late.lock().expect("ticks").clear();
    }
}

/// The `tick` effect: notes how late it started (`args.due`, ms) and does nothing else.
struct Tick(Ticks);

#[async_trait]
impl Effect for Tick {
    async fn run(&self, _state: &mut ThreadState<'_>, args: &Value) -> Result<(), HandlerError> {
        let started = now_us();
        let due = args["due"].as_i64().unwrap_or(0);
        let late = (started - due * 1_000) as f64 / 1_000.0;
        self.0.late.lock().expect("ticks").push(late);
        self.0.ran.notify_waiters();
        Ok(())
    }
}

fn tick(due_at: i64) -> NewTimer {
    NewTimer {
        id: Uuid::now_v7(),
        kind: TimerKind::Effect,
        name: "tick".into(),
        args: json!({ "due": due_at }),
        subject: None,
        due_at,
        max_attempts: 3,
    }
}

/// Opens thread `key` and writes `timers` on it in one commit under its lease, given back.
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
        until: now + 60_000,
        now,
    };
    assert!(store.claim(t.id, lease).await.expect("claim"), "{key}");
    t.updated_at = now;
    let commit = Commit {
        timers,
        settle: true,
        ..Commit::default()
    };
    store.commit(&t, owner, commit).await.expect("scheduled");
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A process's CPU time so far (ms), from `/proc/PID/stat`.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    let after = stat.rsplit_once(')').expect("stat's comm").1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of the line (utime, stime); `after` starts at field 3.
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    let hz = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(100.0);
    ticks * 1_000.0 / hz
}

fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// (a): `duet serve` on `url` with the project in `dir`, idle for `secs` seconds once it
/// listens: (CPU ms per second, RSS KiB).
fn idle_serve(dir: &std::path::Path, url: &str, secs: u64) -> (f64, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["serve", "--listen", "127.0.0.1:0", "--project"])
        .arg(dir)
        .arg("--db")
        .arg(url)
        .env("RUST_LOG", "warn")
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("duet serve starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    for line in lines.by_ref() {
        if line
            .expect("stderr")
            .starts_with("duet serve: listening on ")
        {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let pid = child.id();
    // A second to settle after it listens (its first recovery pass, its pools warming).
    std::thread::sleep(Duration::from_secs(1));
    let (before, start) = (cpu_ms(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    let used = cpu_ms(pid) - before;
    let per_s = used / start.elapsed().as_secs_f64();
    let rss = rss_of(pid);
    let _ = child.kill();
    let _ = child.wait();
    (per_s, rss)
}

/// Waits until no timer is due or processing (the fired ones recorded as completed).
async fn settled(store: &Arc<dyn Store>) {
    loop {
        let c = store.timer_counts(now_ms()).await.expect("counts");
        if c.due == 0 && c.processing == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::main]
async fn main() {
    let _cleanup = Cleanup;
    let pending = env("BENCH_PENDING", 100_000);
    let burst = env("BENCH_TIMERS", 2_000);
    let steady = env("BENCH_STEADY", 500);
    let idle_s = env("BENCH_IDLE_S", 10) as u64;
    let dir = scratch();
    write(
        &dir,
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    write(
        &dir,
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nprompt: p\n",
    );
    write(
        &dir,
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: Done.\n",
    );
    write(
        &dir,
        "agents/effects/tick.yaml",
        "description: Notes when it ran.\n",
    );
    let project = load(&dir);
    let (store, backend, url) = store_at().await;
    println!("backend: {backend}");

    // The pending ones, a day ahead.
    let start = Instant::now();
    let later = now_ms() + DAY_MS;
    let per_thread = 1_000;
    let mut left = pending;
    for n in 0.. {
        if left == 0 {
            break;
        }
        let k = left.min(per_thread);
        left -= k;
        seed(
            &store,
            &format!("later-{n}"),
            (0..k).map(|_| tick(later)).collect(),
        )
        .await;
    }
    let size = store.size_bytes().await.expect("size");
    println!(
        "{pending} timers pending, written in {:.1} s; database {} MiB",
        start.elapsed().as_secs_f64(),
        size / (1024 * 1024)
    );

    // (a) idle.
    let (cpu, rss) = idle_serve(&dir, &url, idle_s);
    println!(
        "(a) idle `duet serve` with {pending} pending, nothing due: {cpu:.2} ms CPU per second over {idle_s} s ({:.3}% of a core); RSS {} MiB",
        cpu / 10.0,
        rss / 1024
    );

    // This process's timer loop, as `duet serve` runs it.
    let ticks = Ticks::default();
    let rt = Runtime::builder(project, store.clone())
        .effect("tick", Tick(ticks.clone()))
        .build();
    let stop = CancellationToken::new();
    let looping = {
        let (rt, stop) = (rt.clone(), stop.clone());
        tokio::spawn(async move { rt.serve_timers(stop).await })
    };

    // (b) burst.
    let rss_before = rss_kib();
    let lead = 3_000 + i64::try_from(burst).unwrap_or(0) * 5;
    let due = now_ms() + lead;
    futures::stream::iter(0..burst)
        .map(|i| {
            let store = &store;
            async move { seed(store, &format!("burst-{i}"), vec![tick(due)]).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    assert!(
        now_ms() < due,
        "the burst took longer to write than its lead ({lead} ms)"
    );
    let late = ticks.until(burst).await;
    settled(&store).await;
    let took = (now_us() - due * 1_000) as f64 / 1e6;
    println!(
        "(b) burst: {burst} timers due at one moment, {pending} pending: {:.0} fired/s ({:.2} s to the last completed); lateness p50 {:.1} ms p99 {:.1} ms; RSS {} → {} MiB",
        burst as f64 / took,
        took,
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        rss_before / 1024,
        rss_kib() / 1024
    );

    // (c) steady.
    ticks.clear();
    let first = now_ms() + 2_000;
    for t in 0..50 {
        let timers = (t..steady)
            .step_by(50)
            .map(|i| tick(first + i64::try_from(i).unwrap_or(0) * 20))
            .collect::<Vec<_>>();
        if !timers.is_empty() {
            seed(&store, &format!("steady-{t}"), timers).await;
        }
    }
    assert!(
        now_ms() < first,
        "the steady timers took longer to write than their lead"
    );
    let late = ticks.until(steady).await;
    settled(&store).await;
    println!(
        "(c) steady: {steady} timers due 20 ms apart (50/s), {pending} pending: lateness p50 {:.1} ms p99 {:.1} ms max {:.1} ms; RSS {} MiB",
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.last().copied().unwrap_or(f64::NAN),
        rss_kib() / 1024
    );
    let counts = store.timer_counts(now_ms()).await.expect("counts");
    assert_eq!(counts.pending, pending as u64, "the far ones still wait");
    assert_eq!(counts.failed, 0, "no timer failed");
    stop.cancel();
    let _ = looping.await;
}
