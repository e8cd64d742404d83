//! [`EmbeddedHost`]: the runtime's [`CodeHost`] port on QuickJS. A project's functions (a TS
//! tool's `execute`, a hook's, a handler's, an effect's or an endpoint's `handler`) run on a pool
//! of engine threads, each with one engine: a warm context holding the project's modules (loaded
//! on first use, from the files as they were when the host was made), in which each call gets a
//! fresh `state`, the call's deadline and memory ceiling. What the code asks of `state` (and
//! `fetch`) goes to the caller's [`Bridge`]; the code waits for the answer, the wait counting
//! against its deadline.
//!
//! A call that failed in a way that may leave its engine unsound (its deadline, its memory
//! ceiling, a module that did not load, a cancelled call, an engine fault) is the engine's last:
//! the next call on that thread gets a new one.

mod bridge;
mod engine;
mod job;
mod options;
mod outcome;
mod pool;
mod rejections;
mod worker;

use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use duet_runtime::{Bridge, CodeCall, CodeError, CodeErrorKind, CodeHost};
use tokio::sync::mpsc;

use crate::resolve::Modules;
use job::{Event, Job};
pub use options::HostOptions;
use pool::Pool;

/// Runs a project's TypeScript and JavaScript functions in embedded QuickJS engines: no file
/// system, process, timers or network reach the code except what the [`Bridge`] answers.
pub struct EmbeddedHost {
    pool: Pool,
    /// How long loading a file may take (part of the bound on a call's whole wait).
    load_deadline: std::time::Duration,
}

impl EmbeddedHost {
    /// A host for the project at `project_root` (its root or its `agents/` folder), its files
    /// read now, once; packages (zod) are found in `node_modules` from the project's folder up,
    /// then in `node_path`.
    pub fn new(
        project_root: &Path,
        node_path: Vec<PathBuf>,
        options: HostOptions,
    ) -> io::Result<EmbeddedHost> {
        let root = duet_spec::fs::project_root(project_root).map_err(io::Error::other)?;
        let listing = duet_spec::fs::read_project(&root).map_err(io::Error::other)?;
        let files = listing
            .files
            .into_iter()
            .filter_map(|f| Some((f.path, String::from_utf8(f.bytes).ok()?)))
            .collect();
        let modules = Modules {
            root: std::fs::canonicalize(&root).ok(),
            node_path,
            files,
            ..Modules::default()
        };
        Ok(EmbeddedHost {
            pool: Pool::new(&options, modules)?,
            load_deadline: options.load_deadline,
        })
    }
}

#[async_trait]
impl CodeHost for EmbeddedHost {
    async fn call(
        &self,
        call: CodeCall,
        bridge: &mut dyn Bridge,
    ) -> Result<serde_json::Value, CodeError> {
        // The whole wait is bounded, time queued for a free engine included: loading the file,
        // then the call's own deadline, and a second's slack. Past it the call is given up (the
        // worker sees the channel close and stops it, or drops it still queued).
        let bound = call.limits.deadline + self.load_deadline + std::time::Duration::from_secs(1);
        let deadline_ms = call.limits.deadline.as_millis();
        tokio::time::timeout(bound, self.run(call, bridge))
            .await
            .unwrap_or_else(|_| {
                Err(CodeError::new(
                    CodeErrorKind::Deadline,
                    format!(
                        "the call waited for a free JavaScript engine and ran past its deadline of {deadline_ms} ms: the project's other calls keep every engine busy"
                    ),
                ))
            })
    }
}

impl EmbeddedHost {
    async fn run(
        &self,
        call: CodeCall,
        bridge: &mut dyn Bridge,
    ) -> Result<serde_json::Value, CodeError> {
        let (events, mut rx) = mpsc::unbounded_channel();
        self.pool.submit(Job { call, events })?;
        // The worker sends what the code asks, one request at a time, then the outcome. If this
        // future is dropped, `rx` goes with it and the worker stops the call.
        while let Some(event) = rx.recv().await {
            let (method, params, reply) = match event {
                Event::Done(outcome) => return outcome,
                Event::Bridge {
                    method,
                    params,
                    reply,
                } => (method, params, reply),
            };
            // The worker gives up on an answer at the call's deadline and says so: the bridge's
            // work is then dropped.
            tokio::select! {
                answer = bridge.call(&method, params) => {
                    // The worker may have stopped waiting: it says why next.
                    let _ = reply.send(answer);
                }
                event = rx.recv() => match event {
                    Some(Event::Done(outcome)) => return outcome,
                    // A worker asks one thing at a time; anything else is a fault.
                    Some(Event::Bridge { .. }) | None => return Err(stopped()),
                },
            }
        }
        Err(stopped())
    }
}

/// The outcome of a call whose engine thread went away.
fn stopped() -> CodeError {
    CodeError::new(
        CodeErrorKind::Crashed,
        "the JavaScript engine running the code stopped before the call finished",
    )
}
