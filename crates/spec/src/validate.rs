//! Cross-definition checks: every reference resolves, relationships target exposed agents,
//! bindings name tools their prompt offers, required parent hooks exist and are thread hooks.
//! Checks local to one file happen while decoding it; these need the whole project.

use crate::agent::{AgentDef, ParentHookRequirement, RESERVED_TOOL_NAMES, Side, SideId};
use crate::decode::nearest;
use crate::issue::{Code, Issue};
use crate::mcp::{exposed_tool_name, split_reference};
use crate::model::{ModelDef, PROVIDERS};
use crate::project::{Defined, Kind, Project, Source};
use crate::prompt::{PromptContent, PromptDef, PromptPart};

struct Out<'p> {
    project: &'p Project,
    issues: Vec<Issue>,
}

impl Out<'_> {
    fn push(&mut self, source: &Source, path: &str, issue: Issue) {
        let span = source.span(path);
        self.issues.push(issue.at(&source.file, path, Some(span)));
    }

    /// An unknown `kind` named `name`, with the closest declared name as the hint.
    fn unknown(&mut self, source: &Source, path: &str, code: Code, kind: Kind, name: &str) {
        let names = self.project.declared_names(kind);
        let listed: Vec<&str> = names.iter().copied().collect();
        let hint = match nearest(name, &listed) {
            Some(n) => format!("did you mean `{n}`?"),
            None if listed.is_empty() => format!(
                "the project defines no {}s (`agents/{}/`)",
                kind.noun(),
                kind.folder()
            ),
            None => format!(
                "defined {}s: {}",
                kind.noun(),
                listed
                    .iter()
                    .take(12)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.push(
            source,
            path,
            Issue::new(
                code,
                format!("no {} named `{name}` is defined", kind.noun()),
            )
            .hint(hint),
        );
    }
}

pub(crate) fn check(project: &Project) -> Vec<Issue> {
    let mut out = Out {
        project,
        issues: Vec::new(),
    };
    for d in project.agents.values() {
        check_agent_hooks(
            &mut out,
            &d.source,
            &d.def.name,
            &d.def.hooks,
            &d.def.parent_hooks,
        );
        for (id, side) in [(SideId::A, &d.def.sides.a), (SideId::B, &d.def.sides.b)] {
            check_side(&mut out, &d.source, id, side, Some(&d.def));
        }
    }
    for p in &project.partial {
        check_agent_hooks(&mut out, &p.source, &p.name, &p.hooks, &p.parent_hooks);
        for (id, side) in &p.sides {
            check_side(&mut out, &p.source, *id, side, None);
        }
    }
    for d in project.prompts.values() {
        check_prompt(&mut out, d);
    }
    for d in project.models.values() {
        check_script_tools(&mut out, d);
        check_model_provider(&mut out, d);
        for (i, f) in d.def.fallbacks.iter().enumerate() {
            let path = format!("fallbacks[{i}]");
            if *f == d.def.name {
                out.push(
                    &d.source,
                    &path,
                    Issue::new(
                        Code::UnknownFallbackModel,
                        format!("model `{f}` lists itself as a fallback"),
                    )
                    .hint("fallbacks name other models"),
                );
            } else if !project.declares(Kind::Model, f) {
                out.unknown(&d.source, &path, Code::UnknownFallbackModel, Kind::Model, f);
            }
        }
    }
    for d in project.tools.values() {
        if let Some(crate::tool::ToolImpl::Effect(e)) = &d.def.implementation
            && !project.declares(Kind::Effect, e)
        {
            out.unknown(&d.source, "effect", Code::UnknownEffect, Kind::Effect, e);
        }
        for (i, u) in d.def.uses.iter().enumerate() {
            if !project.declares(Kind::Tool, u) {
                out.unknown(
                    &d.source,
                    &format!("uses[{i}]"),
                    Code::UnknownTool,
                    Kind::Tool,
                    u,
                );
            }
        }
    }
    for d in project.notifications.values() {
        for (i, a) in d.def.agents.iter().enumerate() {
            if !project.declares(Kind::Agent, a) {
                let path = d.source.item("agents", i);
                out.unknown(&d.source, &path, Code::UnknownAgent, Kind::Agent, a);
            }
        }
    }
    out.issues
}

/// A model's `provider` is built in or defined in the project.
fn check_model_provider(out: &mut Out<'_>, d: &Defined<ModelDef>) {
    let p = d.def.provider.as_str();
    if PROVIDERS.contains(&p) || out.project.declares(Kind::Provider, p) {
        return;
    }
    let mut known: Vec<&str> = PROVIDERS.to_vec();
    known.extend(out.project.declared_names(Kind::Provider));
    let hint = match nearest(p, &known) {
        Some(n) => format!("did you mean `{n}`?"),
        None => format!(
            "providers: {}; or define `{p}` in `agents/providers/{p}.yaml`",
            known.join(", ")
        ),
    };
    out.push(
        &d.source,
        "provider",
        Issue::new(Code::UnknownProvider, format!("duet has no provider `{p}`")).hint(hint),
    );
}

/// An agent's `hooks` and `parentHooks` name hooks that are defined (and thread-scoped, for
/// parent hooks).
fn check_agent_hooks(
    out: &mut Out<'_>,
    source: &Source,
    agent: &str,
    hooks: &[String],
    parent_hooks: &[ParentHookRequirement],
) {
    let project = out.project;
    for (i, h) in hooks.iter().enumerate() {
        if !project.declares(Kind::Hook, h) {
            out.unknown(
                source,
                &format!("hooks[{i}]"),
                Code::UnknownHook,
                Kind::Hook,
                h,
            );
        }
    }
    for (i, req) in parent_hooks.iter().enumerate() {
        let path = format!("{}.hook", source.item("parentHooks", i));
        if !project.declares(Kind::Hook, &req.hook) {
            let issue = Issue::new(
                Code::ParentHookUnknown,
                format!(
                    "required parent hook `{}` is not defined, so composing `{}` fails closed",
                    req.hook, agent
                ),
            )
            .hint(format!(
                "define it in `agents/hooks/` with `id: {}`",
                req.hook
            ));
            out.push(source, &path, issue);
        } else if let Some(h) = project.hooks.get(&req.hook)
            && !h.def.is_thread_scoped()
        {
            let issue = Issue::new(Code::ParentHookUserScoped, format!("`{}` is a `{}` hook, which is user-scoped; only thread hooks can be required of a parent", req.hook, h.def.hook))
                    .hint("require a thread hook, such as `filter_messages` or `after_create_message`");
            out.push(source, &path, issue);
        }
    }
}

fn check_side(
    out: &mut Out<'_>,
    source: &Source,
    id: SideId,
    side: &Side,
    agent: Option<&AgentDef>,
) {
    let project = out.project;
    let field = id.field();
    match side {
        Side::Human(_) => {}
        Side::Handler(h) => {
            if !project.declares(Kind::Handler, &h.handler) {
                out.unknown(
                    source,
                    &format!("{field}.handler"),
                    Code::UnknownHandler,
                    Kind::Handler,
                    &h.handler,
                );
            }
        }
        // The relationships of a side whose backing is broken, alone (see `agent::side`).
        Side::Prompt(s) if s.prompt.is_empty() => {}
        Side::Prompt(s) => {
            if !project.declares(Kind::Prompt, &s.prompt) {
                out.unknown(
                    source,
                    &format!("{field}.prompt"),
                    Code::UnknownPrompt,
                    Kind::Prompt,
                    &s.prompt,
                );
            } else if let Some(prompt) = project.prompts.get(&s.prompt) {
                let offered: Vec<&str> = prompt.def.tools.iter().map(|t| t.name.as_str()).collect();
                for (binding, tool) in s.bound_tools() {
                    if !offered.contains(&tool) && !offers_mcp_tool(project, &offered, tool) {
                        let path = if binding == "stopTool" {
                            format!("{field}.stopTool")
                        } else {
                            format!("{field}.{binding}.name")
                        };
                        let issue = if callable(project, tool) {
                            Issue::new(
                                Code::BindingToolNotInPrompt,
                                format!(
                                    "`{binding}` names `{tool}`, but prompt `{}` does not offer it",
                                    s.prompt
                                ),
                            )
                            .hint(format!(
                                "add `{tool}` to the `tools` of prompt `{}` (in {})",
                                s.prompt, prompt.source.file
                            ))
                        } else {
                            // Adding it to the prompt's tools would only move the error there:
                            // say it is not defined, and what it may have meant.
                            let defined: Vec<&str> =
                                project.declared_names(Kind::Tool).into_iter().collect();
                            let hint = match nearest(tool, &offered)
                                .or_else(|| nearest(tool, &defined))
                            {
                                Some(n) => format!("did you mean `{n}`?"),
                                None => format!(
                                    "define `agents/tools/{tool}.yaml` and add `{tool}` to the `tools` of prompt `{}`",
                                    s.prompt
                                ),
                            };
                            Issue::new(
                                Code::UnknownBindingTool,
                                format!(
                                    "`{binding}` names `{tool}`, which is not defined (no tool, prompt or exposed agent has that name)"
                                ),
                            )
                            .hint(hint)
                        };
                        out.push(source, &path, issue);
                    }
                }
                for (i, r) in s.subagents.iter().enumerate() {
                    if offered.contains(&r.name()) {
                        let issue = Issue::new(
                            Code::RelationshipNameConflict,
                            format!(
                                "relationship name `{}` collides with a tool of prompt `{}`",
                                r.name(),
                                s.prompt
                            ),
                        )
                        .hint("set `as` to a name no tool of the side has");
                        // At the name as written: `as`, else the `agent` it defaults to.
                        let item = source.item(&format!("{field}.subagents"), i);
                        let name = if r.alias.is_some() { "as" } else { "agent" };
                        out.push(source, &format!("{item}.{name}"), issue);
                    }
                }
                if let Some(agent) = agent {
                    check_handoffs(out, source, field, &prompt.def, agent);
                }
            }
        }
    }
    if let Side::Handler(h) = side {
        for (i, r) in h.subagents.iter().enumerate() {
            if r.immediate.is_some() {
                let issue = Issue::new(
                    Code::ImmediateOnHandlerSide,
                    format!(
                        "relationship `{}` is `immediate` on a handler side, where nothing starts it",
                        r.name()
                    ),
                )
                .hint("start it from the handler (`invoke_tool` with the relationship name), or move it to a prompt side");
                let path = format!(
                    "{}.immediate",
                    source.item(&format!("{field}.subagents"), i)
                );
                out.push(source, &path, issue);
            }
        }
    }
    for (i, r) in side.subagents().iter().enumerate() {
        let path = format!("{}.agent", source.item(&format!("{field}.subagents"), i));
        if !project.declares(Kind::Agent, &r.agent) {
            out.unknown(source, &path, Code::UnknownAgent, Kind::Agent, &r.agent);
        } else if let Some(target) = project.agents.get(&r.agent)
            && !target.def.expose_as_tool
        {
            let issue = Issue::new(
                Code::RelationshipTargetNotExposed,
                format!(
                    "agent `{}` is not exposed, so it cannot be composed as a subagent",
                    r.agent
                ),
            )
            .hint(format!(
                "set `exposeAsTool: true` (and a `toolDescription`) on `{}` in {}",
                r.agent, target.source.file
            ));
            out.push(source, &path, issue);
        }
    }
}

/// A prompt's tool entry naming an exposed agent without a relationship is a handoff; the target
/// must have a human side where this agent has one (the thread's conversational surface).
fn check_handoffs(
    out: &mut Out<'_>,
    source: &Source,
    field: &str,
    prompt: &PromptDef,
    agent: &AgentDef,
) {
    for (name, target) in out.project.handoff_targets(agent, prompt) {
        for (id, side, target_side) in [
            (SideId::A, &agent.sides.a, &target.sides.a),
            (SideId::B, &agent.sides.b, &target.sides.b),
        ] {
            if side.is_human() && !target_side.is_human() {
                let issue = Issue::new(
                    Code::HandoffWithoutHumanSide,
                    format!("prompt `{}` hands off to `{}`, which has no human {} where `{}` has its person", prompt.name, name, id.field(), agent.name),
                )
                .hint(format!("give `{name}` a human {}, or compose it as a subagent instead", id.field()));
                out.push(source, &format!("{field}.prompt"), issue);
            }
        }
    }
}

fn check_prompt(out: &mut Out<'_>, d: &Defined<PromptDef>) {
    let project = out.project;
    let p = &d.def;
    if !project.declares(Kind::Model, &p.model) {
        out.unknown(
            &d.source,
            "model",
            Code::UnknownModel,
            Kind::Model,
            &p.model,
        );
    }
    for (i, h) in p.hooks.iter().enumerate() {
        if !project.declares(Kind::Hook, h) {
            out.unknown(
                &d.source,
                &format!("hooks[{i}]"),
                Code::UnknownHook,
                Kind::Hook,
                h,
            );
        }
    }
    if let PromptContent::Parts(parts) = &p.prompt {
        for (i, part) in parts.iter().enumerate() {
            if let PromptPart::Include { prompt } = part
                && !project.declares(Kind::Prompt, prompt)
            {
                out.unknown(
                    &d.source,
                    &format!("prompt[{i}].prompt"),
                    Code::UnknownPrompt,
                    Kind::Prompt,
                    prompt,
                );
            }
        }
    }
    for (i, t) in p.tools.iter().enumerate() {
        let name = t.name.as_str();
        let path = format!("tools[{i}]");
        if name.starts_with("provider:") {
            continue;
        }
        if RESERVED_TOOL_NAMES.contains(&name) {
            let issue = Issue::new(Code::ReservedName, format!("`{name}` is injected by the runtime into sides that own subagent relationships; prompts do not list it"))
                .hint("declare a `subagents` relationship on the agent side instead");
            out.push(&d.source, &path, issue);
            continue;
        }
        if let Some((server, tool)) = split_reference(name) {
            check_mcp_reference(out, &d.source, &path, server, tool);
            continue;
        }
        let is_tool = project.declares(Kind::Tool, name);
        let is_prompt = project.declares(Kind::Prompt, name);
        let agent = project.agents.get(name);
        let is_exposed_agent = agent.is_some_and(|a| a.def.expose_as_tool);
        let is_mcp = project.declares(Kind::Mcp, name);
        let kinds: Vec<&str> = [
            (is_tool, "tool"),
            (is_prompt, "prompt"),
            (is_exposed_agent, "exposed agent"),
            (is_mcp, "MCP server"),
        ]
        .into_iter()
        .filter_map(|(yes, k)| yes.then_some(k))
        .collect();
        match kinds.len() {
            1 => {}
            0 if project.declares(Kind::Handler, name) => {
                let issue = Issue::new(
                    Code::HandlerInPromptTools,
                    format!(
                        "`{name}` is a handler; handlers take a side's turns and are never tools"
                    ),
                )
                .hint("back an agent side with it (`handler: NAME`), or define a tool");
                out.push(&d.source, &path, issue);
            }
            0 if project.declares(Kind::Agent, name) => {
                let issue = Issue::new(Code::UnknownTool, format!("agent `{name}` is not exposed, so it is not callable"))
                    .hint(format!("set `exposeAsTool: true` on `{name}` for a handoff, or compose it with a `subagents` relationship"));
                out.push(&d.source, &path, issue);
            }
            0 => {
                let mut callable: Vec<&str> =
                    project.declared_names(Kind::Tool).into_iter().collect();
                callable.extend(project.declared_names(Kind::Prompt));
                callable.extend(project.declared_names(Kind::Mcp));
                callable.extend(
                    project
                        .agents
                        .values()
                        .filter(|a| a.def.expose_as_tool)
                        .map(|a| a.def.name.as_str()),
                );
                let hint = match nearest(name, &callable) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => format!(
                        "define `agents/tools/{name}.yaml`, or name a prompt, an exposed agent or an MCP server"
                    ),
                };
                out.push(
                    &d.source,
                    &path,
                    Issue::new(
                        Code::UnknownTool,
                        format!(
                            "`{name}` is not a tool, a prompt, an exposed agent or an MCP server"
                        ),
                    )
                    .hint(hint),
                );
            }
            _ => {
                let issue = Issue::new(
                    Code::AmbiguousToolReference,
                    format!(
                        "`{name}` names both {}",
                        kinds
                            .iter()
                            .map(|k| if k.starts_with(['e', 'M']) {
                                format!("an {k}")
                            } else {
                                format!("a {k}")
                            })
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                )
                .hint("rename one of them so the tool entry is unambiguous");
                out.push(&d.source, &path, issue);
            }
        }
    }
}

/// A `SERVER/TOOL` entry: the server is declared in `agents/mcp/` and the tool is named. Which
/// tools a server has is known only once it runs, so the tool itself is checked at run time.
fn check_mcp_reference(out: &mut Out<'_>, source: &Source, path: &str, server: &str, tool: &str) {
    if server.is_empty() || tool.is_empty() || tool.contains('/') {
        let issue = Issue::new(
            Code::InvalidValue,
            format!("`{server}/{tool}` is not `SERVER/TOOL`"),
        )
        .hint("name an MCP server (all its tools) or `SERVER/TOOL` (one of them)");
        out.push(source, path, issue);
    } else if !out.project.declares(Kind::Mcp, server) {
        out.unknown(source, path, Code::UnknownMcpServer, Kind::Mcp, server);
    }
}

/// Warns of each call in a scripted model's `script` that no prompt using the model (as its
/// model or a fallback) offers — counting the relationship, lifecycle and bound tools of the
/// sides those prompts back. An unused model is not judged.
fn check_script_tools(out: &mut Out<'_>, d: &Defined<ModelDef>) {
    let project = out.project;
    if d.def.script.is_empty() {
        return;
    }
    let name = d.def.name.as_str();
    let uses = |model: &str| {
        model == name
            || project
                .models
                .get(model)
                .is_some_and(|m| m.def.fallbacks.iter().any(|f| f == name))
    };
    let prompts: Vec<&str> = project
        .prompts
        .values()
        .filter(|p| uses(&p.def.model))
        .map(|p| p.def.name.as_str())
        .collect();
    if prompts.is_empty() {
        return;
    }
    let mut offered: Vec<&str> = RESERVED_TOOL_NAMES.to_vec();
    for p in &prompts {
        if let Some(prompt) = project.prompts.get(*p) {
            offered.extend(prompt.def.tools.iter().map(|t| t.name.as_str()));
        }
    }
    for a in project.agents.values() {
        for (_, side) in a.def.sides.iter() {
            if let Side::Prompt(s) = side
                && prompts.contains(&s.prompt.as_str())
            {
                offered.extend(s.subagents.iter().map(|r| r.name()));
                offered.extend(s.bound_tools().into_iter().map(|(_, t)| t));
            }
        }
    }
    let answers = d.def.script.iter().enumerate().flat_map(|(i, entry)| {
        entry
            .answers()
            .into_iter()
            .map(move |(under, answer)| (format!("script[{i}]{under}"), answer))
    });
    for (at, answer) in answers {
        for (j, call) in answer.tool_calls.iter().enumerate() {
            let tool = call.name.as_str();
            if offered.contains(&tool) || offers_mcp_tool(project, &offered, tool) {
                continue;
            }
            let mut issue = Issue::new(
                Code::ScriptToolNotOffered,
                format!(
                    "{at} calls `{tool}`, which no prompt using model `{name}` offers ({})",
                    prompts.join(", ")
                ),
            );
            issue = match nearest(tool, &offered) {
                Some(n) => issue.hint(format!("did you mean `{n}`?")),
                None => issue.hint(format!(
                    "add `{tool}` to the `tools` of prompt `{}`, or call a tool it offers",
                    prompts[0]
                )),
            };
            out.push(&d.source, &format!("{at}.tool_calls[{j}].name"), issue);
        }
    }
}

/// Whether a prompt could offer `name`: a tool, a prompt or an exposed agent of the project.
fn callable(project: &Project, name: &str) -> bool {
    project.declares(Kind::Tool, name)
        || project.declares(Kind::Prompt, name)
        || project
            .agents
            .get(name)
            .is_some_and(|a| a.def.expose_as_tool)
}

/// Whether a prompt whose `tools` are `offered` offers the MCP tool its model sees as `name`
/// (`SERVER__TOOL`): it names `SERVER/TOOL`, or `SERVER` (all of that server's tools).
fn offers_mcp_tool(project: &Project, offered: &[&str], name: &str) -> bool {
    offered.iter().any(|entry| match split_reference(entry) {
        Some((server, tool)) => exposed_tool_name(server, tool) == name,
        None => {
            project.declares(Kind::Mcp, entry) && name.starts_with(&exposed_tool_name(entry, ""))
        }
    })
}
