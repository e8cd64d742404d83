//! MCP servers as [`ToolServer`]s, with `rmcp`.
//!
//! A server is started (stdio: the `command`, in the project root) or reached (streamable
//! HTTP: the `url`) on first use, and its tools are listed once per connection. A call's
//! arguments are checked against the tool's `inputSchema` before they are sent. A connection
//! that has died (the process exited, the transport closed) is replaced — started again and
//! listed again — and the call that found it dead is retried once. A server that cannot be
//! started is left alone for [`RETRY_AFTER`], doubling with each failure in a row up to
//! [`RETRY_AFTER_MAX`], so steps do not wait on it every time.
//! `{{env.NAME}}` in `env`, `url` and `headers` come from duet's environment; their values are
//! redacted from every message. A server's `url` is the definition's, trusted as written; a
//! redirect is followed only within its origin.

mod content;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use duet_runtime::{ToolContext, ToolResult, ToolServer, ToolSpec, render};
use duet_spec::{McpServerDef, McpTransport, exposed_tool_name};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceError};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Mutex;

use crate::secrets::Secrets;

/// How long a server that could not be started is left alone before the next try.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);
/// The longest wait between tries.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(300);

/// One live connection: the session, what it listed, and the process (stdio).
struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    tools: Vec<Tool>,
    validators: HashMap<String, jsonschema::Validator>,
    pid: Option<u32>,
}

impl Connection {
    fn alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }
}

#[derive(Default)]
struct State {
    live: Option<Arc<Connection>>,
    /// The last failed start: when the next try may be, and why it failed.
    failed: Option<(Instant, String)>,
    /// Failed starts in a row.
    failures: u32,
}

/// An MCP server the project declares, as a [`ToolServer`].
pub struct McpServer {
    def: McpServerDef,
    root: PathBuf,
    secrets: Secrets,
    state: Mutex<State>,
}

/// Why a call did not come back with a result.
enum CallError {
    /// The connection is gone: start again and retry.
    Gone(String),
    /// The server answered with a protocol error, or did not answer in time.
    Failed(String),
}

/// `server/discover` with the newest protocol first; a server that does not know it (an
/// older one) gets the `initialize` handshake of the newest version that has one.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::LATEST],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Redirects followed only within the origin the request went to (at most 5): the server's
/// `headers`, its credentials among them, never go to a host its definition did not name.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if duet_net::redirect_allowed(attempt.previous(), attempt.url()) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

fn from_env(template: &str) -> String {
    render(template, &serde_json::Value::Null, &|k: &str| {
        std::env::var(k).ok()
    })
}

impl McpServer {
    /// The server `def`; a stdio server runs in `root` (the project root). Nothing starts yet.
    pub fn new(def: McpServerDef, root: &Path) -> Self {
        let mut secrets = Secrets::default();
        let env = |k: &str| std::env::var(k).ok();
        match &def.transport {
            McpTransport::Stdio { env: vars, .. } => {
                for v in vars.values() {
                    secrets.add_env_of(v, &env);
                }
            }
            McpTransport::Http { url, headers } => {
                secrets.add_env_of(url, &env);
                for v in headers.values() {
                    secrets.add_env_of(v, &env);
                }
            }
        }
        McpServer {
            def,
            root: root.to_owned(),
            secrets,
            state: Mutex::new(State::default()),
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The process id of a stdio server while it runs (for diagnostics and tests).
    pub async fn process_id(&self) -> Option<u32> {
        let state = self.state.lock().await;
        state
            .live
            .as_ref()
            .filter(|c| c.alive())
            .and_then(|c| c.pid)
    }

    /// The protocol version the live connection negotiated (`2025-11-25`, `2026-07-28`…).
    pub async fn protocol_version(&self) -> Option<String> {
        let state = self.state.lock().await;
        let info = state.live.as_ref()?.service.peer_info()?;
        Some(info.protocol_version.to_string())
    }

    /// Stops the server (a stdio process is ended); the next use starts it again.
    pub async fn shutdown(&self) {
        let live = self.state.lock().await.live.take();
        if let Some(conn) = live.and_then(|c| Arc::try_unwrap(c).ok()) {
            let _ = conn.service.cancel().await;
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.def.timeout_ms))
    }

    /// The live connection, started (again) if there is none or it died.
    async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut state = self.state.lock().await;
        if let Some(conn) = &state.live
            && conn.alive()
        {
            return Ok(conn.clone());
        }
        if let Some((next, why)) = &state.failed
            && Instant::now() < *next
        {
            return Err(why.clone());
        }
        let started = match tokio::time::timeout(self.timeout(), self.connect()).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "it did not start and list its tools within {} ms (`timeoutMs`)",
                self.def.timeout_ms
            )),
        };
        match started {
            Ok(conn) => {
                let conn = Arc::new(conn);
                state.live = Some(conn.clone());
                state.failed = None;
                state.failures = 0;
                Ok(conn)
            }
            Err(why) => {
                let why = self.secrets.redact(&why);
                tracing::warn!(server = %self.def.name, error = %why, "MCP server cannot start");
                let wait = RETRY_AFTER.saturating_mul(1 << state.failures.min(6));
                state.live = None;
                state.failed = Some((Instant::now() + wait.min(RETRY_AFTER_MAX), why.clone()));
                state.failures = state.failures.saturating_add(1);
                Err(why)
            }
        }
    }

    /// Forgets `dead` if it is still the live connection.
    async fn forget(&self, dead: &Arc<Connection>) {
        let mut state = self.state.lock().await;
        if state.live.as_ref().is_some_and(|c| Arc::ptr_eq(c, dead)) {
            state.live = None;
        }
    }

    async fn connect(&self) -> Result<Connection, String> {
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("duet", env!("CARGO_PKG_VERSION")),
        );
        let (service, pid) = match &self.def.transport {
            McpTransport::Stdio { command, args, env } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).current_dir(&self.root).kill_on_drop(true);
                for (k, v) in env {
                    cmd.env(k, from_env(v));
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("`{command}` cannot be started: {e}"))?;
                let pid = transport.id();
                if let Some(stderr) = stderr {
                    let server = self.def.name.clone();
                    let secrets = self.secrets.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(server = %server, "{}", secrets.redact(&line));
                        }
                    });
                }
                let service = info
                    .serve_with_lifecycle(transport, lifecycle())
                    .await
                    .map_err(|e| format!("it did not complete the MCP handshake: {e}"))?;
                (service, pid)
            }
            McpTransport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let value = from_env(value);
                    let name = HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| format!("`{name}` is not a valid header name"))?;
                    let value = HeaderValue::from_str(&value)
                        .map_err(|_| format!("header `{name}` has a value that is not valid"))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(from_env(url))
                    .custom_headers(custom)
                    .reinit_on_expired_session(true);
                let client = reqwest::Client::builder()
                    .redirect(same_origin_redirects())
                    .build()
                    .map_err(|e| format!("the HTTP client cannot start: {e}"))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service = info
                    .serve_with_lifecycle(transport, lifecycle())
                    .await
                    .map_err(|e| format!("it did not complete the MCP handshake: {e}"))?;
                (service, None)
            }
        };
        let tools = service
            .list_all_tools()
            .await
            .map_err(|e| format!("it did not list its tools: {e}"))?;
        let validators = tools
            .iter()
            .filter_map(|t| {
                let schema = serde_json::Value::Object((*t.input_schema).clone());
                match jsonschema::validator_for(&schema) {
                    Ok(v) => Some((t.name.to_string(), v)),
                    Err(e) => {
                        tracing::warn!(server = %self.def.name, tool = %t.name, error = %e, "an MCP tool's inputSchema does not compile; its calls go unchecked");
                        None
                    }
                }
            })
            .collect();
        tracing::info!(server = %self.def.name, tools = tools.len(), "MCP server started");
        Ok(Connection {
            service,
            tools,
            validators,
            pid,
        })
    }

    /// One `tools/call` on `conn`.
    async fn call_on(
        &self,
        conn: &Connection,
        tool: &str,
        args: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<ToolResult, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = args;
        match tokio::time::timeout(self.timeout(), conn.service.call_tool(params)).await {
            Err(_) => Err(CallError::Failed(format!(
                "no answer within {} ms (`timeoutMs`)",
                self.def.timeout_ms
            ))),
            Ok(Ok(result)) => Ok(content::result(&result)),
            Ok(Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                Err(CallError::Gone(e.to_string()))
            }
            Ok(Err(ServiceError::McpError(e))) => Err(CallError::Failed(format!(
                "it refused the call: {}",
                e.message
            ))),
            Ok(Err(e)) => Err(CallError::Failed(e.to_string())),
        }
    }

    /// The tool of `conn` that a call names: by its own name, or by the rest of its exposed
    /// name (a call routed while the server could not list its tools).
    fn find<'c>(&self, conn: &'c Connection, tool: &str) -> Option<&'c Tool> {
        let exposed = exposed_tool_name(&self.def.name, tool);
        conn.tools.iter().find(|t| t.name == tool).or_else(|| {
            conn.tools
                .iter()
                .find(|t| exposed_tool_name(&self.def.name, &t.name) == exposed)
        })
    }

    fn error(&self, why: &str) -> ToolResult {
        ToolResult::error(
            self.secrets
                .redact(&format!("MCP server `{}`: {why}", self.def.name)),
        )
    }
}

#[async_trait]
impl ToolServer for McpServer {
    async fn tools(&self) -> Result<Vec<ToolSpec>, String> {
        let conn = self.connection().await?;
        Ok(conn.tools.iter().map(content::spec).collect())
    }

    async fn call(&self, ctx: ToolContext, tool: &str, args: serde_json::Value) -> ToolResult {
        let args = match args {
            serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
            a => a,
        };
        let serde_json::Value::Object(object) = &args else {
            return self.error("a tool's arguments are an object");
        };
        let mut conn = match self.connection().await {
            Ok(c) => c,
            Err(why) => return self.error(&format!("not available: {why}")),
        };
        let mut retried = false;
        loop {
            let Some(found) = self.find(&conn, tool) else {
                let names: Vec<&str> = conn.tools.iter().map(|t| t.name.as_ref()).collect();
                return self.error(&format!(
                    "no tool `{tool}`; it has: {}",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ));
            };
            let name = found.name.to_string();
            if let Some(v) = conn.validators.get(&name) {
                let problems = duet_runtime::schema_problems(v, &args);
                if !problems.is_empty() {
                    return self.error(&format!(
                        "invalid arguments for `{name}`: {}",
                        problems.join("; ")
                    ));
                }
            }
            match self.call_on(&conn, &name, Some(object.clone())).await {
                Ok(result) => {
                    return ToolResult {
                        attachments: Vec::new(),
                        status: result.status,
                        content: self.secrets.redact(&result.content),
                    };
                }
                Err(CallError::Failed(why)) => {
                    tracing::warn!(server = %self.def.name, tool = %name, thread = %ctx.thread, error = %self.secrets.redact(&why), "MCP call failed");
                    return self.error(&why);
                }
                Err(CallError::Gone(why)) if !retried => {
                    tracing::warn!(server = %self.def.name, error = %self.secrets.redact(&why), "MCP server connection lost; starting it again");
                    retried = true;
                    self.forget(&conn).await;
                    conn = match self.connection().await {
                        Ok(c) => c,
                        Err(why) => return self.error(&format!("it stopped, and {why}")),
                    };
                }
                Err(CallError::Gone(why)) => {
                    return self.error(&format!("the connection was lost twice: {why}"));
                }
            }
        }
    }
}

/// One [`McpServer`] per server `mcp` declares, by name; stdio servers run in `root`.
pub fn servers(
    mcp: &BTreeMap<String, duet_spec::Defined<McpServerDef>>,
    root: &Path,
) -> BTreeMap<String, Arc<McpServer>> {
    mcp.iter()
        .map(|(name, d)| (name.clone(), Arc::new(McpServer::new(d.def.clone(), root))))
        .collect()
}
