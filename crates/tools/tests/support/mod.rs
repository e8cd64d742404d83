//! What the MCP tests share: finding the reference servers `.ci/run` installs (or skipping,
//! loudly, when they are absent and `DUET_REQUIRE_MCP` is unset), and starting the Python
//! streamable-HTTP server on a free port.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use duet_runtime::{ThreadId, ToolContext};
use duet_spec::{McpServerDef, McpTransport};
use tokio::io::AsyncBufReadExt;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn required() -> bool {
    std::env::var("DUET_REQUIRE_MCP").is_ok_and(|v| v == "1")
}

/// Says why a test does not run, or fails it when CI requires it to run.
pub fn skip(what: &str) {
    assert!(
        !required(),
        "DUET_REQUIRE_MCP=1 but {what}: run .ci/run's install step"
    );
    eprintln!("\n!!! SKIPPED: {what} (set DUET_REQUIRE_MCP=1 to make this a failure) !!!\n");
}

/// The reference server's entry point, installed by `.ci/run` under `.ci/node/`.
pub fn everything_js() -> Option<PathBuf> {
    let js =
        repo().join(".ci/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !js.is_file() {
        skip(&format!(
            "@modelcontextprotocol/server-everything is not installed at {}",
            js.display()
        ));
        return None;
    }
    Some(js)
}

/// `everything` over stdio: `node …/dist/index.js stdio`.
pub fn everything_def(js: &Path) -> McpServerDef {
    McpServerDef {
        name: "everything".into(),
        description: None,
        transport: McpTransport::Stdio {
            command: "node".into(),
            args: vec![js.display().to_string(), "stdio".into()],
            env: BTreeMap::new(),
        },
        timeout_ms: 30_000,
    }
}

/// A call's context.
pub fn ctx() -> ToolContext {
    ToolContext {
        thread: ThreadId::nil(),
        idempotency_key: "t:call".into(),
    }
}

/// The Python streamable-HTTP server of `mcp_server.py`, killed when dropped.
pub struct PyServer {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl PyServer {
    /// Starts it on a port of its own choosing (it prints the port once listening); `None`
    /// (after [`skip`]) when Python or its `mcp` package is missing.
    pub async fn start() -> Option<PyServer> {
        let python = if which("python3") {
            "python3"
        } else {
            "python"
        };
        let has_mcp = std::process::Command::new(python)
            .args(["-c", "import mcp.server.mcpserver, uvicorn"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_mcp {
            skip("Python's `mcp` package (2.x) is not installed");
            return None;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/mcp_server.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the Python MCP server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let port = loop {
            let line = lines
                .next_line()
                .await
                .expect("read the server's output")
                .expect("the server printed its port before exiting");
            if let Some(port) = line.strip_prefix("PORT ") {
                break port.trim().to_owned();
            }
        };
        // Keep reading, so that what it prints later never meets a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Some(PyServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        })
    }

    /// Stops it now.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
