//! [`NodeHost`]: the project's functions run by a `node` process (opt-in per project, for code
//! that needs npm packages or Node APIs), one long-lived process per host, started on the first
//! call and again after it died.
//!
//! On its first start the host strips every code file of the project into a private cache
//! folder ([`cache`]), once for its life (a restarted process reads the same); node loads them
//! through loader hooks (`node/hooks.mjs`) that resolve imports as duet-js does —
//! project-relative (`./x.js` written for `./x.ts`, extensionless), `@standardagents/spec` and
//! the provider packages from duet — and everything else with node's own resolution from the
//! project's folder (its `node_modules`), then the `NODE_PATH` folders. Modules are loaded once
//! per process: what a module keeps at its top level lives from call to call.
//! Calls travel as newline-delimited JSON over the process's stdin/stdout ([`wire`],
//! `node/host.mjs`); several may be in flight at once, and each call's `state` methods come back
//! as bridge requests that the call's own future answers with its [`Bridge`].
//!
//! Limits: the call's `deadline` is kept here (wall time, bridge waits included; starting node
//! is not). Past it the call fails and node is pinged: a process whose event loop does not
//! answer within [`NodeOptions::grace`] is stuck (node cannot interrupt a synchronous loop), so
//! it is killed and the other calls in flight on it fail [`CodeErrorKind::Crashed`]. The heap
//! ceiling is the `memory` of the call that starts the process (`--max-old-space-size`, at
//! least 64 MiB), fixed for the life of the process. A process that dies fails every call in
//! flight (Crashed, retryable; Memory when its heap ran out under a single call) and the next
//! call starts a new one.
//!
//! The process gets no secrets from duet's environment (only `PATH`, `HOME`, locale and the
//! like, plus [`NodeOptions::env`]): code reads configuration with `state.env`. It has node's
//! full authority otherwise (its own `fetch`, the file system, child processes): the node host is
//! for projects that trust their code.

mod cache;
mod options;
mod process;
mod stderr;
mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use async_trait::async_trait;
use duet_runtime::{Bridge, CodeCall, CodeError, CodeErrorKind, CodeHost};
use tokio::time::Instant;

use cache::Cache;
pub use options::NodeOptions;
use process::{Event, Process, project_file};

/// The smallest heap node is started with, in MiB.
const MIN_HEAP_MIB: u64 = 64;

#[derive(Default)]
struct Slot {
    cache: Option<Arc<Cache>>,
    process: Option<Arc<Process>>,
}

/// A [`CodeHost`] running the project's code in a `node` process of its own.
pub struct NodeHost {
    root: PathBuf,
    options: NodeOptions,
    slot: tokio::sync::Mutex<Slot>,
    pid: Arc<AtomicU32>,
    ids: AtomicU64,
}

impl NodeHost {
    /// The host for the project at `root` (its root folder, holding `agents/`, or that
    /// `agents/` folder). Nothing starts until the first call.
    pub fn new(root: &Path, options: NodeOptions) -> NodeHost {
        NodeHost {
            root: root.to_path_buf(),
            options,
            slot: tokio::sync::Mutex::new(Slot::default()),
            pid: Arc::new(AtomicU32::new(0)),
            ids: AtomicU64::new(0),
        }
    }

    /// The node process's id while one runs (for diagnostics and tests).
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::Relaxed)).filter(|p| *p != 0)
    }

    /// Stops the node process, if one runs, and waits until it is gone (its stderr read to the
    /// end): the calls in flight fail ([`CodeErrorKind::Crashed`]); the next call starts anew.
    pub async fn shutdown(&self) {
        let process = self.slot.lock().await.process.take();
        if let Some(p) = process {
            p.kill("duet stopped the node host");
            p.ended().await;
        }
    }

    /// The running process, started (with the cache, the first time) if there is none or it
    /// died. A failure to start is the call's [`CodeErrorKind::Load`]: no retry would fix it.
    async fn process(&self, memory: usize) -> Result<(Arc<Cache>, Arc<Process>), CodeError> {
        let mut slot = self.slot.lock().await;
        let cache = match &slot.cache {
            Some(c) => c.clone(),
            None => {
                let root = self.root.clone();
                let node_path = self.options.node_path.clone();
                let built = tokio::task::spawn_blocking(move || Cache::build(&root, &node_path))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()))
                    .map_err(|e| {
                        load(format!(
                            "the node host cannot prepare the project's code in {}: {e}",
                            self.root.display()
                        ))
                    })?;
                let cache = Arc::new(built);
                slot.cache = Some(cache.clone());
                cache
            }
        };
        if let Some(p) = slot.process.as_ref().filter(|p| p.usable()) {
            return Ok((cache, p.clone()));
        }
        let heap = u64::try_from(memory >> 20)
            .unwrap_or(u64::MAX)
            .max(MIN_HEAP_MIB);
        let started = Process::start(&cache, &self.options, heap, self.pid.clone())
            .await
            .map_err(load)?;
        slot.process = Some(started.clone());
        Ok((cache, started))
    }

    /// After a call ran past its deadline on `process`: kept if its event loop still turns,
    /// killed if it is stuck.
    async fn overran(&self, process: &Process, file: &str) {
        if !process.responsive(self.options.grace).await {
            process.kill(&format!(
                "a call of `{file}` ran past its deadline without yielding, and node cannot interrupt a synchronous loop"
            ));
        }
    }
}

impl Drop for NodeHost {
    fn drop(&mut self) {
        if let Some(p) = self.slot.get_mut().process.take() {
            p.kill("duet stopped the node host");
        }
    }
}

fn load(message: String) -> CodeError {
    CodeError::new(CodeErrorKind::Load, message)
}

/// Until dropped, call `id` is routed on `process`; dropped before the call ended (its
/// deadline passed, or the caller stopped waiting), node is told to stop serving it.
struct Open<'a> {
    process: &'a Process,
    id: u64,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if self.process.close(self.id) {
            self.process.send(wire::cancel(self.id));
        }
    }
}

#[async_trait]
impl CodeHost for NodeHost {
    async fn call(
        &self,
        mut call: CodeCall,
        bridge: &mut dyn Bridge,
    ) -> Result<serde_json::Value, CodeError> {
        let Some(file) = project_file(&call.file) else {
            return Err(load(format!(
                "`{}` is not a file of the project",
                call.file
            )));
        };
        let (cache, process) = self.process(call.limits.memory).await?;
        if !cache.has(&file) {
            return Err(load(format!(
                "`{file}` is not a code file of the project (the node host runs .ts, .mts, .js and .mjs files)"
            )));
        }
        call.file = file;
        let id = self.ids.fetch_add(1, Ordering::Relaxed) + 1;
        let mut events = process.open(id)?;
        let open = Open {
            process: &process,
            id,
        };
        process.send(wire::call(id, &call));
        let deadline = Instant::now() + call.limits.deadline;
        let ended = loop {
            let event = tokio::select! {
                e = events.recv() => e,
                () = tokio::time::sleep_until(deadline) => break None,
            };
            match event {
                Some(Event::Bridge { id, method, params }) => {
                    let answer = tokio::select! {
                        a = bridge.call(&method, params) => a,
                        () = tokio::time::sleep_until(deadline) => break None,
                    };
                    process.send(wire::answer(&id, answer));
                }
                Some(Event::Done(outcome)) => {
                    break Some(outcome.map_err(|e| CodeError {
                        kind: e.kind,
                        message: cache.map(&e.message),
                        stack: e.stack.map(|s| cache.stack(&s)),
                        details: e.details,
                    }));
                }
                Some(Event::Exited(e)) => break Some(Err(e)),
                None => {
                    break Some(Err(CodeError::new(
                        CodeErrorKind::Crashed,
                        "the node process running the project's code stopped answering; it is restarted for the next call",
                    )));
                }
            }
        };
        drop(open);
        if let Some(outcome) = ended {
            return outcome;
        }
        self.overran(&process, &call.file).await;
        Err(CodeError::new(
            CodeErrorKind::Deadline,
            format!(
                "`{}` did not finish within its deadline of {} ms and was stopped",
                call.file,
                call.limits.deadline.as_millis()
            ),
        ))
    }
}
