//! Prompt definitions (`agents/prompts/`): the system prompt, model and tools of a prompt side
//! (digest §8).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::decode::{Ctx, join};
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};
use crate::schema;

/// A prompt: what a prompt-backed side sends its model.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptDef {
    /// `name`: how sides, `tools` entries and includes refer to the prompt; required, unique,
    /// snake_case.
    pub name: String,
    /// `toolDescription`: the description when the prompt is called as a tool (sub-prompt,
    /// handoff, subagent); required.
    pub tool_description: String,
    /// `prompt`: the system prompt, as text or parts; required.
    pub prompt: PromptContent,
    /// `model`: a model name (`agents/models/`); required.
    pub model: String,
    /// `includeChat`: whether the model sees the whole conversation, not only the sibling's
    /// latest messages; default `false`.
    pub include_chat: bool,
    /// `includePastTools`: whether earlier turns' tool calls and results stay in the context;
    /// default `false`.
    pub include_past_tools: bool,
    /// `parallelToolCalls`: whether the model may call several tools at once; unset means the
    /// provider's default.
    pub parallel_tool_calls: Option<bool>,
    /// `toolChoice`: whether the model may, must not or must call a tool; default `auto`.
    pub tool_choice: ToolChoice,
    /// `requiredSchema`: a JSON Schema for an object: the arguments when the prompt is called as
    /// a tool; absent, none.
    pub required_schema: Option<serde_json::Value>,
    /// `tools`: what the model may call: tools, sub-prompts, handoffs; default none.
    pub tools: Vec<PromptTool>,
    /// `variables`: the env values the prompt declares it needs; default none.
    pub variables: Vec<Variable>,
    /// `env`: prompt-level env defaults; default empty.
    pub env: BTreeMap<String, String>,
    /// `reasoning`: the model's reasoning settings; absent, the provider's default.
    pub reasoning: Option<Reasoning>,
    /// `recentImageThreshold`: images older than this many messages reach the model as text
    /// descriptions; absent, 10.
    pub recent_image_threshold: Option<u32>,
    /// `providerOptions`: provider request options, merged over the model's (the prompt's win);
    /// default empty.
    pub provider_options: serde_json::Map<String, serde_json::Value>,
    /// `hooks`: prompt-scoped hook ids; when present they replace the agent's. Default none.
    pub hooks: Vec<String>,
}

/// The system prompt: text, or parts.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PromptContent {
    /// `prompt: TEXT`: the whole system prompt.
    Text(String),
    /// `prompt: [PART, ...]`: parts joined in order.
    Parts(Vec<PromptPart>),
}

/// One part of a composed system prompt.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PromptPart {
    /// `{ type: text, content }`: literal text.
    Text {
        /// `content`: the text, as written; required.
        content: String,
    },
    /// `{ type: include, prompt }`: another prompt's text, by name.
    Include {
        /// `prompt`: the prompt whose text goes here; required.
        prompt: String,
    },
    /// `{ type: env, property }`: an env value, by name.
    Env {
        /// `property`: the env name whose value goes here; required.
        property: String,
    },
}

/// `toolChoice`: whether the model calls tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// `auto`, the default: the model decides.
    #[default]
    Auto,
    /// `none`: the model calls no tool.
    None,
    /// `required`: the model must call a tool.
    Required,
}

/// An entry of a prompt's `tools`: a name, with the options of a sub-prompt or tool entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptTool {
    /// A tool, a prompt (sub-prompt), an exposed agent (handoff) or `provider:NAME`.
    pub name: String,
    /// `includeTextResponse`: whether a sub-prompt's result holds its text answer; default
    /// `true`.
    pub include_text_response: bool,
    /// `includeToolCalls`: whether a sub-prompt's result holds its tool calls; default `true`.
    pub include_tool_calls: bool,
    /// `includeErrors`: whether a sub-prompt's result holds its errors; default `true`.
    pub include_errors: bool,
    /// `initUserMessageProperty`: the call argument that becomes the callee's first user
    /// message (sub-prompt, handoff); optional.
    pub init_user_message_property: Option<String>,
    /// `initAttachmentsProperty`: the call argument holding attachment path(s) for that message;
    /// optional.
    pub init_attachments_property: Option<String>,
    /// `env`: env values for this tool entry (`tenvs`, the deprecated alias, is merged in);
    /// default empty.
    pub env: BTreeMap<String, String>,
    /// `options`: options for this tool entry; default empty.
    pub options: serde_json::Map<String, serde_json::Value>,
}

/// A declared env need.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Variable {
    /// `name`: the env name the value is read under; required.
    pub name: String,
    /// `type`: `text` or `secret`; required.
    #[serde(rename = "type")]
    pub kind: VariableKind,
    /// `required`: whether a thread cannot be created without the value; default `false`.
    pub required: bool,
    /// `scoped`: whether the value resets for the declaring agent's subtree instead of being
    /// inherited from the parent thread; default `false`.
    pub scoped: bool,
    /// `description`: what the value is for; optional.
    pub description: Option<String>,
}

/// A variable's `type`: what its value may be shown to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VariableKind {
    /// `text`: a plain value.
    Text,
    /// `secret`: used only inside tools, never in prompt text or model-visible output.
    Secret,
}

/// A prompt's `reasoning`: how the model reasons before it answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reasoning {
    /// `effort`: `low`, `medium` or `high`; absent, the provider's default.
    pub effort: Option<String>,
    /// `maxTokens`: the cap on reasoning tokens; absent, no cap.
    pub max_tokens: Option<u32>,
    /// `include`: whether the reasoning comes back with the answer; unset, the provider's
    /// default.
    pub include: Option<bool>,
    /// `exclude`: whether the model reasons without returning the reasoning; unset, the
    /// provider's default.
    pub exclude: Option<bool>,
}

const PROMPT_FIELDS: &[&str] = &[
    "name",
    "toolDescription",
    "prompt",
    "model",
    "includeChat",
    "includePastTools",
    "parallelToolCalls",
    "toolChoice",
    "requiredSchema",
    "tools",
    "variables",
    "env",
    "reasoning",
    "recentImageThreshold",
    "providerOptions",
    "hooks",
    "exposeAsTool",
];
const TOOL_ENTRY_FIELDS: &[&str] = &[
    "name",
    "includeTextResponse",
    "includeToolCalls",
    "includeErrors",
    "initUserMessageProperty",
    "initAttachmentsProperty",
    "env",
    "options",
    "tenvs",
];
/// 0.1.0 `SubagentToolConfig` keys: in 0.2.0 their presence in `tools` is a load error.
const LEGACY_SUBAGENT_KEYS: &[&str] = &[
    "resumable",
    "receives_messages",
    "blocking",
    "hidden",
    "immediate",
    "optional",
    "initAgentNameProperty",
];

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node) -> (Option<String>, Option<PromptDef>) {
    let Some(mut o) = ctx.object(root, "") else {
        return (None, None);
    };
    let name = o.required_name(ctx, "name");
    let name_span = o.take("name").map_or(o.span, |n| n.span);
    let tool_description = o.required_name(ctx, "toolDescription");
    let prompt = match o.take("prompt") {
        None => {
            ctx.report(
                Code::MissingField,
                "the definition needs `prompt`",
                "prompt",
                o.span,
            );
            None
        }
        Some(n) => decode_content(ctx, n),
    };
    let model = o.required_name(ctx, "model");
    let include_chat = o.boolean(ctx, "includeChat").unwrap_or(false);
    let include_past_tools = o.boolean(ctx, "includePastTools").unwrap_or(false);
    let parallel_tool_calls = o.boolean(ctx, "parallelToolCalls");
    let tool_choice = match o.take("toolChoice") {
        None => ToolChoice::Auto,
        Some(n) => match ctx.string(n, "toolChoice").as_deref() {
            Some("auto") | None => ToolChoice::Auto,
            Some("none") => ToolChoice::None,
            Some("required") => ToolChoice::Required,
            Some(other) => {
                ctx.report(
                    Code::InvalidValue,
                    format!("`toolChoice` is `auto`, `none` or `required`, not `{other}`"),
                    "toolChoice",
                    n.span,
                );
                ToolChoice::Auto
            }
        },
    };
    let required_schema = o
        .take("requiredSchema")
        .and_then(|n| schema::object_schema(ctx, n, "requiredSchema"));
    let tools = match o.take("tools") {
        Some(n) => ctx
            .array(n, "tools")
            .iter()
            .enumerate()
            .filter_map(|(i, t)| decode_tool_entry(ctx, t, &format!("tools[{i}]")))
            .collect(),
        None => Vec::new(),
    };
    let variables = match o.take("variables") {
        Some(n) => decode_variables(ctx, n, "variables"),
        None => Vec::new(),
    };
    let env = o.string_map(ctx, "env");
    let reasoning = o.take("reasoning").and_then(|n| {
        let mut r = ctx.object(n, "reasoning")?;
        let effort_node = r.take("effort");
        let effort = effort_node.and_then(|e| ctx.string(e, "reasoning.effort"));
        if let (Some(e), Some(n)) = (&effort, effort_node)
            && !["low", "medium", "high"].contains(&e.as_str())
        {
            ctx.report(
                Code::InvalidValue,
                format!("`reasoning.effort` is `low`, `medium` or `high`, not `{e}`"),
                "reasoning.effort",
                n.span,
            );
        }
        let out = Reasoning {
            effort,
            max_tokens: r.count(ctx, "maxTokens"),
            include: r.boolean(ctx, "include"),
            exclude: r.boolean(ctx, "exclude"),
        };
        r.finish(ctx, &["effort", "maxTokens", "include", "exclude"]);
        Some(out)
    });
    let recent_image_threshold = o.count(ctx, "recentImageThreshold");
    let provider_options = o.json_object(ctx, "providerOptions").unwrap_or_default();
    let hooks = o.strings(ctx, "hooks");
    if o.take("exposeAsTool").is_some() {
        ctx.push(
            Issue::new(
                Code::DeprecatedField,
                "a prompt's `exposeAsTool` is deprecated: every prompt can be called as a tool",
            )
            .at(ctx.file, "exposeAsTool", Some(o.key_span("exposeAsTool")))
            .hint("remove it"),
        );
    }
    o.finish(ctx, PROMPT_FIELDS);
    if let Some(n) = &name {
        crate::agent::check_name(ctx, n, "name", name_span);
    }
    let prompt = match (name.clone(), tool_description, prompt, model) {
        (Some(name), Some(tool_description), Some(prompt), Some(model)) => Some(PromptDef {
            name,
            tool_description,
            prompt,
            model,
            include_chat,
            include_past_tools,
            parallel_tool_calls,
            tool_choice,
            required_schema,
            tools,
            variables,
            env,
            reasoning,
            recent_image_threshold,
            provider_options,
            hooks,
        }),
        _ => None,
    };
    (name, prompt)
}

fn decode_content(ctx: &mut Ctx<'_>, node: &Node) -> Option<PromptContent> {
    match &node.value {
        Value::String(s) => Some(PromptContent::Text(s.clone())),
        Value::Array(items) => {
            let mut parts = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let path = format!("prompt[{i}]");
                let Some(mut o) = ctx.object(item, &path) else {
                    continue;
                };
                let kind = o.required_name(ctx, "type");
                let part = match kind.as_deref() {
                    Some("text") => o
                        .required_name(ctx, "content")
                        .map(|content| PromptPart::Text { content }),
                    Some("include") => o
                        .required_name(ctx, "prompt")
                        .map(|prompt| PromptPart::Include { prompt }),
                    Some("env") => o
                        .required_name(ctx, "property")
                        .map(|property| PromptPart::Env { property }),
                    Some(other) => {
                        ctx.report(Code::InvalidValue, format!("a prompt part's `type` is `text`, `include` or `env`, not `{other}`"), &join(&path, "type"), item.span);
                        None
                    }
                    None => None,
                };
                let allowed: &[&str] = match kind.as_deref() {
                    Some("text") => &["type", "content"],
                    Some("include") => &["type", "prompt"],
                    Some("env") => &["type", "property"],
                    _ => &["type", "content", "prompt", "property"],
                };
                o.finish(ctx, allowed);
                parts.extend(part);
            }
            Some(PromptContent::Parts(parts))
        }
        _ => {
            ctx.report(
                Code::WrongType,
                format!(
                    "`prompt` must be a string or an array of parts, not {}",
                    node.kind()
                ),
                "prompt",
                node.span,
            );
            None
        }
    }
}

fn decode_tool_entry(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Option<PromptTool> {
    let mut entry = PromptTool {
        name: String::new(),
        include_text_response: true,
        include_tool_calls: true,
        include_errors: true,
        init_user_message_property: None,
        init_attachments_property: None,
        env: BTreeMap::new(),
        options: serde_json::Map::new(),
    };
    if let Value::String(_) = node.value {
        entry.name = ctx.name(node, path)?;
        return Some(entry);
    }
    let mut o = ctx.object(node, path)?;
    let legacy: Vec<&str> = LEGACY_SUBAGENT_KEYS
        .iter()
        .copied()
        .filter(|k| o.has(k))
        .collect();
    if !legacy.is_empty() {
        for k in &legacy {
            o.take(k);
        }
        let name = node.get("name").and_then(Node::as_str).unwrap_or("AGENT");
        ctx.push(
            Issue::new(
                Code::LegacySubagentTool,
                format!("this `tools` entry is a 0.1.0 subagent config ({}); 0.2.0 declares subagents on the owning side", legacy.join(", ")),
            )
            .at(ctx.file, path, Some(node.span))
            .hint(format!(
                "move it to the agent side's `subagents: [{{ agent: {name} }}]` (the tool `name` becomes `as`, unwrap `resumable`, drop `receives_messages`) and remove it from `tools`"
            )),
        );
    }
    entry.name = o.required_name(ctx, "name")?;
    entry.include_text_response = o.boolean(ctx, "includeTextResponse").unwrap_or(true);
    entry.include_tool_calls = o.boolean(ctx, "includeToolCalls").unwrap_or(true);
    entry.include_errors = o.boolean(ctx, "includeErrors").unwrap_or(true);
    entry.init_user_message_property = o.name(ctx, "initUserMessageProperty");
    entry.init_attachments_property = o.name(ctx, "initAttachmentsProperty");
    entry.env = o.string_map(ctx, "env");
    if o.has("tenvs") {
        ctx.push(
            Issue::new(
                Code::DeprecatedField,
                "`tenvs` is the deprecated alias of `env`",
            )
            .at(ctx.file, &o.path("tenvs"), Some(o.key_span("tenvs")))
            .hint("rename `tenvs` to `env`"),
        );
        for (k, v) in o.string_map(ctx, "tenvs") {
            entry.env.entry(k).or_insert(v);
        }
    }
    entry.options = o.json_object(ctx, "options").unwrap_or_default();
    o.finish(ctx, TOOL_ENTRY_FIELDS);
    Some(entry)
}

pub(crate) fn decode_variables(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Vec<Variable> {
    let mut out = Vec::new();
    for (i, item) in ctx.array(node, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(mut o) = ctx.object(item, &p) else {
            continue;
        };
        let name = o.required_name(ctx, "name");
        let kind_span = o.take("type").map_or(item.span, |n| n.span);
        let kind = match o.required_name(ctx, "type").as_deref() {
            Some("text") => Some(VariableKind::Text),
            Some("secret") => Some(VariableKind::Secret),
            Some(other) => {
                ctx.report(
                    Code::InvalidValue,
                    format!("a variable's `type` is `text` or `secret`, not `{other}`"),
                    &join(&p, "type"),
                    kind_span,
                );
                None
            }
            None => None,
        };
        let required = o.boolean(ctx, "required").unwrap_or(false);
        let scoped = o.boolean(ctx, "scoped").unwrap_or(false);
        let description = o.string(ctx, "description");
        o.finish(ctx, &["name", "type", "required", "scoped", "description"]);
        if let (Some(name), Some(kind)) = (name, kind) {
            out.push(Variable {
                name,
                kind,
                required,
                scoped,
                description,
            });
        }
    }
    out
}
