//! Counting the calls a SQL store makes into its driver: sqlx logs one `sqlx::query` event per
//! call, however many statements its text holds, and [`DriverCalls`], installed as the
//! process's global subscriber, keeps the summary (first words) of each. A test asserts how
//! many calls a path takes; a benchmark reports them per operation. Calls of `PRAGMA`s are not
//! kept: a background checkpointer's `wal_checkpoint` runs on a connection of its own, and a
//! connection's opening settings run once per connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// The driver calls seen since the last [`DriverCalls::take`], in order.
#[derive(Default)]
pub struct DriverCalls {
    seen: Mutex<Vec<String>>,
    next_span: AtomicU64,
}

impl DriverCalls {
    /// The counter, installed as the process's global subscriber on first use; `None` when
    /// another subscriber was installed first (a process has one).
    pub fn install() -> Option<&'static DriverCalls> {
        static CALLS: OnceLock<Option<&'static DriverCalls>> = OnceLock::new();
        *CALLS.get_or_init(|| {
            let calls: &'static DriverCalls = Box::leak(Box::default());
            tracing::subscriber::set_global_default(Counter(calls)).ok()?;
            Some(calls)
        })
    }

    /// The summaries of the calls seen since the last take, in order; the list starts again.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

struct Counter(&'static DriverCalls);

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
            self.0
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(summary);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
