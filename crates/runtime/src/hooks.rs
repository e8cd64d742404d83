//! Hooks: Rust code that decorates a prompt side's turns, registered by name and run only where
//! referenced (digest §6). For the acting prompt the hooks are, in order: the `before_parent`
//! hooks its agent's children require (relationship order, side A's first), the base hooks (the
//! prompt's `hooks`, else the agent's), then the children's `after_parent` hooks. Each run says
//! where it came from ([`HookSource`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use duet_spec::{AgentDef, HookStage, Project, PromptDef};

use crate::model::ChatMessage;
use crate::tools::ToolResult;
use crate::types::{Message, Thread, ToolCall};

/// Why a hook runs: the provenance of its reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookSource {
    /// Named by the prompt's `hooks`.
    Prompt { prompt: String },
    /// Named by the agent's `hooks` (the prompt named none).
    Agent { agent: String },
    /// Required by a composed child's `parentHooks`.
    Child { relationship: String, agent: String },
}

/// What a hook run knows.
#[derive(Clone, Debug)]
pub struct HookContext<'a> {
    /// The thread whose turn it decorates (for a parent hook, the parent's).
    pub thread: &'a Thread,
    /// The hook definition's id.
    pub id: &'a str,
    pub source: HookSource,
}

/// A hook failed. Where the digest lets a hook veto (`before_create_message` on a handler's
/// writes), the failure rejects the write; elsewhere it is journaled (`hook_failed`) and the hook
/// is skipped, the last good value kept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

impl HookError {
    pub fn new(message: impl Into<String>) -> Self {
        HookError(message.into())
    }
}

/// A `prefilter_llm_history` hook's answer: the messages to send, or a block that ends the
/// session before the model is called (`hook_blocked`), its message written by the acting side.
#[derive(Clone, Debug, PartialEq)]
pub enum Prefiltered {
    Messages(Vec<ChatMessage>),
    Block(String),
}

/// A hook implementation. Each method is one hook kind (digest §6.1); a hook implements those its
/// definition's `hook` kind names (the others keep their pass-through defaults and are never
/// called for it). `before_update_message` and `after_update_message` have no method: duet's
/// journal is append-only, messages are never updated, so those kinds never fire.
#[async_trait]
pub trait Hook: Send + Sync + 'static {
    /// `after_thread_created`: once, when a thread is created, before its first step.
    async fn after_thread_created(&self, _ctx: &HookContext<'_>) -> Result<(), HookError> {
        Ok(())
    }
    /// `after_subagent_created`: on the parent, once a child thread exists and is registered,
    /// before its first message.
    async fn after_subagent_created(
        &self,
        _ctx: &HookContext<'_>,
        _child: &Thread,
    ) -> Result<(), HookError> {
        Ok(())
    }
    /// `after_system_message`: may rewrite the system prompt.
    async fn after_system_message(
        &self,
        _ctx: &HookContext<'_>,
        text: String,
    ) -> Result<String, HookError> {
        Ok(text)
    }
    /// `filter_messages`: may drop or change the messages a model sees. Keep each tool call with
    /// its result: calls and results left without their pair are dropped after the hooks run.
    async fn filter_messages(
        &self,
        _ctx: &HookContext<'_>,
        messages: Vec<ChatMessage>,
    ) -> Result<Vec<ChatMessage>, HookError> {
        Ok(messages)
    }
    /// `prefilter_llm_history`: the last look at the request's messages; may block the step.
    async fn prefilter_llm_history(
        &self,
        _ctx: &HookContext<'_>,
        messages: Vec<ChatMessage>,
    ) -> Result<Prefiltered, HookError> {
        Ok(Prefiltered::Messages(messages))
    }
    /// `before_create_message`: may change a message before it is written (its sequence number
    /// and session stay the runtime's).
    async fn before_create_message(
        &self,
        _ctx: &HookContext<'_>,
        message: Message,
    ) -> Result<Message, HookError> {
        Ok(message)
    }
    /// `after_create_message`: observes each message once it is committed.
    async fn after_create_message(
        &self,
        _ctx: &HookContext<'_>,
        _message: &Message,
    ) -> Result<(), HookError> {
        Ok(())
    }
    /// `tool_call_started`: observes a tool call about to run.
    async fn tool_call_started(
        &self,
        _ctx: &HookContext<'_>,
        _call: &ToolCall,
    ) -> Result<(), HookError> {
        Ok(())
    }
    /// `tool_call_done`: observes each tool call and its result.
    async fn tool_call_done(
        &self,
        _ctx: &HookContext<'_>,
        _call: &ToolCall,
        _result: &ToolResult,
    ) -> Result<(), HookError> {
        Ok(())
    }
    /// `after_tool_call_success`: may replace a successful result; `None` drops the call and its
    /// result from the history (the call still counts for the stop rules).
    async fn after_tool_call_success(
        &self,
        _ctx: &HookContext<'_>,
        _call: &ToolCall,
        result: ToolResult,
    ) -> Result<Option<ToolResult>, HookError> {
        Ok(Some(result))
    }
    /// `after_tool_call_failure`: the same for a failed call.
    async fn after_tool_call_failure(
        &self,
        _ctx: &HookContext<'_>,
        _call: &ToolCall,
        result: ToolResult,
    ) -> Result<Option<ToolResult>, HookError> {
        Ok(Some(result))
    }
    /// `before_store_tool_result`: may change the result about to be stored.
    async fn before_store_tool_result(
        &self,
        _ctx: &HookContext<'_>,
        _call: &ToolCall,
        result: ToolResult,
    ) -> Result<ToolResult, HookError> {
        Ok(result)
    }
}

/// Hook implementations by registered name.
#[derive(Clone, Default)]
pub struct Hooks(BTreeMap<String, Arc<dyn Hook>>);

impl Hooks {
    pub fn new() -> Self {
        Hooks::default()
    }

    pub fn with(mut self, name: &str, hook: impl Hook) -> Self {
        self.0.insert(name.to_owned(), Arc::new(hook));
        self
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// One hook to run: its kind, implementation, id and provenance.
#[derive(Clone)]
pub(crate) struct Active {
    pub(crate) kind: String,
    pub(crate) hook: Arc<dyn Hook>,
    pub(crate) id: String,
    pub(crate) source: HookSource,
}

/// The children `agent` composes under `prompt`, as `(relationship or handoff name, child)`:
/// its enabled relationships (hidden ones too; those disabled by `optional` compose nothing),
/// then the exposed agents the prompt offers as handoffs (seed §6: adding an agent "to an enabled
/// parent prompt as a handoff" composes it).
fn composed<'p>(
    project: &'p Project,
    agent: &'p AgentDef,
    prompt: Option<&'p PromptDef>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(&'p str, &'p AgentDef)> {
    let mut out: Vec<(&str, &AgentDef)> = agent
        .sides
        .a
        .subagents()
        .iter()
        .chain(agent.sides.b.subagents())
        .filter(|r| r.enabled(env))
        .filter_map(|r| {
            project
                .agents
                .get(&r.agent)
                .map(|child| (r.name(), &child.def))
        })
        .collect();
    if let Some(prompt) = prompt {
        out.extend(crate::decide::handoff_targets(project, agent, prompt));
    }
    out
}

/// The references in order, as `(hook id, source)`: the composed children's `before_parent`
/// hooks, the base hooks, the children's `after_parent` hooks.
pub fn resolve(
    project: &Project,
    agent: &AgentDef,
    prompt: Option<&PromptDef>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, HookSource)> {
    let children = composed(project, agent, prompt, env);
    let required = |stage: HookStage| -> Vec<(String, HookSource)> {
        children
            .iter()
            .flat_map(|(name, child)| {
                child
                    .parent_hooks
                    .iter()
                    .filter(move |h| h.stage == stage)
                    .map(move |h| {
                        (
                            h.hook.clone(),
                            HookSource::Child {
                                relationship: (*name).to_owned(),
                                agent: child.name.clone(),
                            },
                        )
                    })
            })
            .collect()
    };
    let mut out = required(HookStage::BeforeParent);
    if let Some(prompt) = prompt.filter(|p| !p.hooks.is_empty()) {
        out.extend(prompt.hooks.iter().map(|h| {
            (
                h.clone(),
                HookSource::Prompt {
                    prompt: prompt.name.clone(),
                },
            )
        }));
    } else {
        out.extend(agent.hooks.iter().map(|h| {
            (
                h.clone(),
                HookSource::Agent {
                    agent: agent.name.clone(),
                },
            )
        }));
    }
    out.extend(required(HookStage::AfterParent));
    out
}

impl Hooks {
    /// The implementations for `refs`; a reference with no definition or no registered
    /// implementation is returned as the error (composition fails closed).
    pub(crate) fn activate(
        &self,
        project: &Project,
        refs: Vec<(String, HookSource)>,
    ) -> Result<ActiveHooks, String> {
        let hooks: Vec<Active> = refs
            .into_iter()
            .map(|(id, source)| {
                let def = project
                    .hooks
                    .get(&id)
                    .ok_or_else(|| format!("hook `{id}` is not defined"))?;
                let hook = self.0.get(&def.def.builtin).cloned().ok_or_else(|| {
                    format!(
                        "hook `{id}` needs `{}`, which this build does not register",
                        def.def.builtin
                    )
                })?;
                Ok(Active {
                    kind: def.def.hook.clone(),
                    hook,
                    id,
                    source,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(ActiveHooks {
            hooks: hooks.into(),
            failures: Vec::new(),
        })
    }
}

/// The hooks in force for one step (or handler delivery), in order, and the failures seen: each
/// failed hook is skipped, its input passed on, and the failure journaled with the step.
#[derive(Clone, Default)]
pub(crate) struct ActiveHooks {
    hooks: Arc<[Active]>,
    pub(crate) failures: Vec<crate::record::RecordBody>,
}

impl ActiveHooks {
    fn of(&self, kind: &'static str) -> Vec<Active> {
        self.hooks
            .iter()
            .filter(|h| h.kind == kind)
            .cloned()
            .collect()
    }

    pub(crate) fn has(&self, kind: &str) -> bool {
        self.hooks.iter().any(|h| h.kind == kind)
    }

    fn failed(&mut self, h: &Active, e: &HookError) {
        self.failures.push(crate::record::RecordBody::HookFailed {
            id: h.id.clone(),
            kind: h.kind.clone(),
            error: e.0.clone(),
        });
    }

    pub(crate) async fn after_thread_created(&mut self, t: &Thread) {
        for h in self.of("after_thread_created") {
            if let Err(e) = h.hook.after_thread_created(&h.ctx(t)).await {
                self.failed(&h, &e);
            }
        }
    }

    pub(crate) async fn after_subagent_created(&mut self, t: &Thread, child: &Thread) {
        for h in self.of("after_subagent_created") {
            if let Err(e) = h.hook.after_subagent_created(&h.ctx(t), child).await {
                self.failed(&h, &e);
            }
        }
    }

    pub(crate) async fn after_system_message(&mut self, t: &Thread, mut text: String) -> String {
        for h in self.of("after_system_message") {
            match h.hook.after_system_message(&h.ctx(t), text.clone()).await {
                Ok(new) => text = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        text
    }

    pub(crate) async fn filter_messages(
        &mut self,
        t: &Thread,
        mut messages: Vec<ChatMessage>,
    ) -> Vec<ChatMessage> {
        let hooks = self.of("filter_messages");
        if hooks.is_empty() {
            return messages;
        }
        for h in hooks {
            match h.hook.filter_messages(&h.ctx(t), messages.clone()).await {
                Ok(new) => messages = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        repair_pairs(messages)
    }

    pub(crate) async fn prefilter_llm_history(
        &mut self,
        t: &Thread,
        mut messages: Vec<ChatMessage>,
    ) -> Prefiltered {
        for h in self.of("prefilter_llm_history") {
            match h
                .hook
                .prefilter_llm_history(&h.ctx(t), messages.clone())
                .await
            {
                Ok(Prefiltered::Messages(new)) => messages = new,
                Ok(Prefiltered::Block(why)) => return Prefiltered::Block(why),
                Err(e) => self.failed(&h, &e),
            }
        }
        Prefiltered::Messages(messages)
    }

    /// `before_create_message` for a message the runtime writes: a failing hook is skipped.
    pub(crate) async fn before_create_message(&mut self, t: &Thread, message: Message) -> Message {
        let hooks = self.of("before_create_message");
        if hooks.is_empty() {
            return message;
        }
        let original = message.clone();
        let mut message = message;
        for h in hooks {
            match h
                .hook
                .before_create_message(&h.ctx(t), message.clone())
                .await
            {
                Ok(new) => message = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        keep_identity(message, &original)
    }

    /// `before_create_message` for a message a handler writes: a failing hook rejects the write.
    pub(crate) async fn before_create_message_strict(
        &self,
        t: &Thread,
        message: Message,
    ) -> Result<Message, HookError> {
        let hooks = self.of("before_create_message");
        if hooks.is_empty() {
            return Ok(message);
        }
        let original = message.clone();
        let mut message = message;
        for h in hooks {
            message = h
                .hook
                .before_create_message(&h.ctx(t), message)
                .await
                .map_err(|e| HookError(format!("hook `{}`: {}", h.id, e.0)))?;
        }
        Ok(keep_identity(message, &original))
    }

    /// `before_create_message` for each of `messages`, in order.
    pub(crate) async fn before_create_all(
        &mut self,
        t: &Thread,
        messages: Vec<Message>,
    ) -> Vec<Message> {
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            out.push(self.before_create_message(t, m).await);
        }
        out
    }

    /// `after_create_message` for messages already committed: a failure has no step left to be
    /// journaled with, so it goes to the log.
    pub(crate) async fn after_create_message(&self, t: &Thread, messages: &[Message]) {
        for h in self.of("after_create_message") {
            for m in messages {
                if let Err(e) = h.hook.after_create_message(&h.ctx(t), m).await {
                    tracing::warn!(thread = %t.id, hook = %h.id, error = %e, "after_create_message failed");
                }
            }
        }
    }

    pub(crate) async fn tool_call_started(&mut self, t: &Thread, call: &ToolCall) {
        for h in self.of("tool_call_started") {
            if let Err(e) = h.hook.tool_call_started(&h.ctx(t), call).await {
                self.failed(&h, &e);
            }
        }
    }

    /// After a tool ran, in the digest's order: `tool_call_done`, then
    /// `after_tool_call_success` or `_failure` (`None`: drop the call from the history), then
    /// `before_store_tool_result`.
    pub(crate) async fn tool_result(
        &mut self,
        t: &Thread,
        call: &ToolCall,
        result: ToolResult,
    ) -> Option<ToolResult> {
        for h in self.of("tool_call_done") {
            if let Err(e) = h.hook.tool_call_done(&h.ctx(t), call, &result).await {
                self.failed(&h, &e);
            }
        }
        // The kind follows what the tool did, even if a hook of it changes the status.
        let succeeded = result.is_ok();
        let mut result = result;
        let after = if succeeded {
            "after_tool_call_success"
        } else {
            "after_tool_call_failure"
        };
        for h in self.of(after) {
            let ctx = h.ctx(t);
            let answer = if succeeded {
                h.hook
                    .after_tool_call_success(&ctx, call, result.clone())
                    .await
            } else {
                h.hook
                    .after_tool_call_failure(&ctx, call, result.clone())
                    .await
            };
            match answer {
                Ok(Some(new)) => result = new,
                Ok(None) => return None,
                Err(e) => self.failed(&h, &e),
            }
        }
        for h in self.of("before_store_tool_result") {
            match h
                .hook
                .before_store_tool_result(&h.ctx(t), call, result.clone())
                .await
            {
                Ok(new) => result = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        Some(result)
    }
}

/// What `before_create_message` may not change: where the message sits (sequence, session),
/// who wrote it (role, side, model) and how it pairs with tool traffic (call ids and names; the
/// tool result's call id, name and status). Content, thinking, silence and call arguments are
/// the hook's to change.
fn keep_identity(mut message: Message, original: &Message) -> Message {
    message.seq = original.seq;
    message.session = original.session;
    message.role = original.role;
    message.side = original.side;
    message.model.clone_from(&original.model);
    message.tool_call_id.clone_from(&original.tool_call_id);
    message.tool_name.clone_from(&original.tool_name);
    message.tool_status = original.tool_status;
    message.created_at = original.created_at;
    let same_calls = message.tool_calls.len() == original.tool_calls.len()
        && message
            .tool_calls
            .iter()
            .zip(&original.tool_calls)
            .all(|(a, b)| a.id == b.id && a.name == b.name);
    if !same_calls {
        message.tool_calls.clone_from(&original.tool_calls);
    }
    message
}

impl Active {
    fn ctx<'a>(&'a self, thread: &'a Thread) -> HookContext<'a> {
        HookContext {
            thread,
            id: &self.id,
            source: self.source.clone(),
        }
    }
}

/// Drops tool results whose call is gone and calls whose result is gone (a `filter_messages`
/// hook that split a pair), and messages left with nothing in them.
fn repair_pairs(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    use crate::types::Role;
    use std::collections::BTreeSet;
    let calls: BTreeSet<String> = messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let results: BTreeSet<String> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    messages
        .into_iter()
        .filter_map(|mut m| {
            if m.role == Role::Tool {
                return m
                    .tool_call_id
                    .as_ref()
                    .is_some_and(|id| calls.contains(id))
                    .then_some(m);
            }
            let had_calls = !m.tool_calls.is_empty();
            m.tool_calls.retain(|c| results.contains(&c.id));
            let empty = m.content.as_deref().is_none_or(str::is_empty) && m.tool_calls.is_empty();
            (!(had_calls && empty)).then_some(m)
        })
        .collect()
}
