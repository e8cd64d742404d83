//! The node code host ([`duet_js::NodeHost`]) against a real `node`: ThreadState over RPC in
//! order, throws and load failures as the contract says, packages and Node APIs only node has,
//! a process killed mid-call or stuck in a loop failing that call and not the next, calls in
//! flight together, and a thread endpoint's `Request`/`Response`. Skipped (with a line saying
//! so) when `node` is not on `PATH`, unless `DUET_REQUIRE_NODE=1`.

#[path = "node_host/support.rs"]
mod support;

use std::time::Duration;

use async_trait::async_trait;
use duet_js::{NodeHost, NodeOptions};
use duet_runtime::{Bridge, CodeErrorKind, CodeHost, CodeLimits};
use serde_json::{Value, json};
use support::{Events, Recorder, call, kill, node_here, project};

fn host(dir: &tempfile::TempDir) -> NodeHost {
    NodeHost::new(dir.path(), NodeOptions::default())
}

const STATE: &str = r#"
import { defineTool } from '@standardagents/spec';
type Args = { add: number };
export default defineTool({
  description: 'three state calls',
  execute: async (state, args: Args) => {
    const before = await state.getValue('count');
    await state.setValue('count', before + args.add);
    const key = await state.env('API_BASE');
    return { before, key, thread: state.threadId, context: typeof state.context };
  },
});
"#;

#[tokio::test]
async fn state_calls_reach_the_bridge_in_order_and_answers_come_back() {
    if !node_here() {
        return;
    }
    let dir = project(&[("agents/tools/count.ts", STATE)]);
    let host = host(&dir);
    let mut bridge = Recorder::default();
    let out = host
        .call(
            call("agents/tools/count.ts", vec![json!({ "add": 2 })]),
            &mut bridge,
        )
        .await
        .expect("runs");
    assert_eq!(
        out,
        json!({ "before": 40, "key": "from-env", "thread": "t-1", "context": "object" })
    );
    assert_eq!(
        bridge.asked,
        vec![
            ("getValue".to_owned(), json!({ "key": "count" })),
            (
                "setValue".to_owned(),
                json!({ "key": "count", "value": 42 })
            ),
            ("env".to_owned(), json!({ "name": "API_BASE" })),
        ]
    );
}

#[tokio::test]
async fn a_throw_is_the_calls_error_at_the_line_written() {
    if !node_here() {
        return;
    }
    let text = "type T = { a: string };\n\nexport default {\n  execute: (state: unknown) => {\n    throw new Error('nope');\n  },\n};\n";
    let dir = project(&[("agents/tools/throws.ts", text)]);
    let e = host(&dir)
        .call(
            call("agents/tools/throws.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect_err("it throws");
    assert_eq!(e.kind, CodeErrorKind::Thrown);
    assert_eq!(e.message, "Error: nope");
    let stack = e.stack.clone().expect("a stack");
    assert!(stack.contains("agents/tools/throws.ts:5:11"), "{stack}");
    assert!(!stack.contains("host.mjs"), "{stack}");
    assert!(!e.retryable());
}

#[tokio::test]
async fn a_package_only_node_loads_and_node_apis_are_there() {
    if !node_here() {
        return;
    }
    // CommonJS, which only node loads; imported by a helper written `./pad.js` for `./pad.ts`.
    let dir = project(&[
        (
            "node_modules/left-pad-lite/package.json",
            r#"{ "name": "left-pad-lite", "version": "1.0.0", "main": "index.js" }"#,
        ),
        (
            "node_modules/left-pad-lite/index.js",
            "module.exports = (s, n, c = ' ') => String(s).padStart(n, c);\n",
        ),
        (
            "agents/lib/pad.ts",
            "import leftPad from 'left-pad-lite';\nexport const pad = (s: string): string => leftPad(s, 5, '0');\n",
        ),
        (
            "agents/tools/pad.ts",
            r#"
import { pad } from '../lib/pad.js';
import { createHash } from 'node:crypto';
export default {
  execute: async (state, args) => ({
    padded: pad(args.s),
    version: process.version,
    hash: createHash('sha256').update('x').digest('hex').slice(0, 8),
  }),
};
"#,
        ),
    ]);
    let out = host(&dir)
        .call(
            call("agents/tools/pad.ts", vec![json!({ "s": "42" })]),
            &mut Recorder::default(),
        )
        .await
        .expect("runs");
    assert_eq!(out["padded"], "00042");
    assert_eq!(out["hash"], "2d711642");
    let version = out["version"].as_str().expect("a version");
    assert!(version.starts_with('v'), "{version}");
}

/// Kills the node process when asked anything, then answers.
struct Killer<'a> {
    host: &'a NodeHost,
    killed: Option<u32>,
}

#[async_trait]
impl Bridge for Killer<'_> {
    async fn call(&mut self, _: &str, _: Value) -> Result<Value, String> {
        let pid = self.host.pid().expect("node runs");
        kill(pid);
        self.killed = Some(pid);
        Ok(Value::Null)
    }
}

const WAITS: &str = r#"
export default {
  execute: async (state) => ({ got: await state.getValue('k') }),
};
"#;

#[tokio::test]
async fn a_process_killed_mid_call_fails_that_call_and_the_next_works() {
    if !node_here() {
        return;
    }
    let dir = project(&[("agents/tools/waits.ts", WAITS)]);
    let host = host(&dir);
    let mut killer = Killer {
        host: &host,
        killed: None,
    };
    let e = host
        .call(call("agents/tools/waits.ts", vec![]), &mut killer)
        .await
        .expect_err("the process died under it");
    let killed = killer.killed;
    assert_eq!(e.kind, CodeErrorKind::Crashed);
    assert!(e.retryable());
    assert!(e.message.contains("signal 9"), "{}", e.message);
    assert!(e.message.contains("restarted"), "{}", e.message);
    let out = host
        .call(
            call("agents/tools/waits.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect("a new process runs it");
    assert_eq!(out, json!({ "got": 40 }));
    assert_ne!(host.pid(), killed);
}

#[tokio::test]
async fn a_loop_past_the_deadline_is_stopped_and_the_next_call_works() {
    if !node_here() {
        return;
    }
    let dir = project(&[
        (
            "agents/tools/spin.ts",
            "export default { execute: () => { while (true) {} } };\n",
        ),
        ("agents/tools/waits.ts", WAITS),
    ]);
    let host = host(&dir);
    let warm = host
        .call(
            call("agents/tools/waits.ts", vec![]),
            &mut Recorder::default(),
        )
        .await;
    assert_eq!(warm, Ok(json!({ "got": 40 })));
    let stuck = host.pid();
    let mut spin = call("agents/tools/spin.ts", vec![]);
    spin.limits.deadline = Duration::from_millis(300);
    let e = host
        .call(spin, &mut Recorder::default())
        .await
        .expect_err("stopped");
    assert_eq!(e.kind, CodeErrorKind::Deadline);
    assert!(e.message.contains("300 ms"), "{}", e.message);
    let out = host
        .call(
            call("agents/tools/waits.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect("the next call runs");
    assert_eq!(out, json!({ "got": 40 }));
    assert_ne!(host.pid(), stuck, "the stuck process was replaced");
}

/// Answers only once both calls have asked: the calls must be in flight together.
struct Meet(std::sync::Arc<tokio::sync::Barrier>);

#[async_trait]
impl Bridge for Meet {
    async fn call(&mut self, _: &str, params: Value) -> Result<Value, String> {
        self.0.wait().await;
        Ok(params["key"].clone())
    }
}

#[tokio::test]
async fn two_calls_in_flight_at_once_both_complete() {
    if !node_here() {
        return;
    }
    let dir = project(&[("agents/tools/waits.ts", WAITS)]);
    let host = host(&dir);
    let meet = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let (mut a, mut b) = (Meet(meet.clone()), Meet(meet));
    let mut first = call("agents/tools/waits.ts", vec![]);
    first.call = "call-a".into();
    let mut second = first.clone();
    second.call = "call-b".into();
    let (x, y) = tokio::join!(host.call(first, &mut a), host.call(second, &mut b));
    assert_eq!(x.expect("first"), json!({ "got": "k" }));
    assert_eq!(y.expect("second"), json!({ "got": "k" }));
}

#[tokio::test]
async fn an_endpoint_takes_a_request_and_returns_a_response() {
    if !node_here() {
        return;
    }
    let endpoint = r#"
import { defineThreadEndpoint } from '@standardagents/spec';
export default defineThreadEndpoint(async (req: Request, state, params) => {
  const body = await req.json();
  const q = new URL(req.url).searchParams.get('q');
  return Response.json(
    { method: req.method, q, name: body.name, auth: req.headers.get('x-test'), thread: state.threadId, id: params.id },
    { status: 201 },
  );
});
"#;
    let dir = project(&[("agents/api/hello.post.ts", endpoint)]);
    let mut c = call(
        "agents/api/hello.post.ts",
        vec![
            json!({ "$request": {
                "method": "POST",
                "url": "http://127.0.0.1/threads/t-1/api/hello?q=yes",
                "headers": [["content-type", "application/json"], ["x-test", "on"]],
                "body": "{\"name\":\"duet\"}",
            }}),
            json!({ "id": "7" }),
        ],
    );
    c.entry = vec!["handler".into()];
    // The spec's `(req, state, params)`: `state` second.
    c.state_at = 1;
    let out = host(&dir)
        .call(c, &mut Recorder::default())
        .await
        .expect("runs");
    let response = &out["$response"];
    assert_eq!(response["status"], 201);
    let headers = response["headers"].as_array().expect("headers");
    assert!(
        headers.contains(&json!(["content-type", "application/json"])),
        "{headers:?}"
    );
    let body: Value =
        serde_json::from_str(response["body"].as_str().expect("a text body")).expect("JSON");
    assert_eq!(
        body,
        json!({ "method": "POST", "q": "yes", "name": "duet", "auth": "on", "thread": "t-1", "id": "7" })
    );
}

#[tokio::test]
async fn a_rejection_never_handled_fails_the_call() {
    if !node_here() {
        return;
    }
    let text = "export default { execute: async () => { Promise.reject(new Error('lost')); return 'ok'; } };\n";
    let dir = project(&[("agents/tools/lost.ts", text)]);
    let e = host(&dir)
        .call(
            call("agents/tools/lost.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect_err("fails");
    assert_eq!(e.kind, CodeErrorKind::Thrown);
    assert_eq!(
        e.message,
        "a promise was rejected and never handled: Error: lost"
    );
}

#[tokio::test]
async fn what_cannot_be_loaded_is_a_load_failure() {
    if !node_here() {
        return;
    }
    let dir = project(&[
        (
            "agents/tools/none.ts",
            "export default { description: 'x' };\n",
        ),
        (
            "agents/tools/missing.ts",
            "import x from 'not-installed-anywhere';\nexport default { execute: () => x };\n",
        ),
        ("agents/tools/broken.ts", "export default { execute: ( };\n"),
    ]);
    let host = host(&dir);
    let run = async |file: &str| {
        host.call(call(file, vec![]), &mut Recorder::default())
            .await
            .expect_err("not loaded")
    };
    // Each file, and what its Load failure's message says.
    for (file, says) in [
        ("agents/tools/none.ts", "`execute` is not a function"),
        ("agents/tools/missing.ts", "not-installed-anywhere"),
        ("agents/tools/broken.ts", "agents/tools/broken.ts:1:"),
        ("agents/tools/absent.ts", ""),
        ("../outside.ts", ""),
    ] {
        let e = run(file).await;
        assert_eq!(e.kind, CodeErrorKind::Load, "{file}: {e:?}");
        assert!(e.message.contains(says), "{file}: {}", e.message);
    }
}

#[tokio::test]
async fn console_goes_to_tracing_and_stdout_does_not_break_the_channel() {
    if !node_here() {
        return;
    }
    let events = Events::default();
    let _guard = events.install();
    let text = r#"
export default {
  execute: async () => {
    console.log('hello %s', 'there', { a: 1 });
    console.warn('careful');
    process.stdout.write('not a message\n');
    return 'done';
  },
};
"#;
    let dir = project(&[("agents/tools/talks.ts", text)]);
    let host = host(&dir);
    let out = host
        .call(
            call("agents/tools/talks.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect("runs");
    assert_eq!(out, json!("done"));
    // Once the process is gone, every line it wrote on stderr has been read.
    let pid = host.pid().expect("running");
    host.shutdown().await;
    assert_eq!(host.pid(), None);
    let seen = events.all();
    let console: Vec<_> = seen
        .iter()
        .filter(|e| e.target == "duet::code" && e.fields.contains_key("call"))
        .collect();
    assert!(
        console.iter().any(|e| e.level == "INFO"
            && e.fields["message"] == "hello there { a: 1 }"
            && e.fields["thread"] == "t-1"
            && e.fields["call"] == "call-1"),
        "{seen:#?} (pid {pid})"
    );
    assert!(
        console
            .iter()
            .any(|e| e.level == "WARN" && e.fields["message"] == "careful"),
        "{seen:#?}"
    );
}

#[tokio::test]
async fn child_threads_synchronous_members_and_results_json_cannot_hold() {
    if !node_here() {
        return;
    }
    let text = r#"
export default {
  execute: async (state, args) => {
    if (args.mode === 'child') {
      const child = await state.getChildThread('ref-1');
      state.emit('seen', { id: child.threadId });
      await child.getMessages();
      return child.threadId;
    }
    if (args.mode === 'refused') {
      state.queueTool('nope', {});
      await state.getValue('later');
      return 'not reached';
    }
    return { f: () => 1 };
  },
};
"#;
    let dir = project(&[("agents/tools/mixed.ts", text)]);
    let host = host(&dir);
    let mut bridge = Recorder::default();
    let out = host
        .call(
            call("agents/tools/mixed.ts", vec![json!({ "mode": "child" })]),
            &mut bridge,
        )
        .await
        .expect("runs");
    assert_eq!(out, json!("child-1"));
    assert_eq!(
        bridge.asked,
        vec![
            (
                "getChildThread".to_owned(),
                json!({ "referenceId": "ref-1" })
            ),
            (
                "emit".to_owned(),
                json!({ "event": "seen", "data": { "id": "child-1" } })
            ),
            (
                "getMessages".to_owned(),
                json!({ "options": {}, "$thread": "ref-1" })
            ),
        ]
    );
    let mut refusing = Refuses;
    let e = host
        .call(
            call("agents/tools/mixed.ts", vec![json!({ "mode": "refused" })]),
            &mut refusing,
        )
        .await
        .expect_err("the refusal fails the call");
    assert_eq!(e.kind, CodeErrorKind::Thrown);
    assert!(e.message.contains("queueTool is refused"), "{}", e.message);
    let e = host
        .call(
            call("agents/tools/mixed.ts", vec![json!({ "mode": "json" })]),
            &mut Recorder::default(),
        )
        .await
        .expect_err("a function is not JSON");
    assert_eq!(e.kind, CodeErrorKind::Thrown);
    assert!(e.message.contains("holds a function"), "{}", e.message);
}

/// Refuses `queueTool`; answers the rest with null.
struct Refuses;

#[async_trait]
impl Bridge for Refuses {
    async fn call(&mut self, method: &str, _: Value) -> Result<Value, String> {
        match method {
            "queueTool" => Err("queueTool is refused".into()),
            _ => Ok(Value::Null),
        }
    }
}

#[tokio::test]
async fn a_heap_exhausted_is_memory_and_the_next_call_works() {
    if !node_here() {
        return;
    }
    let text = "export default { execute: () => { const a = []; while (true) a.push(new Array(1e6).fill(1.5)); } };\n";
    let dir = project(&[
        ("agents/tools/hog.ts", text),
        ("agents/tools/waits.ts", WAITS),
    ]);
    let host = host(&dir);
    let mut hog = call("agents/tools/hog.ts", vec![]);
    hog.limits = CodeLimits {
        deadline: Duration::from_secs(60),
        memory: 64 << 20,
    };
    let e = host
        .call(hog, &mut Recorder::default())
        .await
        .expect_err("out of memory");
    assert_eq!(e.kind, CodeErrorKind::Memory, "{}", e.message);
    assert!(e.message.contains("64 MiB"), "{}", e.message);
    let out = host
        .call(
            call("agents/tools/waits.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect("the next call runs");
    assert_eq!(out, json!({ "got": 40 }));
}

#[tokio::test]
async fn packages_come_from_node_path_after_the_projects_own() {
    if !node_here() {
        return;
    }
    let modules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/node/node_modules");
    assert!(
        modules.join("zod/package.json").is_file(),
        "zod is not installed in .ci/node: run scripts/test-servers"
    );
    let dir = project(&[
        (
            "agents/lib/schema.ts",
            "import { z } from 'zod';\nexport const Args = z.object({ n: z.coerce.number().default(1) });\n",
        ),
        (
            "agents/tools/zod.ts",
            "import { Args } from '../lib/schema';\nexport default { execute: (state, args) => Args.parse(args) };\n",
        ),
    ]);
    let host = NodeHost::new(
        dir.path(),
        NodeOptions {
            node_path: vec![modules],
            ..NodeOptions::default()
        },
    );
    let out = host
        .call(
            call("agents/tools/zod.ts", vec![json!({ "n": "7" })]),
            &mut Recorder::default(),
        )
        .await
        .expect("zod from NODE_PATH");
    assert_eq!(out, json!({ "n": 7 }));
}

/// Says it was asked, then never answers.
struct Silent(Option<tokio::sync::oneshot::Sender<()>>);

#[async_trait]
impl Bridge for Silent {
    async fn call(&mut self, _: &str, _: Value) -> Result<Value, String> {
        if let Some(asked) = self.0.take() {
            let _ = asked.send(());
        }
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_call_waiting_on_the_bridge_past_its_deadline_keeps_the_process() {
    if !node_here() {
        return;
    }
    let dir = project(&[("agents/tools/waits.ts", WAITS)]);
    // However loaded the machine, a process that answers is not taken for a stuck one.
    let host = NodeHost::new(
        dir.path(),
        NodeOptions {
            grace: Duration::from_secs(60),
            ..NodeOptions::default()
        },
    );
    let mut waits = call("agents/tools/waits.ts", vec![]);
    waits.limits.deadline = Duration::from_millis(300);
    let e = host
        .call(waits, &mut Silent(None))
        .await
        .expect_err("past its deadline");
    assert_eq!(e.kind, CodeErrorKind::Deadline);
    let pid = host.pid();
    assert!(pid.is_some(), "a process runs");
    // A caller that stops waiting (its step was cancelled) does not stop the process either.
    let (asked, heard) = tokio::sync::oneshot::channel();
    let mut silent = Silent(Some(asked));
    tokio::select! {
        r = host.call(call("agents/tools/waits.ts", vec![]), &mut silent) => panic!("answered: {r:?}"),
        _ = heard => {}
    }
    let out = host
        .call(
            call("agents/tools/waits.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect("the next call runs");
    assert_eq!(out, json!({ "got": 40 }));
    assert_eq!(host.pid(), pid, "the same process");
}

#[tokio::test]
async fn a_node_that_cannot_start_is_a_load_failure_saying_why() {
    // No `node` needed: the executable is missing, or is not node at all.
    let dir = project(&[("agents/tools/waits.ts", WAITS)]);
    let missing = NodeHost::new(
        dir.path(),
        NodeOptions {
            node: "/nonexistent/bin/node".into(),
            ..NodeOptions::default()
        },
    );
    let e = missing
        .call(
            call("agents/tools/waits.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect_err("no node");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert!(
        e.message.contains("cannot start `/nonexistent/bin/node`"),
        "{}",
        e.message
    );
    if !std::path::Path::new("/bin/false").is_file() {
        return;
    }
    let not_node = NodeHost::new(
        dir.path(),
        NodeOptions {
            node: "/bin/false".into(),
            ..NodeOptions::default()
        },
    );
    let e = not_node
        .call(
            call("agents/tools/waits.ts", vec![]),
            &mut Recorder::default(),
        )
        .await
        .expect_err("not node");
    assert_eq!(e.kind, CodeErrorKind::Load);
    assert!(
        e.message
            .contains("exited before duet's host started (exit code 1)"),
        "{}",
        e.message
    );
}
