//! A call's failures are the call's: a throw at the line as written, a rejection nobody
//! handled, the deadline, the memory ceiling, a file that does not load, a result JSON cannot
//! hold; and the next call on the same engine thread works.

use std::time::Duration;

use duet_runtime::{CodeErrorKind, CodeLimits};
use serde_json::json;

use duet_js::HostOptions;

use crate::support::{call, host, host_with, run};

const BOOM: &str = r#"import { defineTool } from '@standardagents/spec';

interface Order {
  id: string;
  total: number;
}

export default defineTool({
  description: 'Fails',
  execute: async (state, args: { id: string }) => {
    const order: Order | undefined = undefined;
    if (!order) throw new Error(`no such order: ${args.id}`);
    return order.total;
  },
});
"#;

#[tokio::test]
async fn a_throw_is_the_message_and_the_line_as_written() {
    let host = host(&[("agents/tools/boom.ts", BOOM)], 1);
    let e = run(
        &host,
        call("agents/tools/boom.ts", vec![json!({ "id": "A1" })]),
    )
    .await
    .expect_err("throws");
    assert_eq!(e.kind, CodeErrorKind::Thrown);
    assert_eq!(e.message, "Error: no such order: A1");
    let stack = e.stack.expect("a stack");
    assert!(stack.contains("agents/tools/boom.ts:12:"), "{stack}");
}

const LOST: &str = r#"
export default {
  execute: async (state, handled) => {
    const p = Promise.reject(new Error('lost'));
    if (handled) {
      await null;
      try { await p; } catch { return 'handled late'; }
    }
    return 'done';
  },
};
"#;

#[tokio::test]
async fn a_rejection_never_handled_fails_the_call() {
    let host = host(&[("agents/tools/lost.js", LOST)], 1);
    let e = run(&host, call("agents/tools/lost.js", vec![json!(false)]))
        .await
        .expect_err("fails");
    assert_eq!(e.kind, CodeErrorKind::Thrown);
    assert_eq!(
        e.message,
        "a promise was rejected and never handled: Error: lost"
    );
    let late = run(&host, call("agents/tools/lost.js", vec![json!(true)])).await;
    assert_eq!(late, Ok(json!("handled late")));
}

const SPIN: &str = r#"
export default {
  execute: async (state, spin) => {
    if (spin) { while (true) {} }
    return 'fine';
  },
};
"#;

#[tokio::test]
async fn a_loop_is_stopped_at_the_deadline_and_the_next_call_works() {
    let host = host(&[("agents/tools/spin.js", SPIN)], 1);
    let mut c = call("agents/tools/spin.js", vec![json!(true)]);
    c.limits.deadline = Duration::from_millis(300);
    let e = run(&host, c).await.expect_err("stopped");
    assert_eq!(e.kind, CodeErrorKind::Deadline);
    assert_eq!(
        e.message,
        "the tool's code ran longer than 300 ms and was stopped"
    );
    let next = run(&host, call("agents/tools/spin.js", vec![json!(false)])).await;
    assert_eq!(next, Ok(json!("fine")));
}

#[tokio::test]
async fn a_bridge_that_does_not_answer_counts_against_the_deadline() {
    let host = host(
        &[(
            "agents/tools/wait.js",
            "export default { execute: (s) => s.getValue('k') };",
        )],
        1,
    );
    let mut c = call("agents/tools/wait.js", vec![]);
    c.limits.deadline = Duration::from_millis(300);
    let mut bridge = Never;
    let e = duet_runtime::CodeHost::call(&host, c, &mut bridge)
        .await
        .expect_err("stopped");
    assert_eq!(e.kind, CodeErrorKind::Deadline);
    assert!(
        e.message.contains("waiting for `getValue`"),
        "{}",
        e.message
    );
}

/// A bridge whose answers never come.
struct Never;

#[async_trait::async_trait]
impl duet_runtime::Bridge for Never {
    async fn call(&mut self, _: &str, _: serde_json::Value) -> Result<serde_json::Value, String> {
        std::future::pending().await
    }
}

const HOG: &str = r#"
export default {
  execute: async (state, how) => {
    if (how === 'buffer') return new Uint8Array(1 << 30).length;
    if (how === 'objects') { const all = []; while (true) all.push({ n: all.length, s: 'x' + all.length }); }
    return 'small';
  },
};
"#;

#[tokio::test]
async fn a_gibibyte_is_stopped_at_the_ceiling_and_the_next_call_works() {
    let host = host(&[("agents/tools/hog.js", HOG)], 1);
    for how in ["buffer", "objects"] {
        let e = run(&host, call("agents/tools/hog.js", vec![json!(how)]))
            .await
            .expect_err("stopped");
        assert_eq!(e.kind, CodeErrorKind::Memory, "{how}: {e:?}");
        assert_eq!(
            e.message,
            "the tool's code needed more than 64 MiB and was stopped"
        );
        let next = run(&host, call("agents/tools/hog.js", vec![json!("small")])).await;
        assert_eq!(next, Ok(json!("small")));
    }
}

const AMBIENT: &str = r#"
export default {
  execute: async () => [typeof process, typeof require, typeof setTimeout, typeof setInterval,
    typeof queueMicrotask === 'function' || typeof queueMicrotask === 'undefined',
    typeof std, typeof os, typeof fetch, typeof Response, typeof URL, typeof console],
};
"#;

#[tokio::test]
async fn code_has_no_process_require_or_timers() {
    let host = host(&[("agents/tools/ambient.js", AMBIENT)], 1);
    let out = run(&host, call("agents/tools/ambient.js", vec![])).await;
    assert_eq!(
        out,
        Ok(json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            true,
            "undefined",
            "undefined",
            "function",
            "function",
            "function",
            "object"
        ]))
    );
}

#[tokio::test]
async fn a_file_outside_the_project_is_refused() {
    let host = host(
        &[
            (
                "agents/tools/escape.ts",
                "import secret from '../../../../etc/hostname';\nexport default { execute: () => secret };\n",
            ),
            (
                "agents/tools/absolute.ts",
                "import secret from '/etc/hostname';\nexport default { execute: () => secret };\n",
            ),
            (
                "agents/tools/package.ts",
                "import fs from 'node:fs';\nexport default { execute: () => fs };\n",
            ),
        ],
        1,
    );
    let e = run(&host, call("agents/tools/escape.ts", vec![]))
        .await
        .expect_err("refused");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert!(
        e.message.contains("is outside the project"),
        "{}",
        e.message
    );
    assert!(
        e.message.starts_with("agents/tools/escape.ts:1:"),
        "{}",
        e.message
    );
    let e = run(&host, call("agents/tools/absolute.ts", vec![]))
        .await
        .expect_err("refused");
    assert_eq!(e.kind, CodeErrorKind::Load, "{e:?}");
    let e = run(&host, call("agents/tools/package.ts", vec![]))
        .await
        .expect_err("refused");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert!(e.message.contains("`node:fs`"), "{}", e.message);
    let e = run(&host, call("../outside.ts", vec![]))
        .await
        .expect_err("refused");
    assert_eq!(e.kind, CodeErrorKind::Load);
}

#[tokio::test]
async fn a_file_whose_loading_does_not_finish_is_stopped_and_the_next_call_works() {
    let host = host_with(
        &[
            (
                "agents/tools/forever.ts",
                "while (true) {}\nexport default { execute: () => 1 };\n",
            ),
            (
                "agents/tools/fine.ts",
                "export default { execute: () => 'fine' };\n",
            ),
        ],
        HostOptions {
            workers: 1,
            load_deadline: Duration::from_millis(300),
            ..HostOptions::default()
        },
    );
    let mut c = call("agents/tools/forever.ts", vec![]);
    c.limits.deadline = Duration::from_millis(100);
    let e = run(&host, c).await.expect_err("stopped");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert_eq!(
        e.message,
        "loading agents/tools/forever.ts took longer than 300 ms and was stopped: a module's top-level code must finish"
    );
    let next = run(&host, call("agents/tools/fine.ts", vec![])).await;
    assert_eq!(next, Ok(json!("fine")));
}

#[tokio::test]
async fn a_missing_function_or_file_is_a_load_failure() {
    let host = host(
        &[
            (
                "agents/tools/x.ts",
                "export default { description: 'no code' };\n",
            ),
            ("agents/tools/none.ts", "export const x = 1;\n"),
            (
                "agents/tools/broken.ts",
                "export default {\n  execute: () => {\n    return 1 +;\n  },\n};\n",
            ),
            (
                "agents/tools/throws.ts",
                "const n: number = 1;\nthrow new Error('at load');\n",
            ),
        ],
        1,
    );
    let e = run(&host, call("agents/tools/x.ts", vec![]))
        .await
        .expect_err("no function");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert_eq!(
        e.message,
        "`execute` is not a function in agents/tools/x.ts's default export"
    );
    let e = run(&host, call("agents/tools/none.ts", vec![]))
        .await
        .expect_err("no default");
    assert_eq!(e.message, "agents/tools/none.ts has no default export");
    let e = run(&host, call("agents/tools/gone.ts", vec![]))
        .await
        .expect_err("no file");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert!(
        e.message.contains("not a file of the project"),
        "{}",
        e.message
    );
    let e = run(&host, call("agents/tools/broken.ts", vec![]))
        .await
        .expect_err("syntax");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert!(
        e.message.starts_with("agents/tools/broken.ts:3:"),
        "{}",
        e.message
    );
    let e = run(&host, call("agents/tools/throws.ts", vec![]))
        .await
        .expect_err("throws");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert!(e.message.contains("at load"), "{}", e.message);
    assert!(
        e.message.contains("agents/tools/throws.ts:2:"),
        "{}",
        e.message
    );
}

const RESULTS: &str = r#"
export default {
  execute: async (state, what) => {
    if (what === 'undefined') return undefined;
    if (what === 'function') return { ok: true, nested: [1, { fn() {} }] };
    if (what === 'bigint') return { n: 10n };
    if (what === 'cycle') { const a = {}; a.self = a; return a; }
    if (what === 'date') return { at: new Date(0) };
    if (what === 'string') return 'plain';
    if (what === 'never') return new Promise(() => {});
    throw 'a string';
  },
};
"#;

#[tokio::test]
async fn results_are_json_or_an_error_saying_why_not() {
    let host = host(&[("agents/tools/results.js", RESULTS)], 1);
    let go = |what: &str| run(&host, call("agents/tools/results.js", vec![json!(what)]));
    // `undefined` is told from `null` (a hook that returns nothing keeps what it was given).
    assert_eq!(go("undefined").await, Ok(json!({ "$undefined": true })));
    assert_eq!(go("string").await, Ok(json!("plain")));
    assert_eq!(
        go("date").await,
        Ok(json!({ "at": "1970-01-01T00:00:00.000Z" }))
    );
    let e = go("function").await.expect_err("a function");
    assert_eq!(e.kind, CodeErrorKind::Thrown);
    assert_eq!(
        e.message,
        "TypeError: the result.nested[1].fn is a function, which JSON cannot hold"
    );
    let e = go("bigint").await.expect_err("a bigint");
    assert_eq!(
        e.message,
        "TypeError: the result.n is a BigInt, which JSON cannot hold"
    );
    let e = go("cycle").await.expect_err("a cycle");
    assert_eq!(
        e.message,
        "TypeError: the result refers to itself (a cycle), which JSON cannot hold"
    );
    let e = go("never").await.expect_err("never settles");
    assert!(e.message.contains("never settled"), "{}", e.message);
    let e = go("throw").await.expect_err("a string thrown");
    assert_eq!(
        (e.kind, e.message.as_str()),
        (CodeErrorKind::Thrown, "a string")
    );
    assert_eq!(go("string").await, Ok(json!("plain")));
}

#[tokio::test]
async fn limits_are_the_calls() {
    let host = host(&[("agents/tools/hog.js", HOG)], 1);
    let mut c = call("agents/tools/hog.js", vec![json!("objects")]);
    c.limits = CodeLimits::default().with(None, Some(8));
    let e = run(&host, c).await.expect_err("stopped");
    assert_eq!(e.kind, CodeErrorKind::Memory);
    assert_eq!(
        e.message,
        "the tool's code needed more than 8 MiB and was stopped"
    );
}
