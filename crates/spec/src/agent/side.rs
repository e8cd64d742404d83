//! Decoding an agent's sides: the backing, prompt-only fields, session bindings and subagent
//! relationships (seed §8.2–§8.7).

use crate::decode::{Ctx, Obj, is_snake_case};
use crate::issue::{Code, Issue};
use crate::node::{Node, Span, Value};

use super::{
    HandlerSide, HumanSide, Immediate, ParentCommunication, PromptSide, RESERVED_TOOL_NAMES,
    SessionToolBinding, Side, SideId, SubagentRelationship,
};

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

/// A side as decoded: `Ok` when well-formed; otherwise the parts that could be read, as sides
/// whose references can still be checked (a prompt side with an empty `prompt` carries
/// relationships alone).
pub(super) type DecodedSide = Result<Side, Vec<Side>>;

const SIDE_FIELDS: &[&str] = &[
    "human",
    "prompt",
    "handler",
    "label",
    "subagents",
    "approver",
    "deadline",
];

pub(super) fn decode_side(ctx: &mut Ctx<'_>, node: &Node, id: SideId) -> DecodedSide {
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
        return Err(Vec::new());
    }
    let Some(mut o) = ctx.object(node, path) else {
        return Err(Vec::new());
    };
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
        return Err(decode_unbacked(ctx, o, &backings));
    }
    let label = o.string(ctx, "label");
    let side = match backings[0] {
        "human" => {
            human_value(ctx, &mut o);
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
            let approver = o.boolean(ctx, "approver").unwrap_or(false);
            let deadline = o.take("deadline").and_then(|n| {
                let at = format!("{path}.deadline");
                crate::deadline::decode(ctx, n, &at, crate::deadline::On::Question)
            });
            reject_prompt_only(ctx, &mut o, "human");
            o.finish(ctx, &["human", "label", "approver", "deadline"]);
            Side::Human(HumanSide {
                label,
                approver,
                deadline,
            })
        }
        "handler" => {
            reject_approver(ctx, &mut o, "handler");
            let handler = o.name(ctx, "handler");
            let subagents = decode_relationships(ctx, &mut o);
            reject_prompt_only(ctx, &mut o, "handler");
            o.finish(ctx, &["handler", "label", "subagents"]);
            match handler {
                Some(handler) => Side::Handler(HandlerSide {
                    handler,
                    label,
                    subagents,
                }),
                None => return Err(relationships_only(subagents)),
            }
        }
        _ => {
            reject_approver(ctx, &mut o, "prompt");
            let prompt = o.name(ctx, "prompt").unwrap_or_default();
            let subagents = decode_relationships(ctx, &mut o);
            let side = prompt_side(ctx, &mut o, prompt, label, subagents);
            let mut allowed = vec!["prompt", "label", "subagents"];
            allowed.extend(PROMPT_ONLY);
            o.finish(ctx, &allowed);
            if side.prompt.is_empty() {
                return Err(relationships_only(side.subagents));
            }
            Side::Prompt(side)
        }
    };
    Ok(side)
}

/// `human` can only be `true`.
/// `approver` (a duet extension) on a side a person does not take.
fn reject_approver(ctx: &mut Ctx<'_>, o: &mut Obj<'_>, backing: &str) {
    if o.take("approver").is_some() {
        ctx.push(
            Issue::new(
                Code::ApproverNotHuman,
                format!("`approver` marks a human side; this side is a `{backing}`"),
            )
            .at(ctx.file, &o.path("approver"), Some(o.key_span("approver")))
            .hint("put `approver: true` on the side a person takes: `{ human: true, approver: true }`"),
        );
    }
}

fn human_value(ctx: &mut Ctx<'_>, o: &mut Obj<'_>) {
    let human_span = o.key_span("human");
    if let Some(false) = o.boolean(ctx, "human") {
        ctx.push(
            Issue::new(Code::InvalidValue, "`human` can only be `true`")
                .at(ctx.file, &o.path("human"), Some(human_span))
                .hint("a side that is not human names a `prompt` or a `handler`"),
        );
    }
}

/// The prompt-only fields of a prompt side, around its prompt, label and relationships.
fn prompt_side(
    ctx: &mut Ctx<'_>,
    o: &mut Obj<'_>,
    prompt: String,
    label: Option<String>,
    subagents: Vec<SubagentRelationship>,
) -> PromptSide {
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
    PromptSide {
        prompt,
        label,
        subagents,
        stop_on_response: o.boolean(ctx, "stopOnResponse").unwrap_or(true),
        stop_tool: o.name(ctx, "stopTool"),
        stop_tool_response_property: o.string(ctx, "stopToolResponseProperty"),
        max_steps: o.count(ctx, "maxSteps"),
        session_stop: binding(ctx, o, "sessionStop"),
        session_fail: binding(ctx, o, "sessionFail"),
        session_status: binding(ctx, o, "sessionStatus"),
        manual_stop_condition: o.boolean(ctx, "manualStopCondition").unwrap_or(false),
    }
}

/// A side without exactly one backing is still read through: every field it holds is checked
/// as the backings it names would check it (prompt-only fields are fine next to a `prompt`,
/// and read as a prompt side's when it names no backing at all), and the parts it names come
/// back as sides, so their references are checked too.
fn decode_unbacked(ctx: &mut Ctx<'_>, mut o: Obj<'_>, backings: &[&str]) -> Vec<Side> {
    let label = o.string(ctx, "label");
    if backings.contains(&"human") {
        human_value(ctx, &mut o);
    }
    let prompt = o.name(ctx, "prompt");
    let handler = o.name(ctx, "handler");
    let subagents = decode_relationships(ctx, &mut o);
    let prompt_fields = backings.is_empty() || backings.contains(&"prompt");
    let mut parts = Vec::new();
    if prompt_fields {
        let side = prompt_side(
            ctx,
            &mut o,
            prompt.unwrap_or_default(),
            label.clone(),
            subagents.clone(),
        );
        if !side.prompt.is_empty() || !side.subagents.is_empty() {
            parts.push(Side::Prompt(side));
        }
    } else {
        reject_prompt_only(ctx, &mut o, "handler");
    }
    if let Some(handler) = handler {
        parts.push(Side::Handler(HandlerSide {
            handler,
            label,
            // The relationships are checked once, with the prompt part when there is one.
            subagents: if prompt_fields { Vec::new() } else { subagents },
        }));
    }
    let allowed: Vec<&str> = SIDE_FIELDS.iter().chain(PROMPT_ONLY).copied().collect();
    o.finish(ctx, &allowed);
    parts
}

/// Relationships of a side whose backing is broken, as a part whose references can be checked.
fn relationships_only(subagents: Vec<SubagentRelationship>) -> Vec<Side> {
    if subagents.is_empty() {
        return Vec::new();
    }
    vec![Side::Prompt(PromptSide {
        prompt: String::new(),
        label: None,
        subagents,
        stop_on_response: true,
        stop_tool: None,
        stop_tool_response_property: None,
        max_steps: None,
        session_stop: None,
        session_fail: None,
        session_status: None,
        manual_stop_condition: false,
    })]
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
    let mut written = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(r) = decode_relationship(ctx, item, &p) else {
            continue;
        };
        if out.iter().any(|x| x.name() == r.name()) {
            let (name_path, name_span) = name_at(item, &p);
            ctx.push(
                Issue::new(
                    Code::RelationshipNameConflict,
                    format!("relationship `{}` is declared twice on this side", r.name()),
                )
                .at(ctx.file, &name_path, Some(name_span))
                .hint("give one of them a distinct `as`"),
            );
            continue;
        }
        out.push(r);
        written.push(i);
    }
    ctx.written.insert(path, written);
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
        let (name_path, name_span) = name_at(node, path);
        ctx.push(
            Issue::new(
                Code::RelationshipNameConflict,
                format!(
                    "relationship name `{}` collides with a reserved lifecycle tool",
                    r.name()
                ),
            )
            .at(ctx.file, &name_path, Some(name_span))
            .hint("set `as` to another name"),
        );
    }
    Some(r)
}

/// A relationship name on both sides is reported at side B's relationship, where its name is
/// written.
pub(super) fn check_relationship_names(ctx: &mut Ctx<'_>, a: &Side, b: &Side, side_b: &Node) {
    let items: &[Node] = match side_b.get("subagents").map(|n| &n.value) {
        Some(Value::Array(items)) => items,
        _ => &[],
    };
    for (i, r) in b.subagents().iter().enumerate() {
        if a.subagents().iter().any(|x| x.name() == r.name()) {
            let written = ctx
                .written
                .get("sideB.subagents")
                .and_then(|w| w.get(i))
                .copied()
                .unwrap_or(i);
            let item_path = format!("sideB.subagents[{written}]");
            let (path, span) = match items.get(written) {
                Some(item) => name_at(item, &item_path),
                None => (item_path, side_b.span),
            };
            ctx.push(
                Issue::new(Code::RelationshipNameConflict, format!("relationship name `{}` appears on both sides", r.name()))
                    .at(ctx.file, &path, Some(span))
                    .hint("a relationship name is the registry identity: give one of them a distinct `as`"),
            );
        }
    }
}

/// Where a relationship's name is written: its `as`, else its `agent` (the name it defaults
/// to), else the relationship itself.
fn name_at(item: &Node, path: &str) -> (String, Span) {
    for key in ["as", "agent"] {
        if let Some(n) = item.get(key) {
            return (format!("{path}.{key}"), n.span);
        }
    }
    (path.to_owned(), item.span)
}
