//! The tool router: what each tool a prompt offers is, and where a call to it goes. Every call a
//! model makes is sorted here into one [`Route`] — a project tool (builtin, template or http, as
//! its definition says), a tool of an MCP server, a subagent lifecycle tool, a handoff, a
//! sub-prompt — or none (unknown), and dispatched in `route_call`. Adding a kind of tool is one
//! arm here.

use std::collections::BTreeMap;

use duet_spec::{
    AgentDef, Project, PromptDef, PromptSide, SubagentRelationship, exposed_tool_name,
    split_reference,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Runtime, Turn};
use crate::children::{ChildRun, Spawner};
use crate::decide;
use crate::hooks::ActiveHooks;
use crate::lifecycle;
use crate::model::ToolSpec;
use crate::tools::{ToolContext, ToolResult};
use crate::types::{Thread, ThreadId, ToolCall};

/// Where a call goes.
#[derive(Clone, Copy)]
pub(super) enum Route<'p> {
    /// A tool definition of the project: it runs as its definition says (a Rust builtin, a
    /// result template, an http call).
    Tool,
    /// `subagent_create`, `subagent_message` (or its legacy name) or `subagents`.
    Lifecycle,
    /// An exposed agent with no relationship here: the thread passes to it.
    Handoff(&'p str, &'p AgentDef),
    /// A prompt named in `tools`: a call runs it as a nested model call.
    SubPrompt(&'p PromptDef, &'p duet_spec::PromptTool),
    /// A tool of the tool server (MCP server) named first. The tool's own name, or `None` for a
    /// call to a server that could not list its tools: the tool is the rest of the call's name.
    Server(&'p str, Option<&'p str>),
}

/// What each tool server a prompt names offers (or why it offers nothing), by server: listing
/// is async, so a step fetches it before building its [`Offer`].
pub(super) type Served = BTreeMap<String, Result<Vec<ToolSpec>, String>>;

/// What one step offers its model, and where each name goes.
pub(super) struct Offer<'p> {
    pub(super) specs: Vec<ToolSpec>,
    routes: BTreeMap<String, Route<'p>>,
    /// The relationships the side offers (enabled, not hidden).
    pub(super) relationships: Vec<&'p SubagentRelationship>,
    lifecycle: Vec<ToolSpec>,
    /// The servers named whole whose tools could not be listed: their calls still go to them.
    down: Vec<&'p str>,
}

impl<'p> Offer<'p> {
    /// Whether `name` is a tool definition of the project here (one that may need approval).
    pub(super) fn is_tool(&self, name: &str) -> bool {
        matches!(self.routes.get(name), Some(Route::Tool))
    }

    /// The tools `prompt` offers on `cfg`'s side of `agent`, with `served` the tools of the
    /// servers it names and `env` deciding which relationships are enabled.
    pub(super) fn new(
        project: &'p Project,
        agent: &AgentDef,
        cfg: &'p PromptSide,
        prompt: &'p PromptDef,
        served: &'p Served,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let mut specs = Vec::new();
        let mut routes = BTreeMap::new();
        let mut down = Vec::new();
        for entry in &prompt.tools {
            if let Some(tool) = project.tools.get(&entry.name) {
                specs.push(ToolSpec {
                    name: entry.name.clone(),
                    description: tool.def.description.clone(),
                    parameters: tool
                        .def
                        .args
                        .clone()
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                });
                routes.insert(entry.name.clone(), Route::Tool);
            } else if let Some(sub) = project.prompts.get(&entry.name) {
                specs.push(ToolSpec {
                    name: entry.name.clone(),
                    description: sub.def.tool_description.clone(),
                    parameters: super::subprompt::schema(&sub.def),
                });
                routes.insert(entry.name.clone(), Route::SubPrompt(&sub.def, entry));
            } else {
                offer_served(served, &entry.name, &mut specs, &mut routes, &mut down);
            }
        }
        let relationships = lifecycle::offered(cfg, env);
        let lifecycle = lifecycle::tool_specs(project, &relationships);
        for spec in &lifecycle {
            routes.insert(spec.name.clone(), Route::Lifecycle);
        }
        specs.extend(lifecycle.iter().cloned());
        for (name, target) in decide::handoff_targets(project, agent, prompt) {
            specs.push(ToolSpec {
                name: name.to_owned(),
                description: target.tool_description.clone().unwrap_or_default(),
                parameters: decide::side_a_schema(project, target),
            });
            routes.insert(name.to_owned(), Route::Handoff(name, target));
        }
        Offer {
            specs,
            routes,
            relationships,
            lifecycle,
            down,
        }
    }

    /// Where a call of `name` goes; `None` for a tool this step does not offer.
    pub(super) fn route(&self, name: &str) -> Option<Route<'p>> {
        let down = || {
            self.down
                .iter()
                .find(|s| name.starts_with(&exposed_tool_name(s, "")))
        };
        (self.routes.get(lifecycle::canonical(name)).copied())
            .or_else(|| down().map(|s| Route::Server(s, None)))
    }

    fn unknown(&self, name: &str) -> ToolResult {
        let names: Vec<&str> = self.specs.iter().map(|o| o.name.as_str()).collect();
        ToolResult::error(format!(
            "Unknown tool `{name}`. Available tools: {}.",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ))
    }
}

/// Offers the tools of the server a `tools` entry names (`SERVER`: all; `SERVER/TOOL`: one),
/// each under its exposed name; nothing for an entry that names no server.
fn offer_served<'p>(
    served: &'p Served,
    entry: &'p str,
    specs: &mut Vec<ToolSpec>,
    routes: &mut BTreeMap<String, Route<'p>>,
    down: &mut Vec<&'p str>,
) {
    let (server, only) = match split_reference(entry) {
        Some((server, tool)) => (server, Some(tool)),
        None => (entry, None),
    };
    let Some((server, listed)) = served.get_key_value(server) else {
        return;
    };
    let Ok(tools) = listed else {
        // Its calls reach it anyway: the server may be back, or says why it is not.
        match only {
            Some(tool) => {
                routes.insert(
                    exposed_tool_name(server, tool),
                    Route::Server(server, Some(tool)),
                );
            }
            None => down.push(server),
        }
        return;
    };
    let chosen = tools.iter().filter(|t| only.is_none_or(|o| o == t.name));
    let mut any = false;
    for spec in chosen {
        any = true;
        let name = exposed_tool_name(server, &spec.name);
        if !routes.contains_key(&name) {
            routes.insert(name.clone(), Route::Server(server, Some(&spec.name)));
            specs.push(ToolSpec {
                name,
                ..spec.clone()
            });
        }
    }
    if let (Some(tool), false) = (only, any) {
        tracing::warn!(server = %server, tool, "the MCP server offers no such tool; it is not offered");
    }
}

impl Runtime {
    /// Whether `prompt` offers an MCP server's tools (listing them may wait on that server).
    pub(super) fn names_servers(&self, prompt: &PromptDef) -> bool {
        prompt.tools.iter().any(|entry| {
            let server = split_reference(&entry.name).map_or(entry.name.as_str(), |(s, _)| s);
            self.inner.project.mcp.contains_key(server)
        })
    }

    /// What each tool server `prompt` names offers, listed before its step's [`Offer`]; a server
    /// that cannot list its tools offers none (a warning), and a cancelled run stops waiting.
    pub(super) async fn served_tools(
        &self,
        prompt: &PromptDef,
        cancel: &CancellationToken,
    ) -> Served {
        let mut served = Served::new();
        for entry in &prompt.tools {
            let server = split_reference(&entry.name).map_or(entry.name.as_str(), |(s, _)| s);
            if !self.inner.project.mcp.contains_key(server) || served.contains_key(server) {
                continue;
            }
            let listed = match self.inner.tools.server(server) {
                Some(s) => tokio::select! {
                    () = cancel.cancelled() => return served,
                    listed = s.tools() => listed,
                },
                None => Err("no tool server is registered under this name".to_owned()),
            };
            if let Err(e) = &listed {
                tracing::warn!(server, error = %e, "an MCP server offers no tools to this step");
            }
            served.insert(server.to_owned(), listed);
        }
        served
    }
}

/// What a dispatched call did.
pub(super) enum Dispatched {
    /// Its result.
    Done(ToolResult),
    /// An `effect:` tool's call: the timer it schedules, written with the step's commit, and
    /// its result.
    Scheduled(crate::store::NewTimer, ToolResult),
    /// A handoff to this agent, if the step keeps it.
    Handoff(String, ToolResult),
    /// A blocking child was started (or continued): the call's result is that child's session
    /// result, written when it ends.
    Awaiting { child: ThreadId, key: String },
}

/// The step's state a call may need: whether a handoff or an await is already pending.
pub(super) struct StepCalls<'a> {
    pub(super) thread: &'a Thread,
    /// The thread's messages before this step's.
    pub(super) history: &'a [crate::types::Message],
    pub(super) env: &'a std::collections::BTreeMap<String, String>,
    pub(super) hooks: &'a mut ActiveHooks,
    pub(super) handoff_made: bool,
    pub(super) awaiting: bool,
    /// What nested model calls (sub-prompts) cost, added to the step's usage.
    pub(super) nested_usage: &'a mut Option<crate::model::Usage>,
}

impl Runtime {
    /// Runs `call` where its route says.
    pub(super) async fn route_call(
        &self,
        offer: &Offer<'_>,
        turn: &Turn<'_>,
        call: &ToolCall,
        step: &mut StepCalls<'_>,
    ) -> Dispatched {
        let project = &self.inner.project;
        let Some(route) = offer.route(&call.name) else {
            return Dispatched::Done(offer.unknown(&call.name));
        };
        // A provider gives arguments that did not parse as their raw text.
        if !call.arguments.is_object() && !call.arguments.is_null() {
            let raw = match &call.arguments {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            return Dispatched::Done(ToolResult::error(format!(
                "The arguments of `{}` are not a JSON object: {raw}",
                call.name
            )));
        }
        match route {
            Route::Tool => {
                if self.is_code_tool(&call.name) {
                    let site = super::thread_state::Site {
                        thread: step.thread,
                        history: step.history,
                        agent: turn.agent,
                        side: turn.side,
                        env: step.env,
                        arguments: &turn.scope.arguments,
                        hooks: step.hooks,
                    };
                    let result = self
                        .run_code_tool(&site, &call.name, &call.arguments, &call.id)
                        .await;
                    return Dispatched::Done(result);
                }
                let ctx = ToolContext {
                    thread: step.thread.id,
                    idempotency_key: format!("{}:{}", step.thread.id, call.id),
                };
                let env = |k: &str| crate::context::env_value(step.env, k);
                let now = self.now();
                match self
                    .inner
                    .tools
                    .call(ctx, &call.name, &call.arguments, &env, now)
                    .await
                {
                    (result, Some(timer)) => Dispatched::Scheduled(timer, result),
                    (result, None) => Dispatched::Done(result),
                }
            }
            Route::SubPrompt(prompt, entry) => Dispatched::Done(
                self.run_subprompt(super::subprompt::SubCall {
                    usage: step.nested_usage,
                    prompt,
                    entry,
                    call,
                    thread: step.thread,
                    side: turn.side,
                    history: step.history,
                    env: step.env,
                    cancel: turn.cancel,
                    agent: turn.agent,
                    arguments: &turn.scope.arguments,
                    hooks: step.hooks,
                })
                .await,
            ),
            Route::Server(server, tool) => {
                let ctx = ToolContext {
                    thread: step.thread.id,
                    idempotency_key: format!("{}:{}", step.thread.id, call.id),
                };
                let prefix = exposed_tool_name(server, "");
                let tool = tool.unwrap_or_else(|| call.name.strip_prefix(&prefix).unwrap_or(""));
                Dispatched::Done(match self.inner.tools.server(server) {
                    Some(s) => s.call(ctx, tool, call.arguments.clone()).await,
                    None => ToolResult::error(format!(
                        "MCP server `{server}` is not available in this runtime."
                    )),
                })
            }
            Route::Handoff(name, target) => {
                let schema = decide::side_a_schema(project, target);
                let errors = lifecycle::schema_errors(&schema, &call.arguments);
                Dispatched::Done(if !errors.is_empty() {
                    ToolResult::error(format!(
                        "Invalid arguments for `{}`: {}",
                        call.name,
                        errors.join("; ")
                    ))
                } else if step.handoff_made {
                    ToolResult::error("Only one handoff per step: this one was not made.")
                } else if step.awaiting {
                    ToolResult::error(
                        "No handoff while a blocking subagent call of this step is waiting: this one was not made.",
                    )
                } else {
                    step.handoff_made = true;
                    return Dispatched::Handoff(
                        name.to_owned(),
                        ToolResult::ok("Handoff complete"),
                    );
                })
            }
            Route::Lifecycle => {
                let name = lifecycle::canonical(&call.name);
                if let Some(spec) = offer.lifecycle.iter().find(|s| s.name == name)
                    && let Err(invalid) = lifecycle::valid(spec, &call.arguments)
                {
                    return Dispatched::Done(invalid);
                }
                let caller = Spawner {
                    env: step.env,
                    hooks: step.hooks,
                    files: Vec::new(),
                };
                let result = match name {
                    lifecycle::CREATE => {
                        if step.handoff_made {
                            return Dispatched::Done(ToolResult::error(
                                "No subagent call after a handoff in the same step: the thread has passed to another agent.",
                            ));
                        }
                        let request = lifecycle::create_request(&call.arguments);
                        let Some(rel) = offer
                            .relationships
                            .iter()
                            .find(|r| r.name() == request.relationship)
                        else {
                            return Dispatched::Done(ToolResult::error(format!(
                                "No subagent relationship `{}` on this side.",
                                request.relationship
                            )));
                        };
                        let spawn = request.spawn(rel, call.id.clone());
                        match self
                            .spawn_child(step.thread, turn.side, rel, spawn, caller, turn.cancel)
                            .await
                        {
                            Ok(Ok(ChildRun::Awaiting { child, key })) => {
                                step.awaiting = true;
                                return Dispatched::Awaiting { child, key };
                            }
                            Ok(Ok(run)) => {
                                Ok(run.tool_result(project.agents.get(&rel.agent).map(|d| &d.def)))
                            }
                            Ok(Err(refused)) => Ok(refused),
                            Err(e) => Err(e),
                        }
                    }
                    lifecycle::MESSAGE => {
                        let (reference, message) = lifecycle::message_request(&call.arguments);
                        let attachments = lifecycle::message_attachments(&call.arguments);
                        let pending = caller.pending_files();
                        self.message_child(
                            step.thread,
                            reference,
                            message,
                            (&attachments, &pending),
                        )
                        .await
                    }
                    _ => self.list_children(step.thread, &offer.relationships).await,
                };
                Dispatched::Done(result.unwrap_or_else(|e| {
                    ToolResult::error(format!("The subagent call failed inside duet: {e}"))
                }))
            }
        }
    }
}
