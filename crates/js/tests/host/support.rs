//! What the code host's tests share: scratch projects, a host over one, a call, a bridge that
//! records what it is asked, and `console`'s events as `tracing` recorded them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use async_trait::async_trait;
use duet_js::{EmbeddedHost, HostOptions};
use duet_runtime::{Bridge, CodeCall, CodeError, CodeHost, CodeLimits};
use serde_json::{Value, json};

/// Where the test packages are installed (`.ci/node/node_modules`).
pub(crate) fn node_modules() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/node/node_modules");
    assert!(
        dir.join("zod/package.json").is_file(),
        "zod is not installed in {}: run scripts/test-servers",
        dir.display()
    );
    dir
}

/// A scratch project holding `files` (paths under the project's root).
pub(crate) fn project(files: &[(&str, &str)]) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("host-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("agents/tools")).expect("scratch");
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("scratch");
        std::fs::write(path, text).expect("write");
    }
    dir
}

/// A host over a scratch project holding `files`, with `workers` engine threads.
pub(crate) fn host(files: &[(&str, &str)], workers: usize) -> EmbeddedHost {
    host_with(
        files,
        HostOptions {
            workers,
            ..HostOptions::default()
        },
    )
}

/// A host over a scratch project holding `files`, with `options`.
pub(crate) fn host_with(files: &[(&str, &str)], options: HostOptions) -> EmbeddedHost {
    EmbeddedHost::new(&project(files), vec![node_modules()], options).expect("a host")
}

/// A call of `file`'s `execute` with `args`, for thread `t-1`.
pub(crate) fn call(file: &str, args: Vec<Value>) -> CodeCall {
    CodeCall {
        state_at: 0,
        file: file.to_owned(),
        entry: vec!["execute".to_owned()],
        args,
        state: json!({ "threadId": "t-1", "agentId": "support", "execution": null }),
        thread: "t-1".to_owned(),
        call: "call-1".to_owned(),
        limits: CodeLimits::default(),
    }
}

type Answer = Box<dyn FnMut(&str, &Value) -> Result<Value, String> + Send>;

/// A bridge that records each request and answers with `answer`.
pub(crate) struct Recorder {
    pub(crate) seen: Vec<(String, Value)>,
    answer: Answer,
}

impl Recorder {
    pub(crate) fn new(
        answer: impl FnMut(&str, &Value) -> Result<Value, String> + Send + 'static,
    ) -> Recorder {
        Recorder {
            seen: Vec::new(),
            answer: Box::new(answer),
        }
    }

    /// A bridge that answers everything with null.
    pub(crate) fn null() -> Recorder {
        Recorder::new(|_, _| Ok(Value::Null))
    }
}

#[async_trait]
impl Bridge for Recorder {
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let answer = (self.answer)(method, &params);
        self.seen.push((method.to_owned(), params));
        answer
    }
}

/// Runs `call` on `host` with a bridge answering null.
pub(crate) async fn run(host: &EmbeddedHost, call: CodeCall) -> Result<Value, CodeError> {
    host.call(call, &mut Recorder::null()).await
}

/// A `tracing` event as recorded: its target, level and fields (`message` among them).
#[derive(Clone, Debug)]
pub(crate) struct Logged {
    pub(crate) target: String,
    pub(crate) level: tracing::Level,
    pub(crate) fields: Vec<(String, String)>,
}

impl Logged {
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every `tracing` event of the process since the first call (a global subscriber: engine
/// threads log too).
pub(crate) fn logged() -> Vec<Logged> {
    LOG.get_or_init(install).lock().expect("log").clone()
}

/// Starts recording events (call before the code logs).
pub(crate) fn record_logs() {
    LOG.get_or_init(install);
}

static LOG: OnceLock<Mutex<Vec<Logged>>> = OnceLock::new();

fn install() -> Mutex<Vec<Logged>> {
    // Set once per test binary; a second binary has its own process.
    let _ = tracing::subscriber::set_global_default(Recording);
    Mutex::new(Vec::new())
}

struct Recording;

impl tracing::Subscriber for Recording {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        let logged = Logged {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields: fields.0,
        };
        if let Some(log) = LOG.get() {
            log.lock().expect("log").push(logged);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

struct Fields(Vec<(String, String)>);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}
