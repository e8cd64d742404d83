//! Shared by the CLI's and the server's end-to-end tests: the backends to run against
//! (`duet_store::testing`: SQLite always, Postgres too when `DATABASE_URL` is set), the
//! repository's project, scratch projects, and small helpers.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use duet_runtime::{Runtime, Store};

#[allow(unused_imports)]
pub use duet_runtime::testing::{
    Scratch, Slow, kill_mid_step, must_load as project, repo, send, texts,
};
#[allow(unused_imports)]
pub use duet_store::testing::{Backend, backends, psql};

/// A runtime with this build's providers, handlers, http client and the project's MCP servers
/// (stdio servers run in the repository root).
pub fn runtime(
    project: Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
) -> duet_runtime::RuntimeBuilder {
    let providers = duet_models::providers_for(&project);
    // Remote A2A agents' tokens: from the project's own `env`-like convention, the process env.
    let handlers = duet_server::remote_agents(
        &project,
        |var| std::env::var(var).ok(),
        duet_handlers::handlers(),
    );
    let builder = Runtime::builder(project.clone(), store)
        .providers(providers)
        .handlers(handlers)
        .hooks(duet_handlers::hooks())
        .effects(duet_handlers::effects());
    duet_tools::register(builder, &project, &repo())
}

/// The approval id (the seq of its `approval_requested` record) of the one call of thread
/// `key` that waits for a decision.
pub async fn pending_approval(rt: &Runtime, key: &str) -> i64 {
    let store = rt.store();
    let t = store.thread(key).await.expect("read").expect("the thread");
    let (records, messages) = (
        store.records(t.id).await.expect("records"),
        store.messages(t.id).await.expect("messages"),
    );
    let pending = duet_runtime::approval::pending(&records, &messages);
    assert_eq!(pending.len(), 1, "{key}: one pending call: {pending:?}");
    pending[0].seq
}

/// A person approves the one pending call of thread `key` (as the repository's approval_gate
/// proposes), and the thread runs on here.
pub async fn approve(rt: &Runtime, key: &str) {
    let seq = pending_approval(rt, key).await;
    let input = duet_runtime::DecisionInput {
        decision: duet_spec::Decision::Approve,
        args: None,
        reason: None,
        text: None,
        remember: None,
    };
    rt.decide(key, seq, input, Some("approver".into()))
        .await
        .expect("decided");
}

/// The repository's project, with its orchestrator composing `question_gate` (whose person
/// answers in words, a park) instead of `approval_gate` (whose person decides a tool call): for
/// the tests of how an *answer* crosses a park and a restart.
pub fn asking_orchestrator() -> Scratch {
    let dir = Scratch::new("asking-orchestrator");
    let agents = repo().join("agents");
    for kind in std::fs::read_dir(&agents).expect("agents/") {
        let kind = kind.expect("entry").path();
        for file in std::fs::read_dir(&kind).expect("a kind's folder") {
            let file = file.expect("entry").path();
            let (Some(k), Some(f)) = (kind.file_name(), file.file_name()) else {
                continue;
            };
            let text = std::fs::read_to_string(&file).expect("a definition");
            let path = format!("agents/{}/{}", k.to_string_lossy(), f.to_string_lossy());
            let text = if path == "agents/agents/orchestrator.yaml" {
                text.replace("agent: approval_gate", "agent: question_gate")
            } else {
                text
            };
            dir.write(&path, &text);
        }
    }
    dir
}
