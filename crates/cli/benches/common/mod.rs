//! What the benchmarks share: scratch folders removed at the end, the store to run on
//! (`DATABASE_URL`: a fresh Postgres database, dropped at the end, or that database itself with
//! `BENCH_SHARED_DB`; else a SQLite file), RSS and percentiles.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use duet_runtime::Store;

pub mod calls;

/// The `duet` binary's allocator, so a benchmark measures what the binary runs.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// This run's scratch folders live under one root, removed when the run ends (even by a
/// panic): a 100,000-thread database is not left behind.
pub fn root() -> PathBuf {
    std::env::temp_dir().join(format!("duet-bench-{}", std::process::id()))
}

pub fn scratch() -> PathBuf {
    let dir = root().join(uuid::Uuid::now_v7().simple().to_string());
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The Postgres database this run made (server URL, name), dropped at the end.
pub static PG: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

/// Removes [`root`] (and drops [`PG`]) when dropped.
pub struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(root());
        if let Some((url, name)) = PG.get() {
            let _ = std::process::Command::new("psql")
                .arg(url)
                .arg("-qc")
                .arg(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .status();
        }
    }
}

pub fn write(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

pub async fn store() -> (Arc<dyn Store>, &'static str) {
    let (stores, backend, _) = stores_at().await;
    (stores.engine, backend)
}

/// [`store`], and the URL that opens it again.
pub async fn store_at() -> (Arc<dyn Store>, &'static str, String) {
    let (stores, backend, url) = stores_at().await;
    (stores.engine, backend, url)
}

/// [`store_at`] with the server's tables of the same database too.
pub async fn stores_at() -> (duet_store::Stores, &'static str, String) {
    match std::env::var("DATABASE_URL") {
        // `BENCH_SHARED_DB=1`: that database itself, kept, so several bench processes share
        // one (`docs/scale.md`); their keys then carry the process id (`key_prefix`).
        Ok(url) if std::env::var_os("BENCH_SHARED_DB").is_some() => (
            duet_store::open(&url).await.expect("postgres"),
            "postgres",
            url,
        ),
        Ok(url) => {
            let name = format!("duet_bench_{}", uuid::Uuid::now_v7().simple());
            let status = std::process::Command::new("psql")
                .arg(&url)
                .arg("-qc")
                .arg(format!("CREATE DATABASE {name}"))
                .status()
                .expect("psql");
            assert!(status.success());
            let _ = PG.set((url.clone(), name.clone()));
            let (base, _) = url.rsplit_once('/').expect("URL ends in /DB");
            let url = format!("{base}/{name}");
            (
                duet_store::open(&url).await.expect("postgres"),
                "postgres",
                url,
            )
        }
        Err(_) => {
            // `BENCH_SQLITE_OPTIONS=synchronous=full`: the SQLite location's options.
            let path = scratch().join("bench.db");
            let url = match std::env::var("BENCH_SQLITE_OPTIONS") {
                Ok(options) => format!("sqlite:{}?{options}", path.display()),
                Err(_) => path.display().to_string(),
            };
            let store = duet_store::open(&url).await.expect("sqlite");
            (store, "sqlite", url)
        }
    }
}

/// What this process's thread keys start with: its id under `BENCH_SHARED_DB`, else nothing.
pub fn key_prefix() -> String {
    match std::env::var_os("BENCH_SHARED_DB") {
        // Unique to this process and sitting (a pid repeats across sittings on a kept database).
        Some(_) => {
            static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
            PREFIX
                .get_or_init(|| format!("p{}-", uuid::Uuid::now_v7().simple()))
                .clone()
        }
        None => String::new(),
    }
}

pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The CPU time this process's threads have had (the sum of each live thread's
/// `/proc/self/task/*/schedstat`, in nanoseconds): a phase's difference is its CPU, server and
/// in-process client together, steadier from run to run than its throughput on a shared VM. A
/// thread that ended meanwhile is not counted (the server's threads live as long as it).
pub fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// CPU milliseconds per operation since `start` (a [`cpu_ns`] reading), for `ops` operations.
pub fn cpu_per(start: u64, ops: usize) -> f64 {
    cpu_ns().saturating_sub(start) as f64 / 1e6 / ops.max(1) as f64
}

/// The `p` quantile of `sorted`; zero for no samples (a phase asked to run none).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

pub fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes `gate` into `dir`: a model asks, a person answers, the model records the decision.
pub fn gate(dir: &Path) {
    write(
        dir,
        "agents/agents/gate.yaml",
        "name: gate\nsideA:\n  prompt: gate\n  sessionStop: { name: decide, messageProperty: decision }\nsideB: { human: true, approver: true }\n",
    );
    write(
        dir,
        "agents/prompts/gate.yaml",
        "name: gate\ntoolDescription: d\nmodel: gate_model\nincludeChat: true\nprompt: Ask for approval.\ntools: [decide]\n",
    );
    write(
        dir,
        "agents/tools/decide.yaml",
        "description: Record the decision.\nargs: { type: object, properties: { decision: { type: string } }, required: [decision] }\nresult: \"Decision: {{decision}}\"\n",
    );
    write(
        dir,
        "agents/models/gate_model.yaml",
        "name: gate_model\nprovider: scripted\nmodel: demo\nscript:\n  - text: Approve the change?\n  - tool_calls: [{ name: decide, arguments: { decision: approved } }]\n",
    );
}

/// The project in `dir`; it must validate.
pub fn load(dir: &Path) -> Arc<duet_spec::Project> {
    let loaded = duet_spec::load(dir).expect("bench project");
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    Arc::new(loaded.project)
}

/// The benchmark project: `pingpong` (prompt × prompt, `turns` turns) and `gate` (prompt × human).
pub fn project(turns: usize) -> Arc<duet_spec::Project> {
    let dir = scratch();
    let half = turns / 2;
    write(
        &dir,
        "agents/agents/pingpong.yaml",
        &format!(
            "name: pingpong\nmaxSessionTurns: {half}\nsideA: {{ prompt: ping, maxSteps: {turns} }}\nsideB: {{ prompt: pong, maxSteps: {turns} }}\n"
        ),
    );
    for name in ["ping", "pong"] {
        write(
            &dir,
            &format!("agents/prompts/{name}.yaml"),
            &format!(
                "name: {name}\ntoolDescription: d\nmodel: {name}_model\nprompt: Say {name}.\n"
            ),
        );
        let mut script = format!("name: {name}_model\nprovider: scripted\nmodel: demo\nscript:\n");
        for i in 0..half {
            script.push_str(&format!("  - text: \"{name} {i}\"\n"));
        }
        write(&dir, &format!("agents/models/{name}_model.yaml"), &script);
    }
    gate(&dir);
    load(&dir)
}

/// An HTTP client of `duet serve` under one API key (the server benches').
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl Client {
    /// POSTs `body` as JSON to `path`: the answer's JSON, which must be a success.
    pub async fn post(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = resp.status();
        let body: serde_json::Value = resp.json().await.expect("json");
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }
}
