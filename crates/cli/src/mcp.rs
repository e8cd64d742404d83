//! `duet mcp list [NAME]`: starts the MCP servers the project declares (`agents/mcp/`), or the
//! one named, and prints the tools each offers under the names its models see them by.
//!
//! Exit codes: 0 every server listed its tools, 1 one could not, 2 bad usage or a project that
//! does not load.

use crate::out::outln;
use std::path::PathBuf;
use std::process::ExitCode;

use duet_runtime::ToolServer;
use duet_spec::{McpTransport, exposed_tool_name};
use duet_tools::McpServer;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Start the declared MCP servers (or NAME) and list the tools each offers.
    List {
        /// Only this server.
        name: Option<String>,
        /// The project root (the folder holding `agents/`).
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// Print one JSON object per server (`server`, `protocol`, `tools` or `error`).
        #[arg(long)]
        json: bool,
    },
}

/// How a person reads a server's transport: `stdio: node server.js`, `http: URL`.
fn transport(t: &McpTransport) -> String {
    match t {
        McpTransport::Stdio { command, args, .. } => {
            let mut words = vec![command.as_str()];
            words.extend(args.iter().map(String::as_str));
            format!("stdio: {}", words.join(" "))
        }
        McpTransport::Http { url, .. } => format!("http: {url}"),
    }
}

/// The first line of `text`, at most `max` characters.
fn line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or("").trim();
    let mut cut: String = first.chars().take(max).collect();
    if cut.len() < first.len() {
        cut.push('…');
    }
    cut
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let Command::List {
        name,
        project,
        json,
    } = args.command;
    let loaded = match duet_js::load(&project, &duet_js::node_path_from_env()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(2);
        }
    };
    if !loaded.is_ok() {
        eprintln!("duet: the project has errors; `duet validate` lists them");
        return ExitCode::from(2);
    }
    let root = duet_spec::fs::project_root(&project).unwrap_or(project);
    let servers: Vec<_> = match &name {
        Some(n) => match loaded.project.mcp.get(n) {
            Some(d) => vec![d],
            None => {
                let known: Vec<&str> = loaded.project.mcp.keys().map(String::as_str).collect();
                eprintln!(
                    "duet: no MCP server `{n}` in agents/mcp/ (declared: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                );
                return ExitCode::from(2);
            }
        },
        None => loaded.project.mcp.values().collect(),
    };
    if servers.is_empty() && !json {
        outln!("the project declares no MCP servers (agents/mcp/)");
    }
    let mut failed = false;
    for d in servers {
        let def = &d.def;
        let server = McpServer::new(def.clone(), &root);
        let listed = server.tools().await;
        let protocol = server.protocol_version().await;
        server.shutdown().await;
        if json {
            let body = match &listed {
                Ok(tools) => serde_json::json!({
                    "server": def.name,
                    "protocol": protocol,
                    "tools": tools.iter().map(|t| serde_json::json!({
                        "name": exposed_tool_name(&def.name, &t.name),
                        "tool": t.name,
                        "description": t.description,
                        "inputSchema": t.parameters,
                    })).collect::<Vec<_>>(),
                }),
                Err(e) => serde_json::json!({"server": def.name, "error": e}),
            };
            outln!("{body}");
        } else {
            let how = transport(&def.transport);
            match &listed {
                Ok(tools) => {
                    let protocol = protocol.unwrap_or_default();
                    outln!(
                        "{} ({how}; MCP {protocol}): {} tools",
                        def.name,
                        tools.len()
                    );
                    let width = tools
                        .iter()
                        .map(|t| exposed_tool_name(&def.name, &t.name).len())
                        .max()
                        .unwrap_or(0);
                    for t in tools {
                        let exposed = exposed_tool_name(&def.name, &t.name);
                        outln!("  {exposed:<width$}  {}", line(&t.description, 80));
                    }
                }
                Err(e) => outln!("{} ({how}): cannot list its tools: {e}", def.name),
            }
        }
        failed |= listed.is_err();
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
