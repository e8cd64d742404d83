//! Shared by the engine and end-to-end tests: the backends to run against
//! (`duet_store::testing`: SQLite always, Postgres too when `DATABASE_URL` is set), the
//! repository's project, scratch projects, and small helpers.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use duet_runtime::{Runtime, Store};

#[allow(unused_imports)]
pub use duet_store::testing::{Backend, backends, psql};

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("duet-tests");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Loads a project that must validate.
pub fn project(root: &Path) -> Arc<duet_spec::Project> {
    let loaded = duet_spec::load(root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    let errors: Vec<String> = loaded
        .issues
        .iter()
        .filter(|i| i.severity == duet_spec::Severity::Error)
        .map(ToString::to_string)
        .collect();
    assert!(
        errors.is_empty(),
        "{}:\n{}",
        root.display(),
        errors.join("\n")
    );
    Arc::new(loaded.project)
}

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
        .hooks(duet_handlers::hooks());
    duet_tools::register(builder, &project, &repo())
}

/// A test project in a scratch folder of its own, written file by file.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty folder whose name starts with `tag`.
    pub fn new(tag: &str) -> Self {
        Scratch(scratch().join(format!("{tag}-{}", uuid::Uuid::now_v7().simple())))
    }

    /// Writes `text` to `path` (relative to the folder), making folders as needed.
    pub fn write(&self, path: &str, text: &str) {
        let p = self.0.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.0
    }

    /// Loads the project written so far; it must validate.
    pub fn project(&self) -> Arc<duet_spec::Project> {
        project(&self.0)
    }
}

/// Sends `text` to `key` (created for `agent` when given) and waits until it settles or queues.
pub async fn send(rt: &Runtime, key: &str, agent: Option<&str>, text: &str) {
    let done = rt
        .send(
            key,
            agent,
            text,
            &duet_runtime::EventSink::discard(),
            &duet_runtime::CancellationToken::new(),
        )
        .await;
    assert!(
        matches!(
            done,
            Ok(duet_runtime::Delivered::Settled(_) | duet_runtime::Delivered::Queued { .. })
        ),
        "{done:?}"
    );
}

/// Thread `key`'s messages that have text: (role, silent, text).
pub async fn texts(store: &Arc<dyn Store>, key: &str) -> Vec<(duet_runtime::Role, bool, String)> {
    let t = store.thread(key).await.expect("read").expect("thread");
    store
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter_map(|m| m.content.map(|c| (m.role, m.silent, c)))
        .collect()
}

/// Sends `text` to thread `key` of `agent` on a task of its own, waits until `entered` says the
/// run is inside its first (never-returning) tool call, and kills the task there: a process that
/// died mid-step. The runtime is dropped after.
pub async fn kill_mid_step(
    victim: Runtime,
    key: &'static str,
    agent: &'static str,
    entered: &tokio::sync::Notify,
) {
    let task = tokio::spawn({
        let victim = victim.clone();
        async move {
            victim
                .send(
                    key,
                    Some(agent),
                    "go",
                    &duet_runtime::EventSink::discard(),
                    &duet_runtime::CancellationToken::new(),
                )
                .await
        }
    });
    entered.notified().await;
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    drop(victim);
}

/// A builtin tool that blocks forever on its first call (after signalling `entered`) and answers
/// at once afterwards: where a crash test kills a run mid-step.
pub struct Slow {
    pub first: std::sync::atomic::AtomicBool,
    pub entered: Arc<tokio::sync::Notify>,
}

#[async_trait::async_trait]
impl duet_runtime::Tool for Slow {
    async fn call(
        &self,
        _: duet_runtime::ToolContext,
        _: serde_json::Value,
    ) -> duet_runtime::ToolResult {
        if self.first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        duet_runtime::ToolResult::ok("done slowly")
    }
}
