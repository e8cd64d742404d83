//! The bridge of code that runs with a [`ThreadState`] (a tool's `execute`, a handler, an
//! effect, a thread endpoint): each spec member the code calls on `state`, answered through the
//! ThreadState handlers already have, so its writes are buffered the same way and committed
//! with the step, delivery or effect run the code ran in.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::fetch::Fetches;
use super::{files, shape};
use crate::code::Bridge;
use crate::handler::ThreadState;
use crate::types::Role;

/// Members of the spec's ThreadState that duet does not offer yet, and why.
const NOT_YET: &[(&str, &str)] = &[
    (
        "queueTool",
        "use `invokeTool`, which runs the tool and returns its result",
    ),
    ("updateMessage", "duet's journal is append-only"),
    ("deleteMessage", "duet's journal is append-only"),
    ("setEnv", "env comes from the definitions and the process"),
    ("getLogs", "duet's journal is read with `getMessages`"),
    (
        "getParentThread",
        "a child reaches its parent with `notifyParent`",
    ),
    ("runCode", "code runs in the project's own files"),
    (
        "getFileThumbnail",
        "duet has no image library to make thumbnails: read the image with `readFile`",
    ),
    ("loadModel", "definitions are read by duet, not by code"),
    ("loadPrompt", "definitions are read by duet, not by code"),
    ("loadAgent", "definitions are read by duet, not by code"),
];

/// `state.env(name)` for code: the side's own env (prompt, agent, scoped), else the process
/// environment only for a name the project declares as a variable (a tool's or a prompt's
/// `variables`). Rust code reads the whole environment; code does not: duet's own secrets (a
/// database URL, model keys) are not the project's to read.
pub(crate) fn code_env(
    project: &duet_spec::Project,
    env: &std::collections::BTreeMap<String, String>,
    name: &str,
) -> Option<String> {
    if let Some(v) = env.get(name) {
        return Some(v.clone());
    }
    let declared = project
        .tools
        .values()
        .any(|t| t.def.variables.iter().any(|v| v.name == name))
        || project
            .prompts
            .values()
            .any(|p| p.def.variables.iter().any(|v| v.name == name));
    declared.then(|| std::env::var(name).ok()).flatten()
}

/// The error for a member duet does not offer (or does not know).
pub(crate) fn unavailable(member: &str) -> String {
    match NOT_YET.iter().find(|(m, _)| *m == member) {
        Some((m, why)) => format!("`state.{m}` is not available in duet yet: {why}"),
        // Known, answered where a `ThreadState` is (`code/files.rs`), refused elsewhere.
        None if files::MEMBERS.contains(&member) => {
            format!("`state.{member}` is not available here")
        }
        None => format!("`state.{member}` is not a ThreadState member duet knows"),
    }
}

/// Answers code's calls on `state` with a [`ThreadState`].
pub(crate) struct StateBridge<'s, 'a> {
    pub(crate) state: &'s mut ThreadState<'a>,
    pub(crate) fetches: Fetches,
    /// Whether `stopSession` may be called: in a handler's delivery, not in a tool's call (a
    /// step ends sessions by its stop rules) or at rest.
    pub(crate) can_stop: bool,
}

fn text(params: &Value, key: &str) -> Result<String, String> {
    match params.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Null) | None => Err(format!("`{key}` is required")),
        Some(other) => Ok(other.to_string()),
    }
}

#[async_trait]
impl Bridge for StateBridge<'_, '_> {
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        if params.get("$thread").is_some() {
            return Err(format!(
                "`state.{method}` on a child thread is not available in duet yet: message it with `invokeTool('subagent_message', …)`"
            ));
        }
        let state = &mut *self.state;
        match method {
            "fetch" => self.fetches.fetch(&params).await,
            m if files::MEMBERS.contains(&m) => files::call(state, m, &params).await,
            "getValue" => {
                let key = text(&params, "key")?;
                Ok(state
                    .get_value(&key)
                    .await
                    .map_err(|e| e.0)?
                    .unwrap_or(Value::Null))
            }
            "setValue" => {
                let key = text(&params, "key")?;
                let value = params.get("value").cloned().filter(|v| !v.is_null());
                state.set_value(key, value);
                Ok(Value::Null)
            }
            "env" => Ok(code_env(state.project, state.env, &text(&params, "name")?)
                .map_or(Value::Null, Value::String)),
            "envType" => {
                let name = text(&params, "name")?;
                let secret = state.project.tools.values().any(|t| {
                    t.def
                        .variables
                        .iter()
                        .any(|v| v.name == name && v.kind == duet_spec::VariableKind::Secret)
                });
                Ok(json!(if secret { "secret" } else { "text" }))
            }
            "getMessages" => Ok(messages(state.messages(), params.get("options"))),
            "getMessage" => {
                let id = text(&params, "id")?;
                Ok(state
                    .messages()
                    .iter()
                    .find(|m| m.seq.to_string() == id)
                    .map_or(Value::Null, shape::message))
            }
            "injectMessage" => {
                let input = params.get("input").cloned().unwrap_or(Value::Null);
                let content = text(&input, "content")?;
                let role = match input.get("role") {
                    None | Some(Value::Null) => Role::authored_by(state.side()),
                    Some(r) => shape::role_of(r)
                        .ok_or("`role` is system, user, assistant or tool")?,
                };
                let silent = input.get("silent").and_then(Value::as_bool).unwrap_or(false);
                state.inject_message(role, content.clone(), silent);
                Ok(json!({ "id": null, "role": role.as_str(), "content": content, "silent": silent }))
            }
            "queueMessage" => {
                let input = params.get("input").cloned().unwrap_or(Value::Null);
                let content = text(&input, "content")?;
                let role = match input.get("role") {
                    None | Some(Value::Null) => Role::User,
                    Some(r) => match shape::role_of(r) {
                        Some(r @ (Role::User | Role::Assistant)) => r,
                        _ => return Err("a queued message's `role` is user or assistant".into()),
                    },
                };
                state.queue_message(role, content);
                Ok(Value::Null)
            }
            "invokeTool" => {
                let name = text(&params, "name")?;
                let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
                Ok(shape::tool_result(&state.invoke_tool(&name, args).await))
            }
            "scheduleEffect" => {
                let name = text(&params, "name")?;
                let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
                let delay = params.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
                let id = state.schedule_effect(&name, args, delay).map_err(|e| e.0)?;
                Ok(json!(id.to_string()))
            }
            "getScheduledEffects" => {
                let name = params.get("name").and_then(Value::as_str);
                let found = state.scheduled_effects(name).await.map_err(|e| e.0)?;
                serde_json::to_value(found).map_err(|e| e.to_string())
            }
            "removeScheduledEffect" => {
                let id = text(&params, "id")?;
                let Ok(id) = id.parse::<uuid::Uuid>() else {
                    return Ok(json!(false));
                };
                Ok(json!(
                    state.remove_scheduled_effect(id).await.map_err(|e| e.0)?
                ))
            }
            "notifyParent" => {
                let content = text(&params, "content")?;
                state.notify_parent(&content).await.map_err(|e| e.0)?;
                Ok(Value::Null)
            }
            "setStatus" => {
                state.set_status(text(&params, "status")?);
                Ok(Value::Null)
            }
            "stopSession" => {
                let result = params
                    .get("options")
                    .and_then(|o| o.get("result"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if !self.can_stop {
                    return Err("`state.stopSession` is available to a handler: a tool ends the session through its agent's `sessionStop` binding, and an effect or an endpoint runs at rest".into());
                }
                state.stop_session(result);
                Ok(Value::Null)
            }
            "emit" => {
                let event = text(&params, "event")?;
                state.emit(event, params.get("data").cloned().unwrap_or(Value::Null));
                Ok(Value::Null)
            }
            "getChildThread" => {
                let reference = text(&params, "referenceId")?;
                for child in state.children().await.map_err(|e| e.0)? {
                    let Some(key) = state.child_key(&child).await.map_err(|e| e.0)? else {
                        continue;
                    };
                    if key == reference {
                        return Ok(json!({
                            "threadId": key,
                            "agentId": child.agent,
                            "status": child.status.as_str(),
                            "arguments": {},
                            "execution": null,
                        }));
                    }
                }
                Ok(Value::Null)
            }
            "terminate" => Err("`state.terminate` on the thread itself is not available in duet yet: end the session with `stopSession`".into()),
            other => Err(unavailable(other)),
        }
    }
}

/// `getMessages(options)`: `{messages, total, hasMore}`, oldest first unless `order: 'desc'`;
/// `limit` (default 100), `offset`; silent messages only with `includeSilent: true`.
fn messages(all: &[crate::types::Message], options: Option<&Value>) -> Value {
    let opt = |k: &str| options.and_then(|o| o.get(k));
    let include_silent = opt("includeSilent")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let desc = opt("order").and_then(Value::as_str) == Some("desc");
    let limit = opt("limit").and_then(Value::as_u64).unwrap_or(100) as usize;
    let offset = opt("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let mut listed: Vec<&crate::types::Message> =
        all.iter().filter(|m| include_silent || !m.silent).collect();
    if desc {
        listed.reverse();
    }
    let total = listed.len();
    let page: Vec<Value> = listed
        .iter()
        .skip(offset)
        .take(limit)
        .map(|m| shape::message(m))
        .collect();
    let has_more = offset.saturating_add(page.len()) < total;
    json!({ "messages": page, "total": total, "hasMore": has_more })
}
