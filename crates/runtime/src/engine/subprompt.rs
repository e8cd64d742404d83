//! Sub-prompt tools: a prompt named in another prompt's `tools` is a tool whose call runs that
//! prompt as one nested model call inside the calling step — its own system prompt (its
//! `{{name}}` variables filled from the call's arguments), model and tools, the arguments checked
//! against its `requiredSchema` — and whose result is built from the nested answer's text, tool
//! calls and errors as the tool entry's `include*` flags say. The nested messages are not
//! journaled (they are never part of the calling side's conversation); the result is, as the
//! calling step's tool message.

use duet_spec::{PromptDef, PromptTool};
use serde_json::{Value, json};
use tracing::Instrument;

use super::{Runtime, model_call};
use crate::event::EventSink;
use crate::model::{ChatMessage, ModelRequest, ToolSpec};
use crate::tools::{ToolContext, ToolResult};
use crate::types::{Message, Role, SideId, Thread, ToolCall};

/// The property a sub-prompt without a `requiredSchema` takes: the message it is asked.
const MESSAGE: &str = "message";

/// The argument schema of sub-prompt `prompt`: its `requiredSchema`, or a single optional
/// `message` string.
pub(super) fn schema(prompt: &PromptDef) -> Value {
    prompt.required_schema.clone().unwrap_or_else(|| {
        json!({
            "type": "object",
            "properties": {MESSAGE: {"type": "string", "description": "What to ask."}},
        })
    })
}

/// What a sub-prompt call has to work with.
pub(super) struct SubCall<'a> {
    pub(super) prompt: &'a PromptDef,
    pub(super) entry: &'a PromptTool,
    pub(super) call: &'a ToolCall,
    pub(super) thread: &'a Thread,
    pub(super) side: SideId,
    pub(super) history: &'a [Message],
    pub(super) env: &'a std::collections::BTreeMap<String, String>,
    pub(super) cancel: &'a tokio_util::sync::CancellationToken,
    /// Where the nested call's usage is added.
    pub(super) usage: &'a mut Option<crate::model::Usage>,
    /// The acting agent, the thread's spawn arguments and the step's hooks: a `.ts` tool the
    /// nested model calls runs with the step's `state`, its writes committed with the step.
    pub(super) agent: &'a duet_spec::AgentDef,
    pub(super) arguments: &'a serde_json::Value,
    pub(super) hooks: &'a crate::hooks::ActiveHooks,
}

impl Runtime {
    /// Runs sub-prompt call `sub`.
    pub(super) async fn run_subprompt(&self, sub: SubCall<'_>) -> ToolResult {
        let (prompt, entry, call) = (sub.prompt, sub.entry, sub.call);
        let errors = crate::lifecycle::schema_errors(&schema(prompt), &call.arguments);
        if !errors.is_empty() {
            return ToolResult::error(format!(
                "Invalid arguments for `{}`: {}",
                call.name,
                errors.join("; ")
            ));
        }
        let model = match self.model(&prompt.model) {
            Ok(m) => m,
            Err(e) => return ToolResult::error(format!("`{}` cannot run: {e}", call.name)),
        };
        let project = self.inner.project.clone();
        let system = crate::context::system_prompt(&project, prompt, sub.env, &call.arguments);
        let mut messages = if prompt.include_chat {
            crate::context::messages(sub.history, sub.side, prompt)
        } else {
            Vec::new()
        };
        messages.push(ChatMessage {
            role: Role::User,
            content: Some(ask(entry, &call.arguments)),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            is_error: false,
            thinking: None,
            provider_data: None,
            images: Vec::new(),
            documents: Vec::new(),
            attachments: Vec::new(),
        });
        // Its own tools: the project's tool definitions it lists (nested sub-prompts, lifecycle
        // tools and handoffs belong to the calling side's step, not to a nested call).
        let tools: Vec<ToolSpec> = prompt
            .tools
            .iter()
            .filter_map(|t| {
                let def = project.tools.get(&t.name)?;
                Some(ToolSpec {
                    name: t.name.clone(),
                    description: def.def.description.clone(),
                    parameters: def
                        .def
                        .args
                        .clone()
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                })
            })
            .collect();
        let takes = crate::model_files::Takes::of(&project, &prompt.model);
        crate::model_files::load(self.files(), sub.thread.id, &mut messages, takes).await;
        let request = ModelRequest {
            thread: sub.thread.id,
            call_index: crate::context::call_index(sub.history, &prompt.model),
            system,
            messages,
            tools: tools.clone(),
            tool_choice: prompt.tool_choice,
            parallel_tool_calls: prompt.parallel_tool_calls,
            reasoning: prompt.reasoning.clone(),
            provider_options: prompt.provider_options.clone(),
        };
        // The nested answer is the tool's result, not the calling side's: nothing of it streams.
        let answer = match model_call::call(
            model.as_ref(),
            request,
            sub.cancel,
            &EventSink::discard(),
            false,
        )
        .instrument(super::model_call::span(&self.inner.project, &prompt.model))
        .await
        {
            Ok(Some(a)) => a,
            Ok(None) => return ToolResult::error("The sub-prompt was cancelled."),
            Err(e) => return ToolResult::error(format!("`{}` failed: {e}", call.name)),
        };
        if let Some(u) = answer.usage {
            *sub.usage = Some(sub.usage.unwrap_or_default().plus(u));
        }
        let mut parts = Vec::new();
        if entry.include_text_response && !answer.text.trim().is_empty() {
            parts.push(answer.text.trim().to_owned());
        }
        for (i, (id, name, arguments)) in answer.calls.into_iter().enumerate() {
            let result = if !tools.iter().any(|t| t.name == name) {
                ToolResult::error(format!("Unknown tool `{name}`."))
            } else if !arguments.is_object() && !arguments.is_null() {
                ToolResult::error(format!("The arguments of `{name}` are not a JSON object."))
            } else {
                let ctx = ToolContext {
                    thread: sub.thread.id,
                    idempotency_key: format!(
                        "{}:{}:{}",
                        sub.thread.id,
                        call.id,
                        id.unwrap_or_else(|| i.to_string())
                    ),
                };
                if self.is_code_tool(&name) {
                    let site = super::thread_state::Site {
                        thread: sub.thread,
                        history: sub.history,
                        agent: sub.agent,
                        side: sub.side,
                        env: sub.env,
                        arguments: sub.arguments,
                        hooks: sub.hooks,
                    };
                    self.run_code_tool(&site, &name, &arguments, &ctx.idempotency_key)
                        .await
                } else {
                    let env = |k: &str| crate::context::env_value(sub.env, k);
                    self.inner.tools.run(ctx, &name, &arguments, &env).await
                }
            };
            let show = if result.is_ok() {
                entry.include_tool_calls
            } else {
                entry.include_errors
            };
            if show {
                let status = if result.is_ok() { "" } else { " (failed)" };
                parts.push(format!("{name}({arguments}){status}: {}", result.content));
            }
        }
        if parts.is_empty() {
            return ToolResult::ok(format!("`{}` gave no answer.", call.name));
        }
        ToolResult::ok(parts.join("\n\n"))
    }
}

/// The message a sub-prompt is asked: the `initUserMessageProperty` argument, else `message`,
/// else the arguments as JSON.
fn ask(entry: &PromptTool, arguments: &Value) -> String {
    let property = entry
        .init_user_message_property
        .as_deref()
        .unwrap_or(MESSAGE);
    match arguments.get(property) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None if arguments.as_object().is_none_or(|o| o.is_empty()) => "Go ahead.".to_owned(),
        None => arguments.to_string(),
    }
}
