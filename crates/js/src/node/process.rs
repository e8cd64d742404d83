//! One `node` process running the cache's `host.mjs`: started in a process group of its own
//! (killed as one), spoken to by a writer task (stdin) and a reader task (stdout) that routes
//! each message to the call it belongs to. When stdout ends — the process exited, crashed or
//! was killed — every call still waiting gets [`Event::Exited`], so none waits on a dead
//! process.

use std::collections::HashMap;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use duet_runtime::{CodeError, CodeErrorKind};
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::cache::Cache;
use super::options::NodeOptions;
use super::stderr::Stderr;
use super::wire::{self, Inbound};

/// How long node may take to start the host and say so.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the process is given to be reaped, and its stderr to be read, once stdout ended.
const EXIT_WAIT: Duration = Duration::from_secs(2);
/// The environment node is given from duet's (nothing else: duet's secrets are not the code's;
/// code asks `state.env`).
const KEPT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TZ",
    "NODE_EXTRA_CA_CERTS",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERPROFILE",
];

/// What a call hears from its process.
#[derive(Debug)]
pub(crate) enum Event {
    /// The code asks state's `method`: answer to `id`.
    Bridge {
        id: String,
        method: String,
        params: Value,
    },
    /// The call ended: what node replied (its stack not yet mapped).
    Done(Result<Value, CodeError>),
    /// The process is gone.
    Exited(CodeError),
}

#[derive(Default)]
struct Routes {
    calls: HashMap<u64, mpsc::UnboundedSender<Event>>,
    pings: HashMap<u64, oneshot::Sender<()>>,
    /// Why the process is gone, once it is.
    exited: Option<CodeError>,
}

/// A running `node` host process.
pub(crate) struct Process {
    pid: u32,
    /// The heap ceiling node was started with, in MiB.
    heap_mib: u64,
    writer: mpsc::UnboundedSender<String>,
    routes: Mutex<Routes>,
    /// The child, until reaped.
    child: Mutex<Option<Box<dyn ChildWrapper>>>,
    /// Why duet stopped it, if it did.
    stopped: Mutex<Option<String>>,
    /// No new call goes to it (duet stopped it, or it is gone).
    retired: AtomicBool,
    pings: AtomicU64,
    stderr: Arc<Stderr>,
    /// The host's record of its running process's id, cleared when this one ends.
    pid_slot: Arc<AtomicU32>,
    /// How it exited (`signal 9`), once reaped.
    exit: Mutex<Option<String>>,
    /// Set once the process is reaped and its calls ended.
    ended: tokio::sync::watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Process {
    /// Starts node on `cache`'s host with a heap of `heap_mib`, and waits until it says it is
    /// ready. `Err` says why it could not start.
    pub(crate) async fn start(
        cache: &Cache,
        options: &NodeOptions,
        heap_mib: u64,
        pid_slot: Arc<AtomicU32>,
    ) -> Result<Arc<Process>, String> {
        let mut command = tokio::process::Command::new(&options.node);
        command
            .arg(format!("--max-old-space-size={heap_mib}"))
            .arg("--import")
            .arg(cache.register())
            .arg(cache.host())
            .current_dir(cache.root())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in KEPT_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(options.env.iter().map(|(k, v)| (k, v)));
        let mut wrap = CommandWrap::from(command);
        #[cfg(unix)]
        wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
        wrap.wrap(KillOnDrop);
        let shown = options.node.display();
        let mut child = wrap.spawn().map_err(|e| {
            format!("cannot start `{shown}`: {e} (the node host needs Node.js 18.19 or later)")
        })?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        ) else {
            let _ = child.start_kill();
            return Err(format!("`{shown}` was started without its pipes"));
        };
        let (writer, lines) = mpsc::unbounded_channel();
        tokio::spawn(write_lines(stdin, lines));
        let errors = Arc::new(Stderr::default());
        let reading = {
            let errors = errors.clone();
            tokio::spawn(async move { errors.read(stderr, pid).await })
        };
        let process = Arc::new(Process {
            pid,
            heap_mib,
            writer,
            routes: Mutex::new(Routes::default()),
            child: Mutex::new(Some(child)),
            stopped: Mutex::new(None),
            retired: AtomicBool::new(false),
            pings: AtomicU64::new(0),
            stderr: errors,
            pid_slot,
            exit: Mutex::new(None),
            ended: tokio::sync::watch::Sender::new(false),
        });
        // Cleared by the reader when the process ends (if it is still this one's).
        process.pid_slot.store(pid, Ordering::Relaxed);
        let (ready, started) = oneshot::channel();
        tokio::spawn(process.clone().read(stdout, reading, ready));
        match tokio::time::timeout(START_TIMEOUT, started).await {
            Ok(Ok(version)) => {
                tracing::info!(target: "duet::code", pid, node = %version, heap_mib, "node host started");
                Ok(process)
            }
            Ok(Err(_)) => {
                let how = lock(&process.exit)
                    .clone()
                    .unwrap_or_else(|| "its status is unknown".into());
                let said = process.stderr.tail().join("\n");
                Err(format!(
                    "`{shown}` exited before duet's host started ({how}){}",
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!("; it said:\n{said}")
                    }
                ))
            }
            Err(_) => {
                process.kill("it did not start in time");
                Err(format!(
                    "`{shown}` did not start duet's host within {} s",
                    START_TIMEOUT.as_secs()
                ))
            }
        }
    }

    /// Whether a new call may go to it.
    pub(crate) fn usable(&self) -> bool {
        !self.retired.load(Ordering::Relaxed)
    }

    /// Routes call `id`'s events to the receiver returned; `Err` when the process is gone.
    pub(crate) fn open(&self, id: u64) -> Result<mpsc::UnboundedReceiver<Event>, CodeError> {
        let mut routes = lock(&self.routes);
        if let Some(gone) = &routes.exited {
            return Err(gone.clone());
        }
        let (tx, rx) = mpsc::unbounded_channel();
        routes.calls.insert(id, tx);
        Ok(rx)
    }

    /// Stops routing call `id`; whether it was still routed (it had not ended).
    pub(crate) fn close(&self, id: u64) -> bool {
        lock(&self.routes).calls.remove(&id).is_some()
    }

    /// Sends `line` (a message with its newline) to node. A process that is gone drops it: its
    /// calls hear [`Event::Exited`] from the reader.
    pub(crate) fn send(&self, line: String) {
        let _ = self.writer.send(line);
    }

    /// Whether node's event loop answers a ping within `within` (it is not stuck in a
    /// synchronous loop).
    pub(crate) async fn responsive(&self, within: Duration) -> bool {
        let id = self.pings.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut routes = lock(&self.routes);
            if routes.exited.is_some() {
                return false;
            }
            routes.pings.insert(id, tx);
        }
        self.send(wire::ping(id));
        matches!(tokio::time::timeout(within, rx).await, Ok(Ok(())))
    }

    /// Kills the process group, for `why`: the calls in flight fail (Crashed) saying so.
    pub(crate) fn kill(&self, why: &str) {
        self.retired.store(true, Ordering::Relaxed);
        lock(&self.stopped).get_or_insert_with(|| why.to_owned());
        if let Some(child) = lock(&self.child).as_mut() {
            let _ = child.start_kill();
        }
    }

    /// Once the process is gone: reaped, its stderr read, its calls ended.
    pub(crate) async fn ended(&self) {
        let _ = self.ended.subscribe().wait_for(|e| *e).await;
    }

    /// Reads node's messages until stdout ends, then reaps the process and ends every call
    /// still waiting.
    async fn read(
        self: Arc<Self>,
        stdout: ChildStdout,
        stderr: JoinHandle<()>,
        ready: oneshot::Sender<String>,
    ) {
        let mut ready = Some(ready);
        let mut from = tokio::io::BufReader::new(stdout);
        let mut buf = Vec::new();
        while let Ok(true) = wire::next_line(&mut from, &mut buf, wire::MAX_LINE).await {
            match wire::parse(&buf) {
                Some(Inbound::Ready(version)) => {
                    if let Some(r) = ready.take() {
                        let _ = r.send(version);
                    }
                }
                Some(Inbound::Done(id, outcome)) => {
                    let route = lock(&self.routes).calls.remove(&id);
                    if let Some(route) = route {
                        let _ = route.send(Event::Done(outcome));
                    }
                }
                Some(Inbound::Bridge {
                    id,
                    call,
                    method,
                    params,
                }) => {
                    let route = lock(&self.routes).calls.get(&call).cloned();
                    let event = Event::Bridge {
                        id: id.clone(),
                        method,
                        params,
                    };
                    if route.is_none_or(|r| r.send(event).is_err()) {
                        self.send(wire::answer(&id, Err("the call has ended".into())));
                    }
                }
                Some(Inbound::Pong(id)) => {
                    if let Some(tx) = lock(&self.routes).pings.remove(&id) {
                        let _ = tx.send(());
                    }
                }
                None if buf.is_empty() => {}
                None => {
                    let shown: String = String::from_utf8_lossy(&buf).chars().take(200).collect();
                    tracing::warn!(target: "duet::code", pid = self.pid, "node wrote a line that is not a message: {shown}");
                }
            }
        }
        self.retired.store(true, Ordering::Relaxed);
        let status = self.reap().await;
        *lock(&self.exit) = Some(describe(status));
        let _ = tokio::time::timeout(EXIT_WAIT, stderr).await;
        let (calls, pings, gone) = {
            let mut routes = lock(&self.routes);
            let calls = std::mem::take(&mut routes.calls);
            let gone = self.gone(status, calls.len());
            routes.exited = Some(gone.clone());
            (calls, std::mem::take(&mut routes.pings), gone)
        };
        drop(pings);
        if lock(&self.stopped).is_none() {
            tracing::warn!(target: "duet::code", pid = self.pid, "{}", gone.message);
        }
        for route in calls.into_values() {
            let _ = route.send(Event::Exited(gone.clone()));
        }
        let _ = self
            .pid_slot
            .compare_exchange(self.pid, 0, Ordering::Relaxed, Ordering::Relaxed);
        drop(ready);
        self.ended.send_replace(true);
    }

    /// The process's exit status, once its group is killed (what the code started dies with
    /// it; killed before the reaping, the group's id cannot have been reused).
    async fn reap(&self) -> Option<ExitStatus> {
        let mut child = lock(&self.child).take()?;
        let _ = child.start_kill();
        tokio::time::timeout(EXIT_WAIT, child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Why the calls in flight (`calls` of them) failed: the process is gone.
    fn gone(&self, status: Option<ExitStatus>, calls: usize) -> CodeError {
        const AGAIN: &str = "it is restarted for the next call";
        if let Some(why) = lock(&self.stopped).as_deref() {
            return CodeError::new(
                CodeErrorKind::Crashed,
                format!("the node process running the project's code was stopped ({why}); {AGAIN}"),
            );
        }
        if self.stderr.out_of_memory() {
            let heap = self.heap_mib;
            return if calls == 1 {
                CodeError::new(
                    CodeErrorKind::Memory,
                    format!(
                        "the code needed more memory than the node host's heap of {heap} MiB; the node process exited and {AGAIN}"
                    ),
                )
            } else {
                CodeError::new(
                    CodeErrorKind::Crashed,
                    format!(
                        "the node process running the project's code ran out of memory (its heap is {heap} MiB) and exited; {AGAIN}"
                    ),
                )
            };
        }
        CodeError::new(
            CodeErrorKind::Crashed,
            format!(
                "the node process running the project's code exited ({}); {AGAIN}",
                describe(status)
            ),
        )
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = lock(&self.child).as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// `signal 9`, `exit code 1`.
fn describe(status: Option<ExitStatus>) -> String {
    let Some(status) = status else {
        return "its status is unknown".into();
    };
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!("signal {signal}");
    }
    status
        .code()
        .map_or_else(|| status.to_string(), |c| format!("exit code {c}"))
}

async fn write_lines(mut stdin: ChildStdin, mut lines: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = lines.recv().await {
        if stdin.write_all(line.as_bytes()).await.is_err() {
            break;
        }
    }
}

/// `file` as a project-relative path without `.`/`..` (`None` when it is absolute or climbs
/// out).
pub(crate) fn project_file(file: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    if Path::new(file).is_absolute() || file.starts_with('/') || file.contains('\\') {
        return None;
    }
    for part in file.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_named_inside_the_project() {
        assert_eq!(
            project_file("agents/./tools/x.ts").as_deref(),
            Some("agents/tools/x.ts")
        );
        assert_eq!(project_file("agents/../x.ts").as_deref(), Some("x.ts"));
        assert_eq!(project_file("../x.ts"), None);
        assert_eq!(project_file("/etc/passwd"), None);
        assert_eq!(project_file(""), None);
    }
}
