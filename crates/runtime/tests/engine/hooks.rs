//! Hooks: registered in Rust, run only where referenced, parent hooks of composed children around
//! the base hooks (`before_parent` → base → `after_parent`) with their provenance, and a required
//! hook this build lacks failing the composition closed rather than running half of it.

use crate::support;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use duet_runtime::ChatMessage;
use duet_runtime::ToolResult;
use duet_runtime::hooks::{Hook, HookContext, HookError, HookSource, Hooks, Prefiltered};
use duet_runtime::{CancellationToken, Delivered, EventSink, Message, Role, StopReason, ToolCall};

/// Records each run's id and source, and marks the system prompt.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(String, HookSource)>>>);

#[async_trait]
impl Hook for Recorder {
    async fn after_system_message(
        &self,
        ctx: &HookContext<'_>,
        text: String,
    ) -> Result<String, HookError> {
        if let Ok(mut seen) = self.0.lock() {
            seen.push((ctx.id.to_owned(), ctx.source.clone()));
        }
        Ok(format!("{text} [{}]", ctx.id))
    }
}

fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("hooks");
    let write = |path: &str, text: &str| dir.write(path, text);
    for id in ["base", "early", "late", "unused"] {
        write(
            &format!("agents/hooks/{id}.yaml"),
            &format!("hook: after_system_message\nid: {id}\n"),
        );
    }
    write(
        "agents/agents/child.yaml",
        "name: child\nexposeAsTool: true\ntoolDescription: A child.\nsideA: { prompt: pp }\nsideB: { human: true }\n\
         parentHooks:\n  - { hook: late, reason: Runs after the parent's own hooks., stage: after_parent }\n  - { hook: early, reason: Runs first., stage: before_parent }\n",
    );
    write(
        "agents/agents/parent.yaml",
        "name: parent\nhooks: [unused]\nsideA:\n  prompt: pp\n  subagents: [{ agent: child, as: helper, hidden: true }]\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/pp.yaml",
        "name: pp\ntoolDescription: d\nmodel: m\nprompt: base prompt\nhooks: [base]\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: hello\n",
    );
    dir.project()
}

#[tokio::test]
async fn parent_hooks_wrap_the_base_hooks_with_their_provenance() {
    let project = project();
    for backend in support::backends().await {
        let recorder = Recorder::default();
        let hooks = ["base", "early", "late", "unused"]
            .into_iter()
            .fold(Hooks::new(), |h, id| h.with(id, recorder.clone()));
        let rt = duet_runtime::Runtime::builder(project.clone(), backend.open().await)
            .providers(duet_models::providers())
            .hooks(hooks)
            .build();
        settled(&rt, "t", "parent", "hi").await;
        let seen = recorder.0.lock().map(|s| s.clone()).unwrap_or_default();
        let child = HookSource::Child {
            relationship: "helper".into(),
            agent: "child".into(),
        };
        assert_eq!(
            seen,
            vec![
                ("early".to_owned(), child.clone()),
                (
                    "base".to_owned(),
                    HookSource::Prompt {
                        prompt: "pp".into()
                    }
                ),
                ("late".to_owned(), child),
            ],
            "{}: the prompt's hooks replace the agent's (`unused`); a hidden relationship still contributes",
            backend.name()
        );
    }
}

#[tokio::test]
async fn a_required_hook_this_build_lacks_fails_closed() {
    let project = project();
    let backend = support::backends().await.remove(0);
    let recorder = Recorder::default();
    // `late` is required by the child but not registered.
    let hooks = ["base", "early", "unused"]
        .into_iter()
        .fold(Hooks::new(), |h, id| h.with(id, recorder.clone()));
    let rt = duet_runtime::Runtime::builder(project, backend.open().await)
        .providers(duet_models::providers())
        .hooks(hooks)
        .build();
    let s = settled(&rt, "t", "parent", "hi").await;
    assert_eq!(s.stop_reason, Some(StopReason::StepError));
    let why = s.result.as_deref().unwrap_or("");
    assert!(why.contains("hooks fail closed: hook `late`"), "{why}");
    // It names the call an embedder must make, for their own hook and for duet's.
    for call in [
        "RuntimeBuilder::hooks",
        "Hooks::new().with(\"late\", …)",
        ".hooks(duet_handlers::hooks())",
    ] {
        assert!(why.contains(call), "the error names `{call}`: {why}");
    }
    assert!(
        recorder.0.lock().map(|s| s.is_empty()).unwrap_or(false),
        "no hook ran: nothing half-installed"
    );
    // And the composition check names it before anything runs.
    let issues = rt.project().check_builtins(&rt.builtins());
    assert!(
        issues.iter().any(|i| i.message.contains("`late`")),
        "{issues:?}"
    );
}

/// Every hook kind that fires, each under its own id, logging what it saw and changing what the
/// digest lets it change.
#[derive(Clone, Default)]
struct Probe(Arc<Mutex<Vec<String>>>);

impl Probe {
    fn log(&self, line: String) {
        if let Ok(mut log) = self.0.lock() {
            log.push(line);
        }
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl Hook for Probe {
    async fn after_thread_created(&self, ctx: &HookContext<'_>) -> Result<(), HookError> {
        self.log(format!("after_thread_created {}", ctx.thread.key));
        Ok(())
    }
    async fn after_subagent_created(
        &self,
        ctx: &HookContext<'_>,
        child: &duet_runtime::Thread,
    ) -> Result<(), HookError> {
        self.log(format!(
            "after_subagent_created {} -> {}",
            ctx.thread.key, child.key
        ));
        Ok(())
    }
    async fn after_system_message(
        &self,
        _ctx: &HookContext<'_>,
        text: String,
    ) -> Result<String, HookError> {
        self.log(format!("after_system_message {text:?}"));
        Ok(format!("{text} (checked)"))
    }
    async fn filter_messages(
        &self,
        _ctx: &HookContext<'_>,
        _messages: Vec<ChatMessage>,
    ) -> Result<Vec<ChatMessage>, HookError> {
        self.log("filter_messages".into());
        Err(HookError::new("no filter today"))
    }
    async fn prefilter_llm_history(
        &self,
        _ctx: &HookContext<'_>,
        messages: Vec<ChatMessage>,
    ) -> Result<Prefiltered, HookError> {
        self.log(format!("prefilter_llm_history {}", messages.len()));
        let blocked = messages
            .iter()
            .any(|m| m.content.as_deref().is_some_and(|c| c.contains("BLOCK")));
        Ok(if blocked {
            Prefiltered::Block("Blocked by policy.".into())
        } else {
            Prefiltered::Messages(messages)
        })
    }
    async fn before_create_message(
        &self,
        _ctx: &HookContext<'_>,
        mut message: Message,
    ) -> Result<Message, HookError> {
        if let Some(c) = &message.content {
            if c.contains("nope") {
                return Err(HookError::new("nope is not allowed"));
            }
            message.content = Some(c.replace("secret", "[redacted]"));
        }
        Ok(message)
    }
    async fn after_create_message(
        &self,
        _ctx: &HookContext<'_>,
        message: &Message,
    ) -> Result<(), HookError> {
        self.log(format!(
            "after_create_message {} {}",
            message.role.as_str(),
            message.content.as_deref().unwrap_or("-")
        ));
        Ok(())
    }
    async fn tool_call_started(
        &self,
        _ctx: &HookContext<'_>,
        call: &ToolCall,
    ) -> Result<(), HookError> {
        self.log(format!("tool_call_started {}", call.name));
        Ok(())
    }
    async fn tool_call_done(
        &self,
        _ctx: &HookContext<'_>,
        call: &ToolCall,
        result: &ToolResult,
    ) -> Result<(), HookError> {
        self.log(format!("tool_call_done {} {}", call.name, result.is_ok()));
        Ok(())
    }
    async fn after_tool_call_success(
        &self,
        _ctx: &HookContext<'_>,
        call: &ToolCall,
        result: ToolResult,
    ) -> Result<Option<ToolResult>, HookError> {
        self.log(format!("after_tool_call_success {}", call.name));
        Ok(match call.name.as_str() {
            "drop_me" => None,
            _ => Some(ToolResult::ok(format!("{} (seen)", result.content))),
        })
    }
    async fn after_tool_call_failure(
        &self,
        _ctx: &HookContext<'_>,
        call: &ToolCall,
        _result: ToolResult,
    ) -> Result<Option<ToolResult>, HookError> {
        self.log(format!("after_tool_call_failure {}", call.name));
        Ok(Some(ToolResult::error("the lookup needs a topic")))
    }
    async fn before_store_tool_result(
        &self,
        _ctx: &HookContext<'_>,
        call: &ToolCall,
        result: ToolResult,
    ) -> Result<ToolResult, HookError> {
        self.log(format!("before_store_tool_result {}", call.name));
        Ok(ToolResult {
            content: format!("stored: {}", result.content),
            ..result
        })
    }
}

/// The thread hook kinds duet fires: all of the spec's but those it never does.
fn kinds() -> Vec<&'static str> {
    duet_spec::THREAD_HOOKS
        .iter()
        .copied()
        .filter(|k| !duet_spec::NEVER_FIRED.contains(k))
        .collect()
}

/// A parent whose agent names every hook kind; it calls tools (one dropped by a hook, one
/// failing), starts a blocking child, and answers. A handler agent with the same hooks.
fn probed_project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("hook-kinds");
    let write = |path: &str, text: &str| dir.write(path, text);
    for kind in kinds() {
        write(
            &format!("agents/hooks/{kind}.yaml"),
            &format!("hook: {kind}\nid: {kind}\n"),
        );
    }
    let all = kinds().join(", ");
    write(
        "agents/agents/parent.yaml",
        &format!(
            "name: parent\nhooks: [{all}]\nsideA:\n  prompt: pp\n  stopOnResponse: true\n  subagents: [{{ agent: kid, blocking: true }}]\nsideB: {{ human: true }}\n"
        ),
    );
    write(
        "agents/prompts/pp.yaml",
        "name: pp\ntoolDescription: d\nmodel: m\nprompt: Be brief.\nincludeChat: true\ntools: [lookup, drop_me]\n",
    );
    write(
        "agents/tools/lookup.yaml",
        "description: Looks a topic up.\nargs: { type: object, properties: { topic: { type: string } }, required: [topic] }\nresult: \"found {{topic}}\"\n",
    );
    write(
        "agents/tools/drop_me.yaml",
        "description: Noise.\nresult: noise\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n\
         \x20 - tool_calls: [{ name: lookup, arguments: { topic: tides } }, { name: drop_me, arguments: {} }, { name: lookup, arguments: {} }]\n\
         \x20 - tool_calls: [{ name: subagent_create, arguments: { agent: kid, name: k, message: Go., attachments: [] } }]\n\
         \x20 - text: the secret is out\n",
    );
    write(
        "agents/agents/kid.yaml",
        "name: kid\nexposeAsTool: true\ntoolDescription: A kid.\nsideA:\n  prompt: kp\n  sessionStop: { name: finish, messageProperty: summary }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/kp.yaml",
        "name: kp\ntoolDescription: d\nmodel: km\nprompt: p\ntools: [finish]\n",
    );
    write(
        "agents/tools/finish.yaml",
        "description: Done.\nargs: { type: object, properties: { summary: { type: string } }, required: [summary] }\nresult: ok\n",
    );
    write(
        "agents/models/km.yaml",
        "name: km\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: finish, arguments: { summary: done } }]\n",
    );
    write("agents/handlers/echo.yaml", "builtin: echo\n");
    // A side whose session ends by a bound tool with no message property: the result is the
    // tool's stored result, as the hooks left it.
    write(
        "agents/agents/closer.yaml",
        "name: closer\nhooks: [after_tool_call_success, before_store_tool_result]\nsideA:\n  prompt: cp\n  sessionStop: { name: close }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/cp.yaml",
        "name: cp\ntoolDescription: d\nmodel: cm\nprompt: p\ntools: [close]\n",
    );
    write(
        "agents/tools/close.yaml",
        "description: Closes.\nresult: closed\n",
    );
    write(
        "agents/models/cm.yaml",
        "name: cm\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: close, arguments: {} }]\n",
    );
    write(
        "agents/agents/echoer.yaml",
        &format!(
            "name: echoer\nhooks: [{all}]\nsideA: {{ handler: echo }}\nsideB: {{ human: true }}\n"
        ),
    );
    dir.project()
}

fn probed_runtime(
    project: Arc<duet_spec::Project>,
    store: Arc<dyn duet_runtime::Store>,
    probe: &Probe,
) -> duet_runtime::Runtime {
    let hooks = kinds()
        .into_iter()
        .fold(Hooks::new(), |h, kind| h.with(kind, probe.clone()));
    support::runtime(project, store).hooks(hooks).build()
}

/// Sends `text` to `key` and returns how the run settled.
async fn settled(
    rt: &duet_runtime::Runtime,
    key: &str,
    agent: &str,
    text: &str,
) -> duet_runtime::Settled {
    match rt
        .send(
            key,
            Some(agent),
            text,
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await
    {
        Ok(Delivered::Settled(s)) => s,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn every_hook_kind_runs_where_and_in_the_order_the_digest_says() {
    let project = probed_project();
    for backend in support::backends().await {
        let probe = Probe::default();
        let rt = probed_runtime(project.clone(), backend.open().await, &probe);
        settled(&rt, "t", "parent", "hello").await;
        let log = probe.lines();
        let first_step: Vec<&str> = log.iter().map(String::as_str).take(17).collect();
        assert_eq!(
            first_step,
            vec![
                "after_thread_created t",
                "after_create_message user hello",
                "after_system_message \"Be brief.\"",
                "filter_messages",
                "prefilter_llm_history 1",
                "tool_call_started lookup",
                "tool_call_done lookup true",
                "after_tool_call_success lookup",
                "before_store_tool_result lookup",
                "tool_call_started drop_me",
                "tool_call_done drop_me true",
                "after_tool_call_success drop_me",
                "tool_call_started lookup",
                "tool_call_done lookup false",
                "after_tool_call_failure lookup",
                "before_store_tool_result lookup",
                "after_create_message assistant -",
            ],
            "{}: {log:#?}",
            backend.name()
        );
        assert!(
            log.contains(&"after_subagent_created t -> t/kid-1".to_owned()),
            "{log:#?}"
        );
        assert_eq!(
            log.iter()
                .filter(|l| l.starts_with("after_thread_created"))
                .count(),
            1,
            "the child's agent names no hooks: only the parent's creation runs them"
        );

        let store = rt.store();
        let t = store.thread("t").await.expect("read").expect("thread");
        let messages = store.messages(t.id).await.expect("messages");
        let shown: Vec<String> = messages
            .iter()
            .map(|m| {
                let calls: Vec<&str> = m.tool_calls.iter().map(|c| c.name.as_str()).collect();
                format!(
                    "{} {} {}",
                    m.role.as_str(),
                    m.content.as_deref().unwrap_or("-"),
                    calls.join(",")
                )
            })
            .collect();
        assert_eq!(
            shown[..5],
            [
                "user hello ",
                // `drop_me` is gone from the call list and has no result.
                "assistant - lookup,lookup",
                "tool stored: found tides (seen) ",
                "tool stored: the lookup needs a topic ",
                "assistant - subagent_create",
            ],
            "{shown:#?}"
        );
        // `before_create_message` redacted the model's answer before it was written.
        assert_eq!(
            shown.last().map(String::as_str),
            Some("assistant the [redacted] is out ")
        );
        // The failing `filter_messages` was skipped, journaled with each step it failed in.
        let records = store.records(t.id).await.expect("records");
        let failed: Vec<serde_json::Value> = records
            .iter()
            .filter(|r| r.kind() == "hook_failed")
            .map(|r| r.data())
            .collect();
        assert_eq!(failed.len(), 3, "one per model step: {failed:?}");
        assert_eq!(
            failed[0],
            serde_json::json!({"id": "filter_messages", "kind": "filter_messages", "error": "no filter today"})
        );
    }
}

#[tokio::test]
async fn a_blocking_prefilter_ends_the_session_before_the_model_is_called() {
    let project = probed_project();
    for backend in support::backends().await {
        let probe = Probe::default();
        let rt = probed_runtime(project.clone(), backend.open().await, &probe);
        let s = settled(&rt, "t", "parent", "BLOCK this").await;
        assert_eq!(s.stop_reason, Some(StopReason::HookBlocked));
        assert_eq!(s.result.as_deref(), Some("Blocked by policy."));
        let store = rt.store();
        let t = store.thread("t").await.expect("read").expect("thread");
        let messages = store.messages(t.id).await.expect("messages");
        let last = messages.last().expect("a message");
        assert_eq!(
            (last.role, last.content.as_deref()),
            (Role::Assistant, Some("Blocked by policy.")),
            "the block's message is written by the acting side; no model step ran"
        );
        assert!(!t.session_open, "{}", backend.name());
        assert!(
            !probe
                .lines()
                .iter()
                .any(|l| l.starts_with("tool_call_started")),
            "nothing ran after the block"
        );
    }
}

#[tokio::test]
async fn a_failing_before_create_message_rejects_a_handler_write() {
    let project = probed_project();
    for backend in support::backends().await {
        let probe = Probe::default();
        let rt = probed_runtime(project.clone(), backend.open().await, &probe);
        for text in ["a secret", "nope"] {
            settled(&rt, "h", "echoer", text).await;
        }
        let store = rt.store();
        let t = store.thread("h").await.expect("read").expect("thread");
        let texts: Vec<(Role, String)> = store
            .messages(t.id)
            .await
            .expect("messages")
            .into_iter()
            .map(|m| (m.role, m.content.unwrap_or_default()))
            .collect();
        // Inbound messages pass the hooks too: "nope" fails its hook and is written unchanged
        // (a runtime write skips a failing hook); the echo of it is a handler write, which a
        // failing hook rejects: the delivery fails and nothing of it is kept.
        assert_eq!(
            texts,
            vec![
                (Role::User, "a [redacted]".to_owned()),
                (Role::Assistant, "a [redacted]".to_owned()),
                (Role::User, "nope".to_owned()),
            ],
            "{}",
            backend.name()
        );
        let records = store.records(t.id).await.expect("records");
        let rejected = records.iter().find(|r| r.kind() == "handler_error");
        assert!(
            rejected.is_some_and(|r| r.data()["error"]
                .as_str()
                .is_some_and(|e| e.contains("hook `before_create_message`: nope is not allowed"))),
            "{records:?}"
        );
    }
}

#[tokio::test]
async fn the_stop_rules_read_the_result_the_hooks_left() {
    let project = probed_project();
    for backend in support::backends().await {
        let probe = Probe::default();
        let rt = probed_runtime(project.clone(), backend.open().await, &probe);
        let s = settled(&rt, "c", "closer", "close it").await;
        assert_eq!(s.stop_reason, Some(StopReason::SessionStop));
        assert_eq!(
            s.result.as_deref(),
            Some("stored: closed (seen)"),
            "{}: the session's result is what was stored, not the raw tool output",
            backend.name()
        );
    }
}

/// A required parent hook acts on the parent's thread state: it reads a value, sets one, and
/// injects a context message, all committed with the step it runs in.
#[derive(Clone, Default)]
struct Context(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Hook for Context {
    async fn after_system_message(
        &self,
        ctx: &HookContext<'_>,
        text: String,
    ) -> Result<String, HookError> {
        let seen = ctx.get_value("audit:count").await?;
        let count = seen.and_then(|v| v.as_i64()).unwrap_or(0) + 1;
        ctx.set_value("audit:count", Some(serde_json::json!(count)))?;
        ctx.inject_message(Role::System, format!("audit context #{count}"), true)?;
        // Files too: the last step's log is there, this one's is written with the step.
        let last = ctx
            .read_file(&format!("/audit/{}.txt", count - 1))
            .await
            .map_err(|e| HookError::new(e.to_string()))?;
        let line = format!("step {count} saw {}", last.is_some());
        ctx.write_file(&format!("/audit/{count}.txt"), line.as_bytes(), None)
            .await
            .map_err(|e| HookError::new(e.to_string()))?;
        Ok(text)
    }

    async fn after_create_message(
        &self,
        ctx: &HookContext<'_>,
        _message: &Message,
    ) -> Result<(), HookError> {
        // After the commit nothing can be written.
        let answer = match ctx.set_value("late", None) {
            Err(_) => "refused",
            Ok(()) => "accepted",
        };
        let file = match ctx.write_file("/late.txt", b"late", None).await {
            Err(_) => "refused",
            Ok(_) => "accepted",
        };
        if let Ok(mut seen) = self.0.lock() {
            seen.push(answer.to_owned());
            seen.push(file.to_owned());
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_parent_hook_writes_through_the_parents_thread_state() {
    let dir = support::Scratch::new("hook-state");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/hooks/audit.yaml",
        "hook: after_system_message\nid: audit\n",
    );
    write(
        "agents/hooks/late.yaml",
        "hook: after_create_message\nid: late\n",
    );
    write(
        "agents/agents/child.yaml",
        "name: child\nexposeAsTool: true\ntoolDescription: A child.\nsideA: { prompt: pp }\nsideB: { human: true }\n\
         parentHooks:\n  - { hook: audit, reason: Audits the parent., stage: before_parent }\n  - { hook: late, reason: Watches., stage: after_parent }\n",
    );
    write(
        "agents/agents/parent.yaml",
        "name: parent\nsideA:\n  prompt: pp\n  subagents: [{ agent: child, as: helper, hidden: true }]\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/pp.yaml",
        "name: pp\ntoolDescription: d\nmodel: m\nprompt: base prompt\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: one\n  - text: two\n",
    );
    let project = dir.project();
    for backend in support::backends().await {
        let store = backend.open().await;
        let context = Context::default();
        let hooks = Hooks::new()
            .with("audit", context.clone())
            .with("late", context.clone());
        let rt = duet_runtime::Runtime::builder(project.clone(), store.clone())
            .providers(duet_models::providers())
            .hooks(hooks)
            .build();
        settled(&rt, "t", "parent", "hi").await;
        settled(&rt, "t", "parent", "again").await;
        let t = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(
            store.value(t.id, "audit:count").await.expect("value"),
            Some(serde_json::json!(2)),
            "{}: each step read the value the last one wrote",
            backend.name()
        );
        let injected: Vec<(Role, Option<String>, bool)> = store
            .messages(t.id)
            .await
            .expect("messages")
            .into_iter()
            .filter(|m| m.role == Role::System)
            .map(|m| (m.role, m.content, m.silent))
            .collect();
        assert_eq!(
            injected,
            vec![
                (Role::System, Some("audit context #1".into()), true),
                (Role::System, Some("audit context #2".into()), true),
            ],
            "{}",
            backend.name()
        );
        let failed = store
            .records(t.id)
            .await
            .expect("records")
            .into_iter()
            .filter(|r| r.kind() == "hook_failed")
            .count();
        assert_eq!(failed, 0, "{}", backend.name());
        // The hook's files, committed with their steps (the second saw the first's).
        let files = rt.files();
        for (n, says) in [(1, "step 1 saw false"), (2, "step 2 saw true")] {
            let f = files
                .file(t.id, &format!("/audit/{n}.txt"))
                .await
                .expect("the hook's file");
            assert_eq!(files.content(&f).await.expect("read"), says.as_bytes());
        }
        assert!(files.stat(t.id, "/late.txt").await.expect("stat").is_none());
        let late = context.0.lock().map(|s| s.clone()).unwrap_or_default();
        assert!(
            !late.is_empty() && late.iter().all(|a| a == "refused"),
            "{}: {late:?}",
            backend.name()
        );
    }
}
