//! Helpers for tests of what runs on the engine (the engine's own, the CLI's, the server's):
//! scratch projects written file by file, loading a project that must validate, sending a
//! message and waiting for it to settle, reading a thread's texts, and a tool where a crash
//! test kills a run mid-step. They panic on failure, as tests do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::delivery::Delivered;
use crate::engine::Runtime;
use crate::event::EventSink;
use crate::store::Store;
use crate::tools::{Tool, ToolContext, ToolResult};
use crate::types::Role;

/// The repository's root (this crate lives in `crates/runtime`): its example project, its
/// scenarios.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Loads the project at `root`, which must validate (every error is the test's failure).
pub fn must_load(root: &Path) -> Arc<duet_spec::Project> {
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

/// A test project in a scratch folder of its own, written file by file.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty folder (under the system's temporary folder) whose name starts with `tag`.
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join("duet-tests");
        Scratch(dir.join(format!("{tag}-{}", uuid::Uuid::now_v7().simple())))
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
        must_load(&self.0)
    }
}

/// Sends `text` to `key` (created for `agent` when given) and waits until it settles or queues.
pub async fn send(rt: &Runtime, key: &str, agent: Option<&str>, text: &str) {
    let done = rt
        .send(
            key,
            agent,
            text,
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await;
    assert!(
        matches!(done, Ok(Delivered::Settled(_) | Delivered::Queued { .. })),
        "{done:?}"
    );
}

/// Thread `key`'s messages that have text: (role, silent, text).
pub async fn texts(store: &Arc<dyn Store>, key: &str) -> Vec<(Role, bool, String)> {
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
    entered: &Notify,
) {
    let task = tokio::spawn({
        let victim = victim.clone();
        async move {
            victim
                .send(
                    key,
                    Some(agent),
                    "go",
                    &EventSink::discard(),
                    &CancellationToken::new(),
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
    /// Whether the next call is the first.
    pub first: AtomicBool,
    /// Signalled when the first call is entered.
    pub entered: Arc<Notify>,
}

#[async_trait::async_trait]
impl Tool for Slow {
    async fn call(&self, _: ToolContext, _: serde_json::Value) -> ToolResult {
        if self.first.swap(false, Ordering::SeqCst) {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        ToolResult::ok("done slowly")
    }
}

/// Writes the engine bench's ping-pong into `dir`: agent `pingpong`, whose two scripted models
/// (`ping`, `pong`) answer without waiting, `turns` turns in all ("ping 0", "pong 0", …).
pub fn write_pingpong(dir: &Scratch, turns: usize) {
    let half = turns / 2;
    dir.write(
        "agents/agents/pingpong.yaml",
        &format!(
            "name: pingpong\nmaxSessionTurns: {half}\nsideA: {{ prompt: ping, maxSteps: {turns} }}\nsideB: {{ prompt: pong, maxSteps: {turns} }}\n"
        ),
    );
    for name in ["ping", "pong"] {
        dir.write(
            &format!("agents/prompts/{name}.yaml"),
            &format!(
                "name: {name}\ntoolDescription: d\nmodel: {name}_model\nprompt: Say {name}.\n"
            ),
        );
        let script: String = (0..half)
            .map(|i| format!("  - text: \"{name} {i}\"\n"))
            .collect();
        dir.write(
            &format!("agents/models/{name}_model.yaml"),
            &format!("name: {name}_model\nprovider: scripted\nmodel: demo\nscript:\n{script}"),
        );
    }
}
