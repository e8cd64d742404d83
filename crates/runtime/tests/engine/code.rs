//! The project's own code in the engine (issue #33), with a code host of the test's own that
//! plays a script per file (its bridge calls, then a return or a failure): a `.ts` tool's
//! writes land in its step's commit and a failing one writes nothing; a `.ts` handler takes a
//! side's turns and a throw fails only its delivery; `filter_messages` changes what the next
//! hooks and the model get; an effect's code runs at rest; a name defined both ways is refused.
//! No JavaScript runs here: `duet-js`'s tests run the real hosts. On every backend.

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use duet_runtime::{
    Bridge, CodeCall, CodeError, CodeErrorKind, CodeHost, Handler, HandlerError, Message, Runtime,
    Store, ThreadState,
};
use serde_json::{Value, json};

/// One step of a file's script.
#[derive(Clone)]
pub(crate) enum Act {
    /// Calls the bridge; the answer (or the error text) is kept in the log.
    Ask(&'static str, Value),
    /// Returns this value.
    Return(Value),
    /// Returns the first argument's first `n` elements (a `filter_messages` hook).
    First(usize),
    /// Fails so.
    Fail(CodeErrorKind, &'static str),
    /// Throws an object `{ block: true }` with this message (a prefilter hook that blocks).
    Block(&'static str),
}

/// A bridge call's method and its answer.
type Answer = (String, Result<Value, String>);

/// Plays each file's script; logs every call and every bridge answer.
#[derive(Clone, Default)]
pub(crate) struct ScriptHost {
    scripts: Arc<BTreeMap<&'static str, Vec<Act>>>,
    calls: Arc<Mutex<Vec<CodeCall>>>,
    answers: Arc<Mutex<Vec<Answer>>>,
}

impl ScriptHost {
    pub(crate) fn new(scripts: Vec<(&'static str, Vec<Act>)>) -> ScriptHost {
        ScriptHost {
            scripts: Arc::new(scripts.into_iter().collect()),
            ..ScriptHost::default()
        }
    }

    pub(crate) fn calls_of(&self, file: &str) -> Vec<CodeCall> {
        let calls = self.calls.lock().expect("calls");
        calls.iter().filter(|c| c.file == file).cloned().collect()
    }

    pub(crate) fn answer(&self, method: &str) -> Option<Result<Value, String>> {
        let answers = self.answers.lock().expect("answers");
        answers
            .iter()
            .find(|(m, _)| m == method)
            .map(|(_, a)| a.clone())
    }
}

#[async_trait]
impl CodeHost for ScriptHost {
    async fn call(&self, call: CodeCall, bridge: &mut dyn Bridge) -> Result<Value, CodeError> {
        self.calls.lock().expect("calls").push(call.clone());
        let script = self.scripts.get(call.file.as_str()).cloned();
        let Some(script) = script else {
            return Err(CodeError::new(CodeErrorKind::Load, "no script"));
        };
        for act in script {
            match act {
                Act::Ask(method, params) => {
                    let answer = bridge.call(method, params).await;
                    self.answers
                        .lock()
                        .expect("answers")
                        .push((method.to_owned(), answer));
                }
                Act::Return(v) => return Ok(v),
                Act::First(n) => {
                    let all = call.args[0].as_array().cloned().unwrap_or_default();
                    return Ok(Value::Array(all.into_iter().take(n).collect()));
                }
                Act::Fail(kind, message) => return Err(CodeError::new(kind, message)),
                Act::Block(message) => {
                    let mut e = CodeError::new(CodeErrorKind::Thrown, message);
                    e.details = Some(Box::new(json!({ "block": true })));
                    return Err(e);
                }
            }
        }
        Ok(Value::Null)
    }
}

/// `desk` (a prompt with the `.ts` tools and hooks; a person), `counter` (a `.ts` handler; a
/// person); the scripted model calls `remember`, then `broken`, then answers.
fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("code");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: Helps.\nmodel: scripted\nprompt: Help.\ntools: [remember, broken]\nhooks: [trim, count_seen, after_ok]\nenv: { GREETING: hello }\n",
    );
    write(
        "agents/models/scripted.yaml",
        "name: scripted\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls:\n      - { name: remember, arguments: { what: tea } }\n      - { name: broken, arguments: {} }\n  - text: Noted.\n",
    );
    write(
        "agents/tools/remember.ts",
        "import { defineTool } from '@standardagents/spec';\nexport default defineTool({\n  description: 'Remembers.',\n  args: { type: 'object', properties: { what: { type: 'string' } }, required: ['what'] },\n  execute: async (state, args) => 'ok',\n});\n",
    );
    write(
        "agents/tools/broken.ts",
        "import { defineTool } from '@standardagents/spec';\nexport default defineTool({\n  description: 'Fails.',\n  execute: async (state) => { throw new Error('boom'); },\n});\n",
    );
    write(
        "agents/hooks/trim.ts",
        "import { defineHook } from '@standardagents/spec';\nexport default defineHook({ hook: 'filter_messages', id: 'trim', execute: async (state, messages) => messages.slice(-1) });\n",
    );
    write(
        "agents/hooks/after_ok.ts",
        "import { defineHook } from '@standardagents/spec';\nexport default defineHook({ hook: 'after_tool_call_success', id: 'after_ok', execute: async (state, call, result) => { console.log(result); } });\n",
    );
    write(
        "agents/hooks/count_seen.ts",
        "import { defineHook } from '@standardagents/spec';\nexport default defineHook({ hook: 'prefilter_llm_history', id: 'count_seen', execute: async (state, messages) => messages });\n",
    );
    write(
        "agents/agents/counter.yaml",
        "name: counter\nsideA: { handler: counter }\nsideB: { human: true }\n",
    );
    write(
        "agents/handlers/counter.ts",
        "import { defineHandler } from '@standardagents/spec';\nexport default defineHandler({ execute: async (state, message) => {} });\n",
    );
    write(
        "agents/agents/relay_desk.yaml",
        "name: relay_desk\nsideA:\n  handler: relayer\n  subagents: [{ agent: echoer, as: helper }]\nsideB: { human: true }\n",
    );
    write(
        "agents/handlers/relayer.ts",
        "import { defineHandler } from '@standardagents/spec';\nexport default defineHandler({ execute: async (state, message) => {} });\n",
    );
    write(
        "agents/agents/echoer.yaml",
        "name: echoer\nexposeAsTool: true\ntoolDescription: Echoes.\nsideA: { handler: echo }\nsideB: { human: true }\n",
    );
    write(
        "agents/agents/planner.yaml",
        "name: planner\nsideA: { handler: planner }\nsideB: { human: true }\n",
    );
    write(
        "agents/handlers/planner.ts",
        "import { defineHandler } from '@standardagents/spec';\nexport default defineHandler({ execute: async (state, message) => {} });\n",
    );
    write(
        "agents/effects/nudge.ts",
        "import { defineEffect } from '@standardagents/spec';\nexport default defineEffect('Nudges.', { type: 'object', properties: { n: { type: 'integer' } } }, async (state, args) => {});\n",
    );
    write(
        "agents/handlers/echo.yaml",
        "description: Replies with the text it was sent.\n",
    );
    dir.project()
}

fn host() -> ScriptHost {
    ScriptHost::new(vec![
        (
            "agents/tools/remember.ts",
            vec![
                Act::Ask("setValue", json!({ "key": "remembered", "value": "tea" })),
                Act::Ask("env", json!({ "name": "GREETING" })),
                // Not the project's: duet's own environment is not code's to read.
                Act::Ask("env", json!({ "name": "PATH" })),
                Act::Ask("setStatus", json!({ "status": "remembering" })),
                Act::Ask("stopSession", json!({ "options": {} })),
                Act::Ask("writeFile", json!({ "args": ["/a.txt", "x"] })),
                Act::Return(json!({ "status": "success", "result": "remembered tea" })),
            ],
        ),
        (
            "agents/tools/broken.ts",
            vec![
                // The first tool's write, not committed yet, is seen by the next.
                Act::Ask("getValue", json!({ "key": "remembered" })),
                Act::Ask("setValue", json!({ "key": "broken", "value": true })),
                Act::Fail(CodeErrorKind::Thrown, "Error: boom"),
            ],
        ),
        (
            "agents/handlers/relayer.ts",
            vec![
                Act::Ask(
                    "invokeTool",
                    json!({ "name": "subagent_create", "args": { "agent": "helper", "message": "ping" } }),
                ),
                Act::Ask(
                    "invokeTool",
                    json!({ "name": "subagent_create", "args": { "agent": "nobody", "message": "x" } }),
                ),
                // A `.ts` tool, from code: it runs with this delivery's state.
                Act::Ask(
                    "invokeTool",
                    json!({ "name": "remember", "args": { "what": "coffee" } }),
                ),
            ],
        ),
        (
            "agents/handlers/planner.ts",
            vec![Act::Ask(
                "scheduleEffect",
                json!({ "name": "nudge", "args": { "n": 3 }, "delayMs": 0 }),
            )],
        ),
        (
            "agents/effects/nudge.ts",
            vec![
                Act::Ask("setValue", json!({ "key": "nudged", "value": 3 })),
                Act::Ask("stopSession", json!({ "options": {} })),
            ],
        ),
        ("agents/hooks/trim.ts", vec![Act::First(1)]),
        ("agents/hooks/count_seen.ts", vec![Act::Return(Value::Null)]),
        // Returns nothing: the call and its result stay (a `null` would drop them).
        (
            "agents/hooks/after_ok.ts",
            vec![Act::Return(json!({ "$undefined": true }))],
        ),
        (
            "agents/handlers/counter.ts",
            vec![
                Act::Ask("getValue", json!({ "key": "n" })),
                Act::Ask("setValue", json!({ "key": "n", "value": 1 })),
                Act::Ask(
                    "injectMessage",
                    json!({ "input": { "role": "assistant", "content": "counted" } }),
                ),
                Act::Ask("emit", json!({ "event": "counted", "data": { "n": 1 } })),
            ],
        ),
    ])
}

fn runtime(store: Arc<dyn Store>, host: &ScriptHost) -> Runtime {
    support::runtime(project(), store)
        .code_host(Arc::new(host.clone()))
        .build()
}

async fn value(store: &Arc<dyn Store>, key: &str, name: &str) -> Option<Value> {
    let t = store.thread(key).await.expect("read").expect("thread");
    store.value(t.id, name).await.expect("value")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_tool_runs_with_the_threads_state_and_its_writes_land_with_the_step() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = host();
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "d1", Some("desk"), "I like tea").await;
        // The tool's result, as its code returned it; the model went on.
        let texts = support::texts(&store, "d1").await;
        let all: Vec<&str> = texts.iter().map(|(_, _, t)| t.as_str()).collect();
        assert!(all.contains(&"remembered tea"), "{all:?}");
        assert!(all.contains(&"Noted."), "{all:?}");
        // Its value and status were committed with the step.
        assert_eq!(value(&store, "d1", "remembered").await, Some(json!("tea")));
        let t = store.thread("d1").await.expect("read").expect("thread");
        assert_eq!(t.status_text.as_deref(), Some("remembering"));
        // The call: the checked arguments after `state`, the thread's key, a stable call id.
        let calls = host.calls_of("agents/tools/remember.ts");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].args, vec![json!({ "what": "tea" })]);
        assert_eq!(calls[0].entry, vec!["execute".to_owned()]);
        assert_eq!(calls[0].state["threadId"], json!("d1"));
        assert_eq!(calls[0].state["agentId"], json!("desk"));
        assert!(calls[0].call.starts_with("tool:"), "{}", calls[0].call);
        // env answers from the prompt's env, and never from duet's own environment; what a
        // tool may not do is refused, naming it.
        let envs: Vec<Result<Value, String>> = host
            .answers
            .lock()
            .expect("answers")
            .iter()
            .filter(|(m, _)| m == "env")
            .map(|(_, a)| a.clone())
            .collect();
        assert_eq!(envs, vec![Ok(json!("hello")), Ok(Value::Null)]);
        assert_eq!(host.answer("getValue"), Some(Ok(json!("tea"))));
        assert_eq!(host.calls_of("agents/hooks/after_ok.ts").len(), 1);
        let stop = host.answer("stopSession").expect("asked");
        assert!(
            stop.as_ref().is_err_and(|e| e.contains("stopSession")),
            "{stop:?}"
        );
        // A file member asked with what it does not take is refused, saying what it needs
        // (`code_files.rs` writes files).
        let file = host.answer("writeFile").expect("asked");
        assert!(
            file.as_ref()
                .is_err_and(|e| e.contains("`path` is required")),
            "{file:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_tool_that_throws_is_an_error_result_and_writes_nothing() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = host();
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "d2", Some("desk"), "break it").await;
        let texts = support::texts(&store, "d2").await;
        let failed = texts
            .iter()
            .find(|(_, _, t)| t.contains("boom"))
            .map(|(_, _, t)| t.clone());
        assert_eq!(
            failed.as_deref(),
            Some("Failed to execute tool `broken`: Error: boom")
        );
        // The step went on to the model's answer; the throw wrote nothing.
        assert!(texts.iter().any(|(_, _, t)| t == "Noted."));
        assert_eq!(value(&store, "d2", "broken").await, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_messages_code_changes_what_the_next_hooks_see() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = host();
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "d3", Some("desk"), "one").await;
        support::send(&rt, "d3", None, "two").await;
        let trims = host.calls_of("agents/hooks/trim.ts");
        let seen = host.calls_of("agents/hooks/count_seen.ts");
        assert!(!trims.is_empty());
        assert_eq!(trims.len(), seen.len());
        for (trim, seen) in trims.iter().zip(&seen) {
            // The hook was handed the whole context and its execution context last...
            let given = trim.args[0].as_array().expect("messages").len();
            assert!(given >= 1);
            assert_eq!(trim.args[1]["source"]["kind"], json!("prompt"));
            // ...and the prefilter after it saw only what it kept.
            assert_eq!(seen.args[0].as_array().expect("messages").len(), 1);
        }
        assert!(
            trims
                .iter()
                .any(|c| c.args[0].as_array().expect("messages").len() > 1),
            "a later step had history to trim"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_handler_takes_the_sides_turns_with_its_writes_committed() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = host();
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "c1", Some("counter"), "count me").await;
        let texts = support::texts(&store, "c1").await;
        assert_eq!(
            texts.last().map(|(_, _, t)| t.as_str()),
            Some("counted"),
            "{texts:?}"
        );
        assert_eq!(value(&store, "c1", "n").await, Some(json!(1)));
        let calls = host.calls_of("agents/handlers/counter.ts");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].args[0]["content"], json!("count me"));
        assert_eq!(calls[0].args[0]["role"], json!("user"));
        assert_eq!(calls[0].state["execution"]["currentSide"], json!("a"));
        let t = store.thread("c1").await.expect("read").expect("thread");
        let records = store.records(t.id).await.expect("records");
        let emitted: Vec<Value> = records
            .iter()
            .filter(|r| r.kind() == "emitted")
            .map(|r| r.data())
            .collect();
        assert_eq!(
            emitted,
            vec![json!({ "event": "counted", "data": { "n": 1 } })]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_handler_that_fails_fails_only_its_delivery() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let scripts: Vec<(&'static str, Vec<Act>)> = vec![(
            "agents/handlers/counter.ts",
            vec![
                Act::Ask("setValue", json!({ "key": "n", "value": 5 })),
                Act::Fail(
                    CodeErrorKind::Deadline,
                    "the handler's code ran longer than 30000 ms and was stopped",
                ),
            ],
        )];
        let host = ScriptHost::new(scripts);
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "c2", Some("counter"), "first").await;
        support::send(&rt, "c2", None, "second").await;
        let t = store.thread("c2").await.expect("read").expect("thread");
        let records = store.records(t.id).await.expect("records");
        let errors: Vec<Value> = records
            .iter()
            .filter(|r| r.kind() == "handler_error")
            .map(|r| r.data())
            .collect();
        // Each delivery failed on its own; the thread took the next message.
        assert_eq!(errors.len(), 2, "{records:?}");
        assert!(
            errors[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("30000 ms"))
        );
        assert_eq!(value(&store, "c2", "n").await, None);
        assert_eq!(host.calls_of("agents/handlers/counter.ts").len(), 2);
    }
}

/// A Rust handler registered under the name a `.ts` handler defines.
struct Shadow;

#[async_trait]
impl Handler for Shadow {
    async fn handle(&self, state: &mut ThreadState<'_>, _m: &Message) -> Result<(), HandlerError> {
        state.reply("shadow");
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_defined_both_in_code_and_in_rust_is_refused() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = host();
        let rt = support::runtime(project(), store.clone())
            .code_host(Arc::new(host.clone()))
            .handler("counter", Shadow)
            .build();
        support::send(&rt, "c3", Some("counter"), "who runs?").await;
        let t = store.thread("c3").await.expect("read").expect("thread");
        let records = store.records(t.id).await.expect("records");
        let error = records
            .iter()
            .find(|r| r.kind() == "step_error")
            .map(|r| r.data().to_string())
            .unwrap_or_default();
        assert!(error.contains("defined twice"), "{records:?}");
        assert!(host.calls_of("agents/handlers/counter.ts").is_empty());
        let texts = support::texts(&store, "c3").await;
        assert!(!texts.iter().any(|(_, _, t)| t == "shadow"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_code_host_a_ts_tool_says_so() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = support::runtime(project(), store.clone()).build();
        support::send(&rt, "d4", Some("desk"), "hello").await;
        let texts = support::texts(&store, "d4").await;
        assert!(
            texts
                .iter()
                .any(|(_, _, t)| t.contains("no code host to run it")),
            "{texts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_handler_starts_a_child_with_subagent_create() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = host();
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "r1", Some("relay_desk"), "relay this").await;
        rt.quiesce().await;
        let answers = host.answers.lock().expect("answers").clone();
        let results: Vec<&Value> = answers
            .iter()
            .filter(|(m, _)| m == "invokeTool")
            .filter_map(|(_, a)| a.as_ref().ok())
            .collect();
        assert_eq!(results.len(), 3, "{answers:?}");
        assert_eq!(
            results[2],
            &json!({ "status": "success", "result": "remembered tea" })
        );
        let calls = host.calls_of("agents/tools/remember.ts");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].args, vec![json!({ "what": "coffee" })]);
        assert_eq!(value(&store, "r1", "remembered").await, Some(json!("tea")));
        assert_eq!(results[0]["status"], json!("success"), "{results:?}");
        assert!(
            results[0]["result"]
                .as_str()
                .is_some_and(|r| r.contains("Reference: r1/helper-1")),
            "{results:?}"
        );
        assert_eq!(results[1]["status"], json!("error"));
        assert!(
            results[1]["error"]
                .as_str()
                .is_some_and(|e| e.contains("`nobody`"))
        );
        let t = store.thread("r1").await.expect("read").expect("thread");
        let children = store.children(t.id).await.expect("children");
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].agent, "echoer");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_effect_runs_at_rest_when_due_and_its_writes_are_committed() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = host();
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "p1", Some("planner"), "plan").await;
        let scheduled = host.answer("scheduleEffect").expect("asked");
        assert!(scheduled.is_ok(), "{scheduled:?}");
        assert_eq!(rt.run_due_timers().await.expect("timers"), 1);
        rt.quiesce().await;
        let calls = host.calls_of("agents/effects/nudge.ts");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].entry, vec!["handler".to_owned()]);
        assert_eq!(calls[0].args, vec![json!({ "n": 3 })]);
        // At rest: no execution, and no session to stop.
        assert_eq!(calls[0].state["execution"], Value::Null);
        let stop = host.answer("stopSession").expect("asked");
        assert!(stop.is_err(), "{stop:?}");
        assert_eq!(value(&store, "p1", "nudged").await, Some(json!(3)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefilter_hook_that_throws_block_ends_the_session_without_the_model() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = ScriptHost::new(vec![
            ("agents/hooks/trim.ts", vec![Act::First(5)]),
            (
                "agents/hooks/count_seen.ts",
                vec![Act::Block("Error: Not today.")],
            ),
        ]);
        let rt = runtime(store.clone(), &host);
        support::send(&rt, "b1", Some("desk"), "please").await;
        let t = store.thread("b1").await.expect("read").expect("thread");
        assert_eq!(t.stop_reason, Some(duet_runtime::StopReason::HookBlocked));
        let texts = support::texts(&store, "b1").await;
        assert_eq!(
            texts.last().map(|(_, _, t)| t.as_str()),
            Some("Not today."),
            "{texts:?}"
        );
        // The model was never asked: its tools never ran.
        assert!(host.calls_of("agents/tools/remember.ts").is_empty());
    }
}
