//! Agent definitions (`agents/agents/`): two sides, each backed by a human, a prompt or a
//! handler (seed `001`, digest §2).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::decode::{Ctx, Obj, is_snake_case};
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};

/// The lifecycle tools the runtime injects into prompt sides; no definition may take their names.
/// `send_to_agent` is the legacy alias of `subagent_message`.
pub const RESERVED_TOOL_NAMES: &[&str] = &[
    "subagent_create",
    "subagent_message",
    "subagents",
    "send_to_agent",
];

/// An agent: the top-level conversation orchestrator.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDef {
    pub name: String,
    /// Side A and side B.
    pub sides: PerSide<Side>,
    /// Exchange cap: the session ends when both sides completed this many turns.
    pub max_session_turns: Option<u32>,
    pub expose_as_tool: bool,
    pub tool_description: Option<String>,
    pub parent_hooks: Vec<ParentHookRequirement>,
    pub description: Option<String>,
    pub icon: Option<String>,
    /// Deprecated by the spec; kept for display.
    pub title: Option<String>,
    /// Agent-level env defaults (`tenvs`, the deprecated alias, is merged in).
    pub env: BTreeMap<String, String>,
    /// Fallback hook ids, used when the active prompt declares none.
    pub hooks: Vec<String>,
    /// Builder-only UI listing hint.
    pub primary: Option<bool>,
    pub package: Packaging,
}

impl AgentDef {
    /// The names of the subagent relationships on both sides, side A's first.
    pub fn relationship_names(&self) -> Vec<&str> {
        self.sides
            .a
            .subagents()
            .iter()
            .chain(self.sides.b.subagents())
            .map(SubagentRelationship::name)
            .collect()
    }

    /// The configuration of side `id`.
    pub fn side(&self, id: SideId) -> &Side {
        &self.sides[id]
    }
}

/// One value per side of an agent: `a` and `b`, also indexed by [`SideId`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct PerSide<T> {
    pub a: T,
    pub b: T,
}

impl<T> PerSide<T> {
    /// A pair from its two values.
    pub fn new(a: T, b: T) -> Self {
        PerSide { a, b }
    }

    /// Both values with their side, side A first.
    pub fn iter(&self) -> impl Iterator<Item = (SideId, &T)> {
        [(SideId::A, &self.a), (SideId::B, &self.b)].into_iter()
    }
}

impl<T> std::ops::Index<SideId> for PerSide<T> {
    type Output = T;
    fn index(&self, id: SideId) -> &T {
        match id {
            SideId::A => &self.a,
            SideId::B => &self.b,
        }
    }
}

impl<T> std::ops::IndexMut<SideId> for PerSide<T> {
    fn index_mut(&mut self, id: SideId) -> &mut T {
        match id {
            SideId::A => &mut self.a,
            SideId::B => &mut self.b,
        }
    }
}

/// Packaging metadata, only consumed when an agent is packed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Packaging {
    pub package_name: Option<String>,
    pub version: Option<String>,
    pub author: Option<String>,
    pub license: Option<String>,
}

/// Which side of an agent.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SideId {
    A,
    B,
}

impl SideId {
    /// The field name in definition files.
    pub fn field(self) -> &'static str {
        match self {
            SideId::A => "sideA",
            SideId::B => "sideB",
        }
    }

    /// The other side.
    pub fn sibling(self) -> SideId {
        match self {
            SideId::A => SideId::B,
            SideId::B => SideId::A,
        }
    }
}

/// A side's configuration: exactly one backing.
#[expect(
    clippy::large_enum_variant,
    reason = "two per agent, built once at load: boxing buys nothing"
)]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "backing")]
pub enum Side {
    Human(HumanSide),
    Prompt(PromptSide),
    Handler(HandlerSide),
}

impl Side {
    pub fn is_human(&self) -> bool {
        matches!(self, Side::Human(_))
    }

    pub fn label(&self) -> Option<&str> {
        match self {
            Side::Human(s) => s.label.as_deref(),
            Side::Prompt(s) => s.label.as_deref(),
            Side::Handler(s) => s.label.as_deref(),
        }
    }

    /// The relationships this side owns (none for a human side).
    pub fn subagents(&self) -> &[SubagentRelationship] {
        match self {
            Side::Human(_) => &[],
            Side::Prompt(s) => &s.subagents,
            Side::Handler(s) => &s.subagents,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HumanSide {
    pub label: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSide {
    pub prompt: String,
    pub label: Option<String>,
    pub subagents: Vec<SubagentRelationship>,
    /// Default `true`: a text answer without tool calls ends the turn.
    pub stop_on_response: bool,
    pub stop_tool: Option<String>,
    pub stop_tool_response_property: Option<String>,
    pub max_steps: Option<u32>,
    pub session_stop: Option<SessionToolBinding>,
    pub session_fail: Option<SessionToolBinding>,
    pub session_status: Option<SessionToolBinding>,
    /// Builder-only extension.
    pub manual_stop_condition: bool,
}

impl PromptSide {
    /// The bindings and stop tool of this side with their field names, in evaluation order.
    pub fn bound_tools(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        for (field, binding) in [
            ("sessionStop", &self.session_stop),
            ("sessionFail", &self.session_fail),
            ("sessionStatus", &self.session_status),
        ] {
            if let Some(b) = binding {
                out.push((field, b.name.as_str()));
            }
        }
        if let Some(t) = &self.stop_tool {
            out.push(("stopTool", t.as_str()));
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandlerSide {
    pub handler: String,
    pub label: Option<String>,
    pub subagents: Vec<SubagentRelationship>,
}

/// A session lifecycle binding (object form only in 0.2.0).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionToolBinding {
    pub name: String,
    pub message_property: Option<String>,
    pub attachments_property: Option<String>,
}

/// How a child reports to its parent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParentCommunication {
    #[default]
    Implicit,
    Explicit,
}

/// `immediate: true`, or its object form.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Immediate {
    pub name_env: Option<String>,
    pub description_env: Option<String>,
    pub scoped_env: Vec<String>,
}

/// A composition: this side may spawn children of `agent`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentRelationship {
    pub agent: String,
    /// The relationship name; [`SubagentRelationship::name`] falls back to `agent`.
    #[serde(rename = "as")]
    pub alias: Option<String>,
    pub description: Option<String>,
    /// Default `false` in 0.2.0.
    pub blocking: bool,
    pub max_instances: Option<u32>,
    pub parent_communication: ParentCommunication,
    pub immediate: Option<Immediate>,
    pub scoped_env: Vec<String>,
    /// An env flag name: the relationship is enabled only when it resolves to true, 1 or yes.
    pub optional: Option<String>,
    pub hidden: bool,
    pub init_user_message_property: Option<String>,
    pub init_attachments_property: Option<String>,
    pub init_agent_name_property: Option<String>,
}

impl SubagentRelationship {
    /// The relationship name: `as`, or the agent name.
    pub fn name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.agent)
    }
}

/// When a required parent hook runs relative to the parent's own hooks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookStage {
    BeforeParent,
    #[default]
    AfterParent,
}

/// A thread hook an exposed agent requires on every direct parent that composes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParentHookRequirement {
    pub hook: String,
    pub reason: String,
    pub stage: HookStage,
}

const AGENT_FIELDS: &[&str] = &[
    "name",
    "sideA",
    "sideB",
    "maxSessionTurns",
    "exposeAsTool",
    "toolDescription",
    "parentHooks",
    "description",
    "icon",
    "title",
    "env",
    "tenvs",
    "hooks",
    "primary",
    "packageName",
    "version",
    "author",
    "license",
];
const PROMPT_ONLY: &[&str] = &[
    "stopOnResponse",
    "stopTool",
    "stopToolResponseProperty",
    "maxSteps",
    "sessionStop",
    "sessionFail",
    "sessionStatus",
    "manualStopCondition",
];
const LEGACY_ALIASES: &[(&str, &str)] = &[
    ("endSessionTool", "sessionStop"),
    ("failSessionTool", "sessionFail"),
    ("statusTool", "sessionStatus"),
];
const RELATIONSHIP_FIELDS: &[&str] = &[
    "agent",
    "as",
    "description",
    "blocking",
    "maxInstances",
    "parentCommunication",
    "immediate",
    "scopedEnv",
    "optional",
    "hidden",
    "initUserMessageProperty",
    "initAttachmentsProperty",
    "initAgentNameProperty",
];

/// What decoding an agent file gives: the agent when both sides are well-formed, and the sides
/// that are, so their references can be checked even while the other side is broken.
pub(crate) struct DecodedAgent {
    pub(crate) name: Option<String>,
    pub(crate) agent: Option<AgentDef>,
    pub(crate) sides: Vec<(SideId, Side)>,
}

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node) -> DecodedAgent {
    let mut out = DecodedAgent {
        name: None,
        agent: None,
        sides: Vec::new(),
    };
    let Some(mut o) = ctx.object(root, "") else {
        return out;
    };
    let name = o.required_name(ctx, "name");
    out.name.clone_from(&name);

    if let Some(t) = o.take("type") {
        let hint = match t.as_str() {
            Some("ai_human") => "replace `type: ai_human` with `sideB: { human: true }`",
            Some("dual_ai") => {
                "replace `type: dual_ai` with a prompt on each side: `sideB: { prompt: ... }`"
            }
            _ => "remove `type`; give each side a backing: `human: true`, `prompt` or `handler`",
        };
        ctx.push(
            Issue::new(Code::LegacyAgentType, "`type` was removed in Standard Agents 0.2.0; behaviour follows from the sides' backings")
                .at(ctx.file, "type", Some(o.key_span("type")))
                .hint(hint),
        );
    }
    if o.take("resumable").is_some() {
        ctx.push(
            Issue::new(Code::LegacyResumable, "`resumable` was removed in 0.2.0: every child thread is persistent")
                .at(ctx.file, "resumable", Some(o.key_span("resumable")))
                .hint("remove `resumable`; put `maxInstances` and `parentCommunication` on the parent's subagent relationship"),
        );
    }

    let side_a = match o.take("sideA") {
        Some(n) => decode_side(ctx, n, SideId::A),
        None => {
            ctx.report(
                Code::MissingField,
                "an agent needs `sideA`",
                "sideA",
                o.span,
            );
            None
        }
    };
    let side_b = match o.take("sideB") {
        Some(n) => decode_side(ctx, n, SideId::B),
        None => {
            ctx.push(
                Issue::new(
                    Code::LegacyMissingSideB,
                    "`sideB` is missing; 0.2.0 has no implicit human side B",
                )
                .at(ctx.file, "sideB", Some(o.span))
                .hint("if a person takes side B's turns, write `sideB: { human: true }`"),
            );
            None
        }
    };

    let max_session_turns = o.count(ctx, "maxSessionTurns");
    let expose_as_tool = o.boolean(ctx, "exposeAsTool").unwrap_or(false);
    let tool_description = o.string(ctx, "toolDescription");
    let parent_hooks = match o.take("parentHooks") {
        Some(n) => decode_parent_hooks(ctx, n, expose_as_tool, o.key_span("parentHooks")),
        None => Vec::new(),
    };
    let description = o.string(ctx, "description");
    let icon = o.string(ctx, "icon");
    let title = o.string(ctx, "title");
    if title.is_some() {
        ctx.report(
            Code::DeprecatedField,
            "`title` is deprecated",
            "title",
            o.key_span("title"),
        );
    }
    let mut env = o.string_map(ctx, "env");
    if o.has("tenvs") {
        ctx.push(
            Issue::new(
                Code::DeprecatedField,
                "`tenvs` is the deprecated alias of `env`",
            )
            .at(ctx.file, "tenvs", Some(o.key_span("tenvs")))
            .hint("rename `tenvs` to `env`"),
        );
        for (k, v) in o.string_map(ctx, "tenvs") {
            env.entry(k).or_insert(v);
        }
    }
    let hooks = o.strings(ctx, "hooks");
    let primary = o.boolean(ctx, "primary");
    let package = Packaging {
        package_name: o.string(ctx, "packageName"),
        version: o.string(ctx, "version"),
        author: o.string(ctx, "author"),
        license: o.string(ctx, "license"),
    };
    let root_span = o.span;
    let name_span = o.take("name").map_or(root_span, |n| n.span);
    let expose_span = o.key_span("exposeAsTool");
    let side_b_span = o.key_span("sideB");
    o.finish(ctx, AGENT_FIELDS);

    if let Some(n) = &name {
        check_name(ctx, n, "name", name_span);
    }
    if expose_as_tool && tool_description.is_none() {
        ctx.push(
            Issue::new(
                Code::ExposedWithoutDescription,
                "an exposed agent without `toolDescription` gives the model nothing to go on",
            )
            .at(ctx.file, "exposeAsTool", Some(expose_span))
            .hint("add `toolDescription`: what the agent does and what it returns"),
        );
    }
    if let (Some(a), Some(b)) = (&side_a, &side_b) {
        if a.is_human() && b.is_human() {
            ctx.push(
                Issue::new(
                    Code::BothSidesHuman,
                    "both sides are human; Standard Agents 0.2.0 reserves human × human",
                )
                .at(ctx.file, "sideB", Some(side_b_span))
                .hint("back one side with a `prompt` or a `handler`"),
            );
        }
        if matches!((a, b), (Side::Prompt(_), Side::Prompt(_))) && max_session_turns.is_none() {
            ctx.push(
                Issue::new(
                    Code::UnboundedPromptPair,
                    "two prompt sides and no `maxSessionTurns`: nothing external stops two models",
                )
                .at(ctx.file, "", Some(name_span))
                .hint(
                    "set `maxSessionTurns`, or make sure a session binding always ends the session",
                ),
            );
        }
        check_relationship_names(ctx, a, b, side_b_span);
    }

    for (id, side) in [(SideId::A, &side_a), (SideId::B, &side_b)] {
        if let Some(s) = side {
            out.sides.push((id, s.clone()));
        }
    }
    if let (Some(name), Some(side_a), Some(side_b)) = (name, side_a, side_b) {
        out.agent = Some(AgentDef {
            name,
            sides: PerSide::new(side_a, side_b),
            max_session_turns,
            expose_as_tool,
            tool_description,
            parent_hooks,
            description,
            icon,
            title,
            env,
            hooks,
            primary,
            package,
        });
    }
    out
}

pub(crate) fn check_name(ctx: &mut Ctx<'_>, name: &str, path: &str, span: crate::node::Span) {
    if !is_snake_case(name) {
        ctx.push(
            Issue::new(
                Code::NameNotSnakeCase,
                format!("`{name}` is not snake_case"),
            )
            .at(ctx.file, path, Some(span))
            .hint(format!("use `{}`", to_snake_case(name))),
        );
    }
    if RESERVED_TOOL_NAMES.contains(&name) {
        ctx.push(
            Issue::new(Code::ReservedName, format!("`{name}` is a lifecycle tool the runtime injects; no definition may take its name"))
                .at(ctx.file, path, Some(span))
                .hint("choose another name"),
        );
    }
}

fn to_snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    match trimmed.chars().next() {
        Some(c) if c.is_ascii_lowercase() => trimmed.to_owned(),
        _ => format!("x_{trimmed}"),
    }
}

fn decode_side(ctx: &mut Ctx<'_>, node: &Node, id: SideId) -> Option<Side> {
    let path = id.field();
    if let Value::String(s) = &node.value {
        ctx.push(
            Issue::new(
                Code::SideBacking,
                format!("`{path}` must be an object naming exactly one backing, not a string"),
            )
            .at(ctx.file, path, Some(node.span))
            .hint(format!(
                "write `{path}: {{ prompt: {s} }}` (or `human: true`, or `handler: ...`)"
            )),
        );
        return None;
    }
    let mut o = ctx.object(node, path)?;
    let backings: Vec<&str> = ["human", "prompt", "handler"]
        .into_iter()
        .filter(|k| o.has(k))
        .collect();
    if backings.len() != 1 {
        let message = if backings.is_empty() {
            format!(
                "`{path}` has no backing: exactly one of `human`, `prompt` or `handler` must be present"
            )
        } else {
            format!(
                "`{path}` has {} backings ({}); exactly one of `human`, `prompt` or `handler` must be present",
                backings.len(),
                backings.join(", ")
            )
        };
        ctx.push(
            Issue::new(Code::SideBacking, message)
                .at(ctx.file, path, Some(node.span))
                .hint("a person: `human: true`; a model: `prompt: NAME`; code: `handler: NAME`"),
        );
        // Still report misspelt fields (`humn`) against everything a side may hold.
        for key in ["human", "prompt", "handler", "label", "subagents"]
            .iter()
            .chain(PROMPT_ONLY)
        {
            o.take(key);
        }
        let all: Vec<&str> = ["human", "prompt", "handler", "label", "subagents"]
            .iter()
            .chain(PROMPT_ONLY)
            .copied()
            .collect();
        o.finish(ctx, &all);
        return None;
    }
    let label = o.string(ctx, "label");
    let side = match backings[0] {
        "human" => {
            let human_span = o.key_span("human");
            if let Some(false) = o.boolean(ctx, "human") {
                ctx.push(
                    Issue::new(Code::InvalidValue, "`human` can only be `true`")
                        .at(ctx.file, &o.path("human"), Some(human_span))
                        .hint("a side that is not human names a `prompt` or a `handler`"),
                );
            }
            if o.take("subagents").is_some() {
                ctx.push(
                    Issue::new(
                        Code::SubagentsOnHumanSide,
                        "a human side cannot own subagents: nothing on it can invoke them",
                    )
                    .at(
                        ctx.file,
                        &o.path("subagents"),
                        Some(o.key_span("subagents")),
                    )
                    .hint("declare the relationship on the prompt or handler side"),
                );
            }
            reject_prompt_only(ctx, &mut o, "human");
            o.finish(ctx, &["human", "label"]);
            Side::Human(HumanSide { label })
        }
        "handler" => {
            let handler = o.name(ctx, "handler");
            let subagents = decode_relationships(ctx, &mut o);
            reject_prompt_only(ctx, &mut o, "handler");
            o.finish(ctx, &["handler", "label", "subagents"]);
            Side::Handler(HandlerSide {
                handler: handler?,
                label,
                subagents,
            })
        }
        _ => {
            let prompt = o.name(ctx, "prompt");
            let subagents = decode_relationships(ctx, &mut o);
            for (alias, new) in LEGACY_ALIASES {
                if o.take(alias).is_some() {
                    ctx.push(
                        Issue::new(
                            Code::LegacyBindingAlias,
                            format!("`{alias}` is the 0.1.0 name of `{new}`"),
                        )
                        .at(ctx.file, &o.path(alias), Some(o.key_span(alias)))
                        .hint(format!("write `{new}: {{ name: TOOL }}`")),
                    );
                }
            }
            let side = PromptSide {
                prompt: prompt.unwrap_or_default(),
                label,
                subagents,
                stop_on_response: o.boolean(ctx, "stopOnResponse").unwrap_or(true),
                stop_tool: o.name(ctx, "stopTool"),
                stop_tool_response_property: o.string(ctx, "stopToolResponseProperty"),
                max_steps: o.count(ctx, "maxSteps"),
                session_stop: binding(ctx, &mut o, "sessionStop"),
                session_fail: binding(ctx, &mut o, "sessionFail"),
                session_status: binding(ctx, &mut o, "sessionStatus"),
                manual_stop_condition: o.boolean(ctx, "manualStopCondition").unwrap_or(false),
            };
            let mut allowed = vec!["prompt", "label", "subagents"];
            allowed.extend(PROMPT_ONLY);
            o.finish(ctx, &allowed);
            if side.prompt.is_empty() {
                return None;
            }
            Side::Prompt(side)
        }
    };
    Some(side)
}

fn reject_prompt_only(ctx: &mut Ctx<'_>, o: &mut Obj<'_>, backing: &str) {
    for key in PROMPT_ONLY
        .iter()
        .chain(LEGACY_ALIASES.iter().map(|(k, _)| k))
    {
        if o.take(key).is_some() {
            ctx.push(
                Issue::new(
                    Code::PromptOnlyField,
                    format!("`{key}` belongs on a prompt side; this side is {backing}-backed"),
                )
                .at(ctx.file, &o.path(key), Some(o.key_span(key)))
                .hint(if backing == "handler" {
                    "handlers end sessions with `state.stopSession()`; remove the field"
                } else {
                    "remove the field; a human side takes no stop or session bindings"
                }),
            );
        }
    }
}

fn binding(ctx: &mut Ctx<'_>, o: &mut Obj<'_>, key: &str) -> Option<SessionToolBinding> {
    let node = o.take(key)?;
    let path = o.path(key);
    if let Value::String(s) = &node.value {
        ctx.push(
            Issue::new(
                Code::SessionBindingNotObject,
                format!("`{key}` must be in object form; the bare string was removed in 0.2.0"),
            )
            .at(ctx.file, &path, Some(node.span))
            .hint(format!("write `{key}: {{ name: {s} }}`")),
        );
        return None;
    }
    let mut b = match &node.value {
        Value::Object(_) => ctx.object(node, &path)?,
        _ => {
            ctx.push(
                Issue::new(Code::SessionBindingNotObject, format!("`{key}` must be an object `{{ name, messageProperty?, attachmentsProperty? }}`, not {}", node.kind()))
                    .at(ctx.file, &path, Some(node.span)),
            );
            return None;
        }
    };
    let name = b.required_name(ctx, "name");
    let message_property = b.name(ctx, "messageProperty");
    let attachments_property = b.name(ctx, "attachmentsProperty");
    b.finish(ctx, &["name", "messageProperty", "attachmentsProperty"]);
    Some(SessionToolBinding {
        name: name?,
        message_property,
        attachments_property,
    })
}

fn decode_relationships(ctx: &mut Ctx<'_>, o: &mut Obj<'_>) -> Vec<SubagentRelationship> {
    let path = o.path("subagents");
    let Some(node) = o.take("subagents") else {
        return Vec::new();
    };
    let items = ctx.array(node, &path);
    let mut out: Vec<SubagentRelationship> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(r) = decode_relationship(ctx, item, &p) else {
            continue;
        };
        if out.iter().any(|x| x.name() == r.name()) {
            ctx.push(
                Issue::new(
                    Code::RelationshipNameConflict,
                    format!("relationship `{}` is declared twice on this side", r.name()),
                )
                .at(ctx.file, &p, Some(item.span))
                .hint("give one of them a distinct `as`"),
            );
            continue;
        }
        out.push(r);
    }
    out
}

fn decode_relationship(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Option<SubagentRelationship> {
    let mut o = ctx.object(node, path)?;
    for legacy in ["resumable", "receives_messages", "receivesMessages"] {
        if o.take(legacy).is_some() {
            ctx.push(
                Issue::new(Code::LegacyResumable, format!("`{legacy}` was removed in 0.2.0: children are persistent and parent messages always enter side A"))
                    .at(ctx.file, &o.path(legacy), Some(o.key_span(legacy)))
                    .hint("remove it; `maxInstances` and `parentCommunication` sit directly on the relationship"),
            );
        }
    }
    let agent = o.required_name(ctx, "agent");
    let alias_span = o.take("as").map(|n| n.span);
    let alias = o.name(ctx, "as");
    if let (Some(a), Some(span)) = (&alias, alias_span)
        && !is_snake_case(a)
    {
        ctx.push(
            Issue::new(
                Code::NameNotSnakeCase,
                format!("relationship name `{a}` is not snake_case"),
            )
            .at(ctx.file, &o.path("as"), Some(span)),
        );
    }
    let pc_path = o.path("parentCommunication");
    let pc_node = o.take("parentCommunication");
    let parent_communication = match pc_node.map(|n| (n, ctx.string(n, &pc_path))) {
        None | Some((_, None)) => ParentCommunication::Implicit,
        Some((_, Some(s))) if s == "implicit" => ParentCommunication::Implicit,
        Some((_, Some(s))) if s == "explicit" => ParentCommunication::Explicit,
        Some((n, Some(s))) => {
            ctx.report(
                Code::InvalidValue,
                format!("`parentCommunication` is `implicit` or `explicit`, not `{s}`"),
                &pc_path,
                n.span,
            );
            ParentCommunication::Implicit
        }
    };
    let imm_path = o.path("immediate");
    let immediate = match o.take("immediate") {
        None => None,
        Some(n) => match &n.value {
            Value::Bool(true) => Some(Immediate {
                name_env: None,
                description_env: None,
                scoped_env: Vec::new(),
            }),
            Value::Bool(false) => None,
            Value::Object(_) => {
                let mut io = ctx.object(n, &imm_path)?;
                let imm = Immediate {
                    name_env: io.name(ctx, "nameEnv"),
                    description_env: io.name(ctx, "descriptionEnv"),
                    scoped_env: io.strings(ctx, "scopedEnv"),
                };
                io.finish(ctx, &["nameEnv", "descriptionEnv", "scopedEnv"]);
                Some(imm)
            }
            _ => {
                ctx.report(Code::WrongType, format!("`{imm_path}` must be a boolean or `{{ nameEnv?, descriptionEnv?, scopedEnv? }}`, not {}", n.kind()), &imm_path, n.span);
                None
            }
        },
    };
    let r = SubagentRelationship {
        agent: agent.unwrap_or_default(),
        alias,
        description: o.string(ctx, "description"),
        blocking: o.boolean(ctx, "blocking").unwrap_or(false),
        max_instances: o.count(ctx, "maxInstances"),
        parent_communication,
        immediate,
        scoped_env: o.strings(ctx, "scopedEnv"),
        optional: o.name(ctx, "optional"),
        hidden: o.boolean(ctx, "hidden").unwrap_or(false),
        init_user_message_property: o.name(ctx, "initUserMessageProperty"),
        init_attachments_property: o.name(ctx, "initAttachmentsProperty"),
        init_agent_name_property: o.name(ctx, "initAgentNameProperty"),
    };
    o.finish(ctx, RELATIONSHIP_FIELDS);
    if r.agent.is_empty() {
        return None;
    }
    if RESERVED_TOOL_NAMES.contains(&r.name()) {
        ctx.push(
            Issue::new(
                Code::RelationshipNameConflict,
                format!(
                    "relationship name `{}` collides with a reserved lifecycle tool",
                    r.name()
                ),
            )
            .at(ctx.file, path, Some(node.span))
            .hint("set `as` to another name"),
        );
    }
    Some(r)
}

fn check_relationship_names(ctx: &mut Ctx<'_>, a: &Side, b: &Side, side_b: crate::node::Span) {
    for r in b.subagents() {
        if a.subagents().iter().any(|x| x.name() == r.name()) {
            ctx.push(
                Issue::new(Code::RelationshipNameConflict, format!("relationship name `{}` appears on both sides", r.name()))
                    .at(ctx.file, "sideB.subagents", Some(side_b))
                    .hint("a relationship name is the registry identity: give one of them a distinct `as`"),
            );
        }
    }
}

fn decode_parent_hooks(
    ctx: &mut Ctx<'_>,
    node: &Node,
    exposed: bool,
    key_span: crate::node::Span,
) -> Vec<ParentHookRequirement> {
    if !exposed {
        ctx.push(
            Issue::new(
                Code::ParentHooksNotExposed,
                "`parentHooks` is only legal on an agent with `exposeAsTool: true`",
            )
            .at(ctx.file, "parentHooks", Some(key_span))
            .hint("set `exposeAsTool: true`, or remove `parentHooks`"),
        );
    }
    let items = ctx.array(node, "parentHooks");
    let mut out: Vec<ParentHookRequirement> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("parentHooks[{i}]");
        let Some(mut o) = ctx.object(item, &path) else {
            continue;
        };
        let hook = o.required_name(ctx, "hook");
        let reason_span = o.take("reason").map(|n| n.span);
        let reason = o.string(ctx, "reason").filter(|r| !r.trim().is_empty());
        if reason.is_none() {
            ctx.push(
                Issue::new(Code::ParentHookMissingReason, "a parent hook requirement needs a non-empty `reason`; composition UIs must disclose it")
                    .at(ctx.file, &format!("{path}.reason"), Some(reason_span.unwrap_or(item.span)))
                    .hint("say why the parent needs this hook"),
            );
        }
        let stage_path = format!("{path}.stage");
        let stage = match o.take("stage") {
            None => Some(HookStage::AfterParent),
            Some(n) => match n.as_str() {
                Some("before_parent") => Some(HookStage::BeforeParent),
                Some("after_parent") => Some(HookStage::AfterParent),
                _ => {
                    let shown = n
                        .as_str()
                        .map_or_else(|| n.kind().to_owned(), |s| format!("`{s}`"));
                    ctx.push(
                        Issue::new(
                            Code::ParentHookBadStage,
                            format!("`stage` is `before_parent` or `after_parent`, not {shown}"),
                        )
                        .at(ctx.file, &stage_path, Some(n.span)),
                    );
                    None
                }
            },
        };
        o.finish(ctx, &["hook", "reason", "stage"]);
        let Some(hook) = hook else { continue };
        if out.iter().any(|h| h.hook == hook) {
            ctx.push(
                Issue::new(
                    Code::ParentHookDuplicate,
                    format!("hook `{hook}` is required twice"),
                )
                .at(ctx.file, &format!("{path}.hook"), Some(item.span))
                .hint("list each hook once"),
            );
            continue;
        }
        if let (Some(reason), Some(stage)) = (reason, stage) {
            out.push(ParentHookRequirement {
                hook,
                reason,
                stage,
            });
        }
    }
    out
}
