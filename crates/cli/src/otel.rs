//! Traces out of the process: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, the runtime's spans and each HTTP request's
//! go to that OTLP endpoint — over HTTP/protobuf, or gRPC when `OTEL_EXPORTER_OTLP_PROTOCOL` (or
//! `..._TRACES_PROTOCOL`) is `grpc`; headers, timeout and the rest from the standard
//! `OTEL_EXPORTER_OTLP_*` variables — batched on a thread of their own. Unset: nothing is built
//! and nothing is exported. Called on the process's tokio runtime (gRPC's channel runs there).
//!
//! While exporting, the runtime gets a [`Carrier`]: trace context crosses the store as W3C
//! Trace Context, so a child run elsewhere and a run after a park continue their trace.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether [`provider`] built an exporter (then runtimes get a [`Carrier`]).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether traces are exported from this process.
pub(crate) fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The tracer provider, when the environment asks for export.
pub(crate) fn provider() -> Option<SdkTracerProvider> {
    let wanted = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()));
    if !wanted {
        return None;
    }
    // HTTP/protobuf unless `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`
    // asks for `grpc` (whose channel lives on the current tokio runtime); another protocol is
    // refused with the reason.
    let exporter = match opentelemetry_otlp::SpanExporter::builder().build() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("duet: traces are not exported: {e}");
            return None;
        }
    };
    EXPORTING.store(true, Ordering::Relaxed);
    Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name("duet").build())
            .build(),
    )
}

/// The layer that hands spans to `provider`'s tracer.
pub(crate) fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer("duet"))
}

/// Sends what is batched and stops the exporter.
pub(crate) fn shutdown(provider: Option<SdkTracerProvider>) {
    if let Some(p) = provider
        && let Err(e) = p.shutdown()
    {
        eprintln!("duet: flushing traces failed: {e}");
    }
}

/// The runtime's [`duet_runtime::telemetry::TraceCarrier`] on OpenTelemetry: a span's context
/// saved as its W3C Trace Context fields.
pub(crate) struct Carrier;

impl duet_runtime::telemetry::TraceCarrier for Carrier {
    fn save(&self, span: &Span) -> Option<String> {
        let cx = span.context();
        if !cx.span().span_context().is_valid() {
            return None;
        }
        let mut fields = HashMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut fields);
        let mut fields: Vec<(&str, &str)> = fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        fields.sort_unstable();
        Some(duet_runtime::telemetry::saved_context(fields))
    }

    fn adopt(&self, span: &Span, parent: &str) {
        if let Some(cx) = restore(parent)
            && let Err(e) = span.set_parent(cx)
        {
            tracing::debug!(error = %e, "a span's parent could not be set");
        }
    }

    fn link(&self, span: &Span, to: &str) {
        if let Some(cx) = restore(to) {
            span.add_link(cx.span().span_context().clone());
        }
    }
}

/// A saved context, when it holds a valid one.
fn restore(saved: &str) -> Option<Context> {
    let fields: HashMap<String, String> = serde_json::from_str(saved).ok()?;
    let cx = TraceContextPropagator::new().extract(&fields);
    cx.span().span_context().is_valid().then_some(cx)
}
