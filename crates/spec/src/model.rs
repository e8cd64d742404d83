//! Model definitions (`agents/models/`): a provider and model id, fallbacks, capabilities, and for
//! the `scripted` provider the script it plays.

use serde::Serialize;

use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};
use crate::script::ScriptEntry;

/// The providers built into duet. `scripted` plays a fixed script, for tests, demos and
/// benchmarks; `openai` and `anthropic` call those APIs. A project may define more
/// (`agents/providers/`).
pub const PROVIDERS: &[&str] = &["scripted", "openai", "anthropic"];

/// A model: the provider and model id a prompt's requests go to.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelDef {
    /// `name`: how prompts and `fallbacks` refer to the model; required, unique, snake_case.
    pub name: String,
    /// `provider`: the provider that serves it, one of [`PROVIDERS`] or a provider the project
    /// defines; required.
    pub provider: String,
    /// The provider written in the model itself (`provider: openai({ baseUrl })` in TS, an
    /// object in YAML), named `model:NAME`; `provider` is then that name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_provider: Option<crate::provider::ProviderDef>,
    /// `model`: the provider's model id; required.
    pub model: String,
    /// `fallbacks`: model names tried in order once this one's retries are exhausted; default
    /// none.
    pub fallbacks: Vec<String>,
    /// `includedProviders`: the upstream providers a routing provider may use; default empty,
    /// no restriction.
    pub included_providers: Vec<String>,
    /// `inputPrice`: USD per million input tokens; optional.
    pub input_price: Option<f64>,
    /// `outputPrice`: USD per million output tokens; optional.
    pub output_price: Option<f64>,
    /// `cachedPrice`: USD per million cached input tokens; optional.
    pub cached_price: Option<f64>,
    /// `capabilities`: what the model supports; default all unset.
    pub capabilities: Capabilities,
    /// `providerOptions`: provider request options, under a prompt's own; default empty.
    pub provider_options: serde_json::Map<String, serde_json::Value>,
    /// `providerTools`: tools the provider runs itself; default none.
    pub provider_tools: Vec<String>,
    /// `script`: for `scripted`, one entry per model call (or `repeat` calls), per thread, in
    /// call order (an entry may branch on what the model was answered); required there and an
    /// error on any other provider.
    pub script: Vec<ScriptEntry>,
}

/// A model's `capabilities`, as declared.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// `reasoningLevels`: the provider's name (or `null`) for each reasoning level 0–100, as
    /// written; optional.
    pub reasoning_levels: Option<serde_json::Value>,
    /// `supportsImages`: whether the model takes images; optional.
    pub supports_images: Option<bool>,
    /// `supportsDocuments` (a duet extension): whether the model takes documents (PDFs sent as
    /// an Anthropic `document` block or an OpenAI `file` part); optional, taken when unset.
    pub supports_documents: Option<bool>,
    /// `supportsToolCalls`: whether the model calls tools; optional.
    pub supports_tool_calls: Option<bool>,
    /// `supportsStreaming`: whether the model streams its answers; optional.
    pub supports_streaming: Option<bool>,
    /// `supportsJsonMode`: whether the model has a JSON output mode; optional.
    pub supports_json_mode: Option<bool>,
    /// `maxContextTokens`: the context window, in tokens; optional.
    pub max_context_tokens: Option<u32>,
    /// `maxOutputTokens`: the most tokens one answer may have; optional.
    pub max_output_tokens: Option<u32>,
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
    "supportsDocuments",
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
    let (provider, inline_provider) = match (o.has("provider"), o.take("provider")) {
        // `provider: openai({ baseUrl })` in TS (a provider package's factory, called), or an
        // object in YAML: a provider of the model's own, named after it.
        (true, Some(n)) if matches!(n.value, Value::Object(_)) => {
            let own = name.as_deref().map(|m| format!("model:{m}"));
            let def = own
                .as_deref()
                .and_then(|own| crate::provider::decode_inline(ctx, n, own));
            (def.as_ref().map(|d| d.name.clone()), def)
        }
        (true, Some(n)) => (ctx.name(n, "provider"), None),
        _ => (o.required_name(ctx, "provider"), None),
    };
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
                    supports_documents: c.boolean(ctx, "supportsDocuments"),
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
        .map(|n| crate::script::decode(ctx, n))
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
            inline_provider,
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
