//! Subagents: a prompt side's relationships become the reserved lifecycle tools
//! (`subagent_create`, `subagent_message`, `subagents`); each instance is a child thread of its
//! own, listed in the parent's registry; its results reach the parent as the digest's §5.7 says.
//!
//! - **blocking**: the child runs inside the parent's tool call and its session's result is the
//!   tool result. A child that parks for a person returns at once ("waiting for a person"); its
//!   result, when the person has answered, arrives like a non-blocking one's.
//! - **non-blocking**: the tool returns at once and the child runs beside the parent; when its
//!   session ends, a silent message with its result is queued to the parent on the owning side's
//!   perspective (unless `parentCommunication: explicit`), and the parent runs on.

use std::collections::BTreeMap;

use duet_spec::{PromptSide, SubagentRelationship};
use serde_json::json;

use crate::engine::{Delivered, Origin, Runtime, Settled, WhenBusy};
use crate::event::EventSink;
use crate::hooks::ActiveHooks;
use crate::model::ToolSpec;
use crate::tools::ToolResult;
use crate::types::{Child, NewQueued, Role, SideId, StopReason, Thread, ThreadStatus};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub(crate) const CREATE: &str = "subagent_create";
pub(crate) const MESSAGE: &str = "subagent_message";
pub(crate) const LIST: &str = "subagents";
/// The legacy name of `subagent_message`, still accepted from models (never offered).
const MESSAGE_ALIAS: &str = "send_to_agent";

/// A lifecycle tool's name, legacy aliases resolved.
pub(crate) fn canonical(name: &str) -> &str {
    if name == MESSAGE_ALIAS { MESSAGE } else { name }
}

/// Whether an env flag is on: `true`, `1` or `yes`, in any case.
fn flag_on(value: Option<String>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// Whether a relationship is enabled: it names no `optional` flag, or its flag is on.
pub(crate) fn enabled(rel: &SubagentRelationship, env: &dyn Fn(&str) -> Option<String>) -> bool {
    rel.optional
        .as_deref()
        .is_none_or(|flag| flag_on(env(flag)))
}

/// The relationships a prompt side offers its model: enabled and not hidden.
pub(crate) fn offered<'a>(
    side: &'a PromptSide,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<&'a SubagentRelationship> {
    side.subagents
        .iter()
        .filter(|r| !r.hidden && enabled(r, env))
        .collect()
}

/// What is wrong with `value` against JSON Schema `schema` (nothing when the schema itself
/// does not compile: definitions are validated when the project loads).
pub(crate) fn schema_errors(schema: &serde_json::Value, value: &serde_json::Value) -> Vec<String> {
    jsonschema::validator_for(schema)
        .map(|v| v.iter_errors(value).map(|e| e.to_string()).collect())
        .unwrap_or_default()
}

/// The lifecycle tools for `relationships` (none when there are none).
pub(crate) fn tool_specs(
    project: &duet_spec::Project,
    relationships: &[&SubagentRelationship],
) -> Vec<ToolSpec> {
    if relationships.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = relationships.iter().map(|r| r.name()).collect();
    let described: Vec<String> = relationships
        .iter()
        .map(|r| {
            let description = r
                .description
                .clone()
                .or_else(|| {
                    project
                        .agents
                        .get(&r.agent)
                        .and_then(|a| a.def.tool_description.clone())
                })
                .unwrap_or_default();
            format!("`{}`: {description}", r.name())
        })
        .collect();
    vec![
        ToolSpec {
            name: CREATE.into(),
            description: format!(
                "Start a subagent instance and give it its first message. Call `subagents` first to see live instances; \
                 use `subagent_message` to follow up with one. Subagents: {}",
                described.join("; ")
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "enum": names},
                    "message": {"type": "string", "minLength": 1},
                    "attachments": {"type": "array", "items": {"type": "string"}},
                    "name": {"type": "string", "minLength": 1},
                    "arguments": {"type": "object"},
                },
                "required": ["agent", "message", "attachments", "name"],
                "additionalProperties": false,
            }),
        },
        ToolSpec {
            name: MESSAGE.into(),
            description: "Send a message to a live subagent instance, by its reference.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "referenceId": {"type": "string"},
                    "message": {"type": "string", "minLength": 1},
                    "attachments": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["referenceId", "message", "attachments"],
                "additionalProperties": false,
            }),
        },
        ToolSpec {
            name: LIST.into(),
            description: "List this conversation's subagent instances with their status.".into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
    ]
}

fn valid(spec: &ToolSpec, args: &serde_json::Value) -> Result<(), ToolResult> {
    let errors = schema_errors(&spec.parameters, args);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ToolResult::error(format!(
            "Invalid arguments for `{}`: {}",
            spec.name,
            errors.join("; ")
        )))
    }
}

/// The message a child's run ends with, for its parent; `None` when nothing is to be delivered
/// (the child parked for a person, or was aborted).
fn completion(settled: &Settled) -> Option<(String, bool)> {
    let reference = &settled.key;
    if settled.status == ThreadStatus::AwaitingHuman {
        return None;
    }
    match settled.stop_reason {
        Some(StopReason::Aborted) | None => None,
        Some(
            StopReason::SessionStop | StopReason::StateStopSession | StopReason::MaxSessionTurns,
        ) => Some((
            format!(
                "Subagent (reference: {reference}) has returned the following result:\n\n{}",
                settled.result.as_deref().unwrap_or("(no result)")
            ),
            true,
        )),
        Some(reason) => {
            let why = match (reason, &settled.result) {
                (StopReason::SessionFail, Some(r)) => r.clone(),
                (StopReason::StepError | StopReason::HookBlocked, Some(r)) => r.clone(),
                _ => format!(
                    "Subagent execution stopped before completion ({}). It did not call a terminal session tool.",
                    reason.as_str()
                ),
            };
            Some((
                format!("Subagent (reference: {reference}) has reported a failure:\n\n{why}"),
                false,
            ))
        }
    }
}

/// The registry status for a settled child run.
fn status_of(settled: &Settled) -> &'static str {
    if settled.status == ThreadStatus::AwaitingHuman {
        return "awaiting_human";
    }
    match settled.stop_reason {
        Some(
            StopReason::SessionStop
            | StopReason::StateStopSession
            | StopReason::MaxSessionTurns
            | StopReason::Aborted,
        )
        | None => "idle",
        Some(_) => "failed",
    }
}

/// Who makes a lifecycle call: the calling side's env (the source of `scopedEnv` values) and
/// its hooks (`after_subagent_created` runs on them).
pub(crate) struct Caller<'a> {
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) hooks: &'a mut ActiveHooks,
}

impl Caller<'_> {
    fn env(&self, name: &str) -> Option<String> {
        self.env
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
    }
}

/// One spawn, however it was asked for: by a model (`subagent_create`), by code (a handler
/// invoking the relationship by name), or by the runtime (`immediate`).
pub(crate) struct Spawn {
    pub(crate) message: String,
    pub(crate) name: Option<String>,
    /// The child's arguments (an object): persisted with it, its prompts' `{{name}}` variables.
    pub(crate) arguments: serde_json::Value,
    /// Whether `arguments` must satisfy the child's side A `requiredSchema`.
    pub(crate) check_arguments: bool,
    pub(crate) blocking: bool,
    /// Per-instance env values on top of the relationship's `scopedEnv` (an immediate spawn's).
    pub(crate) scoped: Vec<String>,
}

/// How a child's run went, for its parent.
pub(crate) enum ChildRun {
    /// Running in the background; its result comes as a message.
    Started(String),
    /// Another runner holds it; the message is queued.
    Queued(String),
    /// A blocking run came back (finished, failed, stopped or waiting for a person).
    Settled(String, Settled),
}

impl ChildRun {
    /// The child's key (its reference).
    pub(crate) fn key(&self) -> &str {
        match self {
            ChildRun::Started(key) | ChildRun::Queued(key) | ChildRun::Settled(key, _) => key,
        }
    }

    /// The parent's tool result.
    pub(crate) fn tool_result(self) -> ToolResult {
        match self {
            ChildRun::Started(key) => ToolResult::ok(format!(
                "The subagent was initiated successfully. Reference: {key}"
            )),
            ChildRun::Queued(key) => ToolResult::ok(format!(
                "The subagent is busy; your message is queued for it. Reference: {key}"
            )),
            ChildRun::Settled(key, s) if s.status == ThreadStatus::AwaitingHuman => {
                ToolResult::ok(format!(
                    "The subagent is waiting for a person to answer. Its result will be sent to you when it finishes.\n\nReference: {key}"
                ))
            }
            ChildRun::Settled(key, s) => match completion(&s) {
                Some((_, true)) => ToolResult::ok(format!(
                    "{}\n\nReference: {key}",
                    s.result.as_deref().unwrap_or("(no result)")
                )),
                Some((text, false)) => ToolResult::error(format!("{text}\n\nReference: {key}")),
                None => ToolResult::ok(format!("The subagent stopped. Reference: {key}")),
            },
        }
    }
}

/// A code-issued spawn's mapping (digest §5.5): the relationship's `init*Property` names pick
/// the first message and the instance name out of `args`; what is left are the child's
/// arguments. With no message mapping the message is `args` as pretty-printed JSON.
pub(crate) fn map_code_spawn(
    rel: &SubagentRelationship,
    args: &serde_json::Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Spawn {
    let mut rest = args.as_object().cloned().unwrap_or_default();
    let message = match rel.init_user_message_property.as_deref() {
        Some(p) => match rest.remove(p) {
            Some(serde_json::Value::String(s)) => s,
            Some(v) => v.to_string(),
            None => String::new(),
        },
        None => serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string()),
    };
    // There is no thread filesystem yet, so no `/attachments/...` path exists to copy: the
    // mapped property is taken out of the arguments and nothing more.
    if let Some(p) = rel.init_attachments_property.as_deref() {
        rest.remove(p);
    }
    let name = rel
        .init_agent_name_property
        .as_deref()
        .and_then(|p| match rest.remove(p) {
            Some(serde_json::Value::String(s)) => Some(s),
            Some(v) => Some(v.to_string()),
            None => env(p),
        });
    Spawn {
        message,
        name,
        arguments: serde_json::Value::Object(rest),
        check_arguments: true,
        blocking: rel.blocking,
        scoped: Vec::new(),
    }
}

/// The durable value marking that `agent`'s `side` has activated on a thread (its `immediate`
/// children were started); a handoff to `agent` clears it.
pub(crate) fn activation_key(agent: &str, side: SideId) -> String {
    format!("duet:activated:{agent}:{}", crate::types::side_str(side))
}

/// A thread name as the registry keeps it: whitespace normalised, at most 120 characters.
fn instance_name(name: &str) -> Option<String> {
    let name: String = name
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(120)
        .collect();
    (!name.is_empty()).then_some(name)
}

impl Runtime {
    /// Runs a lifecycle tool call made by `parent`'s `owner` side.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn lifecycle_call(
        &self,
        parent: &Thread,
        owner: SideId,
        relationships: &[&SubagentRelationship],
        specs: &[ToolSpec],
        name: &str,
        args: &serde_json::Value,
        caller: Caller<'_>,
        cancel: &CancellationToken,
    ) -> ToolResult {
        let name = canonical(name);
        if let Some(spec) = specs.iter().find(|s| s.name == name)
            && let Err(invalid) = valid(spec, args)
        {
            return invalid;
        }
        let result = match name {
            CREATE => {
                let str_arg = |k: &str| {
                    args.get(k)
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let relationship = str_arg("agent");
                let Some(rel) = relationships.iter().find(|r| r.name() == relationship) else {
                    return ToolResult::error(format!(
                        "No subagent relationship `{relationship}` on this side."
                    ));
                };
                // The child's side A prompt says what arguments it takes; a model must give
                // them.
                let spawn = Spawn {
                    message: str_arg("message"),
                    name: Some(str_arg("name")),
                    arguments: args.get("arguments").cloned().unwrap_or_else(|| json!({})),
                    check_arguments: true,
                    blocking: rel.blocking,
                    scoped: Vec::new(),
                };
                self.spawn(parent, owner, rel, spawn, caller, cancel)
                    .await
                    .map(|r| r.map_or_else(|refused| refused, ChildRun::tool_result))
            }
            MESSAGE => self.message_child(parent, args).await,
            _ => self.list_children(parent, relationships).await,
        };
        result.unwrap_or_else(|e| {
            ToolResult::error(format!("The subagent call failed inside duet: {e}"))
        })
    }

    /// Starts (or, at a `maxInstances: 1` blocking cap, continues) an instance of `rel`.
    pub(crate) async fn spawn(
        &self,
        parent: &Thread,
        owner: SideId,
        rel: &SubagentRelationship,
        spawn: Spawn,
        caller: Caller<'_>,
        cancel: &CancellationToken,
    ) -> Result<Result<ChildRun, ToolResult>, crate::engine::RunError> {
        let relationship = rel.name().to_owned();
        let Some(target) = self.project().agents.get(&rel.agent).map(|d| &d.def) else {
            return Ok(Err(ToolResult::error(format!(
                "Agent `{}` is not in the project.",
                rel.agent
            ))));
        };
        let arguments = match spawn.arguments {
            serde_json::Value::Null => json!({}),
            a @ serde_json::Value::Object(_) => a,
            _ => {
                return Ok(Err(ToolResult::error(
                    "subagent_create arguments must be an object when provided.",
                )));
            }
        };
        if spawn.check_arguments {
            let schema = crate::decide::side_a_schema(self.project(), target);
            let errors = schema_errors(&schema, &arguments);
            if !errors.is_empty() {
                return Ok(Err(ToolResult::error(format!(
                    "Invalid `arguments` for `{relationship}`: {}",
                    errors.join("; ")
                ))));
            }
        }
        let store = self.store();
        let siblings: Vec<Child> = store
            .children(parent.id)
            .await?
            .into_iter()
            .filter(|c| c.relationship == relationship)
            .collect();
        let live: Vec<&Child> = siblings
            .iter()
            .filter(|c| c.status != "terminated")
            .collect();
        if let Some(cap) = rel.max_instances
            && live.len() >= cap as usize
        {
            if spawn.blocking && cap == 1 && live.len() == 1 {
                // Create-or-continue: the one instance gets the message.
                let child = live[0];
                let Some(thread) = store.thread_by_id(child.child).await? else {
                    return Ok(Err(ToolResult::error("The subagent instance is gone.")));
                };
                return self
                    .run_child(
                        parent,
                        &thread.key,
                        &thread.origin,
                        &spawn.message,
                        true,
                        child.child,
                        cancel,
                    )
                    .await
                    .map(Ok);
            }
            let mut refs = Vec::new();
            for c in &live {
                if let Some(t) = store.thread_by_id(c.child).await? {
                    refs.push(t.key);
                }
            }
            return Ok(Err(ToolResult::error(format!(
                "Subagent instance limit reached for \"{relationship}\" ({cap}). Use subagent_message with an existing reference instead. Active references: {}",
                refs.join(", ")
            ))));
        }
        // `scopedEnv`: the parent's values, copied into the child; every name must have one.
        let mut env = BTreeMap::new();
        let mut missing = Vec::new();
        for name in rel.scoped_env.iter().chain(&spawn.scoped) {
            match caller.env(name) {
                Some(v) => {
                    env.insert(name.clone(), v);
                }
                None => missing.push(name.as_str()),
            }
        }
        if !missing.is_empty() {
            return Ok(Err(ToolResult::error(format!(
                "Subagent \"{relationship}\" needs env values this thread does not have: {}. Set them on the parent (its agent's or prompt's `env`, or the process environment).",
                missing.join(", ")
            ))));
        }
        let key = format!("{}/{}-{}", parent.key, relationship, siblings.len() + 1);
        let child_id = uuid::Uuid::now_v7();
        let thread = store
            .open_thread(
                &key,
                crate::store::NewThread {
                    id: child_id,
                    agent: &rel.agent,
                    parent: Some(parent.id),
                    principal: parent.principal.as_deref(),
                    source: parent.source.as_deref(),
                    now: self.now_ms(),
                },
            )
            .await?;
        store
            .put_child(&Child {
                child: thread.id,
                parent: parent.id,
                relationship: relationship.clone(),
                owner,
                agent: rel.agent.clone(),
                name: spawn.name.as_deref().and_then(instance_name),
                blocking: spawn.blocking,
                explicit: rel.parent_communication == duet_spec::ParentCommunication::Explicit,
                status: "running".into(),
                created_at: self.now_ms(),
                arguments: arguments.clone(),
                env,
            })
            .await?;
        caller.hooks.after_subagent_created(parent, &thread).await;
        self.run_child(
            parent,
            &key,
            &rel.agent,
            &spawn.message,
            spawn.blocking,
            thread.id,
            cancel,
        )
        .await
        .map(Ok)
    }

    /// Delivers `text` to a child: inline for a blocking relationship (its outcome comes back),
    /// else in the background (the result comes as a message later).
    #[allow(clippy::too_many_arguments)]
    async fn run_child(
        &self,
        parent: &Thread,
        key: &str,
        agent: &str,
        text: &str,
        blocking: bool,
        child: crate::types::ThreadId,
        cancel: &CancellationToken,
    ) -> Result<ChildRun, crate::engine::RunError> {
        self.store().set_child_status(child, "running").await?;
        let origin = |inline| Origin {
            principal: parent.principal.as_deref(),
            source: parent.source.as_deref(),
            parent: Some(parent.id),
            inline,
        };
        if !blocking {
            let (rt, child_key, agent, text, principal, source, parent_id) = (
                self.clone(),
                key.to_owned(),
                agent.to_owned(),
                text.to_owned(),
                parent.principal.clone(),
                parent.source.clone(),
                parent.id,
            );
            self.spawn_background(async move {
                let origin = Origin {
                    principal: principal.as_deref(),
                    source: source.as_deref(),
                    parent: Some(parent_id),
                    inline: false,
                };
                let _ = rt
                    .deliver(
                        &child_key,
                        Some(&agent),
                        &text,
                        origin,
                        WhenBusy::Queue,
                        &EventSink::discard(),
                        &CancellationToken::new(),
                    )
                    .await;
            });
            return Ok(ChildRun::Started(key.to_owned()));
        }
        let child_cancel = cancel.child_token();
        let sink = EventSink::discard();
        // Boxed: a child's run is a run, so this recursion needs an indirection.
        let run: BoxFuture<'_, Result<Delivered, crate::engine::RunError>> =
            Box::pin(self.deliver(
                key,
                Some(agent),
                text,
                origin(true),
                WhenBusy::Queue,
                &sink,
                &child_cancel,
            ));
        Ok(match run.await? {
            Delivered::Queued { .. } => ChildRun::Queued(key.to_owned()),
            Delivered::Settled(s) => {
                if s.status == ThreadStatus::AwaitingHuman {
                    // It waits for a person: its result arrives as a message once they answer.
                    self.store()
                        .set_child_status(child, "awaiting_human")
                        .await?;
                }
                ChildRun::Settled(key.to_owned(), s)
            }
        })
    }

    /// The `immediate` relationships of `side` to start now, before its model is first called:
    /// at the side's first step on this thread, or its first after a handoff brought the agent
    /// in (digest §5.8), each one with no live instance. Returns the messages for the parent's
    /// history: a blocking child's result or failure, or why a spawn could not be made (silent,
    /// on the owning side's perspective).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn immediate_spawns(
        &self,
        agent: &duet_spec::AgentDef,
        cfg: &PromptSide,
        side: SideId,
        parent: &Thread,
        msgs: &[crate::types::Message],
        caller: Caller<'_>,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, crate::engine::RunError> {
        let env_fn = |k: &str| caller.env(k);
        let due: Vec<&SubagentRelationship> = cfg
            .subagents
            .iter()
            .filter(|r| r.immediate.is_some() && enabled(r, &env_fn))
            .collect();
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let existing = self.store().children(parent.id).await?;
        let mut notes = Vec::new();
        let (env, hooks) = (caller.env, caller.hooks);
        for rel in due {
            let live = existing
                .iter()
                .find(|c| c.relationship == rel.name() && c.status != "terminated");
            if let Some(live) = live {
                // Started by a run that died before its activation was committed: a blocking
                // child's finished result is not in the history yet. (One still running reports
                // through the queue when recovery finishes it.)
                if rel.blocking
                    && let Some(child) = self.store().thread_by_id(live.child).await?
                    && child.status != ThreadStatus::Running
                    && let Some((text, _)) = completion(&Settled::of(&child))
                    && !msgs
                        .iter()
                        .any(|m| m.content.as_deref() == Some(text.as_str()))
                {
                    notes.push(text);
                }
                continue;
            }
            let how = rel.immediate.clone().unwrap_or(duet_spec::Immediate {
                name_env: None,
                description_env: None,
                scoped_env: Vec::new(),
            });
            // Only `nameEnv` and `descriptionEnv` may reach a model; `scopedEnv` values go into
            // the child's env and nowhere else.
            let lookup = |k: &Option<String>| {
                k.as_deref()
                    .and_then(|k| env.get(k).cloned().or_else(|| std::env::var(k).ok()))
            };
            let name = lookup(&how.name_env);
            let mut message = format!(
                "You were started automatically by `{}` when it began.",
                agent.name
            );
            if let Some(n) = &name {
                message.push_str(&format!("\n\nName: {n}"));
            }
            if let Some(d) = lookup(&how.description_env) {
                message.push_str(&format!("\n\nDescription: {d}"));
            }
            let spawn = Spawn {
                message,
                name: name.or_else(|| Some(rel.name().to_owned())),
                arguments: json!({}),
                check_arguments: false,
                blocking: rel.blocking,
                scoped: how.scoped_env,
            };
            let caller = Caller {
                env,
                hooks: &mut *hooks,
            };
            let run: BoxFuture<'_, _> =
                Box::pin(self.spawn(parent, side, rel, spawn, caller, cancel));
            match run.await? {
                Err(refused) => notes.push(format!(
                    "Subagent \"{}\" (immediate) could not be started: {}",
                    rel.name(),
                    refused.content
                )),
                Ok(ChildRun::Settled(_, settled)) => {
                    if let Some((text, _)) = completion(&settled) {
                        notes.push(text);
                    }
                }
                Ok(ChildRun::Started(_) | ChildRun::Queued(_)) => {}
            }
            if cancel.is_cancelled() {
                break;
            }
        }
        Ok(notes)
    }

    /// `subagent_message`: `args.message` to the live child `args.referenceId` of `parent`, in
    /// the background (its answer comes back as a message).
    pub(crate) async fn message_child(
        &self,
        parent: &Thread,
        args: &serde_json::Value,
    ) -> Result<ToolResult, crate::engine::RunError> {
        let reference = args
            .get("referenceId")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let message = args
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let inactive =
            || ToolResult::error(format!("Subagent reference \"{reference}\" is not active."));
        let Some(thread) = self.store().thread(reference).await? else {
            return Ok(inactive());
        };
        let Some(entry) = self.store().child(thread.id).await? else {
            return Ok(inactive());
        };
        if entry.parent != parent.id || entry.status == "terminated" {
            return Ok(inactive());
        }
        // Follow-ups always go in the background: the answer comes back as a message.
        let _ = self
            .run_child(
                parent,
                &thread.key,
                &thread.origin,
                message,
                false,
                thread.id,
                &CancellationToken::new(),
            )
            .await?;
        Ok(ToolResult::ok(format!(
            "Message sent to subagent {reference}."
        )))
    }

    async fn list_children(
        &self,
        parent: &Thread,
        relationships: &[&SubagentRelationship],
    ) -> Result<ToolResult, crate::engine::RunError> {
        let mut lines = Vec::new();
        for c in self.store().children(parent.id).await? {
            let Some(rel) = relationships.iter().find(|r| r.name() == c.relationship) else {
                continue;
            };
            let key = self
                .store()
                .thread_by_id(c.child)
                .await?
                .map(|t| t.key)
                .unwrap_or_default();
            let description = rel.description.clone().unwrap_or_default();
            lines.push(format!(
                "- {key}: {} — {} ({description})",
                c.relationship, c.status
            ));
        }
        Ok(ToolResult::ok(if lines.is_empty() {
            "No active subagent instances.".to_owned()
        } else {
            lines.join("\n")
        }))
    }

    /// After a child's run: its registry status, then (implicit communication, and not already
    /// the parent's tool result) its result queued to the parent, which runs on if idle.
    pub(crate) async fn after_child_settled(&self, settled: &Settled, notify_parent: bool) {
        if settled.parent.is_none() {
            return;
        }
        let store = self.store();
        let entry = match store.child(settled.thread).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(child = %settled.key, error = %e, "could not read the child's registry entry");
                return;
            }
        };
        if entry.status != "terminated"
            && let Err(e) = store
                .set_child_status(settled.thread, status_of(settled))
                .await
        {
            tracing::warn!(child = %settled.key, error = %e, "could not settle the child's registry entry");
        }
        if notify_parent {
            self.report(settled, &entry).await;
        }
    }

    /// A child's session ended but its run goes on (more messages were queued for it): that
    /// session's result is queued to the parent now — before the next session can report — and
    /// the parent, if idle, runs in the background.
    pub(crate) async fn report_session(&self, t: &Thread) {
        let settled = Settled::of(t);
        let entry = match self.store().child(t.id).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(child = %t.key, error = %e, "could not read the child's registry entry");
                return;
            }
        };
        let Some((parent, message)) = self.report_message(&settled, &entry).await else {
            return;
        };
        match self.queue_claiming(&parent, message).await {
            Ok(Some(run)) => self.drive_in_background(parent.id, run),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(child = %t.key, parent = %parent.key, error = %e, "reporting a child's result to its parent failed");
            }
        }
    }

    /// Queues a child's result (implicit communication) to its parent, which runs on if idle.
    async fn report(&self, settled: &Settled, entry: &Child) {
        let Some((parent, message)) = self.report_message(settled, entry).await else {
            return;
        };
        let run: BoxFuture<'_, Result<Option<Settled>, crate::engine::RunError>> =
            Box::pin(self.deliver_queued(&parent, message));
        if let Err(e) = run.await {
            tracing::warn!(child = %settled.key, parent = %parent.key, error = %e, "reporting a child's result to its parent failed");
        }
    }

    /// The parent and the message that reports `settled` to it; `None` when nothing is to be
    /// reported (explicit communication, a parked or aborted child, no parent).
    async fn report_message(
        &self,
        settled: &Settled,
        entry: &Child,
    ) -> Option<(Thread, NewQueued)> {
        let parent_id = settled.parent?;
        if entry.explicit {
            return None;
        }
        let (content, _) = completion(settled)?;
        let parent = match self.store().thread_by_id(parent_id).await {
            Ok(parent) => parent?,
            Err(e) => {
                tracing::warn!(child = %settled.key, error = %e, "could not read the parent to report to");
                return None;
            }
        };
        let message = NewQueued {
            role: Role::authored_by(entry.owner.sibling()),
            side: entry.owner.sibling(),
            content,
            human: false,
            silent: true,
            follow_up: false,
        };
        Some((parent, message))
    }
}
