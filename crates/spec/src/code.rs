//! A definition's own code (issue #33): where a TS function is found and the limits it runs
//! under ([`CodeRef`]), and the project's `agents/code.yaml` ([`CodeConfig`]): which host runs
//! the code, its default limits, and the hosts code may `fetch` from.

use serde::Serialize;

use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};

/// The project file holding the project's code settings.
pub const CONFIG_FILES: &[&str] = &["agents/code.yaml", "agents/code.yml"];

/// A definition whose behaviour is a function in its own file (`execute`, an effect's or an
/// endpoint's handler), run by the code host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeRef {
    /// The path to the function in the file's default export (`["execute"]`).
    pub entry: Vec<String>,
    /// `timeoutMs` on the definition: its own deadline, in place of the project's.
    pub timeout_ms: Option<u64>,
    /// `memoryMb` on the definition: its own memory ceiling, in place of the project's.
    pub memory_mb: Option<u64>,
}

impl CodeRef {
    /// A function at `entry` with the project's limits.
    pub fn at(entry: &[&str]) -> CodeRef {
        CodeRef {
            entry: entry.iter().map(|s| (*s).to_owned()).collect(),
            timeout_ms: None,
            memory_mb: None,
        }
    }
}

/// Which host runs the project's code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HostKind {
    /// duet's embedded engine (QuickJS): no ambient authority, a fresh context per call.
    #[default]
    Embedded,
    /// A long-lived `node` process per project, for code that needs npm packages or Node APIs.
    Node,
}

/// `agents/code.yaml`: how the project's code runs. Absent, every default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeConfig {
    /// `host`: `embedded` (default) or `node`.
    pub host: HostKind,
    /// `timeoutMs`: a call's deadline unless its definition sets one (default 30 s).
    pub timeout_ms: u64,
    /// `memoryMb`: a call's memory ceiling unless its definition sets one (default 64).
    pub memory_mb: u64,
    /// `fetch`: what code's `fetch` may reach.
    pub fetch: FetchConfig,
}

impl Default for CodeConfig {
    fn default() -> Self {
        CodeConfig {
            host: HostKind::Embedded,
            timeout_ms: 30_000,
            memory_mb: 64,
            fetch: FetchConfig::default(),
        }
    }
}

/// `fetch` in `agents/code.yaml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchConfig {
    /// `allow`: the hosts code may fetch from (`api.example.com`, `*.example.com`,
    /// `host:port`; an IP literal with a port grants that exact address even when it is
    /// private). None by default.
    pub allow: Vec<String>,
    /// `timeoutMs`: one request's deadline (default 10 s).
    pub timeout_ms: u64,
    /// `maxResponseBytes`: the largest response body (default 5 MiB).
    pub max_response_bytes: u64,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            allow: Vec::new(),
            timeout_ms: 10_000,
            max_response_bytes: 5 << 20,
        }
    }
}

impl crate::Project {
    /// Whether any definition runs the project's own code (a tool's `execute`, a hook's, a
    /// handler's, an effect's `handler`, a thread endpoint): what needs a code host.
    pub fn has_code(&self) -> bool {
        self.tools
            .values()
            .any(|t| matches!(t.def.implementation, Some(crate::ToolImpl::Code(_))))
            || self.hooks.values().any(|h| h.def.code.is_some())
            || self.handlers.values().any(|h| h.def.code.is_some())
            || self.effects.values().any(|e| e.def.code.is_some())
            || !self.endpoints.is_empty()
    }
}

/// The fields a definition with code may set to override the project's limits.
pub(crate) const LIMIT_FIELDS: &[&str] = &["timeoutMs", "memoryMb"];

/// The most a call's deadline may be: ten minutes.
const MAX_TIMEOUT_MS: u64 = 600_000;
/// The most a call's memory ceiling may be: 4 GiB.
const MAX_MEMORY_MB: u64 = 4096;

/// Reads a definition's `timeoutMs`/`memoryMb` (taking them from `o`) into a [`CodeRef`] at
/// `entry`; `has_code` false: the fields are reported, as nothing runs under them.
pub(crate) fn code_ref(
    ctx: &mut Ctx<'_>,
    o: &mut crate::decode::Obj<'_>,
    entry: &[&str],
    has_code: bool,
) -> Option<CodeRef> {
    let mut out = CodeRef::at(entry);
    for field in LIMIT_FIELDS {
        let Some(n) = o.take(field) else { continue };
        if !has_code {
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    format!("`{field}` limits a definition's own code, and this one has none"),
                )
                .at(ctx.file, field, Some(n.span))
                .hint("remove it, or give the definition an `execute` function"),
            );
            continue;
        }
        let (max, unit) = if *field == "timeoutMs" {
            (MAX_TIMEOUT_MS, "ms")
        } else {
            (MAX_MEMORY_MB, "MiB")
        };
        if let Some(v) = positive(ctx, n, field, max, unit) {
            if *field == "timeoutMs" {
                out.timeout_ms = Some(v);
            } else {
                out.memory_mb = Some(v);
            }
        }
    }
    has_code.then_some(out)
}

fn positive(ctx: &mut Ctx<'_>, n: &Node, field: &str, max: u64, unit: &str) -> Option<u64> {
    let v = ctx.number(n, field)?;
    if v.fract() != 0.0 || v < 1.0 || v > max as f64 {
        ctx.push(
            Issue::new(
                Code::InvalidValue,
                format!("`{field}` must be a whole number from 1 to {max} ({unit})"),
            )
            .at(ctx.file, field, Some(n.span)),
        );
        return None;
    }
    Some(v as u64)
}

/// The host `files` (a project's listing) ask for in their `agents/code.yaml`: what a loader
/// must know before it evaluates the definitions (a `node` project's packages are node's).
pub fn host_of(files: &[crate::SourceFile]) -> HostKind {
    files
        .iter()
        .find(|f| is_config(&f.path))
        .map_or(HostKind::Embedded, |f| {
            let text = String::from_utf8_lossy(&f.bytes);
            decode_config(&f.path, &text, &mut Vec::new()).host
        })
}

/// Whether `path` is the project's code settings file.
pub(crate) fn is_config(path: &str) -> bool {
    CONFIG_FILES.contains(&path)
}

/// Reads `agents/code.yaml` (`text`, at `path`).
pub(crate) fn decode_config(path: &str, text: &str, issues: &mut Vec<Issue>) -> CodeConfig {
    let (node, mut parsed) = crate::yaml::parse(text);
    for i in &mut parsed {
        if i.file.as_deref().is_none_or(str::is_empty) {
            i.file = Some(path.to_owned());
        }
    }
    issues.append(&mut parsed);
    let mut config = CodeConfig::default();
    let Some(node) = node else { return config };
    let mut ctx = Ctx::new(path, issues);
    let Some(mut o) = ctx.object(&node, "") else {
        return config;
    };
    if let Some(n) = o.take("host") {
        match &n.value {
            Value::String(s) if s == "embedded" => config.host = HostKind::Embedded,
            Value::String(s) if s == "node" => config.host = HostKind::Node,
            _ => ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    "`host` is `embedded` (duet's own engine) or `node`",
                )
                .at(path, "host", Some(n.span)),
            ),
        }
    }
    if let Some(n) = o.take("timeoutMs")
        && let Some(v) = positive(&mut ctx, n, "timeoutMs", MAX_TIMEOUT_MS, "ms")
    {
        config.timeout_ms = v;
    }
    if let Some(n) = o.take("memoryMb")
        && let Some(v) = positive(&mut ctx, n, "memoryMb", MAX_MEMORY_MB, "MiB")
    {
        config.memory_mb = v;
    }
    if let Some(n) = o.take("fetch")
        && let Some(mut f) = ctx.object(n, "fetch")
    {
        config.fetch.allow = f
            .strings(&mut ctx, "allow")
            .into_iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        for (i, host) in config.fetch.allow.iter().enumerate() {
            if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
                let at = f.path(&format!("allow[{i}]"));
                ctx.push(
                    Issue::new(
                        Code::InvalidValue,
                        format!("`{host}` is not a host: write `api.example.com`, `*.example.com` or `host:port`"),
                    )
                    .at(path, &at, Some(f.key_span("allow"))),
                );
            }
        }
        if let Some(n) = f.take("timeoutMs")
            && let Some(v) = positive(&mut ctx, n, "fetch.timeoutMs", MAX_TIMEOUT_MS, "ms")
        {
            config.fetch.timeout_ms = v;
        }
        if let Some(n) = f.take("maxResponseBytes")
            && let Some(v) = positive(&mut ctx, n, "fetch.maxResponseBytes", 1 << 30, "bytes")
        {
            config.fetch.max_response_bytes = v;
        }
        f.finish(&mut ctx, &["allow", "timeoutMs", "maxResponseBytes"]);
    }
    o.finish(&mut ctx, &["host", "timeoutMs", "memoryMb", "fetch"]);
    config
}
