//! Tool definitions (`agents/tools/`), named by their file. duet never runs TypeScript, so a tool
//! says declaratively how it runs: a Rust `builtin`, a templated `result`, an `http` call, or
//! (a duet extension) an `effect` it schedules.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::approval::{self, Approval};
use crate::decode::{Ctx, Obj};
use crate::issue::{Code, Issue};
use crate::node::{Dynamic, Node, Span, Value};
use crate::prompt::{Variable, decode_variables};
use crate::schema;

/// A tool a prompt can offer its model.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDef {
    /// The file name without extension.
    pub name: String,
    /// `description`: what the tool does, when to call it and what it returns, for the model;
    /// required.
    pub description: String,
    /// `args`: a JSON Schema for the argument object; absent (`None`), no arguments.
    pub args: Option<serde_json::Value>,
    /// Whether `args` was written as a zod schema in a `.ts` tool (it is then its JSON Schema,
    /// and calls are checked with zod's own `safeParse` where the runtime has a code host for
    /// it, so defaults, coercions and refinements behave as the author wrote them).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub args_zod: bool,
    /// `builtin`, `result`, `http` or `effect`, exactly one: how the tool runs; `None` only for a `.ts`
    /// tool whose `execute` is a function (a warning).
    pub implementation: Option<ToolImpl>,
    /// `variables`: the env values the tool declares it needs; default none.
    pub variables: Vec<Variable>,
    /// `uses`: tools this tool may call through `invokeTool` / `queueTool`; default none.
    pub uses: Vec<String>,
    /// `approval` (a duet extension): its calls wait for a person's decision; `None`, they run.
    pub approval: Option<Approval>,
}

/// How a tool runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolImpl {
    /// `builtin`: a tool registered in Rust under this name.
    Builtin(String),
    /// `result`: a fixed string, or one with `{{arg}}` placeholders filled from the arguments.
    Result(String),
    /// `http`: an HTTP request made from templates over the arguments and env.
    Http(HttpCall),
    /// `execute`: the tool's own function (a `.ts`/`.js` tool), run by the code host.
    Code(crate::code::CodeRef),
    /// `effect` (a duet extension): a call schedules this effect (`agents/effects/`) with the
    /// call's arguments less [`ToolImpl::DELAY_ARG`] / [`ToolImpl::AT_ARG`], which say when.
    Effect(String),
}

impl ToolImpl {
    /// The argument of an `effect` tool's call saying in how many milliseconds the effect runs
    /// (an integer ≥ 0); absent with [`ToolImpl::AT_ARG`] too, it runs at once.
    pub const DELAY_ARG: &'static str = "delayMs";
    /// The argument of an `effect` tool's call saying when the effect runs (RFC 3339).
    pub const AT_ARG: &'static str = "at";
}

/// A tool's `http`: the request that runs it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HttpCall {
    /// `method`: the request method, in any case; default `POST`.
    pub method: HttpMethod,
    /// `url`: an `http://` or `https://` address; may hold `{{arg}}` and `{{env.NAME}}`
    /// placeholders. Required.
    pub url: String,
    /// `headers`: values may hold `{{env.NAME}}` placeholders (secrets stay out of
    /// definitions); default none.
    pub headers: BTreeMap<String, String>,
    /// `body`: the request body, a template over the arguments and env; absent, the arguments
    /// as JSON for POST, PUT and PATCH and no body for GET and DELETE.
    pub body: Option<String>,
    /// `timeoutMs`: how long the whole exchange (connect, send, read the answer) may take;
    /// default [`HttpCall::DEFAULT_TIMEOUT_MS`], at most [`HttpCall::MAX_TIMEOUT_MS`].
    pub timeout_ms: u32,
    /// `maxResponseBytes`: the largest answer body read; a larger one is an error result.
    /// Default [`HttpCall::DEFAULT_MAX_RESPONSE_BYTES`], at most
    /// [`HttpCall::MAX_RESPONSE_BYTES_LIMIT`].
    pub max_response_bytes: u32,
}

impl HttpCall {
    /// `timeoutMs` when absent: 30 seconds.
    pub const DEFAULT_TIMEOUT_MS: u32 = 30_000;
    /// The largest `timeoutMs`: 10 minutes.
    pub const MAX_TIMEOUT_MS: u32 = 600_000;
    /// `maxResponseBytes` when absent: 1 MiB.
    pub const DEFAULT_MAX_RESPONSE_BYTES: u32 = 1 << 20;
    /// The largest `maxResponseBytes`: 64 MiB.
    pub const MAX_RESPONSE_BYTES_LIMIT: u32 = 64 << 20;
}

/// An HTTP tool's `method`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// `GET`, to read.
    Get,
    /// `POST`, the default.
    Post,
    /// `PUT`, to replace.
    Put,
    /// `PATCH`, to change in part.
    Patch,
    /// `DELETE`, to remove.
    Delete,
}

const TOOL_FIELDS: &[&str] = &[
    "description",
    "args",
    "builtin",
    "result",
    "http",
    "effect",
    "execute",
    "variables",
    "uses",
    "executionMode",
    "executionProvider",
    "approval",
    "timeoutMs",
    "memoryMb",
];

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node, name: &str) -> Option<ToolDef> {
    let mut o = ctx.object(root, "")?;
    if o.has("name") {
        ctx.push(
            Issue::new(
                Code::UnknownField,
                "a tool is named by its file, not by a `name` field",
            )
            .at(ctx.file, "name", Some(o.key_span("name")))
            .hint(format!(
                "remove `name`; this tool is `{name}` because of its file name"
            )),
        );
        o.take("name");
    }
    let description = o.required_name(ctx, "description");
    let args = o
        .take("args")
        .and_then(|n| schema::object_schema(ctx, n, "args"));
    let execute = o.take("execute");
    let execute_is_function = matches!(
        execute.map(|n| &n.value),
        Some(Value::Dynamic(Dynamic::Function))
    );
    if let Some(n) = execute
        && !execute_is_function
    {
        ctx.report(
            Code::WrongType,
            format!("`execute` is a TypeScript function, not {}", n.kind()),
            "execute",
            n.span,
        );
    }
    let mut impls: Vec<(&str, ToolImpl, Span)> = Vec::new();
    if let Some(n) = o.take("builtin")
        && let Some(b) = ctx.name(n, "builtin")
    {
        impls.push(("builtin", ToolImpl::Builtin(b), n.span));
    }
    if let Some(n) = o.take("result")
        && let Some(r) = ctx.string(n, "result")
    {
        impls.push(("result", ToolImpl::Result(r), n.span));
    }
    if let Some(n) = o.take("http")
        && let Some(h) = decode_http(ctx, n)
    {
        impls.push(("http", ToolImpl::Http(h), n.span));
    }
    if let Some(n) = o.take("effect")
        && let Some(e) = ctx.name(n, "effect")
    {
        impls.push(("effect", ToolImpl::Effect(e), n.span));
    }
    let variables = match o.take("variables") {
        Some(n) => decode_variables(ctx, n, "variables"),
        None => Vec::new(),
    };
    let uses = o.strings(ctx, "uses");
    let approval = o
        .take("approval")
        .and_then(|n| approval::decode(ctx, n, args.as_ref()));
    if o.has("executionMode") || o.has("executionProvider") {
        ctx.push(
            Issue::new(
                Code::UnknownField,
                "provider-executed tools are not supported by duet",
            )
            .at(ctx.file, "executionMode", Some(o.key_span("executionMode"))),
        );
        o.take("executionMode");
        o.take("executionProvider");
    }
    if let Some(code) = crate::code::code_ref(ctx, &mut o, &["execute"], execute_is_function) {
        let span = execute.map_or(o.span, |n| n.span);
        impls.push(("execute", ToolImpl::Code(code), span));
    }
    let root_span = o.span;
    o.finish(ctx, TOOL_FIELDS);

    let implementation = match impls.len() {
        0 => {
            ctx.push(
                Issue::new(Code::ToolNoImplementation, format!("tool `{name}` does not say how it runs"))
                    .at(ctx.file, "", Some(root_span))
                    .hint("add one of `execute` (a function, in a `.ts` tool), `builtin: NAME`, `result: TEMPLATE`, `http: { method, url, headers }` or `effect: NAME`"),
            );
            None
        }
        1 => impls.pop().map(|(_, i, _)| i),
        _ => {
            let names: Vec<&str> = impls.iter().map(|(k, _, _)| *k).collect();
            ctx.push(
                Issue::new(
                    Code::ToolManyImplementations,
                    format!(
                        "tool `{name}` says how to run more than once ({}); it takes exactly one",
                        names.join(" and ")
                    ),
                )
                .at(ctx.file, names[1], Some(impls[1].2))
                .hint("keep one of `execute`, `builtin`, `result`, `http` and `effect`"),
            );
            None
        }
    };
    if let Some(imp) = &implementation {
        check_templates(ctx, imp, args.as_ref(), root);
    }
    if let Some(ToolImpl::Effect(_)) = &implementation {
        check_timing(ctx, name, args.as_ref(), root);
    }
    Some(ToolDef {
        name: name.to_owned(),
        description: description?,
        args,
        args_zod: false,
        implementation,
        variables,
        uses,
        approval,
    })
}

fn decode_http(ctx: &mut Ctx<'_>, node: &Node) -> Option<HttpCall> {
    let mut o = ctx.object(node, "http")?;
    let method = match o.take("method") {
        None => HttpMethod::Post,
        Some(n) => match ctx
            .string(n, "http.method")
            .map(|m| m.to_ascii_uppercase())
            .as_deref()
        {
            Some("GET") => HttpMethod::Get,
            Some("POST") | None => HttpMethod::Post,
            Some("PUT") => HttpMethod::Put,
            Some("PATCH") => HttpMethod::Patch,
            Some("DELETE") => HttpMethod::Delete,
            Some(other) => {
                ctx.report(
                    Code::InvalidValue,
                    format!("`http.method` is GET, POST, PUT, PATCH or DELETE, not `{other}`"),
                    "http.method",
                    n.span,
                );
                HttpMethod::Post
            }
        },
    };
    let url_span = o.take("url").map(|n| n.span);
    let url = o.required_name(ctx, "url");
    if let (Some(u), Some(span)) = (&url, url_span)
        && !(u.starts_with("http://") || u.starts_with("https://") || u.starts_with("{{env."))
    {
        ctx.report(
            Code::InvalidValue,
            format!("`http.url` must start with http:// or https://, not `{u}`"),
            "http.url",
            span,
        );
    }
    let headers = o.string_map(ctx, "headers");
    let body = o.string(ctx, "body");
    let timeout_ms = bounded(ctx, &mut o, "timeoutMs", HttpCall::MAX_TIMEOUT_MS)
        .unwrap_or(HttpCall::DEFAULT_TIMEOUT_MS);
    let max_response_bytes = bounded(
        ctx,
        &mut o,
        "maxResponseBytes",
        HttpCall::MAX_RESPONSE_BYTES_LIMIT,
    )
    .unwrap_or(HttpCall::DEFAULT_MAX_RESPONSE_BYTES);
    o.finish(ctx, HTTP_FIELDS);
    Some(HttpCall {
        method,
        url: url?,
        headers,
        body,
        timeout_ms,
        max_response_bytes,
    })
}

const HTTP_FIELDS: &[&str] = &[
    "method",
    "url",
    "headers",
    "body",
    "timeoutMs",
    "maxResponseBytes",
];

/// A count field of `o` of at least 1 and at most `max`, or `None` (absent, or reported).
pub(crate) fn bounded(ctx: &mut Ctx<'_>, o: &mut Obj<'_>, key: &str, max: u32) -> Option<u32> {
    let path = o.path(key);
    let node = o.take(key)?;
    let n = ctx.count(node, &path)?;
    if n > max {
        ctx.report(
            Code::InvalidValue,
            format!("`{path}` must be at most {max}, not {n}"),
            &path,
            node.span,
        );
        return None;
    }
    Some(n)
}

/// The `{{name}}` placeholders of a template, in order.
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    out
}

fn check_templates(
    ctx: &mut Ctx<'_>,
    imp: &ToolImpl,
    args: Option<&serde_json::Value>,
    root: &Node,
) {
    let mut templates: Vec<(String, &str, Option<Span>)> = Vec::new();
    match imp {
        ToolImpl::Result(t) => {
            templates.push(("result".into(), t, root.get("result").map(|n| n.span)))
        }
        ToolImpl::Http(h) => {
            let http = root.get("http");
            let at = |key: &str| http.and_then(|n| n.get(key)).map(|n| n.span);
            templates.push(("http.url".into(), &h.url, at("url")));
            if let Some(body) = &h.body {
                templates.push(("http.body".into(), body, at("body")));
            }
            for (name, value) in &h.headers {
                let span = http
                    .and_then(|n| n.get("headers"))
                    .and_then(|n| n.get(name))
                    .map(|n| n.span);
                templates.push((format!("http.headers.{name}"), value, span));
            }
        }
        ToolImpl::Builtin(_) | ToolImpl::Effect(_) | ToolImpl::Code(_) => return,
    }
    let known = args.map(schema::property_names).unwrap_or_default();
    for (field, template, span) in templates {
        for p in placeholders(template) {
            if p.starts_with("env.") || known.contains(&p) {
                continue;
            }
            ctx.push(
                Issue::new(
                    Code::TemplateUnknownArg,
                    format!("`{{{{{p}}}}}` in `{field}` names no argument of `args`"),
                )
                .at(ctx.file, &field, span)
                .hint(if known.is_empty() {
                    "declare it under `args.properties`".to_owned()
                } else {
                    format!("arguments: {}", known.join(", "))
                }),
            );
        }
    }
}

/// An `effect` tool's `args` declare `delayMs` as an integer and `at` as a string, if at all;
/// declaring neither, every call runs the effect at once (the model cannot say when).
fn check_timing(ctx: &mut Ctx<'_>, name: &str, args: Option<&serde_json::Value>, root: &Node) {
    let props = args.and_then(|a| a.get("properties"));
    let mut declared = false;
    for (key, want) in [
        (ToolImpl::DELAY_ARG, "integer"),
        (ToolImpl::AT_ARG, "string"),
    ] {
        let Some(prop) = props.and_then(|p| p.get(key)) else {
            continue;
        };
        declared = true;
        let ty = prop.get("type");
        let fits = match ty {
            None => true,
            Some(serde_json::Value::String(t)) => t == want,
            Some(serde_json::Value::Array(ts)) => ts.iter().any(|t| t == want),
            Some(_) => false,
        };
        if !fits {
            let path = format!("args.properties.{key}");
            let span = root
                .get("args")
                .and_then(|n| n.get("properties"))
                .and_then(|n| n.get(key))
                .map(|n| n.span);
            ctx.push(
                Issue::new(
                    Code::EffectToolTiming,
                    format!("`{key}` of effect tool `{name}` is read as {want}, and its schema says otherwise"),
                )
                .at(ctx.file, &path, span)
                .hint(if key == ToolImpl::DELAY_ARG {
                    "declare `delayMs: { type: integer, minimum: 0 }` (milliseconds from the call)"
                } else {
                    "declare `at: { type: string, format: date-time }` (an RFC 3339 time)"
                }),
            );
        }
    }
    if !declared {
        ctx.push(
            Issue::new(
                Code::EffectToolUntimed,
                format!("effect tool `{name}`'s `args` declare neither `delayMs` nor `at`: every call runs the effect at once"),
            )
            .at(ctx.file, "args", root.get("args").map(|n| n.span).or(Some(root.span)))
            .hint("declare `delayMs: { type: integer, minimum: 0 }` or `at: { type: string, format: date-time }` under `args.properties`"),
        );
    }
}
