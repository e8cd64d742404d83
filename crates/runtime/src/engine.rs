//! The driver: runs a thread's turns while holding its lease, doing the IO the pure decisions of
//! `decide.rs` call for. Every step commits its messages, records and counters in one
//! transaction, and only then are its events sent to the caller.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use duet_spec::{AgentDef, HandlerSide, Project, PromptSide, Side};
use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::clock::{Clock, SystemClock};
use crate::context;
use crate::decide::{self, AfterStep, AfterTurn, CallOutcome, Next};
use crate::event::{AgentEvent, EventSink};
use crate::handler::{Effects, Handlers, ThreadState};
use crate::model::{Model, ModelChunk, ModelError, ModelRequest, Providers, ToolSpec};
use crate::store::{Commit, CommitOutcome, Lease, NewThread, Renewal, Store, StoreError};
use crate::tools::{Tool, ToolContext, ToolResult, Tools};
use crate::types::{
    Message, NewQueued, Queued, Record, RecordKind, Role, SideId, StopReason, Thread, ThreadId,
    ThreadStatus, ToolCall, side_str,
};

/// Why a delivery or run could not proceed. Problems *inside* a run (a model error, a bad tool
/// call, a failing handler) are not errors: they are journaled and end in a stop reason.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no agent named `{0}` in the project")]
    UnknownAgent(String),
    #[error("no thread `{0}`")]
    UnknownThread(String),
    #[error("thread `{0}` is terminated")]
    Terminated(String),
    /// The thread belongs to another principal.
    #[error("thread `{0}` belongs to another principal")]
    Forbidden(String),
    /// Another runner holds the thread and the delivery refuses to queue (`invoke`).
    #[error("session busy: a run is already in flight for `{0}`")]
    Busy(String),
}

/// What a delivery does when another runner holds the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenBusy {
    /// Queue the message durably for that runner (`duet send`, a parent's message to a child).
    Queue,
    /// Refuse it, writing nothing: `invoke`'s `session_busy`.
    Reject,
}

/// Who delivers a message, and from where.
#[derive(Clone, Copy, Debug, Default)]
pub struct Origin<'a> {
    /// The principal as canonical JSON; a thread created under one is theirs alone.
    pub principal: Option<&'a str>,
    pub source: Option<&'a str>,
    /// The parent thread, when a parent delivers to its child: the message enters as `user` (side
    /// A acts on it) and a new thread is created as that parent's child.
    pub parent: Option<ThreadId>,
    /// The parent waits for this run inline (a blocking spawn): its outcome is the parent's tool
    /// result, so it is not also delivered to the parent as a message.
    pub inline: bool,
}

/// How a run settled.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    pub thread: ThreadId,
    /// The parent thread, for a subagent.
    pub parent: Option<ThreadId>,
    pub key: String,
    pub session: i64,
    pub status: ThreadStatus,
    pub stop_reason: Option<StopReason>,
    pub result: Option<String>,
}

impl Settled {
    pub(crate) fn of(t: &Thread) -> Self {
        Settled {
            thread: t.id,
            parent: t.parent,
            key: t.key.clone(),
            session: t.session,
            status: t.status,
            stop_reason: t.stop_reason,
            result: t.result.clone(),
        }
    }

    /// The terminal event for this outcome: `failed` for a step error, `completed` otherwise,
    /// with `data: {thread, session, status, stopReason, result}`.
    pub fn terminal_event(&self) -> AgentEvent {
        if self.stop_reason == Some(StopReason::Aborted) {
            return AgentEvent::Failed {
                details: "the run was aborted".into(),
                retryable: false,
                code: Some(crate::agent::codes::ABORTED.into()),
            };
        }
        if self.stop_reason == Some(StopReason::StepError) {
            return AgentEvent::Failed {
                details: self
                    .result
                    .clone()
                    .unwrap_or_else(|| "a step failed".into()),
                // Providers retry transient failures themselves (emitting `retrying`); what
                // reaches here failed for good.
                retryable: false,
                code: Some("step_error".into()),
            };
        }
        AgentEvent::Completed {
            data: Some(json!({
                "thread": self.key,
                "session": self.session,
                "status": self.status.as_str(),
                "stopReason": self.stop_reason.map(StopReason::as_str),
                "result": self.result,
            })),
        }
    }
}

/// What delivering an inbound message did.
#[derive(Clone, Debug, PartialEq)]
pub enum Delivered {
    /// This caller ran the thread until it settled.
    Settled(Settled),
    /// Another runner holds the thread: the message is queued durably and that runner delivers
    /// it before its next step.
    Queued { thread: ThreadId },
}

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    project: Arc<Project>,
    store: Arc<dyn Store>,
    providers: Providers,
    handlers: Handlers,
    hooks: crate::hooks::Hooks,
    tools: BTreeMap<String, Arc<dyn Tool>>,
    clock: Arc<dyn Clock>,
    lease_ms: i64,
}

impl RuntimeBuilder {
    pub fn providers(mut self, providers: Providers) -> Self {
        self.providers = providers;
        self
    }

    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    /// The hook implementations, by registered name.
    pub fn hooks(mut self, hooks: crate::hooks::Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Registers one more handler (beside those of [`RuntimeBuilder::handlers`]).
    pub fn handler(mut self, name: &str, handler: impl crate::handler::Handler) -> Self {
        self.handlers = std::mem::take(&mut self.handlers).with(name, handler);
        self
    }

    pub fn tool(mut self, name: &str, tool: impl Tool) -> Self {
        self.tools.insert(name.to_owned(), Arc::new(tool));
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long a lease lasts without renewal (default 30 s); a runner renews it every third.
    pub fn lease_ms(mut self, ms: i64) -> Self {
        self.lease_ms = ms.max(3);
        self
    }

    pub fn build(self) -> Runtime {
        let tools = Tools::new(self.project.clone(), self.tools);
        Runtime {
            inner: Arc::new(Inner {
                project: self.project,
                store: self.store,
                providers: self.providers,
                handlers: self.handlers,
                hooks: self.hooks,
                tools,
                clock: self.clock,
                lease_ms: self.lease_ms,
                models: Mutex::new(HashMap::new()),
                active: Mutex::new(HashMap::new()),
                background: std::sync::atomic::AtomicUsize::new(0),
                background_done: tokio::sync::Notify::new(),
            }),
        }
    }
}

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
    hooks: crate::hooks::Hooks,
    tools: Tools,
    clock: Arc<dyn Clock>,
    lease_ms: i64,
    models: Mutex<HashMap<String, Arc<dyn Model>>>,
    /// Background runs (non-blocking children) in flight, and a signal when the count drops.
    pub(crate) background: std::sync::atomic::AtomicUsize,
    pub(crate) background_done: tokio::sync::Notify,
    /// This process's runs in flight, by thread: the control plane's `abort` cancels them here
    /// at once (a run in another process sees a durable abort request at its next renewal).
    active: Mutex<HashMap<ThreadId, CancellationToken>>,
}

/// What a child thread carries from its spawn: its arguments (its prompts' `{{name}}`
/// variables) and the env its relationship scoped into it. Empty for other threads.
struct Scope {
    arguments: serde_json::Value,
    env: BTreeMap<String, String>,
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            arguments: json!({}),
            env: BTreeMap::new(),
        }
    }
}

/// Who acts in a step or handler turn, and for which run.
#[derive(Clone, Copy)]
struct Turn<'a> {
    agent: &'a AgentDef,
    side: SideId,
    scope: &'a Scope,
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
            CommitOutcome::Settled => Flow::Done(Settled::of(t)),
            CommitOutcome::Committed { queued } => Flow::Continue { queued },
        }
    }
}

impl Runtime {
    pub fn builder(project: Arc<Project>, store: Arc<dyn Store>) -> RuntimeBuilder {
        RuntimeBuilder {
            project,
            store,
            providers: Providers::new(),
            handlers: Handlers::new(),
            hooks: crate::hooks::Hooks::new(),
            tools: BTreeMap::new(),
            clock: Arc::new(SystemClock),
            lease_ms: 30_000,
        }
    }

    /// Now, by this runtime's clock.
    pub fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    pub fn project(&self) -> &Arc<Project> {
        &self.inner.project
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
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
        }
    }

    /// A lease for run `owner`. Every run has its own owner id, so two deliveries to one thread
    /// in the same process exclude each other as they would across processes.
    fn lease(&self, owner: Uuid) -> Lease {
        let now = self.inner.clock.now_ms();
        Lease {
            owner,
            until: now + self.inner.lease_ms,
            now,
        }
    }

    /// Delivers `text` to the thread `key` (created for `agent` if new) and runs it until it
    /// settles: parked for a person, or the session ended, or a run stop.
    ///
    /// The message is written by the agent's human side (or, for an agent without one, as a
    /// `user` message so side A acts first). If another runner holds the thread, the message is
    /// queued for it and `Delivered::Queued` comes back at once.
    pub async fn send(
        &self,
        key: &str,
        agent: Option<&str>,
        text: &str,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Delivered, RunError> {
        self.deliver(
            key,
            agent,
            text,
            Origin::default(),
            WhenBusy::Queue,
            events,
            cancel,
        )
        .await
    }

    /// [`Runtime::send`] with an origin and a busy policy: the delivery under `invoke` and the
    /// control plane.
    #[allow(clippy::too_many_arguments)]
    pub async fn deliver(
        &self,
        key: &str,
        agent: Option<&str>,
        text: &str,
        origin: Origin<'_>,
        when_busy: WhenBusy,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Delivered, RunError> {
        let now = self.inner.clock.now_ms();
        let thread = match agent {
            Some(name) => {
                if !self.inner.project.agents.contains_key(name) {
                    return Err(RunError::UnknownAgent(name.to_owned()));
                }
                let new = NewThread {
                    id: Uuid::now_v7(),
                    agent: name,
                    parent: origin.parent,
                    principal: origin.principal,
                    source: origin.source,
                    now,
                };
                let t = self.inner.store.open_thread(key, new).await?;
                // A thread handed off to another agent is still addressed by its first agent.
                if t.agent != name && t.origin != name {
                    return Err(StoreError::AgentMismatch {
                        key: key.to_owned(),
                        agent: t.agent,
                    }
                    .into());
                }
                t
            }
            None => self
                .inner
                .store
                .thread(key)
                .await?
                .ok_or_else(|| RunError::UnknownThread(key.to_owned()))?,
        };
        if thread.principal.is_some() && thread.principal.as_deref() != origin.principal {
            return Err(RunError::Forbidden(key.to_owned()));
        }
        if thread.status == ThreadStatus::Terminated {
            return Err(RunError::Terminated(key.to_owned()));
        }
        let agent = self.agent_def(&thread.agent)?;
        let message = if origin.parent.is_some() {
            // Parent to child: always a `user` message, so the child's side A acts on it.
            NewQueued {
                role: Role::User,
                side: SideId::B,
                content: text.to_owned(),
                human: false,
                silent: false,
                follow_up: false,
            }
        } else {
            inbound(agent, text)
        };
        let run = Uuid::now_v7();
        let claimed = match when_busy {
            WhenBusy::Queue => {
                self.inner
                    .store
                    .enqueue(thread.id, message, Some(self.lease(run)), now)
                    .await?
            }
            WhenBusy::Reject => {
                if !self
                    .inner
                    .store
                    .deliver_if_free(thread.id, message, self.lease(run))
                    .await?
                {
                    return Err(RunError::Busy(key.to_owned()));
                }
                true
            }
        };
        if !claimed {
            return Ok(Delivered::Queued { thread: thread.id });
        }
        self.drive(thread.id, run, events, cancel, !origin.inline)
            .await
            .map(Delivered::Settled)
    }

    /// Runs every thread that needs a runner (a dead runner's, or one with queued messages and no
    /// runner). Returns how many were run. Safe to call from any number of processes.
    pub async fn recover(&self, cancel: &CancellationToken) -> Result<usize, RunError> {
        let ids = self
            .inner
            .store
            .recoverable(self.inner.clock.now_ms())
            .await?;
        let mut ran = 0;
        for id in ids {
            if cancel.is_cancelled() {
                break;
            }
            let run = Uuid::now_v7();
            if self.inner.store.claim(id, self.lease(run)).await? {
                match self
                    .drive(id, run, &EventSink::discard(), cancel, true)
                    .await
                {
                    Ok(_) | Err(RunError::Store(StoreError::LeaseLost(_))) => ran += 1,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(ran)
    }

    fn agent_def(&self, name: &str) -> Result<&AgentDef, RunError> {
        self.inner
            .project
            .agents
            .get(name)
            .map(|d| &d.def)
            .ok_or_else(|| RunError::UnknownAgent(name.to_owned()))
    }

    /// Runs a thread whose lease this runtime holds, renewing the lease meanwhile.
    /// Boxed: a child's run may run its parent, so `drive` recurses through other runs.
    fn drive<'a>(
        &'a self,
        id: ThreadId,
        run: Uuid,
        events: &'a EventSink,
        cancel: &'a CancellationToken,
        notify_parent: bool,
    ) -> futures::future::BoxFuture<'a, Result<Settled, RunError>> {
        Box::pin(async move {
            let lost = CancellationToken::new();
            let stop_renewing = CancellationToken::new();
            // The run's own cancel: the caller's, plus an abort from the control plane.
            let abort = cancel.child_token();
            if let Ok(mut active) = self.inner.active.lock() {
                active.insert(id, abort.clone());
            }
            let renewer = {
                let rt = self.clone();
                let (lost, abort) = (lost.clone(), abort.clone());
                let stop = stop_renewing.clone();
                // Renew often enough that a remote abort request is seen within a second.
                let every = std::time::Duration::from_millis(
                    u64::try_from((self.inner.lease_ms / 3).min(1_000))
                        .unwrap_or(1)
                        .max(1),
                );
                tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(every) => {}
                        }
                        match rt.inner.store.renew(id, rt.lease(run)).await {
                            Ok(Renewal::Held {
                                abort_requested: false,
                            }) => {}
                            Ok(Renewal::Held {
                                abort_requested: true,
                            }) => abort.cancel(),
                            Ok(Renewal::Lost) | Err(_) => {
                                lost.cancel();
                                return;
                            }
                        }
                    }
                })
            };
            // Dropping this future (a caller that stopped listening, a killed task) must stop the
            // renewals too, or a dead run would hold the thread forever.
            let guard = stop_renewing.clone().drop_guard();
            let result = self.run(id, events, &abort, &lost, !notify_parent).await;
            drop(guard);
            if let Ok(mut active) = self.inner.active.lock() {
                active.remove(&id);
            }
            let _ = renewer.await;
            let (result, rest) = match result {
                Ok((settled, rest)) => (Ok(settled), rest),
                Err(e) => (Err(e), false),
            };
            if let Ok(settled) = &result
                && settled.parent.is_some()
            {
                // A child reports to its parent: its registry status, and (unless the parent
                // waited for it inline) its result as a message.
                let report: futures::future::BoxFuture<'_, ()> =
                    Box::pin(self.after_child_settled(settled, notify_parent));
                report.await;
                if rest {
                    let _ = self.inner.store.set_child_status(id, "running").await;
                }
            }
            if rest {
                // An inline run stopped at its session's end with messages waiting: they run on
                // in the background under the same lease, reporting as a non-blocking child does.
                self.drive_in_background(id, run);
            }
            result
        })
    }

    /// Runs thread `id`, whose lease `run` holds, in the background.
    pub(crate) fn drive_in_background(&self, id: ThreadId, run: Uuid) {
        let rt = self.clone();
        self.spawn_background(async move {
            let (sink, cancel) = (EventSink::discard(), CancellationToken::new());
            if let Err(e) = rt.drive(id, run, &sink, &cancel, true).await {
                tracing::warn!(thread = %id, error = %e, "a background run failed");
            }
        });
    }

    /// Queues `message` on `t` and tries its lease: the run id when this caller must run it.
    pub(crate) async fn queue_claiming(
        &self,
        t: &Thread,
        message: NewQueued,
    ) -> Result<Option<Uuid>, RunError> {
        let run = Uuid::now_v7();
        let now = self.now();
        let claimed = self
            .inner
            .store
            .enqueue(t.id, message, Some(self.lease(run)), now)
            .await?;
        Ok(claimed.then_some(run))
    }

    /// Runs `work` in the background (a non-blocking child's run), counted so that
    /// [`Runtime::quiesce`] can wait for it.
    pub(crate) fn spawn_background(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        use std::sync::atomic::Ordering;
        self.inner.background.fetch_add(1, Ordering::SeqCst);
        let rt = self.clone();
        tokio::spawn(async move {
            work.await;
            rt.inner.background.fetch_sub(1, Ordering::SeqCst);
            rt.inner.background_done.notify_waiters();
        });
    }

    /// Waits until no background run of this runtime is in flight (subagents started without
    /// blocking, and the parent runs their results trigger): for tests and graceful shutdown.
    pub async fn quiesce(&self) {
        use std::sync::atomic::Ordering;
        loop {
            // Registered before the check, so a run finishing in between still wakes us.
            let notified = self.inner.background_done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.background.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Queues a ready-made message on `t` and, if no run holds it, runs it (a child's result for
    /// its parent).
    pub(crate) async fn deliver_queued(
        &self,
        t: &Thread,
        message: NewQueued,
    ) -> Result<Option<Settled>, RunError> {
        let Some(run) = self.queue_claiming(t, message).await? else {
            return Ok(None);
        };
        self.drive(
            t.id,
            run,
            &EventSink::discard(),
            &CancellationToken::new(),
            true,
        )
        .await
        .map(Some)
    }

    /// Cancels this process's run of thread `id`, if it has one.
    pub(crate) fn cancel_local(&self, id: ThreadId) -> bool {
        let token = self
            .inner
            .active
            .lock()
            .ok()
            .and_then(|a| a.get(&id).cloned());
        token.map(|t| t.cancel()).is_some()
    }

    async fn run(
        &self,
        id: ThreadId,
        events: &EventSink,
        cancel: &CancellationToken,
        lost: &CancellationToken,
        inline: bool,
    ) -> Result<(Settled, bool), RunError> {
        let store = &self.inner.store;
        let mut t = store
            .thread_by_id(id)
            .await?
            .ok_or_else(|| RunError::UnknownThread(id.to_string()))?;
        let mut msgs = store.messages(id).await?;
        let project = self.inner.project.clone();
        // The queue is read when a commit said messages wait (and once at the start): each
        // commit reports the queue as of its own transaction, right before the next step.
        let mut queued = true;
        // Read once per run: a child's arguments and scoped env never change after its spawn.
        let scope = self.scope(&t).await?;
        if t.session == 0 {
            // A new thread: `after_thread_created` runs before anything else does. (Should the
            // process die before the first session opens, it runs again: hooks are meant to be
            // idempotent.)
            self.thread_created(&mut t, &scope).await?;
        }
        loop {
            if lost.is_cancelled() {
                return Err(StoreError::LeaseLost(id).into());
            }
            if cancel.is_cancelled() {
                return self.abort(&mut t).await.map(|s| (s, false));
            }
            if queued {
                // Inbound and steering messages are drained before the next step; follow-ups
                // only when the run would otherwise have settled.
                let queue = store.queue(id).await?;
                let (follow_ups, now): (Vec<Queued>, Vec<Queued>) =
                    queue.into_iter().partition(|q| q.follow_up);
                queued = if !now.is_empty() {
                    self.drain(&mut t, &mut msgs, &now, &scope).await?
                } else if !follow_ups.is_empty() && t.status != ThreadStatus::Running {
                    self.drain(&mut t, &mut msgs, &follow_ups, &scope).await?
                } else {
                    false
                };
            }
            let session_was_open = t.session_open;
            // Looked up each round: a handoff changes the thread's agent.
            let agent = &project
                .agents
                .get(&t.agent)
                .ok_or_else(|| RunError::UnknownAgent(t.agent.clone()))?
                .def;
            let flow = match decide::next(agent, &t) {
                Next::Settle => {
                    // Nothing to run. A thread left `running` with no side to act (never made by
                    // this engine, but a journal from elsewhere could) stops rather than being
                    // recovered forever.
                    let records = if t.status == ThreadStatus::Running {
                        stop(&mut t, StopReason::Aborted, self.now())
                    } else {
                        Vec::new()
                    };
                    self.finish(&mut t, records).await?
                }
                Next::EndSession(reason) => {
                    let result = decide::cap_result(agent, &msgs);
                    let records = self.end_session(&mut t, reason, result);
                    self.finish(&mut t, records).await?
                }
                Next::Park => {
                    let records = park(&mut t, StopReason::AwaitingHuman, self.now());
                    self.finish(&mut t, records).await?
                }
                Next::Stop(reason) => {
                    let records = stop(&mut t, reason, self.now());
                    self.finish(&mut t, records).await?
                }
                Next::Handler(side) => {
                    let Side::Handler(cfg) = decide::side(agent, side) else {
                        continue;
                    };
                    let turn = Turn {
                        agent,
                        side,
                        scope: &scope,
                        events,
                        cancel,
                    };
                    self.handler_turn(cfg, &turn, &mut t, &mut msgs).await?
                }
                Next::Step(side) => {
                    let Side::Prompt(cfg) = decide::side(agent, side) else {
                        continue;
                    };
                    let turn = Turn {
                        agent,
                        side,
                        scope: &scope,
                        events,
                        cancel,
                    };
                    self.step(cfg, &turn, &mut t, &mut msgs).await?
                }
            };
            match flow {
                Flow::Done(settled) => return Ok((settled, false)),
                Flow::Continue { queued: more } => {
                    if session_was_open && !t.session_open && t.parent.is_some() {
                        if inline {
                            // The parent waits for this session's outcome; what was queued
                            // meanwhile runs on in a run of its own (the lease is still held).
                            return Ok((Settled::of(&t), true));
                        }
                        // The run goes on with the next session: this one reports now, before
                        // the next can.
                        self.report_session(&t).await;
                    }
                    queued |= more;
                }
            }
        }
    }

    fn now(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// The hooks in force under `prompt` (a prompt side's; `None` for a handler or human side,
    /// or no side yet): the prompt's (else the agent's), wrapped by the agent's children's parent
    /// hooks. `Err` names a hook this build cannot run: composition fails closed.
    fn hooks_for(
        &self,
        agent: &AgentDef,
        prompt: Option<&duet_spec::PromptDef>,
        env: &BTreeMap<String, String>,
    ) -> Result<crate::hooks::ActiveHooks, String> {
        let env_lookup = |k: &str| env.get(k).cloned().or_else(|| std::env::var(k).ok());
        let refs = crate::hooks::resolve(&self.inner.project, agent, prompt, &env_lookup);
        self.inner.hooks.activate(&self.inner.project, refs)
    }

    /// The hooks in force for `side` of `agent` (see [`Runtime::hooks_for`]).
    fn side_hooks(
        &self,
        agent: &AgentDef,
        side: SideId,
        scope: &Scope,
    ) -> Result<crate::hooks::ActiveHooks, String> {
        let prompt = match decide::side(agent, side) {
            Side::Prompt(cfg) => self.inner.project.prompts.get(&cfg.prompt).map(|p| &p.def),
            _ => None,
        };
        self.hooks_for(agent, prompt, &self.env(agent, prompt, &scope.env))
    }

    /// Runs `after_thread_created` (the agent's hooks: no prompt is active yet).
    async fn thread_created(&self, t: &mut Thread, scope: &Scope) -> Result<(), RunError> {
        let agent = self.agent_def(&t.agent)?;
        // A missing hook is reported by the first step, which fails closed.
        let Ok(mut hooks) = self.hooks_for(agent, None, &self.env(agent, None, &scope.env)) else {
            return Ok(());
        };
        if !hooks.has("after_thread_created") {
            return Ok(());
        }
        hooks.after_thread_created(t).await;
        let records = hook_failures(t, &mut hooks, self.now());
        if !records.is_empty() {
            self.commit(
                t,
                Commit {
                    records,
                    ..Commit::default()
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Persists queued inbound messages: opens a session if none is open, counts human turns
    /// (once per side per drain), and hands the turn to the sibling of the first message's author.
    /// Returns whether more messages arrived meanwhile.
    async fn drain(
        &self,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        queue: &[Queued],
        scope: &Scope,
    ) -> Result<bool, RunError> {
        let now = self.now();
        let mut commit = Commit::default();
        let mut pending_arguments = None;
        if t.status != ThreadStatus::Running {
            t.steps.a = 0;
            t.steps.b = 0;
            t.steps_total = 0;
            t.stop_reason = None;
        }
        if t.session == 0 && scope.arguments.as_object().is_some_and(|o| !o.is_empty()) {
            // A child's first messages start with its spawn arguments (silent), written with its
            // first message: its model sees them whether or not its prompt names them.
            let listed = serde_json::to_string_pretty(&scope.arguments).unwrap_or_default();
            pending_arguments = Some(format!("Initial arguments:\n{listed}"));
        }
        if !t.session_open {
            t.session += 1;
            t.session_open = true;
            t.turns.a = 0;
            t.turns.b = 0;
            t.result = None;
            let seq = t.take_seq();
            commit.records.push(record(
                seq,
                RecordKind::SessionStarted,
                json!({"session": t.session}),
                now,
            ));
        }
        if let Some(text) = pending_arguments {
            let mut m = Message::text(
                t.take_seq(),
                t.session,
                Role::System,
                Some(SideId::B),
                text,
                now,
            );
            m.silent = true;
            commit.messages.push(m);
        }
        let mut counted = [false, false];
        for q in queue {
            let mut m = Message::text(
                t.take_seq(),
                t.session,
                q.role,
                Some(q.side),
                q.content.clone(),
                now,
            );
            m.silent = q.silent;
            commit.messages.push(m);
            commit.drained.push(q.id);
            let slot = usize::from(q.side == SideId::B);
            if q.human && !counted[slot] {
                counted[slot] = true;
                t.turns[q.side] += 1;
                let seq = t.take_seq();
                commit.records.push(record(
                    seq,
                    RecordKind::TurnCompleted,
                    json!({"side": side_str(q.side)}),
                    now,
                ));
            }
        }
        if let Some(first) = queue.first() {
            t.acting = Some(first.side.sibling());
        }
        // The inserts pass the create hooks of the side about to act. (Should its hooks not
        // resolve, they run for none of them: that side's step fails closed.)
        let acting = t.acting.unwrap_or(SideId::A);
        let mut hooks = self
            .agent_def(&t.agent)
            .ok()
            .and_then(|agent| self.side_hooks(agent, acting, scope).ok());
        if let Some(hooks) = hooks.as_mut() {
            let messages = std::mem::take(&mut commit.messages);
            commit.messages = hooks.before_create_all(t, messages).await;
            commit.records.extend(hook_failures(t, hooks, now));
        }
        t.status = ThreadStatus::Running;
        t.updated_at = now;
        let new = commit.messages.clone();
        let outcome = self.commit(t, commit).await?;
        if let Some(hooks) = &hooks {
            hooks.after_create_message(t, &new).await;
        }
        msgs.extend(new);
        Ok(outcome == CommitOutcome::Committed { queued: true })
    }

    async fn commit(&self, t: &Thread, commit: Commit) -> Result<CommitOutcome, RunError> {
        // The run's own id is the lease owner the thread row was claimed with.
        let owner = t.lease_owner.ok_or(StoreError::LeaseLost(t.id))?;
        Ok(self.inner.store.commit(t, owner, commit).await?)
    }

    /// Writes the final records and releases the lease, unless messages arrived meanwhile.
    async fn finish(&self, t: &mut Thread, records: Vec<Record>) -> Result<Flow, RunError> {
        t.updated_at = self.now();
        let outcome = self
            .commit(
                t,
                Commit {
                    records,
                    settle: true,
                    ..Commit::default()
                },
            )
            .await?;
        Ok(Flow::of(outcome, t))
    }

    async fn abort(&self, t: &mut Thread) -> Result<Settled, RunError> {
        let records = stop(t, StopReason::Aborted, self.now());
        t.updated_at = self.now();
        // Queued messages stay queued: recovery (or the next delivery) runs them.
        self.commit(
            t,
            Commit {
                records,
                settle: true,
                ..Commit::default()
            },
        )
        .await?;
        Ok(Settled::of(t))
    }

    fn end_session(
        &self,
        t: &mut Thread,
        reason: StopReason,
        result: Option<String>,
    ) -> Vec<Record> {
        let now = self.now();
        t.session_open = false;
        t.status = ThreadStatus::Idle;
        t.stop_reason = Some(reason);
        t.result.clone_from(&result);
        t.turns.a = 0;
        t.turns.b = 0;
        t.acting = None;
        let seq = t.take_seq();
        vec![record(
            seq,
            RecordKind::SessionEnded,
            json!({"stopReason": reason.as_str(), "result": result}),
            now,
        )]
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
        let provider = self.inner.providers.get(&def.def.provider).ok_or_else(|| {
            ModelError::new(
                format!(
                    "provider `{}` is not available in this build",
                    def.def.provider
                ),
                false,
            )
        })?;
        let model = provider.model(&def.def)?;
        cache.insert(name.to_owned(), model.clone());
        Ok(model)
    }

    /// The env a side sees, lowest precedence first: the prompt's `env`, the agent's, then the
    /// values scoped into this thread by its parent (`scopedEnv`). The process environment is
    /// the fallback for names none of them has.
    fn env(
        &self,
        agent: &AgentDef,
        prompt: Option<&duet_spec::PromptDef>,
        scoped: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut env = prompt.map(|p| p.env.clone()).unwrap_or_default();
        env.extend(agent.env.clone());
        env.extend(scoped.clone());
        env
    }

    /// A child thread's spawn arguments and scoped env (empty for a thread with no parent).
    async fn scope(&self, t: &Thread) -> Result<Scope, RunError> {
        if t.parent.is_none() {
            return Ok(Scope::default());
        }
        Ok(self
            .inner
            .store
            .child(t.id)
            .await?
            .map_or_else(Scope::default, |c| Scope {
                arguments: c.arguments,
                env: c.env,
            }))
    }

    /// Records a failed step and stops the run (`step_error`); the session stays open.
    async fn step_error(&self, t: &mut Thread, error: &str) -> Result<Flow, RunError> {
        let now = self.now();
        let seq = t.take_seq();
        let mut records = vec![record(
            seq,
            RecordKind::StepError,
            json!({"error": error}),
            now,
        )];
        records.extend(stop(t, StopReason::StepError, now));
        t.result = Some(error.to_owned());
        self.finish(t, records).await
    }

    async fn step(
        &self,
        cfg: &PromptSide,
        turn: &Turn<'_>,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
    ) -> Result<Flow, RunError> {
        let Turn {
            agent,
            side,
            scope,
            events,
            cancel,
        } = *turn;
        let project = self.inner.project.clone();
        let Some(prompt) = project.prompts.get(&cfg.prompt).map(|d| &d.def) else {
            return self
                .step_error(t, &format!("no prompt `{}`", cfg.prompt))
                .await;
        };
        let model = match self.model(&prompt.model) {
            Ok(m) => m,
            Err(e) => return self.step_error(t, &e.message).await,
        };
        let env = self.env(agent, Some(prompt), &scope.env);
        let offered: Vec<ToolSpec> = prompt
            .tools
            .iter()
            .filter_map(|entry| {
                let tool = project.tools.get(&entry.name)?;
                Some(ToolSpec {
                    name: entry.name.clone(),
                    description: tool.def.description.clone(),
                    parameters: tool
                        .def
                        .args
                        .clone()
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                })
            })
            .collect();
        // The side's subagent relationships, as the reserved lifecycle tools.
        let env_lookup = |k: &str| env.get(k).cloned().or_else(|| std::env::var(k).ok());
        let relationships = crate::subagents::offered(cfg, &env_lookup);
        let lifecycle = crate::subagents::tool_specs(&project, &relationships);
        // Exposed agents named in the prompt's tools with no relationship: handoffs.
        let handoffs = decide::handoff_targets(&project, agent, prompt);
        let mut offered = offered;
        offered.extend(lifecycle.iter().cloned());
        offered.extend(handoffs.iter().map(|(name, target)| ToolSpec {
            name: (*name).to_owned(),
            description: target.tool_description.clone().unwrap_or_default(),
            parameters: decide::side_a_schema(&project, target),
        }));
        // The hooks of this prompt on this agent, in order; a missing one fails closed.
        let mut hooks = match self.hooks_for(agent, Some(prompt), &env) {
            Ok(active) => active,
            Err(e) => return self.step_error(t, &format!("hooks fail closed: {e}")).await,
        };
        // `immediate` children start when their side first acts, before its first model call.
        if let Some(flow) = self
            .spawn_immediate(agent, cfg, side, t, msgs, &env, &mut hooks, cancel)
            .await?
        {
            return Ok(flow);
        }
        let system = context::system_prompt(&project, prompt, &env, &scope.arguments);
        let system = hooks.after_system_message(t, system).await;
        let context_messages = context::messages(msgs, side, prompt);
        let context_messages = hooks.filter_messages(t, context_messages).await;
        let context_messages = match hooks.prefilter_llm_history(t, context_messages).await {
            crate::hooks::Prefiltered::Messages(m) => m,
            crate::hooks::Prefiltered::Block(why) => {
                return self.hook_blocked(side, t, msgs, events, hooks, why).await;
            }
        };
        let request = ModelRequest {
            thread: t.id,
            call_index: context::call_index(msgs, &prompt.model),
            system,
            messages: context_messages,
            tools: offered.clone(),
            tool_choice: prompt.tool_choice,
            parallel_tool_calls: prompt.parallel_tool_calls,
        };

        // Call the model.
        let mut stream = model.stream(request);
        let (mut text, mut thinking, mut calls) = (String::new(), String::new(), Vec::new());
        loop {
            let chunk = tokio::select! {
                () = cancel.cancelled() => return self.abort(t).await.map(Flow::Done),
                chunk = stream.next() => chunk,
            };
            match chunk {
                None => break,
                Some(Ok(ModelChunk::Text(s))) => text.push_str(&s),
                Some(Ok(ModelChunk::Thinking(s))) => thinking.push_str(&s),
                Some(Ok(ModelChunk::ToolCall {
                    id,
                    name,
                    arguments,
                })) => calls.push((id, name, arguments)),
                Some(Ok(ModelChunk::Usage { .. })) => {}
                Some(Err(e)) => {
                    return self
                        .step_error(t, &format!("model `{}`: {}", prompt.model, e.message))
                        .await;
                }
            }
        }
        drop(stream);

        let now = self.now();
        let seq = t.take_seq();
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .enumerate()
            .map(|(i, (id, name, arguments))| ToolCall {
                id: id.unwrap_or_else(|| format!("call_{seq}_{i}")),
                name,
                arguments,
            })
            .collect();
        let call_refs: Vec<(&str, &serde_json::Value)> = tool_calls
            .iter()
            .map(|c| (c.name.as_str(), &c.arguments))
            .collect();
        let content =
            decide::stop_tool_response(cfg, &call_refs).or((!text.is_empty()).then_some(text));
        let mut message = Message {
            seq,
            session: t.session,
            role: Role::authored_by(side),
            side: Some(side),
            content,
            thinking: (!thinking.is_empty()).then_some(thinking),
            tool_calls,
            tool_call_id: None,
            tool_name: None,
            tool_status: None,
            silent: false,
            model: Some(prompt.model.clone()),
            created_at: now,
        };

        // Run the tools, in order.
        let mut results: Vec<ToolResult> = Vec::with_capacity(message.tool_calls.len());
        // What is stored for each call: the result after the hooks, or `None` (dropped).
        let mut stored: Vec<Option<ToolResult>> = Vec::with_capacity(message.tool_calls.len());
        let mut handoff: Option<(String, serde_json::Value)> = None;
        // Which call made the handoff (its index).
        let mut handoff_call: Option<usize> = None;
        for call in &message.tool_calls {
            if cancel.is_cancelled() {
                t.next_seq = seq;
                return self.abort(t).await.map(Flow::Done);
            }
            hooks.tool_call_started(t, call).await;
            let result = if let Some((_, target)) = handoffs.iter().find(|(n, _)| *n == call.name) {
                let schema = decide::side_a_schema(&project, target);
                let errors = crate::subagents::schema_errors(&schema, &call.arguments);
                if !errors.is_empty() {
                    ToolResult::error(format!(
                        "Invalid arguments for `{}`: {}",
                        call.name,
                        errors.join("; ")
                    ))
                } else if handoff.is_some() {
                    ToolResult::error("Only one handoff per step: this one was not made.")
                } else {
                    handoff = Some((call.name.clone(), call.arguments.clone()));
                    handoff_call = Some(stored.len());
                    ToolResult::ok("Handoff complete")
                }
            } else if lifecycle
                .iter()
                .any(|o| o.name == crate::subagents::canonical(&call.name))
            {
                let call_fut: futures::future::BoxFuture<'_, ToolResult> =
                    Box::pin(self.lifecycle_call(
                        t,
                        side,
                        &relationships,
                        &lifecycle,
                        &call.name,
                        &call.arguments,
                        crate::subagents::Caller {
                            env: &env,
                            hooks: &mut hooks,
                        },
                        cancel,
                    ));
                // Not raced against the cancel: a blocking child runs on a child of this run's
                // token, so it stops on its own (and commits its abort) before this returns.
                let result = call_fut.await;
                if cancel.is_cancelled() {
                    t.next_seq = seq;
                    return self.abort(t).await.map(Flow::Done);
                }
                result
            } else if offered.iter().any(|o| o.name == call.name) {
                let ctx = ToolContext {
                    thread: t.id,
                    idempotency_key: format!("{}:{}", t.id, call.id),
                };
                // A cancelled run stops waiting on its tool at once; the step is not committed.
                tokio::select! {
                    () = cancel.cancelled() => {
                        t.next_seq = seq;
                        return self.abort(t).await.map(Flow::Done);
                    }
                    r = self.inner.tools.run(ctx, &call.name, &call.arguments, &env_lookup) => r,
                }
            } else {
                let names: Vec<&str> = offered.iter().map(|o| o.name.as_str()).collect();
                ToolResult::error(format!(
                    "Unknown tool `{}`. Available tools: {}.",
                    call.name,
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ))
            };
            let kept = hooks.tool_result(t, call, result.clone()).await;
            // A handoff whose result a hook turned into an error is not made.
            if handoff_call == Some(stored.len()) && kept.as_ref().is_some_and(|r| !r.is_ok()) {
                handoff = None;
            }
            stored.push(kept);
            results.push(result);
        }
        let calls = message.tool_calls.clone();
        let tool_messages: Vec<Message> = calls
            .iter()
            .zip(&stored)
            .filter_map(|(call, r)| Some((call, r.as_ref()?)))
            .map(|(call, r)| Message {
                seq: t.take_seq(),
                session: t.session,
                role: Role::Tool,
                side: Some(side),
                content: Some(r.content.clone()),
                thinking: None,
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id.clone()),
                tool_name: Some(call.name.clone()),
                tool_status: Some(r.status),
                silent: false,
                model: None,
                created_at: now,
            })
            .collect();

        // A call a hook dropped leaves the history with its result; it still counts below.
        message.tool_calls.retain(|c| {
            calls
                .iter()
                .zip(&stored)
                .any(|(k, r)| k.id == c.id && r.is_some())
        });

        // Decide.
        // The stop rules read what was stored (a hook may have rewritten a result); a dropped
        // call counts as it ran.
        let outcomes: Vec<CallOutcome<'_>> = calls
            .iter()
            .zip(
                results
                    .iter()
                    .zip(&stored)
                    .map(|(r, s)| s.as_ref().unwrap_or(r)),
            )
            .map(|(c, r)| CallOutcome {
                name: &c.name,
                arguments: &c.arguments,
                status: r.status,
                content: &r.content,
            })
            .collect();
        // A handoff ends the step: no turn is counted and no side switches; the new agent's
        // side A acts next.
        let after = if handoff.is_some() {
            AfterStep::Continue
        } else {
            decide::after_step(cfg, message.content.as_deref(), &outcomes)
        };
        let status = decide::status_text(cfg, &outcomes);
        drop(outcomes);
        t.steps[side] += 1;
        t.steps_total += 1;
        t.updated_at = now;
        let mut records = Vec::new();
        if let Some(text) = status.clone() {
            t.status_text = Some(text.clone());
            let seq = t.take_seq();
            records.push(record(seq, RecordKind::Status, json!({"text": text}), now));
        }
        let mut settle = false;
        match after {
            AfterStep::EndSession { reason, result } => {
                records.extend(self.end_session(t, reason, Some(result)));
                settle = true;
            }
            AfterStep::TurnComplete(reason) => {
                t.turns[side] += 1;
                let seq = t.take_seq();
                records.push(record(
                    seq,
                    RecordKind::TurnCompleted,
                    json!({"side": side_str(side)}),
                    now,
                ));
                match decide::after_turn(
                    agent,
                    t,
                    side,
                    reason.unwrap_or(StopReason::StopOnResponse),
                ) {
                    AfterTurn::EndSession(r) => {
                        let mut all = msgs.clone();
                        all.push(message.clone());
                        let result = decide::cap_result(agent, &all);
                        records.extend(self.end_session(t, r, result));
                        settle = true;
                    }
                    AfterTurn::Park(r) => {
                        records.extend(park(t, r, now));
                        settle = true;
                    }
                    AfterTurn::Stop(r) => {
                        records.extend(stop(t, r, now));
                        settle = true;
                    }
                    AfterTurn::Switch(next) => t.acting = Some(next),
                }
            }
            AfterStep::Continue => {}
        }

        let mut values = Vec::new();
        let mut new = Vec::with_capacity(2 + tool_messages.len());
        new.push(message);
        new.extend(tool_messages);
        if let Some((target, args)) = handoff {
            let seq = t.take_seq();
            records.push(record(
                seq,
                RecordKind::Handoff,
                json!({"from": t.agent, "to": target}),
                now,
            ));
            // A sub-prompt-style entry may name the argument that becomes the new agent's first
            // user message.
            let entry = prompt.tools.iter().find(|e| e.name == target);
            let init = entry
                .and_then(|e| e.init_user_message_property.as_deref())
                .and_then(|p| args.get(p));
            if let Some(text) = init {
                let content = text
                    .as_str()
                    .map_or_else(|| text.to_string(), str::to_owned);
                new.push(Message::text(
                    t.take_seq(),
                    t.session,
                    Role::User,
                    Some(SideId::B),
                    content,
                    now,
                ));
            }
            // The new agent's sides activate afresh: its `immediate` children are re-armed.
            for s in [SideId::A, SideId::B] {
                values.push((crate::subagents::activation_key(&target, s), None));
            }
            t.agent = target;
            t.acting = Some(SideId::A);
        }
        let new = hooks.before_create_all(t, new).await;
        records.extend(hook_failures(t, &mut hooks, now));
        let outcome = self
            .commit(
                t,
                Commit {
                    messages: new.clone(),
                    records,
                    settle,
                    values,
                    ..Commit::default()
                },
            )
            .await?;
        // Committed: now the caller may see it, and the hooks that watch messages; a child's
        // free-text status shows in its parent's registry.
        emit_messages(events, &new);
        if let (Some(text), Some(_)) = (&status, t.parent) {
            self.inner.store.set_child_status(t.id, text).await?;
        }
        hooks.after_create_message(t, &new).await;
        msgs.extend(new);
        Ok(Flow::of(outcome, t))
    }

    /// Starts the side's due `immediate` children (see [`Runtime::immediate_spawns`]) and
    /// writes what they report into the thread before its model call. `Some` when the run was
    /// aborted meanwhile.
    #[allow(clippy::too_many_arguments)]
    async fn spawn_immediate(
        &self,
        agent: &AgentDef,
        cfg: &PromptSide,
        side: SideId,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        env: &BTreeMap<String, String>,
        hooks: &mut crate::hooks::ActiveHooks,
        cancel: &CancellationToken,
    ) -> Result<Option<Flow>, RunError> {
        if !cfg.subagents.iter().any(|r| r.immediate.is_some()) {
            return Ok(None);
        }
        // Activation is durable: marked in the commit that writes what the children reported,
        // so a run that dies in between activates again (and finds the children it started).
        let mark = crate::subagents::activation_key(&t.agent, side);
        if self.inner.store.value(t.id, &mark).await?.is_some() {
            return Ok(None);
        }
        let caller = crate::subagents::Caller { env, hooks };
        let run: futures::future::BoxFuture<'_, Result<Vec<String>, RunError>> =
            Box::pin(self.immediate_spawns(agent, cfg, side, t, msgs, caller, cancel));
        let notes = run.await?;
        let now = self.now();
        // On the owning side's perspective, like every child-to-parent message.
        let notes: Vec<Message> = notes
            .into_iter()
            .map(|note| {
                let mut m = Message::text(
                    t.take_seq(),
                    t.session,
                    Role::authored_by(side.sibling()),
                    Some(side.sibling()),
                    note,
                    now,
                );
                m.silent = true;
                m
            })
            .collect();
        let new = hooks.before_create_all(t, notes).await;
        t.updated_at = now;
        self.commit(
            t,
            Commit {
                messages: new.clone(),
                // An aborted activation is not complete: the next run starts what it did not.
                values: if cancel.is_cancelled() {
                    Vec::new()
                } else {
                    vec![(mark, Some(json!(true)))]
                },
                ..Commit::default()
            },
        )
        .await?;
        hooks.after_create_message(t, &new).await;
        msgs.extend(new);
        if cancel.is_cancelled() {
            return self.abort(t).await.map(|s| Some(Flow::Done(s)));
        }
        Ok(None)
    }

    /// A `prefilter_llm_history` hook blocked the step: its message is written by the acting
    /// side and the session ends (`hook_blocked`) before any model call.
    async fn hook_blocked(
        &self,
        side: SideId,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        events: &EventSink,
        mut hooks: crate::hooks::ActiveHooks,
        why: String,
    ) -> Result<Flow, RunError> {
        let now = self.now();
        let seq = t.take_seq();
        let message = Message::text(
            seq,
            t.session,
            Role::authored_by(side),
            Some(side),
            why.clone(),
            now,
        );
        let message = hooks.before_create_message(t, message).await;
        let mut records = self.end_session(t, StopReason::HookBlocked, Some(why));
        records.extend(hook_failures(t, &mut hooks, now));
        t.updated_at = now;
        let new = vec![message];
        let outcome = self
            .commit(
                t,
                Commit {
                    messages: new.clone(),
                    records,
                    settle: true,
                    ..Commit::default()
                },
            )
            .await?;
        emit_messages(events, &new);
        hooks.after_create_message(t, &new).await;
        msgs.extend(new);
        Ok(Flow::of(outcome, t))
    }

    async fn handler_turn(
        &self,
        cfg: &HandlerSide,
        turn: &Turn<'_>,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
    ) -> Result<Flow, RunError> {
        let Turn {
            agent,
            side,
            scope,
            events,
            cancel,
        } = *turn;
        let project = self.inner.project.clone();
        let builtin = project
            .handlers
            .get(&cfg.handler)
            .map_or(cfg.handler.as_str(), |h| h.def.builtin.as_str());
        let Some(handler) = self.inner.handlers.get(builtin).cloned() else {
            return self
                .step_error(
                    t,
                    &format!("handler `{builtin}` is not registered in this build of duet"),
                )
                .await;
        };
        let env = self.env(agent, None, &scope.env);
        // A handler side has no prompt: the agent's hooks (and its children's parent hooks).
        let hooks = match self.hooks_for(agent, None, &env) {
            Ok(active) => active,
            Err(e) => return self.step_error(t, &format!("hooks fail closed: {e}")).await,
        };
        let sibling: &[duet_spec::SubagentRelationship] = match decide::side(agent, side.sibling())
        {
            Side::Prompt(p) => &p.subagents,
            Side::Handler(h) => &h.subagents,
            Side::Human(_) => &[],
        };
        let inbound: Vec<Message> = msgs
            .iter()
            .filter(|m| {
                m.side == Some(side.sibling())
                    && matches!(m.role, Role::User | Role::Assistant)
                    && m.seq > t.watermarks[side]
            })
            .cloned()
            .collect();
        let mut stop_result: Option<Option<String>> = None;
        let mut queued = false;
        let mut child_status: Option<String> = None;
        for m in &inbound {
            if cancel.is_cancelled() {
                return self.abort(t).await.map(Flow::Done);
            }
            let mut state = ThreadState {
                thread: t,
                messages: msgs,
                side,
                env: &env,
                store: self.inner.store.as_ref(),
                tools: &self.inner.tools,
                runtime: self,
                relationships: &cfg.subagents,
                sibling_relationships: sibling,
                arguments: &scope.arguments,
                hooks: hooks.clone(),
                effects: Effects::default(),
            };
            let result = tokio::select! {
                () = cancel.cancelled() => return self.abort(t).await.map(Flow::Done),
                r = handler.handle(&mut state, m) => r,
            };
            let effects = std::mem::take(&mut state.effects);
            let mut hooks = std::mem::take(&mut state.hooks);
            drop(state);
            let now = self.now();
            // Each message the handler wrote passes `before_create_message`; a hook that fails
            // rejects the delivery like a handler error.
            let mut written = Vec::with_capacity(effects.injected.len());
            let mut result = result;
            if result.is_ok() {
                for (role, content, silent) in &effects.injected {
                    let writer = match role {
                        Role::Assistant => Some(SideId::A),
                        Role::User => Some(SideId::B),
                        _ => None,
                    };
                    let mut msg = Message::text(0, t.session, *role, writer, content.clone(), now);
                    msg.silent = *silent;
                    match hooks.before_create_message_strict(t, msg).await {
                        Ok(m) => written.push(m),
                        Err(e) => {
                            result = Err(crate::handler::HandlerError::new(e.0));
                            break;
                        }
                    }
                }
            }
            // The watermark moves before the effects apply: delivery is at most once.
            t.watermarks[side] = m.seq;
            let mut commit = Commit::default();
            match result {
                Ok(()) => {
                    for mut msg in written {
                        msg.seq = t.take_seq();
                        commit.messages.push(msg);
                    }
                    commit.enqueue = effects.queued;
                    commit.values = effects.values;
                    if let Some(text) = effects.status {
                        if t.parent.is_some() {
                            child_status = Some(text.clone());
                        }
                        t.status_text = Some(text.clone());
                        let seq = t.take_seq();
                        commit.records.push(record(
                            seq,
                            RecordKind::Status,
                            json!({"text": text}),
                            now,
                        ));
                    }
                    stop_result = effects.stop;
                }
                Err(e) => {
                    let seq = t.take_seq();
                    commit.records.push(record(
                        seq,
                        RecordKind::HandlerError,
                        json!({"handler": builtin, "message": m.seq, "error": e.to_string()}),
                        now,
                    ));
                }
            }
            commit.records.extend(hook_failures(t, &mut hooks, now));
            t.updated_at = now;
            let new = commit.messages.clone();
            queued |= self.commit(t, commit).await? == CommitOutcome::Committed { queued: true };
            emit_messages(events, &new);
            hooks.after_create_message(t, &new).await;
            msgs.extend(new);
            if let Some(text) = child_status.take() {
                self.inner.store.set_child_status(t.id, &text).await?;
            }
            if stop_result.is_some() {
                break;
            }
        }

        let now = self.now();
        let mut records = Vec::new();
        if !inbound.is_empty() {
            t.turns[side] += 1;
            let seq = t.take_seq();
            records.push(record(
                seq,
                RecordKind::TurnCompleted,
                json!({"side": side_str(side)}),
                now,
            ));
        }
        let mut settle = true;
        if let Some(result) = stop_result {
            let result = result.unwrap_or_else(|| "Session stopped.".to_owned());
            records.extend(self.end_session(t, StopReason::StateStopSession, Some(result)));
        } else {
            match decide::after_handler_turn(agent, t, side, !inbound.is_empty()) {
                AfterTurn::EndSession(r) => {
                    let result = decide::cap_result(agent, msgs);
                    records.extend(self.end_session(t, r, result));
                }
                AfterTurn::Park(r) => records.extend(park(t, r, now)),
                AfterTurn::Stop(r) => records.extend(stop(t, r, now)),
                AfterTurn::Switch(next) => {
                    t.acting = Some(next);
                    settle = false;
                }
            }
        }
        t.updated_at = now;
        let outcome = self
            .commit(
                t,
                Commit {
                    records,
                    settle,
                    ..Commit::default()
                },
            )
            .await?;
        Ok(match Flow::of(outcome, t) {
            Flow::Continue { queued: more } => Flow::Continue {
                queued: queued || more,
            },
            done => done,
        })
    }
}

/// The hook failures seen so far, as journal records (taken from `hooks`).
pub(crate) fn hook_failures(
    t: &mut Thread,
    hooks: &mut crate::hooks::ActiveHooks,
    now: i64,
) -> Vec<Record> {
    std::mem::take(&mut hooks.failures)
        .into_iter()
        .map(|f| record(t.take_seq(), RecordKind::HookFailed, f, now))
        .collect()
}

fn record(seq: i64, kind: RecordKind, data: serde_json::Value, now: i64) -> Record {
    Record {
        seq,
        kind,
        data,
        created_at: now,
    }
}

/// Parks the run for a person: the session stays open.
fn park(t: &mut Thread, reason: StopReason, now: i64) -> Vec<Record> {
    halt(t, ThreadStatus::AwaitingHuman, reason, now)
}

/// Stops the run (a safety limit, an error, an abort): the session stays open.
fn stop(t: &mut Thread, reason: StopReason, now: i64) -> Vec<Record> {
    halt(t, ThreadStatus::Idle, reason, now)
}

fn halt(t: &mut Thread, status: ThreadStatus, reason: StopReason, now: i64) -> Vec<Record> {
    t.status = status;
    t.stop_reason = Some(reason);
    let seq = t.take_seq();
    let data = json!({"stopReason": reason.as_str(), "status": status.as_str()});
    vec![record(seq, RecordKind::Stopped, data, now)]
}

/// The message written for an inbound text: by the agent's human side, or as `user` (side B's
/// authorship) so side A acts first.
fn inbound(agent: &AgentDef, text: &str) -> NewQueued {
    let human = [SideId::B, SideId::A]
        .into_iter()
        .find(|s| decide::side(agent, *s).is_human());
    let side = human.unwrap_or(SideId::B);
    NewQueued {
        role: Role::authored_by(side),
        side,
        content: text.to_owned(),
        human: human.is_some(),
        silent: false,
        follow_up: false,
    }
}

/// The events of committed messages: thinking, text, then each tool call's start and, when its
/// result is among `messages`, its end.
fn emit_messages(events: &EventSink, messages: &[Message]) {
    let ended = |id: &str| {
        messages
            .iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
            .map(|m| AgentEvent::ToolEnded {
                id: id.to_owned(),
                is_error: m.tool_status == Some(crate::types::ToolStatus::Error),
                content: json!(m.content.clone().unwrap_or_default()),
            })
    };
    for m in messages
        .iter()
        .filter(|m| !m.silent && matches!(m.role, Role::User | Role::Assistant))
    {
        if let Some(th) = &m.thinking {
            events.send(AgentEvent::Thinking { delta: th.clone() });
        }
        if let Some(c) = m.content.as_ref().filter(|c| !c.is_empty()) {
            events.send(AgentEvent::Text { delta: c.clone() });
        }
        for call in &m.tool_calls {
            events.send(AgentEvent::ToolStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                args: call.arguments.clone(),
            });
            if let Some(end) = ended(&call.id) {
                events.send(end);
            }
        }
    }
}
