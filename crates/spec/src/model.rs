//! Model definitions (`agents/models/`): a provider and model id, fallbacks, capabilities, and for
//! the `scripted` provider the script it plays.

use serde::Serialize;

use crate::decode::{Ctx, join};
use crate::issue::{Code, Issue};
use crate::node::Node;

/// The providers duet has. `scripted` plays a fixed script, for tests, demos and benchmarks.
pub const PROVIDERS: &[&str] = &["scripted", "openai", "anthropic"];

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelDef {
    pub name: String,
    pub provider: String,
    /// The provider's model id.
    pub model: String,
    /// Model names tried in order once this one's retries are exhausted.
    pub fallbacks: Vec<String>,
    pub included_providers: Vec<String>,
    /// USD per million tokens.
    pub input_price: Option<f64>,
    pub output_price: Option<f64>,
    pub cached_price: Option<f64>,
    pub capabilities: Capabilities,
    pub provider_options: serde_json::Map<String, serde_json::Value>,
    pub provider_tools: Vec<String>,
    /// For `scripted`: one entry per model call, per thread, in call order.
    pub script: Vec<ScriptEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub reasoning_levels: Option<serde_json::Value>,
    pub supports_images: Option<bool>,
    pub supports_tool_calls: Option<bool>,
    pub supports_streaming: Option<bool>,
    pub supports_json_mode: Option<bool>,
    pub max_context_tokens: Option<u32>,
    pub max_output_tokens: Option<u32>,
}

/// One scripted model response.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScriptEntry {
    pub text: Option<String>,
    pub thinking: Option<String>,
    pub tool_calls: Vec<ScriptToolCall>,
    /// Milliseconds to wait before answering (`delayMs`): latency for demos and tests.
    pub delay_ms: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScriptToolCall {
    pub name: String,
    pub arguments: serde_json::Value,
}

const MODEL_FIELDS: &[&str] = &[
    "name",
    "provider",
    "model",
    "fallbacks",
    "includedProviders",
    "inputPrice",
    "outputPrice",
    "cachedPrice",
    "capabilities",
    "providerOptions",
    "providerTools",
    "script",
];
const CAPABILITY_FIELDS: &[&str] = &[
    "reasoningLevels",
    "supportsImages",
    "supportsToolCalls",
    "supportsStreaming",
    "supportsJsonMode",
    "maxContextTokens",
    "maxOutputTokens",
];

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node) -> (Option<String>, Option<ModelDef>) {
    let Some(mut o) = ctx.object(root, "") else {
        return (None, None);
    };
    let name = o.required_name(ctx, "name");
    let name_span = o.take("name").map_or(o.span, |n| n.span);
    let provider_node = o.take("provider");
    let provider = o.required_name(ctx, "provider");
    if let (Some(p), Some(n)) = (&provider, provider_node)
        && !PROVIDERS.contains(&p.as_str())
    {
        ctx.push(
            Issue::new(Code::UnknownProvider, format!("duet has no provider `{p}`"))
                .at(ctx.file, "provider", Some(n.span))
                .hint(format!("providers: {}", PROVIDERS.join(", "))),
        );
    }
    let model = o.required_name(ctx, "model");
    let fallbacks = o.strings(ctx, "fallbacks");
    let included_providers = o.strings(ctx, "includedProviders");
    let input_price = o.number(ctx, "inputPrice");
    let output_price = o.number(ctx, "outputPrice");
    let cached_price = o.number(ctx, "cachedPrice");
    let capabilities = match o.take("capabilities") {
        None => Capabilities::default(),
        Some(n) => match ctx.object(n, "capabilities") {
            None => Capabilities::default(),
            Some(mut c) => {
                let caps = Capabilities {
                    reasoning_levels: c
                        .take("reasoningLevels")
                        .and_then(|n| ctx.json(n, "capabilities.reasoningLevels")),
                    supports_images: c.boolean(ctx, "supportsImages"),
                    supports_tool_calls: c.boolean(ctx, "supportsToolCalls"),
                    supports_streaming: c.boolean(ctx, "supportsStreaming"),
                    supports_json_mode: c.boolean(ctx, "supportsJsonMode"),
                    max_context_tokens: c.count(ctx, "maxContextTokens"),
                    max_output_tokens: c.count(ctx, "maxOutputTokens"),
                };
                c.finish(ctx, CAPABILITY_FIELDS);
                caps
            }
        },
    };
    let provider_options = o.json_object(ctx, "providerOptions").unwrap_or_default();
    let provider_tools = o.strings(ctx, "providerTools");
    let script_node = o.take("script");
    let script = script_node
        .map(|n| decode_script(ctx, n))
        .unwrap_or_default();
    let root_span = o.span;
    o.finish(ctx, MODEL_FIELDS);
    if let Some(n) = &name {
        crate::agent::check_name(ctx, n, "name", name_span);
    }
    match (provider.as_deref(), script_node) {
        (Some("scripted"), None) => ctx.push(
            Issue::new(
                Code::MissingField,
                "a `scripted` model needs a `script`: one entry per model call",
            )
            .at(ctx.file, "script", Some(root_span))
            .hint("add `script: [{ text: \"...\" }]`"),
        ),
        (Some(p), Some(n)) if p != "scripted" => ctx.push(
            Issue::new(
                Code::ScriptNotScripted,
                format!("`script` is only played by the `scripted` provider, not `{p}`"),
            )
            .at(ctx.file, "script", Some(n.span))
            .hint("remove `script`, or set `provider: scripted`"),
        ),
        _ => {}
    }
    let out = match (name.clone(), provider, model) {
        (Some(name), Some(provider), Some(model)) => Some(ModelDef {
            name,
            provider,
            model,
            fallbacks,
            included_providers,
            input_price,
            output_price,
            cached_price,
            capabilities,
            provider_options,
            provider_tools,
            script,
        }),
        _ => None,
    };
    (name, out)
}

fn decode_script(ctx: &mut Ctx<'_>, node: &Node) -> Vec<ScriptEntry> {
    let mut out = Vec::new();
    for (i, item) in ctx.array(node, "script").iter().enumerate() {
        let path = format!("script[{i}]");
        let Some(mut o) = ctx.object(item, &path) else {
            continue;
        };
        let mut entry = ScriptEntry {
            text: o.string(ctx, "text"),
            thinking: o.string(ctx, "thinking"),
            tool_calls: Vec::new(),
            delay_ms: o.count(ctx, "delayMs"),
        };
        if let Some(calls) = o.take("tool_calls") {
            let calls_path = join(&path, "tool_calls");
            for (j, call) in ctx.array(calls, &calls_path).iter().enumerate() {
                let call_path = format!("{calls_path}[{j}]");
                let Some(mut c) = ctx.object(call, &call_path) else {
                    continue;
                };
                let name = c.required_name(ctx, "name");
                let arguments = match c.take("arguments") {
                    None => Some(serde_json::Value::Object(serde_json::Map::new())),
                    Some(a) => ctx
                        .json_object(a, &join(&call_path, "arguments"))
                        .map(serde_json::Value::Object),
                };
                c.finish(ctx, &["name", "arguments"]);
                if let (Some(name), Some(arguments)) = (name, arguments) {
                    entry.tool_calls.push(ScriptToolCall { name, arguments });
                }
            }
        }
        if !o.has("text") && !o.has("tool_calls") {
            ctx.report(
                Code::MissingField,
                format!("`{path}` needs `text` or `tool_calls`"),
                &path,
                item.span,
            );
        }
        o.finish(ctx, &["text", "thinking", "tool_calls", "delayMs"]);
        out.push(entry);
    }
    out
}
