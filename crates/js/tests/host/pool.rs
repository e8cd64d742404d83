//! The engine threads: many calls at once all complete, each with its own answers, and a call
//! whose caller went away is stopped so the thread takes the next.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::{Bridge, CodeHost};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{Recorder, call, host, run};

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
