//! The node host's cost: the first call (the project stripped into the cache, node started) and
//! a warm call of a tool making three ThreadState calls (`getValue`, `setValue`, `env`), the
//! bridge answering in-process. Prints p50/p99 over `BENCH_RUNS` calls (default 2000).
//!
//! `cargo bench -p duet-js --bench node_host` (skipped, saying so, without `node` on `PATH`).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use duet_js::{NodeHost, NodeOptions};
use duet_runtime::{Bridge, CodeCall, CodeHost, CodeLimits};
use serde_json::{Value, json};

const TOOL: &str = r#"
import { defineTool } from '@standardagents/spec';
export default defineTool({
  description: 'three state calls',
  execute: async (state, args: { add: number }) => {
    const before = (await state.getValue('count')) ?? 0;
    await state.setValue('count', before + args.add);
    return { before, key: await state.env('API_BASE') };
  },
});
"#;

struct InProcess;

#[async_trait]
impl Bridge for InProcess {
    async fn call(&mut self, method: &str, _: Value) -> Result<Value, String> {
        Ok(match method {
            "getValue" => json!(1),
            "env" => json!("https://api.example"),
            _ => Value::Null,
        })
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn main() {
    let here = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !here {
        println!("node_host: skipped, no `node` on PATH");
        return;
    }
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().expect("scratch");
    let tools = dir.path().join("agents/tools");
    std::fs::create_dir_all(&tools).expect("scratch");
    std::fs::write(tools.join("count.ts"), TOOL).expect("scratch");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let host = NodeHost::new(dir.path(), NodeOptions::default());
        let call = CodeCall {
            state_at: 0,
            file: "agents/tools/count.ts".into(),
            entry: vec!["execute".into()],
            args: vec![json!({ "add": 2 })],
            state: json!({ "threadId": "t", "agentId": "a", "execution": null }),
            thread: "t".into(),
            call: "c".into(),
            limits: CodeLimits::default(),
        };
        let started = Instant::now();
        host.call(call.clone(), &mut InProcess)
            .await
            .expect("the first call");
        let first = started.elapsed();
        for _ in 0..50 {
            host.call(call.clone(), &mut InProcess).await.expect("warm");
        }
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let at = Instant::now();
            host.call(call.clone(), &mut InProcess).await.expect("warm");
            times.push(at.elapsed());
        }
        times.sort();
        println!(
            "node_host: first call (strip + start node + import) {:.1} ms; warm call with 3 state calls over {runs} runs: p50 {:.3} ms, p99 {:.3} ms",
            first.as_secs_f64() * 1e3,
            percentile(&times, 0.50).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3,
        );
    });
}
