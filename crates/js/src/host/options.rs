//! How an embedded host runs code: its threads and the deadline of loading a file.

use std::time::Duration;

/// How an [`EmbeddedHost`] runs code.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Engine threads kept, each running one call at a time (at least one).
    pub workers: usize,
    /// The most engine threads at once: beyond `workers`, threads are started while calls are
    /// queued and every thread is busy, some only waiting on the runtime (a call whose
    /// `invokeTool` runs another TS tool needs a second thread), and leave once idle.
    pub max_workers: usize,
    /// The most loading a file and its imports into an engine may take (once per file and
    /// engine, before the call's own deadline starts; a call's deadline, if longer, applies
    /// instead). As long as evaluating a definition may take by default.
    pub load_deadline: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            workers: 4,
            max_workers: 16,
            load_deadline: Duration::from_secs(2),
        }
    }
}
