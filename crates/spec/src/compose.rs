//! What an agent composes, as pure functions of the project: the handoffs a prompt offers, and
//! everything running an agent can reach (its prompts' tools, its handlers, its hooks, and the
//! agents it composes by relationship or handoff with their required parent hooks,
//! recursively), so a runner can refuse, before anything runs, an agent whose code this build
//! lacks, and leave the project's other agents alone.

use std::collections::BTreeSet;

use crate::agent::{AgentDef, Side};
use crate::decode::nearest;
use crate::issue::{Code, Issue};
use crate::project::{Project, Source};
use crate::prompt::PromptDef;
use crate::tool::ToolImpl;

/// The names of the Rust implementations a build of duet registers (to check `builtin:`
/// names), or that an agent needs ([`Project::builtins_needed`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Builtins {
    /// Rust tools, the names tools' `builtin:` refers to.
    pub tools: BTreeSet<String>,
    /// Rust handlers, the names handlers' `builtin:` (or file name) refers to.
    pub handlers: BTreeSet<String>,
    /// Rust hooks, the names hooks' `builtin:` (or id) refers to.
    pub hooks: BTreeSet<String>,
    /// Rust effects, the ids effects' `builtin:` (or file name) refers to. Any thread may
    /// schedule any effect, so no agent needs one: they are checked for the project alone
    /// ([`Project::check_builtins`]), never before an agent runs.
    pub effects: BTreeSet<String>,
}

/// The definitions running one agent can reach, by name.
#[derive(Default)]
struct Reach<'p> {
    agents: BTreeSet<&'p str>,
    /// `(agent, prompt)`: a prompt's handoffs depend on the agent it runs on.
    prompts: BTreeSet<(&'p str, &'p str)>,
    tools: BTreeSet<&'p str>,
    hooks: BTreeSet<&'p str>,
    handlers: BTreeSet<&'p str>,
}

impl Project {
    /// The handoffs `prompt` offers on `agent` (seed §5): the exposed agents named in its
    /// `tools` that are no tool, no prompt and no subagent relationship of `agent`, in the
    /// prompt's order. (The rule the runtime applies when it offers them to the model.)
    pub fn handoff_targets<'p>(
        &'p self,
        agent: &AgentDef,
        prompt: &PromptDef,
    ) -> Vec<(&'p str, &'p AgentDef)> {
        let relationships = agent.relationship_names();
        prompt
            .tools
            .iter()
            .filter(|e| !relationships.contains(&e.name.as_str()))
            .filter(|e| !self.tools.contains_key(&e.name) && !self.prompts.contains_key(&e.name))
            .filter_map(|e| self.agents.get_key_value(&e.name))
            .filter(|(_, d)| d.def.expose_as_tool)
            .map(|(name, d)| (name.as_str(), &d.def))
            .collect()
    }

    /// The `builtin:` names running `agent` needs: the tools its prompts offer (and the tools
    /// those `use`, and sub-prompts' tools), its sides' handlers, its hooks and its prompts'
    /// hooks, and the required parent hooks of every agent it composes by relationship or by
    /// handoff — then the same for each of those agents, recursively. Relationships behind an
    /// `optional` flag count: the flag is read only at run time. Names the project does not
    /// define are left out (validation reports them).
    pub fn builtins_needed(&self, agent: &str) -> Builtins {
        let reach = self.reach(agent);
        let mut out = Builtins::default();
        for t in &reach.tools {
            if let Some(ToolImpl::Builtin(b)) = self
                .tools
                .get(*t)
                .and_then(|d| d.def.implementation.as_ref())
            {
                out.tools.insert(b.clone());
            }
        }
        // A handler or hook with its own `execute` needs no Rust code.
        for h in &reach.handlers {
            if let Some(d) = self.handlers.get(*h).filter(|d| d.def.code.is_none()) {
                out.handlers.insert(d.def.builtin.clone());
            }
        }
        for h in &reach.hooks {
            if let Some(d) = self.hooks.get(*h).filter(|d| d.def.code.is_none()) {
                out.hooks.insert(d.def.builtin.clone());
            }
        }
        out
    }

    /// Checks every `builtin:` name of the project (and the implicit ones of hooks and
    /// handlers) against what a build registers. These are warnings (`unknown_builtin`): a
    /// project whose code lives elsewhere is still a valid project. See
    /// [`Project::check_builtins_for`] for what must hold before an agent runs.
    pub fn check_builtins(&self, registered: &Builtins) -> Vec<Issue> {
        self.builtin_issues(registered, None)
    }

    /// The `unknown_builtin` issues, as errors, of what running `agent` needs
    /// ([`Project::builtins_needed`]) and `registered` lacks: a runner refuses the agent
    /// before anything runs when this is not empty.
    pub fn check_builtins_for(&self, agent: &str, registered: &Builtins) -> Vec<Issue> {
        let reach = self.reach(agent);
        self.builtin_issues(registered, Some(&reach))
            .into_iter()
            .map(Issue::escalated)
            .collect()
    }

    fn builtin_issues(&self, registered: &Builtins, only: Option<&Reach<'_>>) -> Vec<Issue> {
        let mut issues = Vec::new();
        // A definition with its own function whose name a build registers Rust code under too
        // is defined twice.
        let mut twice = |source: &Source, kind: &str, name: &str, field: &str| {
            issues.push(
                Issue::new(
                    Code::CodeAndBuiltin,
                    format!("{kind} `{name}` has its own `{field}` function, and this build of duet registers a Rust {kind} `{name}` too"),
                )
                .at(&source.file, field, Some(source.span(field)))
                .hint("rename one of them: a definition runs one way"),
            );
        };
        let wanted =
            |set: Option<&BTreeSet<&str>>, name: &str| set.is_none_or(|s| s.contains(name));
        for (name, d) in &self.handlers {
            if d.def.code.is_some()
                && wanted(only.map(|r| &r.handlers), name)
                && registered.handlers.contains(&d.def.builtin)
            {
                twice(&d.source, "handler", &d.def.builtin, "execute");
            }
        }
        for (id, d) in &self.hooks {
            if d.def.code.is_some()
                && wanted(only.map(|r| &r.hooks), id)
                && registered.hooks.contains(&d.def.builtin)
            {
                twice(&d.source, "hook", &d.def.builtin, "execute");
            }
        }
        for d in self.effects.values() {
            if d.def.code.is_some() && only.is_none() && registered.effects.contains(&d.def.builtin)
            {
                twice(&d.source, "effect", &d.def.builtin, "handler");
            }
        }
        let mut missing = |source: &Source, kind: &str, name: &str, known: &BTreeSet<String>| {
            let listed: Vec<&str> = known.iter().map(String::as_str).collect();
            let hint = match nearest(name, &listed) {
                Some(n) => format!("did you mean `{n}`?"),
                None => format!(
                    "registered {kind}s: {}",
                    if listed.is_empty() {
                        "none".to_owned()
                    } else {
                        listed.join(", ")
                    }
                ),
            };
            let issue = Issue::new(
                Code::UnknownBuiltin,
                format!("no {kind} `{name}` is registered in this build of duet"),
            )
            .hint(hint);
            issues.push(issue.at(&source.file, "builtin", Some(source.span("builtin"))));
        };
        for (name, d) in &self.tools {
            if let Some(ToolImpl::Builtin(b)) = &d.def.implementation
                && wanted(only.map(|r| &r.tools), name)
                && !registered.tools.contains(b)
            {
                missing(&d.source, "tool", b, &registered.tools);
            }
        }
        for (name, d) in &self.handlers {
            if d.def.code.is_none()
                && wanted(only.map(|r| &r.handlers), name)
                && !registered.handlers.contains(&d.def.builtin)
            {
                missing(&d.source, "handler", &d.def.builtin, &registered.handlers);
            }
        }
        for (id, d) in &self.hooks {
            if d.def.code.is_none()
                && wanted(only.map(|r| &r.hooks), id)
                && !registered.hooks.contains(&d.def.builtin)
            {
                missing(&d.source, "hook", &d.def.builtin, &registered.hooks);
            }
        }
        if only.is_none() {
            for d in self.effects.values() {
                if d.def.code.is_none() && !registered.effects.contains(&d.def.builtin) {
                    missing(&d.source, "effect", &d.def.builtin, &registered.effects);
                }
            }
        }
        issues
    }

    fn reach(&self, agent: &str) -> Reach<'_> {
        let mut reach = Reach::default();
        self.reach_agent(agent, &mut reach);
        reach
    }

    fn reach_agent<'p>(&'p self, name: &str, reach: &mut Reach<'p>) {
        let Some((name, d)) = self.agents.get_key_value(name) else {
            return;
        };
        if !reach.agents.insert(name) {
            return;
        }
        let agent = &d.def;
        reach.hooks.extend(agent.hooks.iter().map(String::as_str));
        for (_, side) in agent.sides.iter() {
            match side {
                Side::Human(_) => {}
                Side::Handler(h) => {
                    reach.handlers.insert(&h.handler);
                }
                Side::Prompt(p) => self.reach_prompt(name, agent, &p.prompt, reach),
            }
            for r in side.subagents() {
                self.reach_child(&r.agent, reach);
            }
        }
    }

    /// A composed child: its required parent hooks run on the composing side, and the child
    /// itself runs.
    fn reach_child<'p>(&'p self, child: &str, reach: &mut Reach<'p>) {
        if let Some(c) = self.agents.get(child) {
            reach
                .hooks
                .extend(c.def.parent_hooks.iter().map(|h| h.hook.as_str()));
            self.reach_agent(child, reach);
        }
    }

    fn reach_prompt<'p>(
        &'p self,
        agent_name: &'p str,
        agent: &'p AgentDef,
        prompt: &str,
        reach: &mut Reach<'p>,
    ) {
        let Some((prompt_name, d)) = self.prompts.get_key_value(prompt) else {
            return;
        };
        if !reach.prompts.insert((agent_name, prompt_name)) {
            return;
        }
        let p = &d.def;
        reach.hooks.extend(p.hooks.iter().map(String::as_str));
        for t in &p.tools {
            if self.tools.contains_key(&t.name) {
                self.reach_tool(&t.name, reach);
            } else if self.prompts.contains_key(&t.name) {
                // A sub-prompt runs on the same agent; its handoffs bubble up to it.
                self.reach_prompt(agent_name, agent, &t.name, reach);
            }
        }
        for (target, _) in self.handoff_targets(agent, p) {
            self.reach_child(target, reach);
        }
    }

    fn reach_tool<'p>(&'p self, name: &str, reach: &mut Reach<'p>) {
        let Some((name, d)) = self.tools.get_key_value(name) else {
            return;
        };
        if !reach.tools.insert(name) {
            return;
        }
        for u in &d.def.uses {
            self.reach_tool(u, reach);
        }
    }
}
