//! MCP server definitions (`agents/mcp/`): a server of tools that duet starts (stdio) or reaches
//! (streamable HTTP). A prompt offers its tools by naming the server in `tools`: `everything`
//! offers all of them, `everything/echo` only `echo`. Its model sees each under
//! [`exposed_tool_name`] (`everything__echo`). Nothing here starts a server: which tools it
//! has is known only at run time.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::Node;
use crate::tool::bounded;

/// An MCP server the project declares.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerDef {
    /// `name`: how prompts' `tools` refer to it; required, unique, snake_case.
    pub name: String,
    /// `description`: what the server is for, for people (`duet mcp list`); optional.
    pub description: Option<String>,
    /// `command` (stdio) or `url` (streamable HTTP), exactly one.
    pub transport: McpTransport,
    /// `timeoutMs`: how long starting the server, listing its tools or one call may take;
    /// default [`McpServerDef::DEFAULT_TIMEOUT_MS`].
    pub timeout_ms: u32,
}

impl McpServerDef {
    /// `timeoutMs` when absent: 60 seconds.
    pub const DEFAULT_TIMEOUT_MS: u32 = 60_000;
    /// The largest `timeoutMs`: 10 minutes.
    pub const MAX_TIMEOUT_MS: u32 = 600_000;
}

/// How duet talks to an MCP server.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum McpTransport {
    /// `command`: a program duet starts and talks to over its stdin and stdout.
    Stdio {
        /// `command`: the program (found on `PATH` when it has no `/`); it runs in the
        /// project root.
        command: String,
        /// `args`: its arguments; default none.
        args: Vec<String>,
        /// `env`: variables set for it on top of duet's own environment; values may hold
        /// `{{env.NAME}}` placeholders. Default none.
        env: BTreeMap<String, String>,
    },
    /// `url`: a streamable-HTTP MCP endpoint.
    Http {
        /// `url`: an `http://` or `https://` address, or one starting with `{{env.NAME}}`.
        url: String,
        /// `headers`: sent with every request; values may hold `{{env.NAME}}` placeholders
        /// (secrets stay out of definitions). Default none.
        headers: BTreeMap<String, String>,
    },
}

/// The longest tool name providers accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_TOOL_NAME: usize = 64;

/// The name a model sees for tool `tool` of MCP server `server`: `SERVER__TOOL`, every character
/// outside `[A-Za-z0-9_-]` replaced by `_`. A name over [`MAX_TOOL_NAME`] is cut and ends with a
/// hash of the whole, so it stays unique and the same in every process (the journal keeps it).
pub fn exposed_tool_name(server: &str, tool: &str) -> String {
    let full = format!("{server}__{tool}");
    let mut name: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() > MAX_TOOL_NAME {
        // FNV-1a: stable across builds and platforms, unlike `DefaultHasher`.
        let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        name.truncate(MAX_TOOL_NAME - 9);
        name.push_str(&format!("_{:08x}", hash & 0xffff_ffff));
    }
    name
}

/// A prompt's `tools` entry split as an MCP reference: `SERVER/TOOL` gives the server and the
/// tool; anything else, `None`.
pub fn split_reference(entry: &str) -> Option<(&str, &str)> {
    entry.split_once('/')
}

const MCP_FIELDS: &[&str] = &[
    "name",
    "description",
    "command",
    "args",
    "env",
    "url",
    "headers",
    "timeoutMs",
];

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node) -> (Option<String>, Option<McpServerDef>) {
    let Some(mut o) = ctx.object(root, "") else {
        return (None, None);
    };
    let name = o.required_name(ctx, "name");
    let name_span = o.take("name").map_or(o.span, |n| n.span);
    let description = o.string(ctx, "description");
    let command_node = o.take("command");
    let command = o.name(ctx, "command");
    let args = o.strings(ctx, "args");
    let env = o.string_map(ctx, "env");
    let url_node = o.take("url");
    let url = o.name(ctx, "url");
    let headers = o.string_map(ctx, "headers");
    let timeout_ms = bounded(ctx, &mut o, "timeoutMs", McpServerDef::MAX_TIMEOUT_MS)
        .unwrap_or(McpServerDef::DEFAULT_TIMEOUT_MS);
    let stray = |o: &crate::decode::Obj<'_>, keys: &[&'static str]| -> Vec<&'static str> {
        keys.iter().copied().filter(|k| o.has(k)).collect()
    };
    let transport = match (command_node, url_node) {
        (Some(_), Some(n)) => {
            ctx.push(
                Issue::new(
                    Code::McpTransport,
                    "an MCP server has `command` (stdio) or `url` (streamable HTTP), not both",
                )
                .at(ctx.file, "url", Some(n.span))
                .hint("keep one of them"),
            );
            None
        }
        (None, None) => {
            ctx.push(
                Issue::new(
                    Code::McpTransport,
                    "an MCP server needs `command` (a stdio server duet starts) or `url` (a streamable-HTTP server)",
                )
                .at(ctx.file, "", Some(o.span))
                .hint("add `command: npx` with `args: [...]`, or `url: http://HOST/mcp`"),
            );
            None
        }
        (Some(_), None) => {
            for key in stray(&o, &["headers"]) {
                ctx.push(
                    Issue::new(
                        Code::McpTransport,
                        format!("`{key}` belongs to a server reached by `url`, not one started by `command`"),
                    )
                    .at(ctx.file, key, Some(o.key_span(key)))
                    .hint("use `env` to pass settings to a stdio server"),
                );
            }
            command.map(|command| McpTransport::Stdio { command, args, env })
        }
        (None, Some(n)) => {
            for key in stray(&o, &["args", "env"]) {
                ctx.push(
                    Issue::new(
                        Code::McpTransport,
                        format!("`{key}` belongs to a server started by `command`, not one reached by `url`"),
                    )
                    .at(ctx.file, key, Some(o.key_span(key)))
                    .hint("remove it, or start the server with `command`"),
                );
            }
            if let Some(u) = &url
                && !(u.starts_with("http://")
                    || u.starts_with("https://")
                    || u.starts_with("{{env."))
            {
                ctx.report(
                    Code::InvalidValue,
                    format!("`url` must start with http:// or https://, not `{u}`"),
                    "url",
                    n.span,
                );
            }
            url.map(|url| McpTransport::Http { url, headers })
        }
    };
    o.finish(ctx, MCP_FIELDS);
    if let Some(n) = &name {
        crate::agent::check_name(ctx, n, "name", name_span);
    }
    let def = match (name.clone(), transport) {
        (Some(name), Some(transport)) => Some(McpServerDef {
            name,
            description,
            transport,
            timeout_ms,
        }),
        _ => None,
    };
    (name, def)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_are_valid_provider_tool_names() {
        assert_eq!(exposed_tool_name("everything", "echo"), "everything__echo");
        assert_eq!(exposed_tool_name("fs", "read.file/v2"), "fs__read_file_v2");
        let long = exposed_tool_name("server", &"x".repeat(100));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert_ne!(long, exposed_tool_name("server", &"x".repeat(101)));
        assert_eq!(long, exposed_tool_name("server", &"x".repeat(100)));
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
        assert_eq!(
            split_reference("everything/echo"),
            Some(("everything", "echo"))
        );
        assert_eq!(split_reference("everything"), None);
    }
}
