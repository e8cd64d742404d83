//! Hooks: registered in Rust, run only where referenced, parent hooks of composed children around
//! the base hooks (`before_parent` → base → `after_parent`) with their provenance, and a required
//! hook this build lacks failing the composition closed rather than running half of it.

mod support;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use duet_runtime::hooks::{Hook, HookContext, HookSource, Hooks};
use duet_runtime::{CancellationToken, Delivered, EventSink, StopReason};

/// Records each run's id and source, and marks the system prompt.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(String, HookSource)>>>);

#[async_trait]
impl Hook for Recorder {
    async fn after_system_message(&self, ctx: &HookContext<'_>, text: String) -> String {
        if let Ok(mut seen) = self.0.lock() {
            seen.push((ctx.id.to_owned(), ctx.source.clone()));
        }
        format!("{text} [{}]", ctx.id)
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
        let done = rt
            .send(
                "t",
                Some("parent"),
                "hi",
                &EventSink::discard(),
                &CancellationToken::new(),
            )
            .await;
        assert!(matches!(done, Ok(Delivered::Settled(_))), "{done:?}");
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
    let done = rt
        .send(
            "t",
            Some("parent"),
            "hi",
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await;
    match done {
        Ok(Delivered::Settled(s)) => {
            assert_eq!(s.stop_reason, Some(StopReason::StepError));
            assert!(
                s.result
                    .as_deref()
                    .unwrap_or("")
                    .contains("hooks fail closed: hook `late`"),
                "{:?}",
                s.result
            );
        }
        other => panic!("{other:?}"),
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
