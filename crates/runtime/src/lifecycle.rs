//! The subagent lifecycle, the pure part: a prompt side's relationships as the reserved
//! lifecycle tools (`subagent_create`, `subagent_message`, `subagents`), the arguments they take,
//! and what a child's outcome means for its parent (its registry status, its tool result or
//! message).
//! The doing — spawning, running, reporting — is the runtime's (`engine/spawn.rs`), behind
//! the [`Children`](crate::children::Children) port.
//!
//! - **blocking**: a model's call waits durably for the child's session to end; the child's
//!   result is that call's tool result (`engine/awaits.rs`).
//! - **non-blocking**: the tool returns at once and the child runs beside the parent; when its
//!   session ends, a silent message with its result is queued to the parent on the owning side's
//!   perspective (unless `parentCommunication: explicit`), and the parent runs on.

use duet_spec::{AgentDef, PromptSide, Side, SubagentRelationship};
use serde_json::json;

use crate::children::{Spawn, SpawnMode};
use crate::delivery::Settled;
use crate::model::ToolSpec;
use crate::tools::ToolResult;
use crate::types::{ChildStatus, SideId, StopReason, ThreadStatus};

pub(crate) const CREATE: &str = "subagent_create";
pub(crate) const MESSAGE: &str = "subagent_message";
pub(crate) const LIST: &str = "subagents";
/// The legacy name of `subagent_message`, still accepted from models (never offered).
const MESSAGE_ALIAS: &str = "send_to_agent";

/// A lifecycle tool's name, legacy aliases resolved.
pub(crate) fn canonical(name: &str) -> &str {
    if name == MESSAGE_ALIAS { MESSAGE } else { name }
}

/// The relationships a prompt side offers its model: enabled and not hidden.
pub(crate) fn offered<'a>(
    side: &'a PromptSide,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<&'a SubagentRelationship> {
    side.subagents
        .iter()
        .filter(|r| !r.hidden && r.enabled(env))
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

pub(crate) fn valid(spec: &ToolSpec, args: &serde_json::Value) -> Result<(), ToolResult> {
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

/// Whether `agent` binds terminal session tools (`sessionStop` or `sessionFail`) on a side: then
/// a session that ends without calling one did not finish its work.
fn has_terminal_tools(agent: &AgentDef) -> bool {
    agent.sides.iter().any(|(_, s)| {
        matches!(s, Side::Prompt(p) if p.session_stop.is_some() || p.session_fail.is_some())
    })
}

/// The tools bound as `sessionStop` (or `sessionFail`, by `reason`) on `agent`'s prompt sides:
/// the session's returned files are its newest successful call's attachments.
pub(crate) fn terminal_tools(agent: &AgentDef, reason: StopReason) -> Vec<&str> {
    agent
        .sides
        .iter()
        .filter_map(|(_, s)| match s {
            Side::Prompt(p) => match reason {
                StopReason::SessionStop => p.session_stop.as_ref(),
                StopReason::SessionFail => p.session_fail.as_ref(),
                _ => None,
            },
            _ => None,
        })
        .map(|b| b.name.as_str())
        .collect()
}

/// Whether `name` is `side`'s `sessionStop` or `sessionFail` tool: its stored result lists no
/// attachment paths (child-local paths do not leak), and `attachmentsProperty` is its
/// binding's.
pub(crate) fn terminal_binding<'s>(
    side: &'s PromptSide,
    name: &str,
) -> Option<&'s duet_spec::SessionToolBinding> {
    [&side.session_stop, &side.session_fail]
        .into_iter()
        .flatten()
        .find(|b| b.name == name)
}

/// What a child's settled run means for its parent: `Some((text, ok))` when its session ended or
/// its run stopped for good; `None` while it is still on its way (parked for a person, waiting
/// for a child of its own) or was aborted with nothing to say. `agent` is the child's definition.
pub(crate) fn outcome(settled: &Settled, agent: Option<&AgentDef>) -> Option<(String, bool)> {
    if matches!(
        settled.status,
        ThreadStatus::AwaitingHuman | ThreadStatus::Waiting
    ) {
        return None;
    }
    let reason = settled.stop_reason?;
    let failed = |why: String| Some((why, false));
    match reason {
        StopReason::Aborted => None,
        StopReason::MaxSessionTurns
            if settled.result.is_none() && agent.is_some_and(has_terminal_tools) =>
        {
            failed(
                "The subagent ended on maxSessionTurns without calling a terminal session tool."
                    .to_owned(),
            )
        }
        StopReason::SessionStop | StopReason::StateStopSession | StopReason::MaxSessionTurns => {
            Some((
                settled
                    .result
                    .clone()
                    .unwrap_or_else(|| "(no result)".to_owned()),
                true,
            ))
        }
        StopReason::SessionFail | StopReason::StepError | StopReason::HookBlocked
            if settled.result.is_some() =>
        {
            failed(settled.result.clone().unwrap_or_default())
        }
        other => failed(format!(
            "Subagent execution stopped before completion ({}). It did not call a terminal session tool.",
            other.as_str()
        )),
    }
}

/// The message that reports a child's outcome to its parent (implicit communication);
/// `returned` (the files it returned, as the parent has them: see `engine/returned.rs`) is
/// appended to the result.
pub(crate) fn report_text(reference: &str, outcome: &(String, bool), returned: &str) -> String {
    match outcome {
        (result, true) => format!(
            "Subagent (reference: {reference}) has returned the following result:\n\n{result}{returned}"
        ),
        (why, false) => {
            format!("Subagent (reference: {reference}) has reported a failure:\n\n{why}{returned}")
        }
    }
}

/// A blocking call's tool result for a child's settled run, and whether it succeeded;
/// `returned` as in [`report_text`].
pub(crate) fn call_result(
    settled: &Settled,
    agent: Option<&AgentDef>,
    returned: &str,
) -> (String, bool) {
    let reference = &settled.key;
    match outcome(settled, agent) {
        Some((result, true)) => (
            format!("{result}{returned}\n\nReference: {reference}"),
            true,
        ),
        Some(failure) => (
            format!(
                "{}\n\nReference: {reference}",
                report_text(reference, &failure, returned)
            ),
            false,
        ),
        None if settled.status == ThreadStatus::Terminated => (
            format!(
                "The subagent was terminated before its session ended.\n\nReference: {reference}"
            ),
            false,
        ),
        None if settled.stop_reason == Some(StopReason::Aborted) => (
            format!("The subagent was aborted before its session ended.\n\nReference: {reference}"),
            false,
        ),
        None => (
            format!("The subagent stopped. Reference: {reference}"),
            true,
        ),
    }
}

/// The registry status for a settled child run.
pub(crate) fn status_of(settled: &Settled, agent: Option<&AgentDef>) -> ChildStatus {
    match settled.status {
        ThreadStatus::AwaitingHuman => return ChildStatus::AwaitingHuman,
        ThreadStatus::Waiting => return ChildStatus::Waiting,
        _ => {}
    }
    match (settled.stop_reason, outcome(settled, agent)) {
        (Some(StopReason::Aborted) | None, _) | (_, Some((_, true))) => ChildStatus::Idle,
        _ => ChildStatus::Failed,
    }
}

/// A model's `subagent_create` arguments (already checked against the tool's schema).
pub(crate) struct CreateRequest {
    pub(crate) relationship: String,
    message: String,
    name: String,
    arguments: serde_json::Value,
    attachments: Vec<String>,
}

/// Reads `subagent_create`'s arguments.
pub(crate) fn create_request(args: &serde_json::Value) -> CreateRequest {
    let text = |k: &str| {
        args.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    CreateRequest {
        relationship: text("agent"),
        message: text("message"),
        name: text("name"),
        arguments: args.get("arguments").cloned().unwrap_or_else(|| json!({})),
        attachments: crate::files::attachment_paths(args.get("attachments")),
    }
}

impl CreateRequest {
    /// The spawn it asks for on `rel`: a blocking relationship's child is awaited by the call
    /// `call`; the child's side A prompt says what arguments it takes.
    pub(crate) fn spawn(self, rel: &SubagentRelationship, call: String) -> Spawn {
        let mode = if rel.blocking {
            SpawnMode::Await(call)
        } else {
            SpawnMode::Background
        };
        Spawn {
            message: self.message,
            name: Some(self.name),
            arguments: self.arguments,
            check_arguments: true,
            mode,
            scoped: Vec::new(),
            attachments: self.attachments,
            lenient_attachments: false,
        }
    }
}

/// `subagent_message`'s attachments: the paths of the parent's files to send.
pub(crate) fn message_attachments(args: &serde_json::Value) -> Vec<String> {
    crate::files::attachment_paths(args.get("attachments"))
}

/// `subagent_message`'s arguments: the reference and the message.
pub(crate) fn message_request(args: &serde_json::Value) -> (&str, &str) {
    let text = |k: &str| {
        args.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    };
    (text("referenceId"), text("message"))
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
    // The mapped property names the parent's `/attachments/...` files the child gets; only
    // those that exist are used (the spawn checks).
    let attachments = rel
        .init_attachments_property
        .as_deref()
        .map(|p| crate::files::attachment_paths(rest.remove(p).as_ref()))
        .unwrap_or_default();
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
        mode: if rel.blocking {
            SpawnMode::Inline
        } else {
            SpawnMode::Background
        },
        scoped: Vec::new(),
        attachments,
        lenient_attachments: true,
    }
}

/// The durable value marking that `agent`'s `side` has activated on a thread (its `immediate`
/// children were started); a handoff to `agent` clears it.
pub(crate) fn activation_key(agent: &str, side: SideId) -> String {
    format!("duet:activated:{agent}:{}", crate::types::side_str(side))
}

/// A thread name as the registry keeps it: whitespace normalised, at most 120 characters.
pub(crate) fn instance_name(name: &str) -> Option<String> {
    let name: String = name
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(120)
        // A model's name for it: no NUL is stored (`crate::nul`).
        .map(crate::nul::char)
        .collect();
    (!name.is_empty()).then_some(name)
}

impl crate::children::ChildRun {
    /// The parent's tool result for a child run that came back (`agent`: the child's
    /// definition, for what its outcome means).
    pub(crate) fn tool_result(self, agent: Option<&AgentDef>) -> ToolResult {
        use crate::children::ChildRun;
        match self {
            ChildRun::Started(key) => ToolResult::ok(format!(
                "The subagent was initiated successfully. Reference: {key}"
            )),
            ChildRun::Queued(key) => ToolResult::ok(format!(
                "The subagent is busy; your message is queued for it. Reference: {key}"
            )),
            ChildRun::Awaiting { key, .. } => ToolResult::ok(format!(
                "The subagent is running; its result will come when its session ends. Reference: {key}"
            )),
            ChildRun::Settled(key, s, _) if s.status == ThreadStatus::AwaitingHuman => {
                ToolResult::ok(format!(
                    "The subagent is waiting for a person to answer. Its result will be sent to you when it finishes.\n\nReference: {key}"
                ))
            }
            ChildRun::Settled(_, s, returned) => {
                let (content, ok) = call_result(&s, agent, &returned.text);
                let mut result = if ok {
                    ToolResult::ok(content)
                } else {
                    ToolResult::error(content)
                };
                result.attachments = returned.attachments;
                result
            }
        }
    }
}
