//! Built-in code handlers: Rust implementations of the runtime's [`Handler`] port, registered by
//! the name a handler file's `builtin:` (or file name) gives.
//!
//! - `echo` replies with what it was sent.
//! - Hooks: `approval_audit` (an `after_create_message` hook) writes every approval request and
//!   decision a parent sees to the `duet::audit` tracing target.
//! - `relay` forwards a person's messages to a child (the side's first subagent relationship)
//!   and relays the child's results back: a model-less surface over a composed agent.
//! - `keyword_router` answers by keyword, from rules in the thread's durable values or the agent
//!   env, and can end the session on a keyword (an auto-approver is a router whose rule for
//!   "approve" stops the session with "approved").
//! - `file_reply` ([`FileReply`]) answers each message with a file written to the thread,
//!   attached to its reply, and ends the session.
//! - Effects ([`effects`]): `queue_message` (a reminder that starts a turn) and `invoke_tool`
//!   (runs a project tool later).

mod effects;
mod file_reply;

pub use effects::{InvokeTool, QueueMessage, effects};
pub use file_reply::FileReply;

use async_trait::async_trait;
use duet_runtime::hooks::{Hook, HookContext, HookError, Hooks};
use duet_runtime::{Handler, HandlerError, Handlers, Message, Role, ThreadState};

/// Every built-in handler, by name.
pub fn handlers() -> Handlers {
    Handlers::new()
        .with("echo", Echo)
        .with("file_reply", FileReply)
        .with("keyword_router", KeywordRouter)
        .with("relay", Relay)
}

/// Replies with the inbound message's text.
#[derive(Clone, Copy, Debug, Default)]
pub struct Echo;

#[async_trait]
impl Handler for Echo {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        state.reply(message.content.clone().unwrap_or_default());
        Ok(())
    }
}

/// Routes by keyword. Rules come from the env var `ROUTER_RULES` (agent `env` or process), a JSON
/// array of `{"match": "approve", "reply": "Approved.", "stop": "approved", "status": "..."}`:
/// the first rule whose `match` occurs in the message (case-insensitive) applies — it replies,
/// optionally sets the status, and with `stop` ends the session with that result. No rule
/// matching replies with `ROUTER_FALLBACK` (default: a list of the keywords). The count of routed
/// messages is kept in the durable value `routed`.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeywordRouter;

#[async_trait]
impl Handler for KeywordRouter {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let rules_text = state
            .env("ROUTER_RULES")
            .ok_or_else(|| HandlerError::new("keyword_router needs the env var ROUTER_RULES"))?;
        let rules: Vec<serde_json::Value> = serde_json::from_str(&rules_text).map_err(|e| {
            HandlerError::new(format!("ROUTER_RULES is not a JSON array of rules: {e}"))
        })?;
        let text = message.content.clone().unwrap_or_default().to_lowercase();
        let routed = state
            .get_value("routed")
            .await?
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        state.set_value("routed", Some(serde_json::json!(routed + 1)));
        let str_of = |rule: &serde_json::Value, key: &str| {
            rule.get(key).and_then(|v| v.as_str()).map(str::to_owned)
        };
        for rule in &rules {
            let Some(keyword) = str_of(rule, "match") else {
                return Err(HandlerError::new(
                    "a ROUTER_RULES rule has no `match` string",
                ));
            };
            if !text.contains(&keyword.to_lowercase()) {
                continue;
            }
            if let Some(reply) = str_of(rule, "reply") {
                state.reply(reply);
            }
            if let Some(status) = str_of(rule, "status") {
                state.set_status(status);
            }
            if let Some(result) = str_of(rule, "stop") {
                state.stop_session(Some(result));
            }
            return Ok(());
        }
        let keywords: Vec<String> = rules.iter().filter_map(|r| str_of(r, "match")).collect();
        let fallback = state
            .env("ROUTER_FALLBACK")
            .unwrap_or_else(|| format!("I understand: {}.", keywords.join(", ")));
        state.reply(fallback);
        Ok(())
    }
}

/// Relays between a person and a child: the person's message goes to the live child of the
/// side's first relationship (a new one if there is none), and the child's result, when it
/// arrives, goes back to the person without its envelope.
#[derive(Clone, Copy, Debug, Default)]
pub struct Relay;

#[async_trait]
impl Handler for Relay {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let text = message.content.clone().unwrap_or_default();
        if message.silent && text.starts_with("Subagent (reference: ") {
            let body = text
                .split_once("\n\n")
                .map_or(text.as_str(), |(_, body)| body);
            state.reply(body.to_owned());
            state.set_status("answered");
            return Ok(());
        }
        let relationship = state
            .relationships()
            .first()
            .map(|r| r.name().to_owned())
            .ok_or_else(|| HandlerError::new("relay needs a subagent relationship on its side"))?;
        let mut live = None;
        for child in state.children().await? {
            if child.relationship == relationship && child.status.is_live() {
                live = state.child_key(&child).await?;
            }
        }
        let key = match live {
            Some(key) => {
                state.message_child(&key, &text).await?;
                key
            }
            None => state.spawn_child(&relationship, &text).await?,
        };
        state.reply(format!("(forwarded to {key})"));
        state.set_status(format!("waiting for {key}"));
        Ok(())
    }
}

/// Every built-in hook, by name.
pub fn hooks() -> Hooks {
    Hooks::new().with("approval_audit", ApprovalAudit)
}

/// Audits approvals on the parent that composes an approval gate: each request it sends
/// (`subagent_create`) and each result that comes back is written to the `duet::audit` target.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApprovalAudit;

#[async_trait]
impl Hook for ApprovalAudit {
    async fn after_create_message(
        &self,
        ctx: &HookContext<'_>,
        message: &Message,
    ) -> Result<(), HookError> {
        let requests = message
            .tool_calls
            .iter()
            .filter(|c| c.name == "subagent_create");
        for call in requests {
            tracing::info!(target: "duet::audit", thread = %ctx.thread.key, hook = ctx.id, request = %call.arguments, "approval requested");
        }
        let result = message
            .content
            .as_deref()
            .filter(|c| message.silent && c.starts_with("Subagent (reference: "));
        if let (Some(content), Role::User | Role::Assistant) = (result, message.role) {
            tracing::info!(target: "duet::audit", thread = %ctx.thread.key, hook = ctx.id, outcome = %content, "approval outcome");
        }
        Ok(())
    }
}
