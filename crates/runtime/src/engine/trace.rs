//! Trace context across the store, when a [`TraceCarrier`](crate::telemetry::TraceCarrier) is
//! set: saved with what a run queues and with a park, read back by the run that drains or
//! resumes. Without a carrier each of these does nothing and reads nothing. A park is also
//! stamped with the project's revision, carrier or not.

use tracing::Span;

use super::Runtime;
use crate::record::RecordBody;
use crate::store::{Commit, JournalEntry};
use crate::telemetry::RunTrace;
use crate::types::{Queued, Thread, ThreadStatus};

impl Runtime {
    /// The trace carrier the runtime was built with, if any: a server adopts an incoming
    /// request's trace context with it.
    pub fn trace_carrier(&self) -> Option<&dyn crate::telemetry::TraceCarrier> {
        self.inner.carrier.as_deref()
    }

    /// The current span's context, saved: what a message queued from here continues.
    pub(super) fn trace_here(&self) -> Option<String> {
        let carrier = self.inner.carrier.as_deref()?;
        let span = Span::current();
        if span.is_none() {
            return None;
        }
        carrier.save(&span)
    }

    /// Stamps a park that `commit` writes with the project's revision and, when a carrier is
    /// set, the current span's context (the step that asked).
    pub(super) fn mark_park(&self, commit: &mut Commit) {
        for record in &mut commit.records {
            if let RecordBody::Stopped {
                status: ThreadStatus::AwaitingHuman,
                trace,
                revision,
                ..
            } = &mut record.body
            {
                if revision.is_none() {
                    *revision = Some(self.inner.project.revision.clone());
                }
                if trace.is_none() && self.inner.carrier.is_some() {
                    *trace = self.trace_here();
                }
            }
        }
    }

    /// Before `queue` is drained into `t`: the trace its messages continue becomes the run's
    /// parent and, when `t` is parked (this drain answers it), the park's saved context is what
    /// the next step links to.
    pub(super) async fn trace_drain(&self, t: &Thread, queue: &[Queued], trace: &mut RunTrace) {
        if self.inner.carrier.is_none() || queue.is_empty() {
            return;
        }
        if let Some(saved) = queue.iter().rev().find_map(|q| q.trace.as_ref()) {
            trace.parent = Some(saved.clone());
        }
        if t.status != ThreadStatus::AwaitingHuman {
            return;
        }
        // The park's `stopped` record is the last entry before the park's seq.
        match self.inner.store.journal_since(t.id, t.next_seq - 2).await {
            Ok(entries) => {
                trace.resumed = entries.into_iter().rev().find_map(|e| match e {
                    JournalEntry::Record(r) => match r.body {
                        RecordBody::Stopped { trace, .. } => trace,
                        _ => None,
                    },
                    JournalEntry::Message(_) => None,
                });
            }
            Err(e) => {
                tracing::debug!(thread = %t.key, error = %e, "could not read the park's trace context");
            }
        }
    }

    /// Prepares `span`, a step's span about to be entered, to continue the run's trace.
    pub(super) fn trace_step(&self, span: &Span, trace: &mut RunTrace) {
        if let Some(carrier) = self.inner.carrier.as_deref() {
            trace.step(carrier, span);
        }
    }
}
