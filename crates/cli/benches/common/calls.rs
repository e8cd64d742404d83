//! Counts the calls into the database driver (`BENCH_CALLS=1`): sqlx logs one `sqlx::query`
//! event per call, however many statements its text holds, and this process-wide subscriber
//! counts them, so a phase can report its calls per operation. Off by default: a subscriber
//! costs a little on every call, and the timed numbers are taken without it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// The calls seen, by the first words of their statement text.
#[derive(Default)]
pub struct Calls {
    seen: Mutex<BTreeMap<String, u64>>,
    next_span: AtomicU64,
}

impl Calls {
    /// The counter, installed on first use when `BENCH_CALLS` is set.
    pub fn get() -> Option<&'static Calls> {
        static CALLS: OnceLock<Option<&'static Calls>> = OnceLock::new();
        *CALLS.get_or_init(|| {
            std::env::var_os("BENCH_CALLS")?;
            let calls: &'static Calls = Box::leak(Box::default());
            tracing::subscriber::set_global_default(Counter(calls)).ok()?;
            Some(calls)
        })
    }

    /// The calls counted since the last take, by summary, emptied.
    pub fn take(&self) -> BTreeMap<String, u64> {
        std::mem::take(&mut *self.seen.lock().expect("calls"))
    }
}

/// Prints the calls of a phase of `ops` operations (when counting), and starts the next.
pub fn report(phase: &str, ops: usize) {
    let Some(calls) = Calls::get() else { return };
    let seen = calls.take();
    let total: u64 = seen.values().sum();
    println!(
        "    {phase}: {:.2} driver calls per operation",
        total as f64 / ops.max(1) as f64
    );
    for (summary, n) in seen {
        println!("      {:>8.2}  {summary}", n as f64 / ops.max(1) as f64);
    }
}

struct Counter(&'static Calls);

struct Summary(Option<String>);

impl Visit for Summary {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "summary" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl Subscriber for Counter {
    fn register_callsite(&self, m: &'static Metadata<'static>) -> Interest {
        if self.enabled(m) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target() == "sqlx::query"
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.0.next_span.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut summary = Summary(None);
        event.record(&mut summary);
        let summary = summary.0.unwrap_or_default();
        if !summary.starts_with("PRAGMA ") {
            let mut seen = self.0.seen.lock().expect("calls");
            *seen.entry(summary.chars().take(60).collect()).or_default() += 1;
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
