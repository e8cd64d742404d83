//! What the node host's tests share: whether `node` is there, scratch projects, calls, a
//! recording bridge and a `tracing` layer that keeps the events.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::{Bridge, CodeCall, CodeLimits};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// Whether `node` is on `PATH` (or `DUET_NODE` names one: the node the host starts): when it is
/// not, the test prints why it is skipped, unless `DUET_REQUIRE_NODE=1`, which makes it fail.
pub(crate) fn node_here() -> bool {
    let found = std::process::Command::new(duet_js::NodeOptions::default().node)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("DUET_REQUIRE_NODE").as_deref() != Ok("1"),
            "DUET_REQUIRE_NODE=1 and there is no `node` on PATH"
        );
        eprintln!("skipped: no `node` on PATH (set DUET_REQUIRE_NODE=1 to make this a failure)");
    }
    found
}

/// A scratch project holding `files` (project-relative paths).
pub(crate) fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("scratch");
    for (rel, text) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("scratch");
        std::fs::write(&path, text).expect("scratch");
    }
    std::fs::create_dir_all(dir.path().join("agents")).expect("scratch");
    dir
}

/// A call of `file`'s `execute` with `args` after `state`.
pub(crate) fn call(file: &str, args: Vec<Value>) -> CodeCall {
    CodeCall {
        state_at: 0,
        file: file.into(),
        entry: vec!["execute".into()],
        args,
        state: json!({ "threadId": "t-1", "agentId": "a", "execution": null }),
        thread: "t-1".into(),
        call: "call-1".into(),
        limits: CodeLimits {
            deadline: Duration::from_secs(20),
            ..CodeLimits::default()
        },
    }
}

/// A bridge that records what it is asked, in order, and answers from a few canned values.
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) asked: Vec<(String, Value)>,
}

#[async_trait]
impl Bridge for Recorder {
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.asked.push((method.to_owned(), params.clone()));
        match method {
            "getValue" => Ok(json!(40)),
            "setValue" | "emit" | "queueTool" => Ok(Value::Null),
            "env" => Ok(json!("from-env")),
            "getChildThread" => Ok(json!({ "threadId": "child-1" })),
            "getMessages" => Ok(json!([])),
            other => Err(format!("`{other}` is refused by this test")),
        }
    }
}

/// One `tracing` event: its target, level and fields (the message under `message`).
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) target: String,
    pub(crate) level: String,
    pub(crate) fields: BTreeMap<String, String>,
}

/// Keeps every event.
#[derive(Clone, Default)]
pub(crate) struct Events(pub(crate) Arc<Mutex<Vec<Seen>>>);

impl Events {
    /// Installs a subscriber keeping events on this thread (tasks of a current-thread runtime
    /// run here) until the guard is dropped.
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::registry().with(self.clone());
        tracing::subscriber::set_default(subscriber)
    }

    pub(crate) fn all(&self) -> Vec<Seen> {
        self.0.lock().expect("events").clone()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let meta = event.metadata();
        self.0.lock().expect("events").push(Seen {
            target: meta.target().into(),
            level: meta.level().to_string(),
            fields,
        });
    }
}

/// Kills the process `pid` (SIGKILL), as a crash would.
pub(crate) fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -9 {pid}");
}
