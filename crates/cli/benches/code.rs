//! What a TS tool costs a turn (#33), a documented command, not a test:
//!
//! ```sh
//! cargo bench -p duet-cli --bench code                          # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//!   cargo bench -p duet-cli --bench code                        # Postgres (a fresh database)
//! BENCH_TURNS=1000 BENCH_ROUNDS=5 cargo bench -p duet-cli --bench code  # (400 and 5)
//! ```
//!
//! The engine bench's prompt × prompt ping-pong, where each of ping's turns is two model steps —
//! a call of the tool `stamp`, then its text — and pong answers with text. One thread of
//! `BENCH_TURNS` ping turns per variant, each on a runtime composed as `duet run` composes it
//! (`duet::compose`), all on one database, after a warm-up thread of two turns on the same
//! runtime; `BENCH_ROUNDS` (5) rounds of the variants in turn, the median round and the best
//! reported (the machine's load moves single rounds). Only `stamp` differs:
//!
//! - `rust`: a builtin registered in Rust (`RuntimeBuilder::tool`) returning the same text;
//! - `ts`: a `.ts` tool whose `execute` returns it (the embedded host);
//! - `ts+state`: the same making three ThreadState calls (`getValue`, `setValue`, `env`);
//! - `node`: `ts+state` on the node host (skipped, saying so, without `node` on `PATH`).
//!
//! Prints each variant's ping turns/s and mean ping turn (tool step, text step, pong's answer,
//! their commits), and the difference from `rust`: what the code host adds to a turn. In
//! `ts+state` that includes the database's share of the state calls (`getValue` reads the
//! committed value, `setValue` adds a row to the step's commit), which a Rust `Tool` (no
//! ThreadState) does not make. A warm call's own p50/p99, the bridge answering in-process, is
//! `cargo bench -p duet-js --bench host` (embedded) and `--bench node_host`.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::{Cleanup, env, ms, scratch, store_at, write};
use duet_runtime::{
    CancellationToken, Delivered, EventSink, Runtime, Store, ThreadStatus, Tool, ToolContext,
    ToolResult,
};

/// `stamp` in Rust: what the TS one returns.
struct Stamp;

#[async_trait]
impl Tool for Stamp {
    async fn call(&self, _ctx: ToolContext, args: serde_json::Value) -> ToolResult {
        ToolResult::ok(format!("stamped {}", args["n"]))
    }
}

const ARGS: &str = "{ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }";

/// The `.ts` tool: its `execute` body by variant.
fn ts_tool(body: &str) -> String {
    format!(
        "import {{ defineTool }} from '@standardagents/spec';\n\
         export default defineTool({{\n  description: 'Stamps',\n  args: {ARGS},\n  \
         execute: async (state, args) => {{\n    {body}\n  }},\n}});\n"
    )
}

const PLAIN: &str = "return `stamped ${args.n}`;";
const STATEFUL: &str = "const n = (await state.getValue('n')) ?? 0;\n    \
    await state.setValue('n', n + 1);\n    \
    await state.env('REGION');\n    \
    return `stamped ${args.n}`;";

/// The project of `variant` in a scratch folder: `pingpong` of `turns` ping turns and `warm`
/// of two.
fn project(variant: &str, turns: usize) -> std::path::PathBuf {
    let dir = scratch();
    for (name, session) in [("pingpong", turns), ("warm", 2)] {
        write(
            &dir,
            &format!("agents/agents/{name}.yaml"),
            &format!(
                "name: {name}\nmaxSessionTurns: {}\nsideA: {{ prompt: ping, maxSteps: {} }}\nsideB: {{ prompt: pong, maxSteps: {} }}\n",
                session,
                turns * 4,
                turns * 4
            ),
        );
    }
    write(
        &dir,
        "agents/prompts/ping.yaml",
        "name: ping\ntoolDescription: d\nmodel: ping_model\nprompt: Say ping.\ntools: [stamp]\n",
    );
    write(
        &dir,
        "agents/prompts/pong.yaml",
        "name: pong\ntoolDescription: d\nmodel: pong_model\nprompt: Say pong.\n",
    );
    let mut ping = "name: ping_model\nprovider: scripted\nmodel: demo\nscript:\n".to_owned();
    let mut pong = "name: pong_model\nprovider: scripted\nmodel: demo\nscript:\n".to_owned();
    for i in 0..turns {
        ping.push_str(&format!(
            "  - tool_calls: [{{ name: stamp, arguments: {{ n: {i} }} }}]\n  - text: \"ping {i}\"\n"
        ));
        pong.push_str(&format!("  - text: \"pong {i}\"\n"));
    }
    write(&dir, "agents/models/ping_model.yaml", &ping);
    write(&dir, "agents/models/pong_model.yaml", &pong);
    match variant {
        "rust" => write(
            &dir,
            "agents/tools/stamp.yaml",
            "description: Stamps\nbuiltin: stamp\nargs: { type: object, properties: { n: { type: number } }, required: [n] }\n",
        ),
        "ts" => write(&dir, "agents/tools/stamp.ts", &ts_tool(PLAIN)),
        _ => write(&dir, "agents/tools/stamp.ts", &ts_tool(STATEFUL)),
    }
    if variant == "node" {
        write(&dir, "agents/code.yaml", "host: node\n");
    }
    dir
}

/// The runtime `duet run` composes for the project at `dir` (with `stamp` in Rust for `rust`).
fn runtime(variant: &str, dir: &Path, store: Arc<dyn Store>) -> Runtime {
    let loaded = duet::load(dir).expect("the bench project");
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    let builder = duet::compose(Arc::new(loaded.project), dir, store);
    let builder = if variant == "rust" {
        builder.tool("stamp", Stamp)
    } else {
        builder
    };
    builder.build()
}

async fn send(rt: &Runtime, key: &str, agent: &str) {
    let done = rt
        .send(
            key,
            Some(agent),
            "Start.",
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await;
    match done {
        Ok(Delivered::Settled(s)) => assert_eq!(s.status, ThreadStatus::Idle, "{key}"),
        other => panic!("{key}: {other:?}"),
    }
}

/// A ping-pong of `turns` on `rt` as thread `key`: the time it took.
async fn measure(rt: &Runtime, key: &str, turns: usize) -> Duration {
    let start = Instant::now();
    send(rt, key, "pingpong").await;
    let took = start.elapsed();
    let store = rt.store();
    let thread = store.thread(key).await.expect("read").expect("thread");
    let messages = store.messages(thread.id).await.expect("messages");
    let stamped = messages
        .iter()
        .filter(|m| {
            m.content
                .as_deref()
                .is_some_and(|c| c.starts_with("stamped "))
        })
        .count();
    assert_eq!(stamped, turns, "{key}: every ping turn called stamp");
    took
}

fn node_on_path() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let _cleanup = Cleanup;
    let turns = env("BENCH_TURNS", 400);
    let rounds = env("BENCH_ROUNDS", 5);
    let (store, backend, _) = store_at().await;
    println!(
        "backend: {backend}; {turns} ping turns (tool step, text step, pong) a thread, \
         {rounds} rounds of the variants in turn; the median round, and the best"
    );
    let mut variants = Vec::new();
    for variant in ["rust", "ts", "ts+state", "node"] {
        if variant == "node" && !node_on_path() {
            println!("{variant:>9}: skipped (no `node` on PATH)");
            continue;
        }
        let rt = runtime(variant, &project(variant, turns), store.clone());
        send(&rt, &format!("{variant}-warm"), "warm").await;
        variants.push((variant, rt, Vec::new()));
    }
    for round in 0..rounds {
        for (variant, rt, took) in &mut variants {
            took.push(measure(rt, &format!("{variant}-{round}"), turns).await);
        }
    }
    let mut rust = None;
    for (variant, _, mut took) in variants {
        took.sort();
        let n = u32::try_from(turns).expect("turns");
        let (median, best) = (took[took.len() / 2] / n, took[0] / n);
        let (base_median, base_best) = *rust.get_or_insert((median, best));
        println!(
            "{variant:>9}: {:.0} ping turns/s, {:.3} ms a turn ({:+.3} against rust); \
             best round {:.3} ms ({:+.3})",
            1_000.0 / ms(median),
            ms(median),
            ms(median) - ms(base_median),
            ms(best),
            ms(best) - ms(base_best),
        );
    }
}
