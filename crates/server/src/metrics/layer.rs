//! The runtime's spans (`duet_runtime::telemetry`) as metrics: a `tracing` layer that times each
//! `invoke_agent`, `chat`, `execute_tool`, `commit` and `timer` span from its start to its close and
//! counts it by its attributes. Install it with [`Metrics::layer`] where the process composes
//! its subscriber (`duet serve` does).

use std::time::Instant;

use duet_runtime::telemetry::{TARGET, attr, span as names};
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use super::Metrics;

/// What a span said about itself, as far as metrics care.
#[derive(Default)]
struct Fields {
    agent: String,
    side: String,
    model: String,
    provider: String,
    tool: String,
    error: Option<String>,
    outcome: String,
    ttft_ms: Option<f64>,
    retries: u64,
    input_tokens: u64,
    output_tokens: u64,
    turns: u64,
    timer_kind: String,
    timer_lateness_ms: Option<u64>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            attr::AGENT_NAME => &mut self.agent,
            attr::SIDE => &mut self.side,
            attr::MODEL_DEFINITION => &mut self.model,
            attr::PROVIDER_NAME => &mut self.provider,
            attr::TOOL_NAME => &mut self.tool,
            attr::OUTCOME => &mut self.outcome,
            attr::TIMER_KIND => &mut self.timer_kind,
            attr::ERROR_TYPE => {
                self.error = Some(value.to_owned());
                return;
            }
            _ => return,
        };
        value.clone_into(slot);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            attr::RETRIES => self.retries = value,
            attr::USAGE_INPUT_TOKENS => self.input_tokens = value,
            attr::USAGE_OUTPUT_TOKENS => self.output_tokens = value,
            attr::TURNS => self.turns = value,
            attr::TIMER_LATENESS_MS => self.timer_lateness_ms = Some(value),
            _ => {}
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == attr::TIME_TO_FIRST_TOKEN_MS {
            self.ttft_ms = Some(value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or_default());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == attr::ERROR_TYPE {
            self.error = Some(format!("{value:?}"));
        }
    }
}

/// A span being timed.
struct Timing {
    start: Instant,
    fields: Fields,
}

/// The layer (see the module's documentation).
pub struct MetricsLayer {
    metrics: Metrics,
}

impl Metrics {
    /// The `tracing` layer that feeds these metrics from the runtime's spans.
    pub fn layer(&self) -> MetricsLayer {
        MetricsLayer {
            metrics: self.clone(),
        }
    }
}

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != TARGET {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Timing {
                start: Instant::now(),
                fields,
            });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(timing) = span.extensions_mut().get_mut::<Timing>()
        {
            values.record(&mut timing.fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(timing) = span.extensions_mut().remove::<Timing>() else {
            return;
        };
        let seconds = timing.start.elapsed().as_secs_f64();
        let f = &timing.fields;
        let outcome = if f.error.is_some() { "error" } else { "ok" };
        let m = &self.metrics;
        match span.name() {
            names::INVOKE_AGENT => {
                m.add(
                    "duet_steps_total",
                    &[("agent", &f.agent), ("side", &f.side), ("outcome", outcome)],
                    1.0,
                );
                m.observe(
                    "duet_step_duration_seconds",
                    &[("agent", &f.agent)],
                    seconds,
                );
            }
            names::CHAT => {
                let model = ("model", f.model.as_str());
                m.add(
                    "duet_model_calls_total",
                    &[model, ("provider", &f.provider), ("outcome", outcome)],
                    1.0,
                );
                m.observe("duet_model_call_duration_seconds", &[model], seconds);
                if let Some(ms) = f.ttft_ms {
                    m.observe(
                        "duet_model_time_to_first_token_seconds",
                        &[model],
                        ms / 1000.0,
                    );
                }
                for (kind, n) in [("input", f.input_tokens), ("output", f.output_tokens)] {
                    if n > 0 {
                        #[allow(clippy::cast_precision_loss)]
                        m.add(
                            "duet_model_tokens_total",
                            &[model, ("type", kind)],
                            n as f64,
                        );
                    }
                }
                if f.retries > 0 {
                    #[allow(clippy::cast_precision_loss)]
                    m.add("duet_model_retries_total", &[model], f.retries as f64);
                }
            }
            names::EXECUTE_TOOL => {
                let result = if f.error.is_some() {
                    "error"
                } else {
                    "success"
                };
                m.add(
                    "duet_tool_calls_total",
                    &[("tool", &f.tool), ("outcome", result)],
                    1.0,
                );
                m.observe(
                    "duet_tool_call_duration_seconds",
                    &[("tool", &f.tool)],
                    seconds,
                );
            }
            names::COMMIT => {
                let outcome = if f.outcome.is_empty() {
                    "error"
                } else {
                    f.outcome.as_str()
                };
                m.add("duet_commits_total", &[("outcome", outcome)], 1.0);
                m.observe("duet_commit_duration_seconds", &[], seconds);
                if outcome == "lease_lost" {
                    m.add("duet_lease_conflicts_total", &[], 1.0);
                }
                if outcome == "committed" && f.turns > 0 {
                    #[allow(clippy::cast_precision_loss)]
                    m.add("duet_turns_total", &[], f.turns as f64);
                }
            }
            names::TIMER => timer(m, f, seconds),
            _ => {}
        }
    }
}

/// A timer's firing: counted by kind as fired and by what it came to, its lateness (due time to
/// firing) and its duration observed.
fn timer(m: &Metrics, f: &Fields, seconds: f64) {
    let kind = ("kind", f.timer_kind.as_str());
    m.add("duet_timers_fired_total", &[kind], 1.0);
    let counter = match f.outcome.as_str() {
        "completed" => Some("duet_timers_completed_total"),
        "failed" => Some("duet_timers_failed_total"),
        "retried" => Some("duet_timers_retried_total"),
        "deferred" => Some("duet_timers_deferred_total"),
        _ => None,
    };
    if let Some(name) = counter {
        m.add(name, &[kind], 1.0);
    }
    if let Some(ms) = f.timer_lateness_ms {
        // Milliseconds to seconds: exact far past any real lateness.
        #[allow(clippy::cast_precision_loss)]
        m.observe("duet_timer_lateness_seconds", &[kind], ms as f64 / 1000.0);
    }
    m.observe("duet_timer_duration_seconds", &[kind], seconds);
}
