//! The trace-context port: how a run's spans join a trace begun elsewhere — in another process,
//! or before a restart — when all that connects them is a row in the store.
//!
//! The runtime names no tracing backend. Whoever composes the process and exports spans (the
//! CLI, with OpenTelemetry) gives the runtime a [`TraceCarrier`]; without one nothing is saved
//! or read and nothing costs anything. A saved context is opaque text to the runtime: it is
//! kept with a queued message (`NewQueued::trace`) and with a park (the `stopped` record), and
//! handed back to the carrier when the message is drained or the park answered.
//!
//! The saved form is the JSON object of the W3C Trace Context fields (`{"traceparent": "00-…",
//! "tracestate": "…"}`, see [`saved_context`]), so that a context from elsewhere (an HTTP
//! request's headers) is saved the same way.

use tracing::Span;

/// Saves a span's trace context as text and gives a span a saved context as its parent or as
/// a link. Implemented outside the runtime (see the module's docs).
pub trait TraceCarrier: Send + Sync + 'static {
    /// `span`'s context as text, or `None` when it belongs to no trace (a disabled span, or
    /// one no exporter sees). After this, `span`'s parent can no longer be set.
    fn save(&self, span: &Span) -> Option<String>;
    /// Makes the saved context `parent` the parent of `span`, which must not have been entered
    /// yet. A context that does not parse is ignored.
    fn adopt(&self, span: &Span, parent: &str);
    /// Links `span` to the saved context `to` (the span it follows from, in another trace).
    fn link(&self, span: &Span, to: &str);
}

/// The saved form of W3C Trace Context fields (`traceparent`, `tracestate`, ...): a JSON object
/// of them, in the order given. What a [`TraceCarrier`] saves and reads.
pub fn saved_context<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let object: serde_json::Map<String, serde_json::Value> = fields
        .into_iter()
        .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.to_owned())))
        .collect();
    serde_json::Value::Object(object).to_string()
}

/// What a run carries of trace context: the context its steps take as their parent when no
/// span encloses them (the latest drained message's), the park it resumes (its first step links
/// to it), and its last step's (what the run's report to its parent carries).
#[derive(Clone, Debug, Default)]
pub(crate) struct RunTrace {
    /// The parent of steps that no span encloses.
    pub(crate) parent: Option<String>,
    /// The parked step this run resumes, linked from its next step.
    pub(crate) resumed: Option<String>,
    /// The run's last step.
    pub(crate) last: Option<String>,
}

impl RunTrace {
    /// Prepares `span`, a step's span about to be entered, with `carrier`: adopts the run's
    /// parent when nothing encloses the step, links the park it resumes, and remembers it as
    /// the run's last step.
    pub(crate) fn step(&mut self, carrier: &dyn TraceCarrier, span: &Span) {
        if Span::current().is_none()
            && let Some(parent) = &self.parent
        {
            carrier.adopt(span, parent);
        }
        if let Some(park) = self.resumed.take() {
            carrier.link(span, &park);
        }
        if let Some(saved) = carrier.save(span) {
            self.last = Some(saved);
        }
    }
}
