//! The embedded code host's latency: a warm call of a TS tool (importing zod) that makes three
//! `state` calls, the bridge answering in-process, and the same tool making none. Prints p50
//! and p99 over `BENCH_RUNS` calls (default 2000), after the first (cold) call.
//!
//! `cargo bench -p duet-js --bench host`

use std::path::Path;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use duet_js::{EmbeddedHost, HostOptions};
use duet_runtime::{Bridge, CodeCall, CodeHost, CodeLimits};
use serde_json::{Value, json};

const TOOL: &str = r#"
import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

export default defineTool({
  description: 'Counts',
  args: z.object({ key: z.string(), touch: z.boolean() }),
  execute: async (state, args: { key: string; touch: boolean }) => {
    if (!args.touch) return { n: 0 };
    const n: number = (await state.getValue(args.key)) ?? 0;
    await state.setValue(args.key, n + 1);
    const region = await state.env('REGION');
    return { n: n + 1, region };
  },
});
"#;

/// Answers in-process, as the runtime's bridge would from its buffered state.
struct Answers;

#[async_trait]
impl Bridge for Answers {
    async fn call(&mut self, method: &str, _: Value) -> Result<Value, String> {
        Ok(match method {
            "getValue" => json!(41),
            "env" => json!("eu"),
            _ => Value::Null,
        })
    }
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = std::env::temp_dir().join(format!("duet-js-bench-host-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("agents/tools")).expect("scratch");
    std::fs::write(dir.join("agents/tools/count.ts"), TOOL).expect("write");
    let node_modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/node/node_modules");
    let host = EmbeddedHost::new(
        &dir,
        vec![node_modules],
        HostOptions {
            workers: 1,
            ..HostOptions::default()
        },
    )
    .expect("a host");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let call = |touch: bool| CodeCall {
        state_at: 0,
        file: "agents/tools/count.ts".into(),
        entry: vec!["execute".into()],
        args: vec![json!({ "key": "n", "touch": touch })],
        state: json!({ "threadId": "t-1", "agentId": "bench" }),
        thread: "t-1".into(),
        call: "c-1".into(),
        limits: CodeLimits::default(),
    };
    runtime.block_on(async {
        let start = Instant::now();
        let out = host.call(call(true), &mut Answers).await.expect("runs");
        assert_eq!(out, json!({ "n": 42, "region": "eu" }));
        println!(
            "host/cold first call (engine + zod + the tool loaded): {:?}",
            start.elapsed()
        );
        for (name, touch) in [("three state calls", true), ("no state call", false)] {
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                let start = Instant::now();
                host.call(call(touch), &mut Answers).await.expect("runs");
                times.push(start.elapsed());
            }
            report(&format!("host/warm call, {name}"), &mut times);
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}

fn report(name: &str, times: &mut [Duration]) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "{name}: p50 {:?}, p99 {:?} over {} calls",
        at(0.50),
        at(0.99),
        times.len()
    );
}
