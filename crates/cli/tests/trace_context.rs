//! Trace context across the store, with `duet`'s own carrier (`src/otel.rs`) and
//! OpenTelemetry's in-memory exporter, on every backend: a message queued by a process that then
//! died is run by another in the trace that queued it; a composed approval answered after a
//! restart resumes in the answer's trace, its first step linked to the step that asked; the
//! parent's continuation follows in that trace.

#[path = "support/spans.rs"]
mod spans;
mod support;

#[allow(dead_code)]
#[path = "../src/otel.rs"]
mod otel;

use std::sync::Arc;

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

use duet_runtime::{Accepted, CancellationToken, Delivery, ManualClock, Runtime};

/// A runtime on `store` at time `now` that saves trace context with `duet`'s carrier.
/// A runtime of the repository's project whose orchestrator composes question_gate (a person
/// answering in words, a park: the answer whose trace this follows; a decision on
/// approval_gate's proposal does not carry its request's trace yet).
fn runtime(store: Arc<dyn duet_runtime::Store>, now: i64) -> Runtime {
    let scratch = support::asking_orchestrator();
    let project = scratch.project();
    support::runtime(project, store)
        .clock(Arc::new(ManualClock::new(now)))
        .trace_carrier(Arc::new(otel::Carrier))
        .build()
}

/// The exported spans named `name`, in the order they ended.
fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// A span's trace and span id, as OpenTelemetry exports them.
fn ids(span: &tracing::Span) -> (TraceId, SpanId) {
    let cx = span.context();
    let sc = opentelemetry::trace::TraceContextExt::span(&cx)
        .span_context()
        .clone();
    (sc.trace_id(), sc.span_id())
}

/// Whether both agents' steps have ended.
fn both_agents_stepped(spans: &[SpanData]) -> bool {
    !named(spans, "invoke_agent orchestrator").is_empty()
        && !named(spans, "invoke_agent question_gate").is_empty()
}

/// Whether `span` descends from the span `ancestor` (by parent ids within the export).
fn descends(spans: &[SpanData], span: &SpanData, ancestor: SpanId) -> bool {
    let mut up = span.parent_span_id;
    for _ in 0..spans.len() {
        if up == ancestor {
            return true;
        }
        match spans.iter().find(|s| s.span_context.span_id() == up) {
            Some(parent) => up = parent.parent_span_id,
            None => return false,
        }
    }
    false
}

#[tokio::test]
async fn traces_cross_the_store_a_restart_and_a_park() {
    // The process's subscriber, not this thread's (see `spans::install`; OpenTelemetry's context
    // is read through it, which a reloadable layer would hide).
    let exporter = spans::Watched::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test"))),
    )
    .expect("the one subscriber of this test binary");
    for backend in support::backends().await {
        let name = backend.name();
        exporter.reset();
        let store = backend.open().await;

        // A request queues the orchestrator's message, and its process dies before running it.
        let request = tracing::info_span!("request");
        let (request_trace, request_id) = ids(&request);
        let first = runtime(store.clone(), 1_000);
        let delivery = Delivery {
            agent: Some("orchestrator"),
            ..Delivery::new("ops-1", "Rotate the production keys tonight, please.")
        };
        let accepted = first
            .accept(delivery)
            .instrument(request.clone())
            .await
            .expect("accepted");
        assert!(
            matches!(accepted, Accepted::Claimed(_)),
            "{name}: {accepted:?}"
        );
        drop((accepted, first));
        drop(request);

        // Another process recovers it once the lease is out: the run is the request's.
        let heir = runtime(store.clone(), 120_000);
        assert_eq!(
            heir.recover(&CancellationToken::new())
                .await
                .expect("recover"),
            1,
            "{name}"
        );
        heir.quiesce().await;
        let spans = exporter.until(both_agents_stepped).await;
        let orchestrator = named(&spans, "invoke_agent orchestrator");
        assert_eq!(orchestrator.len(), 1, "{name}");
        assert_eq!(
            orchestrator[0].span_context.trace_id(),
            request_trace,
            "{name}: the recovered run continues the trace that queued its message"
        );
        assert_eq!(orchestrator[0].parent_span_id, request_id, "{name}");
        let spawn = named(&spans, "execute_tool subagent_create");
        assert_eq!(spawn.len(), 1, "{name}");
        let asked = named(&spans, "invoke_agent question_gate");
        assert_eq!(asked.len(), 1, "{name}");
        let asked = asked[0].span_context.clone();
        assert!(
            descends(
                &spans,
                named(&spans, "invoke_agent question_gate")[0],
                spawn[0].span_context.span_id()
            ),
            "{name}: the gate's question is under the orchestrator's tool call"
        );
        drop(heir);
        exporter.reset();

        // After a restart, a person answers: the gate resumes in the answer's trace, linked to
        // the step that asked; the orchestrator's continuation follows in the same trace.
        let restarted = runtime(store.clone(), 130_000);
        let answer = tracing::info_span!("answer");
        let (answer_trace, _) = ids(&answer);
        support::send(&restarted, "ops-1/approval-1", None, "approve")
            .instrument(answer.clone())
            .await;
        restarted.quiesce().await;
        drop(answer);
        let spans = exporter.until(both_agents_stepped).await;
        let resumed = named(&spans, "invoke_agent question_gate");
        assert_eq!(resumed.len(), 1, "{name}: {spans:#?}");
        let resumed = resumed[0];
        assert_eq!(
            resumed.span_context.trace_id(),
            answer_trace,
            "{name}: the resumed step is the answer's"
        );
        assert_ne!(answer_trace, request_trace, "{name}");
        let links: Vec<(TraceId, SpanId)> = resumed
            .links
            .iter()
            .map(|l| (l.span_context.trace_id(), l.span_context.span_id()))
            .collect();
        assert_eq!(
            links,
            [(asked.trace_id(), asked.span_id())],
            "{name}: the resumed step links to the step that asked"
        );
        let continued = named(&spans, "invoke_agent orchestrator");
        assert_eq!(continued.len(), 1, "{name}: {spans:#?}");
        assert_eq!(
            continued[0].span_context.trace_id(),
            answer_trace,
            "{name}: the parent's continuation follows the answer"
        );
        assert!(
            continued[0].links.is_empty(),
            "{name}: the parent was waiting on its child, not parked"
        );
    }
}
