//! Built-in effects: Rust implementations of the runtime's [`Effect`] port, registered by the
//! id an effect file's `builtin:` (or file name) gives. They let a definition say "remind me"
//! or "call this later" without code of its own.
//!
//! - `queue_message` — args `{content, role?}` (`role`: `user`, the default, or `assistant`):
//!   queues that message to the thread, so it starts a turn (a reminder).
//! - `invoke_tool` — args `{tool, args?}`: runs a project tool with `args` (default `{}`); an
//!   error result fails the attempt (it is retried, then `failed`).

use async_trait::async_trait;
use duet_runtime::{Effect, EffectImpls, HandlerError, Role, ThreadState};
use serde_json::Value;

/// Every built-in effect, by id.
pub fn effects() -> EffectImpls {
    EffectImpls::new()
        .with("invoke_tool", InvokeTool)
        .with("queue_message", QueueMessage)
}

/// Queues a message to the thread: `{content, role?: "user" | "assistant"}`.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueMessage;

#[async_trait]
impl Effect for QueueMessage {
    async fn run(&self, state: &mut ThreadState<'_>, args: &Value) -> Result<(), HandlerError> {
        let content = match args.get("content") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => {
                return Err(HandlerError::new(
                    "queue_message needs `content`, a non-empty string",
                ));
            }
        };
        let role = match args.get("role") {
            None | Some(Value::Null) => Role::User,
            Some(Value::String(r)) if r == "user" => Role::User,
            Some(Value::String(r)) if r == "assistant" => Role::Assistant,
            Some(other) => {
                return Err(HandlerError::new(format!(
                    "queue_message's `role` is \"user\" or \"assistant\", not {other}"
                )));
            }
        };
        state.queue_message(role, content);
        Ok(())
    }
}

/// Runs a project tool: `{tool, args?}`; its error result fails the attempt.
#[derive(Clone, Copy, Debug, Default)]
pub struct InvokeTool;

#[async_trait]
impl Effect for InvokeTool {
    async fn run(&self, state: &mut ThreadState<'_>, args: &Value) -> Result<(), HandlerError> {
        let Some(tool) = args.get("tool").and_then(Value::as_str) else {
            return Err(HandlerError::new("invoke_tool needs `tool`, a tool's name"));
        };
        let tool_args = args
            .get("args")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
        let result = state.invoke_tool(tool, tool_args).await;
        if result.is_ok() {
            Ok(())
        } else {
            Err(HandlerError::new(format!(
                "tool `{tool}` failed: {}",
                result.content
            )))
        }
    }
}
