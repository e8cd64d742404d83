//! Hooks: Rust code that decorates a prompt side's turns, registered by name and run only where
//! referenced (digest §6). For the acting prompt the hooks are, in order: the `before_parent`
//! hooks its agent's children require (relationship order, side A's first), the base hooks (the
//! prompt's `hooks`, else the agent's), then the children's `after_parent` hooks. Each run says
//! where it came from ([`HookSource`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use duet_spec::{AgentDef, HookStage, Project, PromptDef};

mod active;
mod files;

pub(crate) use active::ActiveHooks;

use crate::model::ChatMessage;
use crate::store::Store;
use crate::tools::ToolResult;
use crate::types::{Message, Role, Thread, ToolCall};

/// Why a hook runs: the provenance of its reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookSource {
    /// Named by the prompt's `hooks`.
    Prompt {
        /// The prompt's name.
        prompt: String,
    },
    /// Named by the agent's `hooks` (the prompt named none).
    Agent {
        /// The agent's name.
        agent: String,
    },
    /// Required by a composed child's `parentHooks`.
    Child {
        /// The relationship (or handoff) name that composes the child.
        relationship: String,
        /// The child agent whose `parentHooks` require it.
        agent: String,
    },
}

/// What a hook run knows, and the thread state it may act on (seed §6: "the hook receives the
/// parent's ThreadState"): read durable values and env, inject messages, set values. Writes are
/// buffered, as a handler's are, and committed with the step (or drain, or handler delivery) the
/// hook runs in, injected messages after that commit's own (a model sees them from its next
/// call). `after_create_message` runs after its commit, so there it may read but not write.
#[derive(Clone)]
pub struct HookContext<'a> {
    /// The thread whose turn it decorates (for a parent hook, the parent's).
    pub thread: &'a Thread,
    /// The hook definition's id.
    pub id: &'a str,
    /// Why this hook runs here.
    pub source: HookSource,
    pub(crate) state: &'a HookState,
    /// Whether writes are still possible (not after the commit).
    pub(crate) writable: bool,
}

impl std::fmt::Debug for HookContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookContext")
            .field("thread", &self.thread.key)
            .field("id", &self.id)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// What hooks wrote, to commit with the step they ran in — and what a step's `.ts` tools wrote
/// through their `state` ([`ActiveHooks::absorb`]), committed the same way.
#[derive(Clone, Debug, Default)]
pub(crate) struct HookWrites {
    /// Messages written, in order.
    pub(crate) messages: Vec<crate::Injected>,
    pub(crate) values: Vec<(String, Option<serde_json::Value>)>,
    /// Messages queued for the thread's next step.
    pub(crate) queued: Vec<crate::types::NewQueued>,
    /// A new free-text status.
    pub(crate) status: Option<String>,
    /// Effects scheduled, and pending ones cancelled.
    pub(crate) timers: Vec<crate::store::NewTimer>,
    pub(crate) cancel: Vec<uuid::Uuid>,
    /// Custom events (`emit`).
    pub(crate) events: Vec<(String, serde_json::Value)>,
    /// File rows a `.ts` tool wrote, in order.
    pub(crate) files: Vec<crate::files::FileWrite>,
}

/// The state behind the contexts of one step's hooks: the store (for reads), the side's env,
/// and the buffered writes.
#[derive(Default)]
pub(crate) struct HookState {
    pub(crate) store: Option<Arc<dyn Store>>,
    /// The thread filesystem (`hooks/files.rs`).
    pub(crate) files: Option<crate::thread_files::ThreadFiles>,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) writes: Mutex<HookWrites>,
}

impl HookContext<'_> {
    pub(crate) fn write(&self, f: impl FnOnce(&mut HookWrites)) -> Result<(), HookError> {
        if !self.writable {
            return Err(HookError::new(
                "after_create_message runs after its commit: it cannot write",
            ));
        }
        let mut writes = self
            .state
            .writes
            .lock()
            .map_err(|_| HookError::new("hook writes poisoned"))?;
        f(&mut writes);
        Ok(())
    }

    /// Writes a message with `role` into the thread (committed with this step, after its own
    /// messages; no execution is started by it).
    pub fn inject_message(
        &self,
        role: Role,
        content: impl Into<String>,
        silent: bool,
    ) -> Result<(), HookError> {
        let content = content.into();
        self.write(|w| w.messages.push(crate::Injected::new(role, content, silent)))
    }

    /// Sets (or with `None` deletes) a durable value of the thread.
    pub fn set_value(
        &self,
        key: impl Into<String>,
        value: Option<serde_json::Value>,
    ) -> Result<(), HookError> {
        let key = key.into();
        self.write(|w| w.values.push((key, value)))
    }

    /// A durable value of the thread: this step's hook writes first, then the store.
    pub async fn get_value(&self, key: &str) -> Result<Option<serde_json::Value>, HookError> {
        let pending = self
            .state
            .writes
            .lock()
            .ok()
            .and_then(|w| w.values.iter().rev().find(|(k, _)| k == key).cloned());
        if let Some((_, v)) = pending {
            return Ok(v);
        }
        match &self.state.store {
            Some(store) => store
                .value(self.thread.id, key)
                .await
                .map_err(|e| HookError::new(e.to_string())),
            None => Ok(None),
        }
    }

    /// An env value of the side the hook runs for, then the process environment.
    pub fn env(&self, name: &str) -> Option<String> {
        crate::context::env_value(&self.state.env, name)
    }
}

/// A hook failed. Where the digest lets a hook veto (`before_create_message` on a handler's
/// writes), the failure rejects the write; elsewhere it is journaled (`hook_failed`) and the hook
/// is skipped, the last good value kept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

impl HookError {
    /// A failure with `message` as its error text (what `hook_failed` journals).
    pub fn new(message: impl Into<String>) -> Self {
        HookError(message.into())
    }
}

/// A `prefilter_llm_history` hook's answer: the messages to send, or a block that ends the
/// session before the model is called (`hook_blocked`), its message written by the acting side.
#[derive(Clone, Debug, PartialEq)]
pub enum Prefiltered {
    /// Send the model these messages.
    Messages(Vec<ChatMessage>),
    /// End the session without calling the model: the text is written as the acting side's
    /// message and is the session's result.
    Block(String),
}

/// A tool call a `tool_call_policy` hook is asked about, with the tool's declared approval.
#[derive(Clone, Copy, Debug)]
pub struct PolicyCall<'a> {
    /// The call: its id, the tool's name, the arguments the model gave.
    pub call: &'a ToolCall,
    /// The tool's `approval`, if it declares one.
    pub approval: Option<&'a duet_spec::Approval>,
    /// Whether that approval applies to these arguments (its `when` matches).
    pub applies: bool,
}

/// A `tool_call_policy` hook's answer for one call. Several hooks' answers combine to the most
/// restrictive (`Deny` over `Ask` over `Allow` over `NoOpinion`); the first `Deny` ends the
/// asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// The tool's own `approval` decides, as without the hook.
    NoOpinion,
    /// The call may run: waives the tool's approval only where it says `waivable: true`
    /// (otherwise the call still waits as its approval says).
    Allow,
    /// The call never runs: the model gets an error result carrying `reason`, and the journal a
    /// `tool_call_denied` record.
    Deny {
        /// Why, for the model and the journal.
        reason: String,
    },
    /// The call waits for a person's decision, as a call its tool's `approval` applies to.
    Ask {
        /// The decisions offered; `None` (or empty): the tool's approval's, else approve and
        /// reject.
        decisions: Option<Vec<duet_spec::Decision>>,
        /// A deadline for this call (a duet extension), in place of its tool's
        /// `approval.deadline`; `None`: the tool's, if any.
        deadline: Option<duet_spec::Deadline>,
    },
}

impl Policy {
    /// How restrictive the answer is: the combination keeps the highest.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Policy::NoOpinion => 0,
            Policy::Allow => 1,
            Policy::Ask { .. } => 2,
            Policy::Deny { .. } => 3,
        }
    }
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
    /// `tool_call_policy` (a duet extension): decides, before a tool call runs, whether it runs,
    /// is denied, or waits for a person ([`Policy`]). Asked for calls of tools (not handoffs or
    /// subagents), after `tool_call_started`. A failing hook counts as `Ask` (fail closed: a
    /// person decides) and is journaled (`hook_failed`).
    async fn tool_call_policy(
        &self,
        _ctx: &HookContext<'_>,
        _call: &PolicyCall<'_>,
    ) -> Result<Policy, HookError> {
        Ok(Policy::NoOpinion)
    }
    /// `question_reminder` (a duet extension): a deadline reminded the person of a question or
    /// a pending tool call ([`Reminder`]), once its `question_reminded` record is written. A
    /// notification goes out from here; a failure is logged (the reminder stands).
    async fn question_reminder(
        &self,
        _ctx: &HookContext<'_>,
        _reminder: &Reminder<'_>,
    ) -> Result<(), HookError> {
        Ok(())
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

/// What a `question_reminder` hook is told.
#[derive(Clone, Debug)]
pub struct Reminder<'a> {
    /// What is waited on (`question:SESSION:TURN` or `approval:SEQ`).
    pub subject: &'a str,
    /// Which reminder, from 1.
    pub n: u32,
    /// The question: the thread's last message before its park, or the pending call (its tool
    /// and arguments).
    pub question: &'a str,
    /// When the deadline's default answers (ms since the Unix epoch), if it has one.
    pub default_at: Option<i64>,
}

/// Hook implementations by registered name; and the project's own (`.ts` hooks with an
/// `execute`), by hook id, which the runtime makes itself.
#[derive(Clone, Default)]
pub struct Hooks(
    BTreeMap<String, Arc<dyn Hook>>,
    pub(crate) BTreeMap<String, Arc<dyn Hook>>,
);

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Hooks::default()
    }

    /// These hooks and `hook`, registered as `name` (replacing any of that name).
    pub fn with(mut self, name: &str, hook: impl Hook) -> Self {
        self.0.insert(name.to_owned(), Arc::new(hook));
        self
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
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
pub(crate) fn resolve(
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
