//! The engine threads: many calls at once all complete, each with its own answers, and a call
//! whose caller went away is stopped so the thread takes the next.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::{Bridge, CodeHost};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use duet_js::{EmbeddedHost, HostOptions};

use crate::support::{Recorder, call, host, host_with, run};

const ECHO: &str = r#"
import { z } from 'zod';
const Args = z.object({ n: z.number() });
export default {
  execute: async (state, args) => {
    const { n } = Args.parse(args);
    const doubled = await state.getValue(`n${n}`);
    return { n, doubled, thread: state.threadId };
  },
};
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_calls_at_once_all_complete_with_their_own_answers() {
    let host = Arc::new(host(&[("agents/tools/echo.ts", ECHO)], 3));
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..60_i64 {
        let host = host.clone();
        calls.spawn(async move {
            let mut c = call("agents/tools/echo.ts", vec![json!({ "n": n })]);
            c.state = json!({ "threadId": format!("t-{n}") });
            let mut bridge = Recorder::new(move |_, params| {
                let key = params["key"].as_str().unwrap_or_default().to_owned();
                assert_eq!(key, format!("n{n}"));
                Ok(json!(n * 2))
            });
            (n, host.call(c, &mut bridge).await)
        });
    }
    let mut done = 0;
    while let Some(joined) = calls.join_next().await {
        let (n, out) = joined.expect("joined");
        assert_eq!(
            out,
            Ok(json!({ "n": n, "doubled": n * 2, "thread": format!("t-{n}") }))
        );
        done += 1;
    }
    assert_eq!(done, 60);
}

/// A bridge that says when it is asked, answers `emit` and never answers anything else.
struct Signal(mpsc::UnboundedSender<String>);

#[async_trait]
impl Bridge for Signal {
    async fn call(&mut self, method: &str, _: Value) -> Result<Value, String> {
        let _ = self.0.send(method.to_owned());
        if method == "emit" {
            return Ok(Value::Null);
        }
        std::future::pending().await
    }
}

const STUCK: &str = r#"
export default {
  execute: async (state, how) => {
    if (how === 'bridge') await state.getValue('never');
    if (how === 'loop') { state.emit('spinning', {}); while (true) {} }
    return 'next';
  },
};
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_frees_its_thread() {
    let host = Arc::new(host(&[("agents/tools/stuck.js", STUCK)], 1));
    for how in ["bridge", "loop"] {
        let (tx, mut asked) = mpsc::unbounded_channel();
        let h = host.clone();
        let task = tokio::spawn(async move {
            let mut c = call("agents/tools/stuck.js", vec![json!(how)]);
            // Long enough that only the cancellation can end it within the test.
            c.limits.deadline = Duration::from_secs(3600);
            h.call(c, &mut Signal(tx)).await
        });
        // The code is running (waiting on the bridge, or about to spin): drop its caller.
        asked.recv().await.expect("asked");
        task.abort();
        let _ = task.await;
        // One thread: the next call runs only once the cancelled one has stopped.
        let next = run(&host, call("agents/tools/stuck.js", vec![json!("done")])).await;
        assert_eq!(next, Ok(json!("next")), "after `{how}`");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_queued_behind_a_busy_engine_is_given_up_at_its_own_deadline() {
    // One engine thread, never grown (the busy call spins, it does not wait on the runtime).
    let host = Arc::new(host_with(
        &[("agents/tools/stuck.js", STUCK)],
        HostOptions {
            workers: 1,
            max_workers: 1,
            load_deadline: Duration::from_millis(100),
        },
    ));
    let (tx, mut asked) = mpsc::unbounded_channel();
    let h = host.clone();
    let busy = tokio::spawn(async move {
        let mut c = call("agents/tools/stuck.js", vec![json!("loop")]);
        c.limits.deadline = Duration::from_secs(3600);
        h.call(c, &mut Signal(tx)).await
    });
    asked.recv().await.expect("spinning");
    // Queued behind it: its wait is bounded by its own deadline (plus loading and a second),
    // not by the spinning call's hour.
    let mut queued = call("agents/tools/stuck.js", vec![json!("done")]);
    queued.limits.deadline = Duration::from_millis(200);
    let outcome = run(&host, queued).await;
    let e = outcome.expect_err("given up");
    assert_eq!(e.kind, duet_runtime::CodeErrorKind::Deadline, "{e:?}");
    assert!(
        e.message.contains("waited for a free JavaScript engine"),
        "{e:?}"
    );
    busy.abort();
    let _ = busy.await;
}

const OUTER: &str = r#"
export default {
  execute: async (state, depth) => {
    const inner = await state.invokeTool('inner', { depth });
    return ['outer', depth, inner];
  },
};
"#;

/// Runs `invokeTool` as the runtime would for a TS tool: another call on the same host, this
/// bridge answering its requests too.
struct Nested(Arc<EmbeddedHost>);

#[async_trait]
impl Bridge for Nested {
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        assert_eq!(method, "invokeTool");
        let depth = params["args"]["depth"].as_i64().unwrap_or_default();
        let file = if depth > 1 {
            "agents/tools/outer.js"
        } else {
            "agents/tools/leaf.js"
        };
        let mut c = call(file, vec![json!(depth - 1)]);
        c.limits.deadline = Duration::from_secs(20);
        let host = self.0.clone();
        Box::pin(async move { host.call(c, &mut Nested(host.clone())).await })
            .await
            .map_err(|e| e.message)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_can_wait_on_calls_nested_deeper_than_the_pool() {
    let host = Arc::new(host_with(
        &[
            ("agents/tools/outer.js", OUTER),
            (
                "agents/tools/leaf.js",
                "export default { execute: (state, depth) => ['leaf', depth] };",
            ),
        ],
        HostOptions {
            workers: 1,
            max_workers: 4,
            ..HostOptions::default()
        },
    ));
    let mut c = call("agents/tools/outer.js", vec![json!(3)]);
    // If the nested calls found no thread, this call would wait until its deadline and fail.
    c.limits.deadline = Duration::from_secs(20);
    let out = host.call(c, &mut Nested(host.clone())).await;
    assert_eq!(
        out,
        Ok(json!(["outer", 3, ["outer", 2, ["outer", 1, ["leaf", 0]]]]))
    );
}
