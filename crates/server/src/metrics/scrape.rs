//! What the router mounts of the metrics: `GET /metrics` (the scrape, an admin's) and the
//! middleware that counts and times every HTTP request and the SSE streams open.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::registry::{self, Metrics};
use crate::auth::Caller;
use crate::problem::Problem;
use crate::service::health;
use crate::state::AppState;

/// The text format's media type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`.
pub(crate) async fn scrape(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Response, Problem> {
    if !caller.admin {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the metrics span every principal: read them with an admin key",
        ));
    }
    let counts = health::counts(&state).await?;
    let mut extra =
        String::from("# HELP duet_threads Threads by status.\n# TYPE duet_threads gauge\n");
    for (status, n) in &counts.by_status {
        extra.push_str(&format!(
            "duet_threads{{status=\"{}\"}} {n}\n",
            status.as_str()
        ));
    }
    extra.push_str(
        "# HELP duet_oldest_question_age_seconds How long the longest-waiting question has waited for a person (0: none waits).\n# TYPE duet_oldest_question_age_seconds gauge\n",
    );
    let age = counts
        .oldest_awaiting
        .map_or(0, |since| (state.runtime().now_ms() - since).max(0));
    // Milliseconds to seconds: exact far past any real wait.
    #[allow(clippy::cast_precision_loss)]
    let age = age as f64 / 1000.0;
    extra.push_str(&format!(
        "duet_oldest_question_age_seconds {}\n",
        registry::number(age)
    ));
    let timers = crate::service::timers::counts(&state).await?;
    extra.push_str(
        "# HELP duet_timers Timers by state: pending (not yet due), due (due, waiting for a process: late), processing, failed.\n# TYPE duet_timers gauge\n",
    );
    for (name, n) in [
        ("pending", timers.pending),
        ("due", timers.due),
        ("processing", timers.processing),
        ("failed", timers.failed),
    ] {
        extra.push_str(&format!("duet_timers{{state=\"{name}\"}} {n}\n"));
    }
    notifications(&state, &mut extra).await?;
    let body = state.options().metrics.render(&extra);
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    Ok(response)
}

/// The outbox's deliveries by channel and status, read at the scrape: every channel in every
/// status (0 when none), so a series does not vanish when its last delivery changes status.
async fn notifications(state: &AppState, extra: &mut String) -> Result<(), Problem> {
    use duet_server_store::DeliveryStatus;
    use std::collections::BTreeMap;
    let statuses = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];
    let mut counts: BTreeMap<(String, &'static str), i64> = BTreeMap::new();
    for channel in crate::notify::shown::CHANNELS {
        for s in statuses {
            counts.insert((channel.to_owned(), s.as_str()), 0);
        }
    }
    for (channel, status, n) in crate::service::notify::counts(state).await? {
        *counts.entry((channel, status.as_str())).or_default() += n;
    }
    extra.push_str(
        "# HELP duet_notifications Notification deliveries in the outbox by channel and status (pending, delivered, failed).\n# TYPE duet_notifications gauge\n",
    );
    for ((channel, status), n) in &counts {
        let labels = registry::set(
            &[
                ("channel", channel.clone()),
                ("status", (*status).to_owned()),
            ],
            None,
        );
        extra.push_str(&format!("duet_notifications{labels} {n}\n"));
    }
    Ok(())
}

/// Counts every request by its route (the pattern, not the path: `/threads/{key}`), method and
/// status, and times it to its response's head, inside a span of its own.
pub(crate) async fn http(State(state): State<AppState>, req: Request, next: Next) -> Response {
    use tracing::Instrument;
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let span = tracing::info_span!(
        target: "duet::http",
        "http",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    // A client's trace (W3C `traceparent`) continues here when traces are exported.
    if let Some(carrier) = state.runtime().trace_carrier()
        && let Some(saved) = incoming_trace(req.headers())
    {
        carrier.adopt(&span, &saved);
    }
    let started = Instant::now();
    let mut response = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    let metrics = &state.options().metrics;
    // Every SSE stream (the REST API's, A2A's, the inbox's) counts while its body lives.
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if sse {
        use futures::StreamExt;
        let open = StreamOpen::new(metrics);
        response = response.map(|body| {
            axum::body::Body::from_stream(body.into_data_stream().map(move |chunk| {
                let _counted = &open;
                chunk
            }))
        });
    }
    let status = response.status().as_u16().to_string();
    metrics.add(
        "duet_http_requests_total",
        &[("route", &route), ("method", &method), ("status", &status)],
        1.0,
    );
    metrics.observe(
        "duet_http_request_duration_seconds",
        &[("route", &route)],
        started.elapsed().as_secs_f64(),
    );
    response
}

/// The W3C Trace Context of a request's headers, in the runtime's saved form.
fn incoming_trace(headers: &axum::http::HeaderMap) -> Option<String> {
    let field = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let parent = field("traceparent")?;
    let mut fields = vec![("traceparent", parent)];
    if let Some(state) = field("tracestate") {
        fields.push(("tracestate", state));
    }
    Some(duet_runtime::telemetry::saved_context(fields))
}

/// Counts an SSE stream open while it lives.
struct StreamOpen(Metrics);

impl StreamOpen {
    fn new(metrics: &Metrics) -> Self {
        metrics.add("duet_sse_streams", &[], 1.0);
        StreamOpen(metrics.clone())
    }
}

impl Drop for StreamOpen {
    fn drop(&mut self) {
        self.0.add("duet_sse_streams", &[], -1.0);
    }
}
