//! `GET /metrics`: what an operator's Prometheus scrapes — the runtime's steps, turns, commits,
//! model calls (latency, time to first token, tokens, retries) and tool calls (from its spans,
//! through [`MetricsLayer`]), recoveries, lease conflicts, HTTP requests by route and status,
//! the SSE streams open, and, read from the store at each scrape, the threads by status and how
//! long the oldest question has waited for a person. An admin key reads it (the counts span
//! every principal).

mod layer;
mod registry;
mod scrape;

pub use layer::MetricsLayer;
pub use registry::Metrics;
pub(crate) use scrape::{http, scrape};

/// The target of each HTTP request's span (`{method} {route}`, in the OpenTelemetry HTTP
/// conventions), for a subscriber that exports traces.
pub const HTTP_TARGET: &str = "duet::http";
