//! Hooks: Rust code that decorates a prompt side's turns, registered by name and run only where
//! referenced (digest §6). For the acting prompt the hooks are, in order: the `before_parent`
//! hooks its agent's children require (relationship order, side A's first), the base hooks (the
//! prompt's `hooks`, else the agent's), then the children's `after_parent` hooks. Each run says
//! where it came from ([`HookSource`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use duet_spec::{Agent, HookStage, Project, Prompt};

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

/// A hook implementation. Each method is one hook kind; a hook implements those its definition's
/// `hook` kind names (the others keep their pass-through defaults and are never called for it).
#[async_trait]
pub trait Hook: Send + Sync + 'static {
    /// `after_system_message`: may rewrite the system prompt.
    async fn after_system_message(&self, _ctx: &HookContext<'_>, text: String) -> String {
        text
    }
    /// `filter_messages`: may drop or change the messages a model sees.
    async fn filter_messages(
        &self,
        _ctx: &HookContext<'_>,
        messages: Vec<ChatMessage>,
    ) -> Vec<ChatMessage> {
        messages
    }
    /// `after_create_message`: observes each message a step committed.
    async fn after_create_message(&self, _ctx: &HookContext<'_>, _message: &Message) {}
    /// `tool_call_done`: observes each tool call and its result.
    async fn tool_call_done(&self, _ctx: &HookContext<'_>, _call: &ToolCall, _result: &ToolResult) {
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

/// The references in order, as `(hook id, source)`: children's `before_parent`, the base hooks,
/// children's `after_parent`. Relationships disabled by `optional` contribute nothing; `hidden`
/// ones still do.
pub fn resolve(
    project: &Project,
    agent: &Agent,
    prompt: &Prompt,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, HookSource)> {
    let enabled = |flag: &Option<String>| {
        flag.as_deref().is_none_or(|f| {
            env(f).is_some_and(|v| {
                matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes")
            })
        })
    };
    let required = |stage: HookStage| -> Vec<(String, HookSource)> {
        agent
            .side_a
            .subagents()
            .iter()
            .chain(agent.side_b.subagents())
            .filter(|r| enabled(&r.optional))
            .filter_map(|r| project.agents.get(&r.agent).map(|child| (r, &child.def)))
            .flat_map(|(r, child)| {
                child
                    .parent_hooks
                    .iter()
                    .filter(move |h| h.stage == stage)
                    .map(move |h| {
                        (
                            h.hook.clone(),
                            HookSource::Child {
                                relationship: r.name().to_owned(),
                                agent: child.name.clone(),
                            },
                        )
                    })
            })
            .collect()
    };
    let mut out = required(HookStage::BeforeParent);
    if prompt.hooks.is_empty() {
        out.extend(agent.hooks.iter().map(|h| {
            (
                h.clone(),
                HookSource::Agent {
                    agent: agent.name.clone(),
                },
            )
        }));
    } else {
        out.extend(prompt.hooks.iter().map(|h| {
            (
                h.clone(),
                HookSource::Prompt {
                    prompt: prompt.name.clone(),
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
    ) -> Result<Vec<Active>, String> {
        refs.into_iter()
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
            .collect()
    }
}
