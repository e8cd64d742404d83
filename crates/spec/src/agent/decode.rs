//! Decoding an agent file: the top-level fields, the name checks and `parentHooks`; the sides
//! and their relationships are decoded in [`super::side`].

use crate::decode::{Ctx, is_snake_case};
use crate::issue::{Code, Issue};
use crate::node::Node;

use super::side::{check_relationship_names, decode_side};
use super::{
    AgentDef, HookStage, Packaging, ParentHookRequirement, PerSide, RESERVED_TOOL_NAMES, Side,
    SideId,
};

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

/// What decoding an agent file gives: the agent when both sides are well-formed; otherwise the
/// sides (or the parts of a side) that are, and its hook references, so their references can be
/// checked even while the agent is broken.
pub(crate) struct DecodedAgent {
    pub(crate) name: Option<String>,
    pub(crate) agent: Option<AgentDef>,
    pub(crate) sides: Vec<(SideId, Side)>,
    pub(crate) hooks: Vec<String>,
    pub(crate) parent_hooks: Vec<ParentHookRequirement>,
}

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node) -> DecodedAgent {
    let mut out = DecodedAgent {
        name: None,
        agent: None,
        sides: Vec::new(),
        hooks: Vec::new(),
        parent_hooks: Vec::new(),
    };
    let mut parts: Vec<(SideId, Side)> = Vec::new();
    let mut side = |ctx: &mut Ctx<'_>, n: &Node, id: SideId| match decode_side(ctx, n, id) {
        Ok(s) => Some(s),
        Err(p) => {
            parts.extend(p.into_iter().map(|s| (id, s)));
            None
        }
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
        Some(n) => side(ctx, n, SideId::A),
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
        Some(n) => side(ctx, n, SideId::B),
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
    let o_side_b = o.take("sideB");
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
        match (a, b) {
            _ if max_session_turns.is_some() => {}
            (Side::Prompt(_), Side::Prompt(_)) => ctx.push(
                Issue::new(
                    Code::UnboundedPromptPair,
                    "two prompt sides and no `maxSessionTurns`: nothing external stops two models",
                )
                .at(ctx.file, "", Some(name_span))
                .hint(
                    "set `maxSessionTurns`, or make sure a session binding always ends the session",
                ),
            ),
            (Side::Handler(_), Side::Handler(_) | Side::Prompt(_))
            | (Side::Prompt(_), Side::Handler(_)) => ctx.push(
                Issue::new(
                    Code::UnboundedHandlerPair,
                    "no human side, a handler on one, and no `maxSessionTurns`: nothing external stops the two sides answering each other",
                )
                .at(ctx.file, "", Some(name_span))
                .hint(
                    "set `maxSessionTurns`, or make sure the handler (`stopSession()`) or a session binding always ends the session",
                ),
            ),
            _ => {}
        }
        if let Some(node) = o_side_b {
            check_relationship_names(ctx, a, b, node);
        }
    }

    for (id, side) in [(SideId::A, &side_a), (SideId::B, &side_b)] {
        if let Some(s) = side {
            out.sides.push((id, s.clone()));
        }
    }
    out.sides.extend(parts);
    out.hooks.clone_from(&hooks);
    out.parent_hooks.clone_from(&parent_hooks);
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
    // Every hook id written so far, valid entry or not: a second one is a duplicate either way.
    let mut seen: Vec<String> = Vec::new();
    let mut written = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("parentHooks[{i}]");
        let Some(mut o) = ctx.object(item, &path) else {
            continue;
        };
        let hook_span = o.take("hook").map_or(item.span, |n| n.span);
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
        if seen.contains(&hook) {
            ctx.push(
                Issue::new(
                    Code::ParentHookDuplicate,
                    format!("hook `{hook}` is required twice"),
                )
                .at(ctx.file, &format!("{path}.hook"), Some(hook_span))
                .hint("list each hook once"),
            );
            continue;
        }
        seen.push(hook.clone());
        if let (Some(reason), Some(stage)) = (reason, stage) {
            out.push(ParentHookRequirement {
                hook,
                reason,
                stage,
            });
            written.push(i);
        }
    }
    ctx.written.insert("parentHooks".to_owned(), written);
    out
}
