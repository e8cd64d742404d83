//! The session control plane: `steer` reaches the run before its next model call, `follow_up`
//! when it would otherwise settle, `abort` stops it — in this process at once, from another
//! process through the store — and `state`, `entries` and `follow` observe it. On every backend.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::control::{Command, SessionResult, control_codes};
use duet_runtime::{
    Agent, AgentEvent, Prompt, Runtime, Scope, Store, Tool, ToolContext, ToolResult, codes,
};
use futures::StreamExt;
use tokio::sync::Notify;

/// A tool that waits until the test lets it go.
#[derive(Clone, Default)]
struct Gate {
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

#[async_trait]
impl Tool for Gate {
    async fn call(&self, _: ToolContext, _: serde_json::Value) -> ToolResult {
        self.entered.notify_one();
        self.release.notified().await;
        ToolResult::ok("opened")
    }
}

fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("control");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/gated.yaml",
        "name: gated\nexposeAsTool: true\ntoolDescription: Waits at a gate.\nsideA: { prompt: gated }\nsideB: { human: true }\n",
    );
    write(
        "agents/agents/boss.yaml",
        "name: boss\nsideA:\n  prompt: boss\n  subagents: [{ agent: gated, blocking: true }]\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/boss.yaml",
        "name: boss\ntoolDescription: d\nmodel: boss_model\nprompt: p\n",
    );
    write(
        "agents/models/boss_model.yaml",
        "name: boss_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: subagent_create, arguments: { agent: gated, name: g, message: Wait here., attachments: [] } }]\n",
    );
    write(
        "agents/prompts/gated.yaml",
        "name: gated\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [wait]\n",
    );
    write(
        "agents/tools/wait.yaml",
        "description: Waits.\nbuiltin: wait\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: wait }]\n  - text: second answer\n  - text: third answer\n  - text: fourth answer\n",
    );
    dir.project()
}

fn runtime(
    project: &Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
    gate: &Gate,
    lease_ms: i64,
) -> Runtime {
    support::runtime(project.clone(), store)
        .tool("wait", gate.clone())
        .lease_ms(lease_ms)
        .build()
}

fn scope() -> Scope {
    Scope::new(uuid::Uuid::now_v7().to_string())
}

/// Messages as `role: content` lines.
async fn transcript(rt: &Runtime, scope: &Scope) -> Vec<String> {
    let t = rt
        .store()
        .thread(&scope.session)
        .await
        .expect("read")
        .expect("thread");
    rt.store()
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter_map(|m| m.content.map(|c| format!("{}: {c}", m.role.as_str())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_and_follow_ups_reach_the_run_in_their_places() {
    let project = project();
    for backend in support::backends().await {
        let gate = Gate::default();
        let rt = runtime(&project, backend.open().await, &gate, 30_000);
        let agent = rt.agent("gated").expect("agent");
        let scope = scope();
        let events = agent.invoke(scope.clone(), Prompt::text("start"));
        let run = tokio::spawn(events.collect::<Vec<_>>());
        gate.entered.notified().await;

        let state = rt.state(&scope).await.expect("state");
        assert_eq!(state.status, "running", "{}", backend.name());
        let follow = rt
            .dispatch(
                &scope,
                Command::FollowUp {
                    prompt: Prompt::text("and then this"),
                },
            )
            .await;
        assert!(
            matches!(follow, SessionResult::Ok { run_id: Some(_) }),
            "{}: {follow:?}",
            backend.name()
        );
        let steer = rt
            .dispatch(
                &scope,
                Command::Steer {
                    prompt: Prompt::text("mind the budget"),
                },
            )
            .await;
        assert!(
            matches!(steer, SessionResult::Ok { run_id: Some(_) }),
            "{}: {steer:?}",
            backend.name()
        );
        let state = rt.state(&scope).await.expect("state");
        assert_eq!(
            (state.pending.steering, state.pending.follow_up),
            (1, 1),
            "{}",
            backend.name()
        );
        gate.release.notify_one();

        let events = run.await.expect("joins");
        match events.last() {
            Some(AgentEvent::Completed { data }) => {
                assert_eq!(
                    data.as_ref().and_then(|d| d["status"].as_str()),
                    Some("awaiting_human")
                );
            }
            other => panic!("{}: {other:?}", backend.name()),
        }
        // The steer went in before the second model call; the follow-up after the run parked.
        assert_eq!(
            transcript(&rt, &scope).await,
            [
                "user: start",
                "tool: opened",
                "user: mind the budget",
                "assistant: second answer",
                "user: and then this",
                "assistant: third answer"
            ],
            "{}",
            backend.name()
        );
        // The park the run went on from (the follow-up waited) is marked: the run's next commit
        // opens with `run_continued`, naming that park, so observers see one run.
        let entries = rt.entries(&scope, 0).await.expect("entries");
        let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
        let park = kinds.iter().position(|k| *k == "stopped").expect("a park");
        assert_eq!(kinds.get(park + 1), Some(&"run_continued"), "{kinds:?}");
        assert_eq!(
            entries[park + 1].data,
            serde_json::json!({"after": entries[park].seq})
        );
        assert_eq!(
            kinds.iter().filter(|k| **k == "run_continued").count(),
            1,
            "{kinds:?}"
        );
        let state = rt.state(&scope).await.expect("state");
        assert_eq!(
            (
                state.status,
                state.pending.steering + state.pending.follow_up
            ),
            ("parked", 0)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_stops_the_run_here_and_from_another_process() {
    let project = project();
    for backend in support::backends().await {
        for remote in [false, true] {
            let gate = Gate::default();
            // A short lease, so the run renews (and sees a remote abort request) every 100 ms.
            let rt = runtime(&project, backend.open().await, &gate, 300);
            let other = runtime(&project, backend.open().await, &Gate::default(), 300);
            let scope = scope();
            let events = rt
                .agent("gated")
                .expect("agent")
                .invoke(scope.clone(), Prompt::text("start"));
            let run = tokio::spawn(events.collect::<Vec<_>>());
            gate.entered.notified().await;
            let controller = if remote { &other } else { &rt };
            let accepted = controller.dispatch(&scope, Command::Abort).await;
            assert!(
                matches!(accepted, SessionResult::Ok { .. }),
                "{} remote={remote}: {accepted:?}",
                backend.name()
            );
            let events = tokio::time::timeout(Duration::from_secs(10), run)
                .await
                .expect("aborted promptly")
                .expect("joins");
            match events.last() {
                Some(AgentEvent::Failed {
                    code, retryable, ..
                }) => {
                    assert_eq!(
                        (code.as_deref(), *retryable),
                        (Some(codes::ABORTED), false),
                        "{}",
                        backend.name()
                    );
                }
                other => panic!("{} remote={remote}: {other:?}", backend.name()),
            }
            let state = rt.state(&scope).await.expect("state");
            assert_eq!(
                state.status,
                "idle",
                "{} remote={remote}: released",
                backend.name()
            );
            // Nothing runs now: commands that need a run are refused.
            for command in [
                Command::Abort,
                Command::Steer {
                    prompt: Prompt::text("hello?"),
                },
            ] {
                match rt.dispatch(&scope, command).await {
                    SessionResult::Err { code, .. } => {
                        assert_eq!(code, control_codes::NO_ACTIVE_RUN)
                    }
                    ok => panic!("{ok:?}"),
                }
            }
        }
    }
}

#[tokio::test]
async fn commands_are_checked_before_acceptance() {
    let project = project();
    let backend = support::backends().await.remove(0);
    let rt = runtime(&project, backend.open().await, &Gate::default(), 30_000);
    // A session no invoke created has no run: `no_active_run`, as fastagent answers, for every
    // run command (its clients then start the run with an invoke).
    let steer = Command::Steer {
        prompt: Prompt::text("x"),
    };
    let follow_up = Command::FollowUp {
        prompt: Prompt::text("x"),
    };
    for command in [Command::Abort, steer, follow_up] {
        let unknown = rt.dispatch(&Scope::new("nobody"), command).await;
        assert!(
            matches!(
                unknown,
                SessionResult::Err {
                    code: control_codes::NO_ACTIVE_RUN,
                    retryable: false,
                    ..
                }
            ),
            "{unknown:?}"
        );
        let wire = serde_json::to_value(&unknown).expect("json");
        assert_eq!(wire["ok"], false);
        assert_eq!(wire["error"]["code"], "no_active_run");
    }
    let parsed: Command =
        serde_json::from_value(serde_json::json!({"type": "steer", "prompt": {"text": "x"}}))
            .expect("wire form");
    assert_eq!(
        parsed,
        Command::Steer {
            prompt: Prompt::text("x")
        }
    );
}

/// The observer follows through the store's change feed: on Postgres from a store of its own (as
/// another process would), on SQLite (whose feed is in process) through the running one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_follows_a_session_from_a_cursor() {
    let project = project();
    for backend in support::backends().await {
        let name = backend.name();
        let gate = Gate::default();
        let rt = runtime(&project, backend.open().await, &gate, 30_000);
        let observer = match backend {
            support::Backend::Postgres(_) => {
                runtime(&project, backend.open().await, &Gate::default(), 30_000)
            }
            _ => rt.clone(),
        };
        let scope = scope();
        let agent = rt.agent("gated").expect("agent");
        let run = tokio::spawn(
            agent
                .invoke(scope.clone(), Prompt::text("start"))
                .collect::<Vec<_>>(),
        );
        gate.entered.notified().await;
        let before = observer.entries(&scope, 0).await.expect("entries");
        let cursor = before.last().map_or(0, |e| e.seq);
        assert!(
            before
                .iter()
                .any(|e| e.kind == "message" && e.data["content"] == "start"),
            "{name}"
        );
        let mut feed = observer.follow(scope.clone(), cursor);
        gate.release.notify_one();
        // Only what came after the cursor, in order, ending with the park.
        let mut seen = Vec::new();
        while let Ok(Some(entry)) = tokio::time::timeout(Duration::from_secs(10), feed.next()).await
        {
            assert!(entry.seq > cursor, "{name}");
            let done = entry.kind == "stopped";
            seen.push(entry);
            if done {
                break;
            }
        }
        run.await.expect("joins");
        let seqs: Vec<i64> = seen.iter().map(|e| e.seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{name}: {seqs:?}");
        assert!(
            seen.iter().any(|e| e.data["content"] == "second answer"),
            "{name}: {seen:?}"
        );
        assert_eq!(
            seen.last().map(|e| e.data["stopReason"].clone()),
            Some(serde_json::json!("stop_on_response")),
            "{name}"
        );
        // Everything after the cursor, nothing twice.
        let all = observer.entries(&scope, cursor).await.expect("entries");
        assert_eq!(
            all.iter().map(|e| e.seq).collect::<Vec<_>>(),
            seqs,
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_a_parent_aborts_the_child_it_waits_on() {
    let project = project();
    for backend in support::backends().await {
        let gate = Gate::default();
        let rt = runtime(&project, backend.open().await, &gate, 30_000);
        let scope = scope();
        let run = tokio::spawn(
            rt.agent("boss")
                .expect("agent")
                .invoke(scope.clone(), Prompt::text("go"))
                .collect::<Vec<_>>(),
        );
        // The child's tool is where both wait.
        gate.entered.notified().await;
        let accepted = rt.dispatch(&scope, Command::Abort).await;
        assert!(
            matches!(accepted, SessionResult::Ok { .. }),
            "{}: {accepted:?}",
            backend.name()
        );
        let events = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("promptly")
            .expect("joins");
        assert!(
            matches!(events.last(), Some(AgentEvent::Failed { code: Some(c), .. }) if c == codes::ABORTED),
            "{}: {events:?}",
            backend.name()
        );
        let child = rt
            .store()
            .thread(&format!("{}/gated-1", scope.session))
            .await
            .expect("read")
            .expect("child");
        assert_eq!(
            child.stop_reason,
            Some(duet_runtime::StopReason::Aborted),
            "{}",
            backend.name()
        );
        assert_eq!(
            child.lease_owner,
            None,
            "{}: the child let go too",
            backend.name()
        );
        assert_eq!(rt.state(&scope).await.expect("state").status, "idle");
    }
}
