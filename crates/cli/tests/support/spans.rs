//! OpenTelemetry's in-memory span exporter, watched: a test waits until the spans it wants have
//! ended (each export is an event), rather than for time to pass.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SpanData, SpanExporter};

#[derive(Debug)]
struct Inner {
    memory: InMemorySpanExporter,
    ended: tokio::sync::watch::Sender<u64>,
}

/// The exporter: give it to a simple span processor, which exports each span as it ends.
#[derive(Clone, Debug)]
pub struct Watched(Arc<Inner>);

impl Default for Watched {
    fn default() -> Self {
        Watched(Arc::new(Inner {
            memory: InMemorySpanExporter::default(),
            ended: tokio::sync::watch::channel(0).0,
        }))
    }
}

impl SpanExporter for Watched {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let exported = self.0.memory.export(batch).await;
        self.0.ended.send_modify(|n| *n += 1);
        exported
    }
}

impl Watched {
    /// Every span ended so far.
    pub fn spans(&self) -> Vec<SpanData> {
        self.0.memory.get_finished_spans().unwrap_or_default()
    }

    /// Forgets the spans ended so far.
    pub fn reset(&self) {
        self.0.memory.reset();
    }

    /// The spans ended so far, once `wanted` holds of them. A span ends when its last handle
    /// drops, which may be a moment after the run that made it settled. Fails after a minute
    /// (a guard against a hang, not a timing).
    pub async fn until(&self, wanted: impl Fn(&[SpanData]) -> bool) -> Vec<SpanData> {
        let mut ended = self.0.ended.subscribe();
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let spans = self.spans();
                if wanted(&spans) {
                    return spans;
                }
                if ended.changed().await.is_err() {
                    return spans;
                }
            }
        })
        .await;
        waited.unwrap_or_else(|_| {
            let names: Vec<String> = self.spans().into_iter().map(|s| s.name.into()).collect();
            panic!("the spans wanted never ended; ended: {names:?}")
        })
    }
}

/// A layer of the test's subscriber.
pub type TestLayer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// Makes `layer` the process's tracing layer, in place of the last one given. The subscriber is
/// the process's (set once), not the test thread's: a span's last handle may drop on another
/// thread — sqlx's SQLite worker holds the current span while it runs a command — and a
/// registry set for one thread only never closes that span's parent from there (the parent
/// would stay open, its end never exported). A reloadable layer hides itself from downcasts, so
/// a test that reads OpenTelemetry's context from a span sets its subscriber itself.
pub fn install(layer: TestLayer) {
    use tracing_subscriber::layer::SubscriberExt;
    static HANDLE: std::sync::OnceLock<
        tracing_subscriber::reload::Handle<TestLayer, tracing_subscriber::Registry>,
    > = std::sync::OnceLock::new();
    let handle = HANDLE.get_or_init(|| {
        let none: TestLayer = Box::new(tracing_subscriber::layer::Identity::new());
        let (reloadable, handle) = tracing_subscriber::reload::Layer::new(none);
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(reloadable))
            .expect("no other subscriber in this test binary");
        handle
    });
    handle.reload(layer).expect("the subscriber is alive");
}
