//! What the node process writes on stderr, as `tracing` events (target `duet::code`): the
//! code's `console.*` lines (JSON from `host.mjs`, naming the thread and the call) at their
//! level, anything else (node's own warnings, a package's output, a crash) as a warning. The
//! last lines are kept to say why a process could not start, and a heap exhausted is noticed.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use tokio::io::AsyncRead;

use super::wire;

/// A stderr line longer than this is dropped.
const MAX_LINE: usize = 1 << 20;
/// How many plain lines are kept.
const TAIL: usize = 10;

/// What the stderr reader learned.
#[derive(Default)]
pub(crate) struct Stderr {
    /// Node said its heap is exhausted.
    out_of_memory: AtomicBool,
    /// The last plain lines.
    tail: Mutex<VecDeque<String>>,
}

#[derive(Deserialize)]
struct Console {
    duet: String,
    level: String,
    thread: Option<String>,
    call: Option<String>,
    message: String,
}

impl Stderr {
    /// Whether node reported its heap exhausted.
    pub(crate) fn out_of_memory(&self) -> bool {
        self.out_of_memory.load(Ordering::Relaxed)
    }

    /// The last lines node wrote that were not the code's console, oldest first.
    pub(crate) fn tail(&self) -> Vec<String> {
        self.tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Reads `from` to its end, logging each line.
    pub(crate) async fn read(&self, from: impl AsyncRead + Unpin, pid: u32) {
        let mut from = tokio::io::BufReader::new(from);
        let mut buf = Vec::new();
        while let Ok(true) = wire::next_line(&mut from, &mut buf, MAX_LINE).await {
            self.line(&String::from_utf8_lossy(&buf), pid);
        }
    }

    fn line(&self, line: &str, pid: u32) {
        if let Some(c) = console(line) {
            let thread = c.thread.unwrap_or_default();
            let call = c.call.unwrap_or_default();
            let message = c.message;
            match c.level.as_str() {
                "error" => tracing::error!(target: "duet::code", %thread, %call, "{message}"),
                "warn" => tracing::warn!(target: "duet::code", %thread, %call, "{message}"),
                "debug" => tracing::debug!(target: "duet::code", %thread, %call, "{message}"),
                _ => tracing::info!(target: "duet::code", %thread, %call, "{message}"),
            }
            return;
        }
        if line.trim().is_empty() {
            return;
        }
        if line.contains("JavaScript heap out of memory") || line.contains("Reached heap limit") {
            self.out_of_memory.store(true, Ordering::Relaxed);
        }
        if let Ok(mut tail) = self.tail.lock() {
            if tail.len() == TAIL {
                tail.pop_front();
            }
            tail.push_back(line.to_owned());
        }
        tracing::warn!(target: "duet::code", pid, "node: {line}");
    }
}

/// A console line of `host.mjs`.
fn console(line: &str) -> Option<Console> {
    if !line.starts_with("{\"duet\":\"console\"") {
        return None;
    }
    serde_json::from_str::<Console>(line)
        .ok()
        .filter(|c| c.duet == "console")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_lines_are_told_from_the_rest() {
        let c = console(
            r#"{"duet":"console","level":"warn","thread":"t1","call":"c1","message":"hi"}"#,
        )
        .expect("a console line");
        assert_eq!(
            (c.level.as_str(), c.thread.as_deref(), c.message.as_str()),
            ("warn", Some("t1"), "hi")
        );
        assert!(console("(node:12) Warning: something").is_none());
        let stderr = Stderr::default();
        stderr.line(
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
            1,
        );
        stderr.line(
            r#"{"duet":"console","level":"info","thread":null,"call":null,"message":"x"}"#,
            1,
        );
        assert!(stderr.out_of_memory());
        assert_eq!(stderr.tail().len(), 1);
    }
}
