//! Traces out of the process: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, the runtime's spans and each HTTP request's
//! go to that OTLP/HTTP endpoint (protobuf; headers, timeout and the rest from the standard
//! `OTEL_EXPORTER_OTLP_*` variables), batched on a thread of their own. Unset: nothing is
//! built and nothing is exported.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

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
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("duet: traces are not exported: {e}");
            return None;
        }
    };
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
