//! The driver: runs a thread's turns while holding its lease, doing the IO that the pure
//! decisions (`decide.rs`) and transitions (`transition.rs`) call for. Every step commits its
//! messages, records and counters in one transaction, and only then are its events sent.
//!
//! - `builder`: [`RuntimeBuilder`].
//! - `deliver`: [`Runtime::send`], [`Runtime::deliver`], [`Runtime::recover`], background runs.
//! - `lease`: the lease guard (renewal, a run registered while it lives).
//! - `runs`: this process's runs in flight and its background runs (plain data); `held`: a
//!   drain held for its run's next commit (plain data).
//! - `run`: the run loop — drain → decide → do → commit → emit.
//! - `step`: one model step; `router`: what each tool call is and where it goes.
//! - `handler_turn`: a handler's turn; `immediate`: `immediate` children at activation.
//! - `endpoint`: [`Runtime::call_endpoint`], a thread endpoint's call (its writes committed
//!   under the lease when the thread is free; read-only while it runs or once terminated).
//! - `spawn`: the [`Children`](crate::children::Children) port on this runtime (spawn,
//!   message, report).
//! - `awaits`: a blocking child's result reaching the parent's open tool call.
//! - `timers`: firing due timers, the retry policy, the loop that sleeps until the next one
//!   (`fire`: what a timer's kind does).
//! - `write`: the one write path — every commit, with its hooks, events and registry update in
//!   one fixed order.

mod approvals;
mod attach;
mod awaits;
mod batch;
mod builder;
mod code_tool;
mod deadline;
mod deliver;
mod effect_run;
mod emit;
mod endpoint;
mod fire;
mod handler_turn;
mod held;
mod immediate;
mod lease;
mod model_call;
mod returned;
mod router;
mod run;
mod runs;
mod spawn;
mod step;
mod subprompt;
mod thread_state;
mod timers;
mod trace;
mod write;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use duet_spec::{AgentDef, Project, PromptDef, Side};
use tokio_util::sync::CancellationToken;

pub use approvals::{AcceptedDecision, DecisionInput, DecisionLanded};
pub use builder::RuntimeBuilder;
pub use timers::retry_delay_ms;

use crate::clock::Clock;
use crate::decide;
use crate::delivery::Settled;
use crate::error::RunError;
use crate::event::EventSink;
use crate::handler::Handlers;
use crate::hooks::{ActiveHooks, Hooks};
use crate::model::{Model, ModelError, Providers};
use crate::store::{CommitOutcome, Store};
use crate::tools::Tools;
use crate::types::{SideId, Thread, ThreadId};

/// The engine: runs the agents of one project on one store. Cheap to clone; holds no per-thread
/// state between runs (a parked thread costs nothing here).
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    project: Arc<Project>,
    store: Arc<dyn Store>,
    providers: Providers,
    handlers: Handlers,
    /// Scheduled effects' code, by registered id.
    effects: crate::effect::EffectImpls,
    hooks: Hooks,
    tools: Tools,
    clock: Arc<dyn Clock>,
    /// The thread filesystem ([`RuntimeBuilder::blobs`], [`RuntimeBuilder::file_limits`]).
    files: crate::thread_files::ThreadFiles,
    lease_ms: i64,
    /// How long a claim on a timer lasts ([`RuntimeBuilder::timer_claim_ms`]).
    timer_claim_ms: i64,
    /// Told of the timers this runtime commits, so its own timer loop re-arms without waiting
    /// for the store's wakeups.
    timer_wakes: crate::store::WakeHub,
    /// Whether `chat` spans carry message contents ([`RuntimeBuilder::capture_content`]).
    capture_content: bool,
    /// Saves and restores trace context across the store ([`RuntimeBuilder::trace_carrier`]).
    carrier: Option<Arc<dyn crate::telemetry::TraceCarrier>>,
    models: Mutex<HashMap<String, Arc<dyn Model>>>,
    runs: runs::Runs,
    /// Drains held for their run's next commit.
    held: held::Held,
    background: runs::Background,
    /// Cancelled by [`Runtime::shutdown`]: runs stop at their next commit and give their lease
    /// back; nothing new is accepted.
    detached: CancellationToken,
}

/// What a child thread carries from its spawn: its arguments (its prompts' `{{name}}`
/// variables) and the env its relationship scoped into it. Empty for other threads.
struct ChildScope {
    arguments: serde_json::Value,
    env: BTreeMap<String, String>,
}

impl Default for ChildScope {
    fn default() -> Self {
        ChildScope {
            arguments: serde_json::json!({}),
            env: BTreeMap::new(),
        }
    }
}

/// Who acts in a step or handler turn, and for which run.
#[derive(Clone, Copy)]
struct Turn<'a> {
    agent: &'a AgentDef,
    side: SideId,
    scope: &'a ChildScope,
    events: &'a EventSink,
    cancel: &'a CancellationToken,
}

/// How a run's loop goes on.
enum Flow {
    /// Another round; `queued`: messages are waiting (as of the last commit).
    Continue {
        queued: bool,
    },
    Done(Settled),
}

impl Flow {
    fn of(outcome: CommitOutcome, t: &Thread) -> Flow {
        match outcome {
            CommitOutcome::Settled => Flow::Done(Settled::released(t)),
            CommitOutcome::Committed { queued } => Flow::Continue { queued },
        }
    }
}

impl Runtime {
    /// Now, by this runtime's clock.
    pub fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// This runtime's clock (the one its leases and journal times are written with).
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock.clone()
    }

    fn now(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// Stops this runtime for a graceful shutdown: deliveries are refused from now on
    /// ([`RunError::ShuttingDown`]), and every run of this process stops at its next commit —
    /// nothing is journaled for the stop — giving its lease back, so another process (or this
    /// one, restarted) continues the thread at once. Wait for the runs with
    /// [`Runtime::quiesce`] and for the callers' own runs as they return.
    pub fn shutdown(&self) {
        self.inner.detached.cancel();
    }

    /// Whether [`Runtime::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.detached.is_cancelled()
    }

    /// How many runs this process has in flight.
    pub fn runs_in_flight(&self) -> usize {
        self.inner.runs.len()
    }

    /// The loaded project whose agents this runtime runs.
    pub fn project(&self) -> &Arc<Project> {
        &self.inner.project
    }

    /// The store that holds this runtime's threads, journals and queues.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The thread filesystem: its files' rows in this runtime's store, their chunks in its blob
    /// store, within its limits.
    pub fn files(&self) -> &crate::thread_files::ThreadFiles {
        &self.inner.files
    }

    /// The names this runtime registers, for `Project::check_builtins`.
    pub fn builtins(&self) -> duet_spec::Builtins {
        duet_spec::Builtins {
            tools: self
                .inner
                .tools
                .builtin_names()
                .map(str::to_owned)
                .collect(),
            handlers: self.inner.handlers.names().map(str::to_owned).collect(),
            hooks: self.inner.hooks.names().map(str::to_owned).collect(),
            effects: self.inner.effects.names().map(str::to_owned).collect(),
        }
    }

    fn agent_def(&self, name: &str) -> Result<&AgentDef, RunError> {
        self.inner
            .project
            .agents
            .get(name)
            .map(|d| &d.def)
            .ok_or_else(|| RunError::UnknownAgent(name.to_owned()))
    }

    fn model(&self, name: &str) -> Result<Arc<dyn Model>, ModelError> {
        let mut cache = self
            .inner
            .models
            .lock()
            .map_err(|_| ModelError::new("model cache poisoned", false))?;
        if let Some(m) = cache.get(name) {
            return Ok(m.clone());
        }
        let def = self
            .inner
            .project
            .models
            .get(name)
            .ok_or_else(|| ModelError::new(format!("no model `{name}`"), false))?;
        let primary = self.build_model(&def.def)?;
        // The model's fallbacks (theirs are not followed: the chain is the one list).
        let mut links = vec![(name.to_owned(), primary)];
        for fallback in &def.def.fallbacks {
            if links.iter().any(|(n, _)| n == fallback) {
                continue;
            }
            let model = match self.inner.project.models.get(fallback) {
                Some(d) => self
                    .build_model(&d.def)
                    .unwrap_or_else(|e| Arc::new(crate::fallback::Unavailable(e))),
                None => Arc::new(crate::fallback::Unavailable(ModelError::new(
                    format!("no model `{fallback}`"),
                    false,
                ))),
            };
            links.push((fallback.clone(), model));
        }
        let model: Arc<dyn Model> = if links.len() == 1 {
            links.remove(0).1
        } else {
            Arc::new(crate::fallback::Chain { links })
        };
        cache.insert(name.to_owned(), model.clone());
        Ok(model)
    }

    /// The model `def` describes, built by its provider.
    fn build_model(&self, def: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        let provider = self.inner.providers.get(&def.provider).ok_or_else(|| {
            ModelError::new(
                format!("provider `{}` is not available in this build", def.provider),
                false,
            )
        })?;
        provider.model(def)
    }

    /// The env a side sees, lowest precedence first: the prompt's `env`, the agent's, then the
    /// values scoped into this thread by its parent (`scopedEnv`). The process environment is
    /// the fallback for names none of them has.
    fn env(
        &self,
        agent: &AgentDef,
        prompt: Option<&PromptDef>,
        scoped: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut env = prompt.map(|p| p.env.clone()).unwrap_or_default();
        env.extend(agent.env.clone());
        env.extend(scoped.clone());
        env
    }

    /// A child thread's spawn arguments and scoped env (empty for a thread with no parent).
    async fn child_scope(&self, t: &Thread) -> Result<ChildScope, RunError> {
        if t.parent.is_none() {
            return Ok(ChildScope::default());
        }
        Ok(self
            .inner
            .store
            .child(t.id)
            .await?
            .map_or_else(ChildScope::default, |c| ChildScope {
                arguments: c.arguments,
                env: c.env,
            }))
    }

    /// The hooks in force under `prompt` (a prompt side's; `None` for a handler or human side,
    /// or no side yet): the prompt's (else the agent's), wrapped by the parent hooks of the
    /// children the agent composes. `Err` names a hook this build cannot run: composition fails
    /// closed.
    fn hooks_for(
        &self,
        agent: &AgentDef,
        prompt: Option<&PromptDef>,
        env: &BTreeMap<String, String>,
    ) -> Result<ActiveHooks, String> {
        let env_lookup = |k: &str| crate::context::env_value(env, k);
        let refs = crate::hooks::resolve(&self.inner.project, agent, prompt, &env_lookup);
        let active = self.inner.hooks.activate(&self.inner.project, refs)?;
        Ok(active.with_state(&self.inner.store, &self.inner.files, env))
    }

    /// The hooks in force for `side` of `agent` (see [`Runtime::hooks_for`]).
    fn side_hooks(
        &self,
        agent: &AgentDef,
        side: SideId,
        scope: &ChildScope,
    ) -> Result<ActiveHooks, String> {
        let prompt = match decide::side(agent, side) {
            Side::Prompt(cfg) => self.inner.project.prompts.get(&cfg.prompt).map(|p| &p.def),
            _ => None,
        };
        self.hooks_for(agent, prompt, &self.env(agent, prompt, &scope.env))
    }

    /// Cancels this process's run of thread `id`, if it has one.
    pub(crate) fn cancel_local(&self, id: ThreadId) -> bool {
        self.inner.runs.cancel(id)
    }
}
