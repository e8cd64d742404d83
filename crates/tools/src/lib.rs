//! Tools for duet that reach out of the process: the project's `http` tools ([`HttpClient`],
//! on `reqwest`), code's `fetch` ([`CodeFetcher`], on `reqwest` too) and the MCP servers it
//! declares in `agents/mcp/` ([`McpServer`], on `rmcp`).
//! This is the only crate that names `rmcp`; the runtime knows them only through its
//! [`duet_runtime::HttpTools`] and [`duet_runtime::ToolServer`] ports.
//!
//! ```no_run
//! # async fn demo(project: std::sync::Arc<duet_spec::Project>, store: std::sync::Arc<dyn duet_runtime::Store>) {
//! let root = std::path::Path::new(".");
//! let runtime = duet_tools::register(duet_runtime::Runtime::builder(project.clone(), store), &project, root)
//!     .build();
//! # }
//! ```

mod fetch;
mod http;
pub mod mcp;
pub mod secrets;

use std::path::Path;

pub use fetch::{Allowlist, CodeFetcher, FetchPolicy, Route};
pub use http::HttpClient;
pub use mcp::McpServer;

/// The [`FetchPolicy`] of a project's `agents/code.yaml` `fetch`.
pub fn policy_of(config: &duet_spec::FetchConfig) -> FetchPolicy {
    FetchPolicy {
        allow: config.allow.clone(),
        timeout: std::time::Duration::from_millis(config.timeout_ms),
        max_response_bytes: config.max_response_bytes,
        ..FetchPolicy::default()
    }
}

/// `builder` with the http client, code's `fetch` (the project's `agents/code.yaml` allowlist)
/// and one [`McpServer`] per server `project` declares (stdio
/// servers run in `root`, the project root). Nothing starts until a step needs it.
pub fn register(
    builder: duet_runtime::RuntimeBuilder,
    project: &duet_spec::Project,
    root: &Path,
) -> duet_runtime::RuntimeBuilder {
    register_with(builder, project, root, HttpClient::new())
}

/// [`register`] with an http client of the caller's (one that allows private targets, say).
pub fn register_with(
    mut builder: duet_runtime::RuntimeBuilder,
    project: &duet_spec::Project,
    root: &Path,
    http: HttpClient,
) -> duet_runtime::RuntimeBuilder {
    builder = builder
        .http_tools(http)
        .fetcher(std::sync::Arc::new(CodeFetcher::new(policy_of(
            &project.code.fetch,
        ))));
    for (name, server) in mcp::servers(&project.mcp, root) {
        builder = builder.tool_server(&name, server);
    }
    builder
}
