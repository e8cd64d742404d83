//! A TS hook (`defineHook({ hook, id, execute })`) as the runtime's [`Hook`]: each kind's
//! `execute(state, …args, context)` with the spec's arguments, its return value read back the
//! way the kind says (new text, filtered messages, a transformed message or result, `null`
//! to drop a call). Its `state` is the hook's: values, env, injected messages, `fetch`.

use async_trait::async_trait;
use duet_spec::CodeRef;
use serde_json::{Value, json};

use super::fetch::Fetches;
use super::run::{described, limits};
use super::shape;
use super::state::{code_env, unavailable};
use crate::code::{Bridge, CodeCall, CodeError, Hosting};
use crate::hooks::{
    Hook, HookContext, HookError, HookSource, Policy, PolicyCall, Prefiltered, Reminder,
};
use crate::model::ChatMessage;
use crate::tools::ToolResult;
use crate::types::{Message, Role, Thread, ToolCall};

/// A hook whose `execute` is the project's code.
pub(crate) struct CodeHook {
    pub(crate) hosting: Hosting,
    pub(crate) file: String,
    pub(crate) code: CodeRef,
    pub(crate) config: duet_spec::CodeConfig,
    /// The project, for the variables code may read from the environment.
    pub(crate) project: std::sync::Arc<duet_spec::Project>,
}

impl crate::hooks::Hooks {
    /// These hooks and the project's own: a [`CodeHook`] for each hook whose `execute` is code.
    pub(crate) fn with_code(
        mut self,
        project: &std::sync::Arc<duet_spec::Project>,
        hosting: &Hosting,
    ) -> Self {
        for (id, d) in &project.hooks {
            if let Some(code) = &d.def.code {
                let hook = CodeHook {
                    hosting: hosting.clone(),
                    file: d.source.file.clone(),
                    code: code.clone(),
                    config: project.code.clone(),
                    project: project.clone(),
                };
                self.1.insert(id.clone(), std::sync::Arc::new(hook));
            }
        }
        self
    }
}

/// The spec's `HookExecutionContext`: where the hook's reference came from.
fn context(source: &HookSource) -> Value {
    let source = match source {
        HookSource::Prompt { prompt } => json!({ "kind": "prompt", "promptName": prompt }),
        HookSource::Agent { agent } => json!({ "kind": "agent", "agentName": agent }),
        HookSource::Child {
            relationship,
            agent,
        } => json!({ "kind": "child", "relationshipName": relationship, "agentName": agent }),
    };
    json!({ "source": source })
}

/// Answers a hook's calls on `state`: durable values, env, injected messages and `fetch`.
struct HookBridge<'c, 'a> {
    ctx: &'c HookContext<'a>,
    fetches: Fetches,
    project: std::sync::Arc<duet_spec::Project>,
}

#[async_trait]
impl Bridge for HookBridge<'_, '_> {
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let key = |k: &str| -> Result<String, String> {
            params
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("`{k}` is required"))
        };
        match method {
            "fetch" => self.fetches.fetch(&params).await,
            "getValue" => Ok(self
                .ctx
                .get_value(&key("key")?)
                .await
                .map_err(|e| e.0)?
                .unwrap_or(Value::Null)),
            "setValue" => {
                let value = params.get("value").cloned().filter(|v| !v.is_null());
                self.ctx.set_value(key("key")?, value).map_err(|e| e.0)?;
                Ok(Value::Null)
            }
            "env" => Ok(code_env(&self.project, &self.ctx.state.env, &key("name")?)
                .map_or(Value::Null, Value::String)),
            "injectMessage" => {
                let input = params.get("input").cloned().unwrap_or(Value::Null);
                let content = input
                    .get("content")
                    .and_then(Value::as_str)
                    .ok_or("`content` is required")?
                    .to_owned();
                let role = input
                    .get("role")
                    .and_then(shape::role_of)
                    .unwrap_or(Role::System);
                let silent = input
                    .get("silent")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.ctx
                    .inject_message(role, content.clone(), silent)
                    .map_err(|e| e.0)?;
                Ok(
                    json!({ "id": null, "role": role.as_str(), "content": content, "silent": silent }),
                )
            }
            // The thread's files, with the step's pending writes; a hook's writes go with the step.
            m if super::files::MEMBERS.contains(&m) => {
                let mut ctx = self.ctx.clone();
                super::files::call(&mut ctx, m, &params).await
            }
            other => match unavailable(other) {
                e if e.contains("not a ThreadState member") => Err(e),
                _ => Err(format!(
                    "`state.{other}` is not available to a hook in duet: a hook reads and writes values and files, reads env, injects messages and fetches"
                )),
            },
        }
    }
}

impl CodeHook {
    /// Runs the hook with `args` after `state` (the execution context appended).
    /// Runs the hook about `subject` (what this firing is for: a message's seq, a tool call's
    /// id…, so two firings in one commit never share a call id, nor their `fetch`es' keys)
    /// with `args` after `state` (the execution context appended).
    async fn run(
        &self,
        ctx: &HookContext<'_>,
        subject: &str,
        mut args: Vec<Value>,
    ) -> Result<Value, CodeError> {
        args.push(context(&ctx.source));
        let thread = ctx.thread;
        let call = CodeCall {
            file: self.file.clone(),
            entry: self.code.entry.clone(),
            args,
            state_at: 0,
            state: shape::state(thread, &json!({}), None),
            thread: thread.key.clone(),
            call: format!("hook:{}:{}:{subject}", ctx.id, thread.next_seq),
            limits: limits(&self.config, &self.code),
        };
        let host = self.hosting.host(&format!("hook `{}`", ctx.id))?.clone();
        let mut bridge = HookBridge {
            ctx,
            project: self.project.clone(),
            fetches: Fetches::new(self.hosting.fetcher.clone(), &call.thread, &call.call),
        };
        host.call(call, &mut bridge).await
    }

    /// An `after_tool_call_*` hook: what it made of `result` ([`kept`]).
    async fn after_call(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCall,
        result: ToolResult,
    ) -> Result<Option<ToolResult>, HookError> {
        let args = vec![shape::tool_call(call), shape::tool_result(&result)];
        let out = self
            .run(ctx, &call.id, args)
            .await
            .map_err(|e| HookError::new(described(&e)))?;
        Ok(kept(&out, result))
    }

    async fn value(
        &self,
        ctx: &HookContext<'_>,
        subject: &str,
        args: Vec<Value>,
    ) -> Result<Value, HookError> {
        self.run(ctx, subject, args)
            .await
            .map(shape::settled)
            .map_err(|e| HookError::new(described(&e)))
    }
}

/// A tool result a hook returned; `None` for `null`.
fn result_of(value: &Value) -> Option<ToolResult> {
    (!value.is_null()).then(|| shape::tool_result_of(value))
}

/// What an `after_tool_call_*` hook made of `result`: returning nothing keeps it, `null` drops
/// the call from the history (the spec's), anything else replaces it.
fn kept(value: &Value, result: ToolResult) -> Option<ToolResult> {
    if shape::is_undefined(value) {
        Some(result)
    } else {
        result_of(value)
    }
}

#[async_trait]
impl Hook for CodeHook {
    async fn after_thread_created(&self, ctx: &HookContext<'_>) -> Result<(), HookError> {
        self.value(ctx, "thread", vec![]).await.map(|_| ())
    }

    async fn after_subagent_created(
        &self,
        ctx: &HookContext<'_>,
        child: &Thread,
    ) -> Result<(), HookError> {
        let key = child.key.clone();
        let child = shape::state(child, &json!({}), None);
        self.value(ctx, &key, vec![child]).await.map(|_| ())
    }

    async fn after_system_message(
        &self,
        ctx: &HookContext<'_>,
        text: String,
    ) -> Result<String, HookError> {
        match self
            .value(ctx, "system", vec![Value::String(text.clone())])
            .await?
        {
            Value::Null => Ok(text),
            Value::String(s) => Ok(s),
            other => Err(HookError::new(format!(
                "after_system_message must return the new text (a string), not {}",
                shape::kind(&other)
            ))),
        }
    }

    async fn filter_messages(
        &self,
        ctx: &HookContext<'_>,
        messages: Vec<ChatMessage>,
    ) -> Result<Vec<ChatMessage>, HookError> {
        let out = self
            .value(ctx, "messages", vec![shape::chat(&messages)])
            .await?;
        if out.is_null() {
            return Ok(messages);
        }
        shape::chat_of(&messages, &out).map_err(HookError::new)
    }

    async fn prefilter_llm_history(
        &self,
        ctx: &HookContext<'_>,
        messages: Vec<ChatMessage>,
    ) -> Result<Prefiltered, HookError> {
        match self.run(ctx, "history", vec![shape::chat(&messages)]).await {
            Ok(Value::Null) => Ok(Prefiltered::Messages(messages)),
            Ok(out) => shape::chat_of(&messages, &out)
                .map(Prefiltered::Messages)
                .map_err(HookError::new),
            Err(e)
                if e.details
                    .as_ref()
                    .and_then(|d| d.get("block"))
                    .and_then(Value::as_bool)
                    == Some(true) =>
            {
                let text = e.message.trim_start_matches("Error: ").to_owned();
                Ok(Prefiltered::Block(text))
            }
            Err(e) => Err(HookError::new(described(&e))),
        }
    }

    async fn before_create_message(
        &self,
        ctx: &HookContext<'_>,
        message: Message,
    ) -> Result<Message, HookError> {
        let subject = format!("message:{}", message.seq);
        let out = self
            .value(ctx, &subject, vec![shape::message(&message)])
            .await?;
        shape::message_of(message, &out).map_err(HookError::new)
    }

    async fn after_create_message(
        &self,
        ctx: &HookContext<'_>,
        message: &Message,
    ) -> Result<(), HookError> {
        let subject = format!("message:{}", message.seq);
        self.value(ctx, &subject, vec![shape::message(message)])
            .await
            .map(|_| ())
    }

    async fn tool_call_started(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCall,
    ) -> Result<(), HookError> {
        self.value(ctx, &call.id, vec![shape::tool_call(call), Value::Null])
            .await
            .map(|_| ())
    }

    async fn tool_call_done(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCall,
        result: &ToolResult,
    ) -> Result<(), HookError> {
        let args = vec![shape::tool_call(call), shape::tool_result(result)];
        self.value(ctx, &call.id, args).await.map(|_| ())
    }

    async fn after_tool_call_success(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCall,
        result: ToolResult,
    ) -> Result<Option<ToolResult>, HookError> {
        self.after_call(ctx, call, result).await
    }

    async fn after_tool_call_failure(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCall,
        result: ToolResult,
    ) -> Result<Option<ToolResult>, HookError> {
        self.after_call(ctx, call, result).await
    }

    async fn tool_call_policy(
        &self,
        ctx: &HookContext<'_>,
        call: &PolicyCall<'_>,
    ) -> Result<Policy, HookError> {
        let asked = json!({
            "call": shape::tool_call(call.call),
            "approval": call.approval.map(|a| serde_json::to_value(a).unwrap_or(Value::Null)),
            "applies": call.applies,
        });
        let out = self.value(ctx, &call.call.id, vec![asked]).await?;
        policy_of(&out).map_err(HookError::new)
    }

    async fn question_reminder(
        &self,
        ctx: &HookContext<'_>,
        reminder: &Reminder<'_>,
    ) -> Result<(), HookError> {
        let r = json!({
            "subject": reminder.subject,
            "n": reminder.n,
            "question": reminder.question,
            "defaultAt": reminder.default_at,
        });
        let subject = format!("{}:{}", reminder.subject, reminder.n);
        self.value(ctx, &subject, vec![r]).await.map(|_| ())
    }

    async fn before_store_tool_result(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCall,
        result: ToolResult,
    ) -> Result<ToolResult, HookError> {
        let args = vec![shape::tool_call(call), shape::tool_result(&result)];
        Ok(result_of(&self.value(ctx, &call.id, args).await?).unwrap_or(result))
    }
}

/// A policy hook's answer: `undefined`/`null` or `'no_opinion'`, `'allow'`, `'ask'`, `'deny'`,
/// or an object `{ decision, reason }`.
fn policy_of(v: &Value) -> Result<Policy, String> {
    let (decision, reason) = match v {
        Value::Null => return Ok(Policy::NoOpinion),
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => (
            o.get("decision").and_then(Value::as_str).unwrap_or(""),
            o.get("reason").and_then(Value::as_str),
        ),
        other => {
            return Err(format!(
                "tool_call_policy returns 'allow', 'deny', 'ask' or {{ decision, reason }}, not {}",
                shape::kind(other)
            ));
        }
    };
    match decision {
        "no_opinion" => Ok(Policy::NoOpinion),
        "allow" => Ok(Policy::Allow),
        "ask" => Ok(Policy::Ask {
            decisions: None,
            deadline: None,
        }),
        "deny" => Ok(Policy::Deny {
            reason: reason.unwrap_or("denied by policy").to_owned(),
        }),
        other => Err(format!(
            "tool_call_policy's decision `{other}` is not allow, deny, ask or no_opinion"
        )),
    }
}
