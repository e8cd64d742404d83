//! The metrics this server keeps, and their Prometheus text exposition (format 0.0.4): counters,
//! gauges and histograms by label set, every family declared once (name, help, kind), so
//! `/metrics` always lists every family and a typo is a panic in a test, not a new series.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// Latency buckets, in seconds: 1 ms to 1 min.
const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Lateness buckets, in seconds: 10 ms to 1 h (a timer fires late by a wake's latency, a
/// batch's wait, or a whole outage).
const LATENESS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram(&'static [f64]),
}

/// Every family: its name, help and kind.
const FAMILIES: &[(&str, &str, Kind)] = &[
    (
        "duet_steps_total",
        "Steps sides took (a model step or a handler turn), by agent, side and outcome.",
        Kind::Counter,
    ),
    (
        "duet_step_duration_seconds",
        "How long a step took, by agent.",
        Kind::Histogram(SECONDS),
    ),
    (
        "duet_turns_total",
        "Turns completed (committed).",
        Kind::Counter,
    ),
    (
        "duet_commits_total",
        "Commits of runs, by outcome (committed, lease_lost, error).",
        Kind::Counter,
    ),
    (
        "duet_commit_duration_seconds",
        "How long a commit took.",
        Kind::Histogram(SECONDS),
    ),
    (
        "duet_lease_conflicts_total",
        "Commits refused because another runner took the thread's lease.",
        Kind::Counter,
    ),
    (
        "duet_model_calls_total",
        "Model calls, by model definition, provider and outcome.",
        Kind::Counter,
    ),
    (
        "duet_model_call_duration_seconds",
        "How long a model call took, by model definition.",
        Kind::Histogram(SECONDS),
    ),
    (
        "duet_model_time_to_first_token_seconds",
        "Time from a model call's start to its first chunk, by model definition.",
        Kind::Histogram(SECONDS),
    ),
    (
        "duet_model_tokens_total",
        "Tokens of model calls, by model definition and type (input, output).",
        Kind::Counter,
    ),
    (
        "duet_model_retries_total",
        "Retries model calls made, by model definition.",
        Kind::Counter,
    ),
    (
        "duet_tool_calls_total",
        "Tool calls, by tool and outcome (success, error).",
        Kind::Counter,
    ),
    (
        "duet_tool_call_duration_seconds",
        "How long a tool call took, by tool.",
        Kind::Histogram(SECONDS),
    ),
    (
        "duet_recoveries_total",
        "Threads this process recovered (runs whose runner died).",
        Kind::Counter,
    ),
    (
        "duet_timers_fired_total",
        "Timers this process fired (effects run, deadlines acted on), by kind.",
        Kind::Counter,
    ),
    (
        "duet_timers_completed_total",
        "Timers fired that completed, by kind.",
        Kind::Counter,
    ),
    (
        "duet_timers_failed_total",
        "Timers fired that failed for good (out of attempts, or unable to run), by kind.",
        Kind::Counter,
    ),
    (
        "duet_timers_retried_total",
        "Timers fired that failed and will be tried again after a backoff, by kind.",
        Kind::Counter,
    ),
    (
        "duet_timers_deferred_total",
        "Timers fired whose thread was busy: tried again shortly, the attempt not counted, by kind.",
        Kind::Counter,
    ),
    (
        "duet_timer_lateness_seconds",
        "How late a timer fired: from its due time to its firing, by kind.",
        Kind::Histogram(LATENESS),
    ),
    (
        "duet_timer_duration_seconds",
        "How long firing a timer took, by kind.",
        Kind::Histogram(SECONDS),
    ),
    (
        "duet_notifications_sent_total",
        "Notification deliveries this process tried, by channel and outcome (delivered, retry, failed).",
        Kind::Counter,
    ),
    (
        "duet_notification_latency_seconds",
        "From a notification delivery's routing into the outbox to its delivery, by channel.",
        Kind::Histogram(LATENESS),
    ),
    (
        "duet_http_requests_total",
        "HTTP requests, by route, method and status.",
        Kind::Counter,
    ),
    (
        "duet_http_request_duration_seconds",
        "Time to an HTTP response's head, by route.",
        Kind::Histogram(SECONDS),
    ),
    (
        "duet_sse_streams",
        "Server-Sent Event streams open now.",
        Kind::Gauge,
    ),
    (
        "duet_connections_open",
        "HTTP connections served now (refused ones apart).",
        Kind::Gauge,
    ),
    (
        "duet_connections_max",
        "The most HTTP connections served at once (--max-connections).",
        Kind::Gauge,
    ),
    (
        "duet_connections_accepted_total",
        "TCP connections accepted.",
        Kind::Counter,
    ),
    (
        "duet_connections_refused_total",
        "Connections past the cap with every slot busy, by answer (503, or closed unanswered).",
        Kind::Counter,
    ),
    (
        "duet_connections_closed_total",
        "Connections the server closed, by reason (header_timeout, idle_timeout, evicted: the idle one making room past the cap).",
        Kind::Counter,
    ),
    (
        "duet_accept_errors_total",
        "Accept errors (EMFILE: out of file descriptors); each pauses the accept loop briefly.",
        Kind::Counter,
    ),
];

/// One series' state.
enum Series {
    Value(f64),
    Histogram {
        buckets: Vec<u64>,
        sum: f64,
        count: u64,
    },
}

type Labels = Vec<(&'static str, String)>;

/// The metrics: cheap to clone, shared by the tracing layer, the HTTP middleware and `/metrics`.
#[derive(Clone, Default)]
pub struct Metrics(Arc<Mutex<BTreeMap<&'static str, BTreeMap<Labels, Series>>>>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

fn kind(name: &str) -> Kind {
    match FAMILIES.iter().find(|(n, _, _)| *n == name) {
        Some((_, _, kind)) => *kind,
        None => panic!("metric family `{name}` is not declared"),
    }
}

fn labels(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

impl Metrics {
    /// Adds `by` to counter (or gauge) `name` at `pairs`.
    pub(crate) fn add(&self, name: &'static str, pairs: &[(&'static str, &str)], by: f64) {
        debug_assert!(!matches!(kind(name), Kind::Histogram(_)), "{name}");
        if let Ok(mut all) = self.0.lock() {
            let series = all
                .entry(name)
                .or_default()
                .entry(labels(pairs))
                .or_insert(Series::Value(0.0));
            if let Series::Value(v) = series {
                *v += by;
            }
        }
    }

    /// Sets gauge `name` at `pairs` to `value`.
    pub(crate) fn set(&self, name: &'static str, pairs: &[(&'static str, &str)], value: f64) {
        debug_assert!(matches!(kind(name), Kind::Gauge), "{name}");
        if let Ok(mut all) = self.0.lock() {
            all.entry(name)
                .or_default()
                .insert(labels(pairs), Series::Value(value));
        }
    }

    /// Records `value` in histogram `name` at `pairs`.
    pub(crate) fn observe(&self, name: &'static str, pairs: &[(&'static str, &str)], value: f64) {
        let Kind::Histogram(bounds) = kind(name) else {
            debug_assert!(false, "{name} is not a histogram");
            return;
        };
        if let Ok(mut all) = self.0.lock() {
            let series = all
                .entry(name)
                .or_default()
                .entry(labels(pairs))
                .or_insert_with(|| Series::Histogram {
                    buckets: vec![0; bounds.len()],
                    sum: 0.0,
                    count: 0,
                });
            if let Series::Histogram {
                buckets,
                sum,
                count,
            } = series
            {
                if let Some(at) = bounds.iter().position(|b| value <= *b) {
                    buckets[at] += 1;
                }
                *sum += value;
                *count += 1;
            }
        }
    }

    /// The exposition of every family, then `extra` (gauges read at scrape time, already in the
    /// text format).
    pub(crate) fn render(&self, extra: &str) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let Ok(all) = self.0.lock() else {
            return out;
        };
        for (name, help, kind) in FAMILIES {
            let type_name = match kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram(_) => "histogram",
            };
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {type_name}");
            let Some(series) = all.get(name) else {
                continue;
            };
            for (labels, s) in series {
                match (s, kind) {
                    (Series::Value(v), _) => {
                        let _ = writeln!(out, "{name}{} {}", set(labels, None), number(*v));
                    }
                    (
                        Series::Histogram {
                            buckets,
                            sum,
                            count,
                        },
                        Kind::Histogram(bounds),
                    ) => {
                        let mut cumulative = 0;
                        for (bound, n) in bounds.iter().zip(buckets) {
                            cumulative += n;
                            let _ = writeln!(
                                out,
                                "{name}_bucket{} {cumulative}",
                                set(labels, Some(&number(*bound)))
                            );
                        }
                        let _ = writeln!(out, "{name}_bucket{} {count}", set(labels, Some("+Inf")));
                        let _ = writeln!(out, "{name}_sum{} {}", set(labels, None), number(*sum));
                        let _ = writeln!(out, "{name}_count{} {count}", set(labels, None));
                    }
                    (Series::Histogram { .. }, _) => {}
                }
            }
        }
        out.push_str(extra);
        out
    }
}

/// A number as the text format writes it.
pub(crate) fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

/// `{k="v",…}` (with `le` last for a bucket), or nothing for no labels.
pub(crate) fn set(labels: &[(&'static str, String)], le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    format!("{{{}}}", parts.join(","))
}

/// A label value escaped: `\`, `"` and newlines.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render_in_the_text_format() {
        let m = Metrics::default();
        m.add("duet_turns_total", &[], 2.0);
        m.add(
            "duet_tool_calls_total",
            &[("tool", "a\"b"), ("outcome", "success")],
            1.0,
        );
        m.observe("duet_commit_duration_seconds", &[], 0.003);
        m.observe("duet_commit_duration_seconds", &[], 100.0);
        let text = m.render("");
        assert!(
            text.contains("# TYPE duet_turns_total counter\nduet_turns_total 2\n"),
            "{text}"
        );
        assert!(
            text.contains("duet_tool_calls_total{tool=\"a\\\"b\",outcome=\"success\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("duet_commit_duration_seconds_bucket{le=\"0.0025\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("duet_commit_duration_seconds_bucket{le=\"0.005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("duet_commit_duration_seconds_bucket{le=\"60\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("duet_commit_duration_seconds_bucket{le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("duet_commit_duration_seconds_count 2\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP duet_sse_streams "),
            "every family is declared: {text}"
        );
    }
}
