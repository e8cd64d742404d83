//! The handler port: Rust code that takes a side's turns, registered by name, with a
//! [`ThreadState`] to read the thread and act on it.
//!
//! A handler's writes are buffered and committed with its delivery in one transaction; a handler
//! that returns an error fails that delivery only: nothing it wrote is kept, the error is
//! journaled, and the turn goes on with the next inbound message.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

mod files;

use crate::children::{ChildRun, Children, Spawn, SpawnMode, Spawner};
use crate::store::{Store, StoreError};
use crate::tools::{ToolContext, ToolResult, Tools};
use crate::types::{Message, NewQueued, Role, SideId, Thread};

/// A handler failed its delivery.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HandlerError(pub String);

impl HandlerError {
    /// A failure whose journaled error text is `message`.
    pub fn new(message: impl Into<String>) -> Self {
        HandlerError(message.into())
    }
}

impl From<StoreError> for HandlerError {
    fn from(e: StoreError) -> Self {
        HandlerError(e.to_string())
    }
}

/// Code that takes a side's turns. Called once per inbound message.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Takes `message`, the side's next inbound message, acting through `state`.
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError>;
}

/// Handlers by registered name.
#[derive(Clone, Default)]
pub struct Handlers(BTreeMap<String, Arc<dyn Handler>>);

impl Handlers {
    /// No handlers.
    pub fn new() -> Self {
        Handlers::default()
    }

    /// These handlers and `handler`, registered as `name` (replacing any of that name).
    pub fn with(mut self, name: &str, handler: impl Handler) -> Self {
        self.0.insert(name.to_owned(), Arc::new(handler));
        self
    }

    /// The handler registered as `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Handler>> {
        self.0.get(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// A message code wrote (a handler's `reply`, a hook's `inject_message`), before its commit.
#[derive(Clone, Debug)]
pub(crate) struct Injected {
    pub(crate) role: Role,
    pub(crate) content: String,
    pub(crate) silent: bool,
    /// Files of the thread the message carries ([`ThreadState::reply_with_files`]).
    pub(crate) attachments: Vec<crate::files::AttachmentRef>,
}

impl Injected {
    /// A message with no attachments.
    pub(crate) fn new(role: Role, content: String, silent: bool) -> Self {
        Injected {
            role,
            content,
            silent,
            attachments: Vec::new(),
        }
    }
}

/// What a handler did, applied when its delivery commits.
#[derive(Clone, Debug, Default)]
pub(crate) struct Writes {
    pub(crate) injected: Vec<Injected>,
    pub(crate) queued: Vec<NewQueued>,
    pub(crate) values: Vec<(String, Option<serde_json::Value>)>,
    pub(crate) status: Option<String>,
    pub(crate) stop: Option<Option<String>>,
    /// Effects scheduled ([`ThreadState::schedule_effect`]), written with the commit.
    pub(crate) timers: Vec<crate::store::NewTimer>,
    /// Pending effects removed ([`ThreadState::remove_scheduled_effect`]), cancelled with it.
    pub(crate) cancel: Vec<uuid::Uuid>,
    /// Custom events ([`ThreadState::emit`]), journaled with it.
    pub(crate) events: Vec<(String, serde_json::Value)>,
    /// File rows written ([`ThreadState::write_file`] and the rest), in order; their chunks are
    /// stored already.
    pub(crate) files: Vec<crate::files::FileWrite>,
}

/// A handler's view of its thread during one delivery.
pub struct ThreadState<'a> {
    pub(crate) thread: &'a Thread,
    pub(crate) messages: &'a [Message],
    pub(crate) side: SideId,
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) store: &'a dyn Store,
    /// The thread filesystem (its writes are buffered in `writes.files`).
    pub(crate) files: &'a crate::thread_files::ThreadFiles,
    pub(crate) tools: &'a Tools,
    /// What this delivery may do with subagents.
    pub(crate) children: &'a dyn Children,
    /// The subagent relationships this handler's side owns, and its sibling side's (code may
    /// start those too).
    pub(crate) relationships: &'a [duet_spec::SubagentRelationship],
    pub(crate) sibling_relationships: &'a [duet_spec::SubagentRelationship],
    /// The thread's spawn arguments (`{}` unless it is a child spawned with some).
    pub(crate) arguments: &'a serde_json::Value,
    /// The project, for what a child's outcome means.
    pub(crate) project: &'a duet_spec::Project,
    /// The agent's hooks (a handler side has no prompt): `after_subagent_created` for its
    /// spawns; failures are journaled with the delivery.
    pub(crate) hooks: crate::hooks::ActiveHooks,
    pub(crate) writes: Writes,
    /// The time of this delivery (what an effect's delay counts from).
    pub(crate) now: i64,
}

impl ThreadState<'_> {
    fn project_agent(&self, name: &str) -> Option<&duet_spec::AgentDef> {
        self.project.agents.get(name).map(|d| &d.def)
    }

    /// The caller-owned key of the thread.
    pub fn key(&self) -> &str {
        &self.thread.key
    }

    /// The thread's internal id.
    pub fn thread_id(&self) -> crate::types::ThreadId {
        self.thread.id
    }

    /// The thread's current session (numbered from 1; a message after one ended opens the next).
    pub fn session(&self) -> i64 {
        self.thread.session
    }

    /// The agent now taking the thread's turns.
    pub fn agent(&self) -> &str {
        &self.thread.agent
    }

    /// The side this handler backs.
    pub fn side(&self) -> SideId {
        self.side
    }

    /// The thread's committed messages, in order.
    pub fn messages(&self) -> &[Message] {
        self.messages
    }

    /// Writes a message authored by this handler's side: the sibling's next inbound message.
    pub fn reply(&mut self, content: impl Into<String>) {
        let role = Role::authored_by(self.side);
        self.writes
            .injected
            .push(Injected::new(role, content.into(), false));
    }

    /// Writes a message with any role at once (no execution is started by it).
    pub fn inject_message(&mut self, role: Role, content: impl Into<String>, silent: bool) {
        self.writes
            .injected
            .push(Injected::new(role, content.into(), silent));
    }

    /// Queues a message durably; it is delivered before the thread's next step.
    pub fn queue_message(&mut self, role: Role, content: impl Into<String>) {
        let side = if role == Role::Assistant {
            SideId::A
        } else {
            SideId::B
        };
        self.writes.queued.push(NewQueued::new(role, side, content));
    }

    /// Ends the session after this delivery, with `result` (default "Session stopped.").
    pub fn stop_session(&mut self, result: Option<String>) {
        self.writes.stop = Some(result);
    }

    /// Emits a custom thread event (the spec's `emit(event, data)`): journaled with this
    /// delivery's commit as an `emitted` record, which the thread's event stream carries.
    pub fn emit(&mut self, event: impl Into<String>, data: serde_json::Value) {
        self.writes.events.push((event.into(), data));
    }

    /// Sets the thread's free-text status.
    pub fn set_status(&mut self, text: impl Into<String>) {
        self.writes.status = Some(text.into());
    }

    /// A durable value: this delivery's own writes first, then the store.
    pub async fn get_value(&self, key: &str) -> Result<Option<serde_json::Value>, HandlerError> {
        if let Some((_, v)) = self.writes.values.iter().rev().find(|(k, _)| k == key) {
            return Ok(v.clone());
        }
        // An earlier `.ts` tool of the same step (or a hook) set it: not committed yet.
        if let Some(v) = self.hooks.pending_value(key) {
            return Ok(v);
        }
        Ok(self.store.value(self.thread.id, key).await?)
    }

    /// Sets (or with `None` deletes) a durable value.
    pub fn set_value(&mut self, key: impl Into<String>, value: Option<serde_json::Value>) {
        self.writes.values.push((key.into(), value));
    }

    /// Gives the thread's next question a deadline of its own (a duet extension), in place of
    /// its human side's `deadline`; `None` takes a set one back. Kept as the durable value
    /// [`crate::deadline::OVERRIDE_KEY`] until the commit that parks the thread schedules it.
    pub fn set_question_deadline(&mut self, deadline: Option<&duet_spec::Deadline>) {
        let value = deadline.and_then(|d| serde_json::to_value(d).ok());
        self.set_value(crate::deadline::OVERRIDE_KEY, value);
    }

    /// An env value: the agent's `env`, then the process environment.
    pub fn env(&self, name: &str) -> Option<String> {
        crate::context::env_value(self.env, name)
    }

    /// The arguments this thread was spawned with (an object; `{}` for a thread that is not a
    /// child or was started without any).
    pub fn arguments(&self) -> &serde_json::Value {
        self.arguments
    }

    /// Starts a child of relationship `relationship` with `message` and returns its key. The
    /// child runs in the background; its result comes back to this side as an inbound message
    /// (`Subagent (reference: KEY) has returned …`), unless the relationship is explicit.
    pub async fn spawn_child(
        &mut self,
        relationship: &str,
        message: &str,
    ) -> Result<String, HandlerError> {
        let Some(rel) = self
            .relationships
            .iter()
            .find(|r| r.name() == relationship)
            .cloned()
        else {
            return Err(HandlerError::new(format!(
                "No subagent relationship `{relationship}` on this side."
            )));
        };
        let spawn = Spawn {
            message: message.to_owned(),
            name: Some(relationship.to_owned()),
            arguments: serde_json::json!({}),
            check_arguments: false,
            mode: SpawnMode::Background,
            scoped: Vec::new(),
            attachments: Vec::new(),
            lenient_attachments: false,
        };
        let side = self.side;
        self.start(&rel, side, spawn)
            .await
            .map(|run| run.key().to_owned())
            .map_err(|refused| HandlerError::new(refused.content))
    }

    /// Starts a child of `rel`, owned by side `owner`, with this delivery's env and hooks.
    async fn start(
        &mut self,
        rel: &duet_spec::SubagentRelationship,
        owner: SideId,
        spawn: Spawn,
    ) -> Result<ChildRun, ToolResult> {
        // What this delivery wrote so far can be sent: the copy reads the pending records.
        let files = self.writes.files.clone();
        let caller = Spawner {
            env: self.env,
            hooks: &mut self.hooks,
            files,
        };
        self.children
            .spawn(
                self.thread,
                owner,
                rel,
                spawn,
                caller,
                &tokio_util::sync::CancellationToken::new(),
            )
            .await
            .unwrap_or_else(|e| {
                Err(ToolResult::error(format!(
                    "The subagent call failed inside duet: {e}"
                )))
            })
    }

    /// `subagent_create` called from code (the spec's relay pattern): `{agent, message, name?,
    /// arguments?}` on a relationship of this side or its sibling's, started in the background
    /// (a code-issued spawn is never awaited by a step); its outcome comes back as an inbound
    /// message.
    async fn lifecycle_create(&mut self, args: &serde_json::Value) -> ToolResult {
        let request = crate::lifecycle::create_request(args);
        let own = self
            .relationships
            .iter()
            .find(|r| r.name() == request.relationship)
            .map(|r| (r.clone(), self.side));
        let sibling = self
            .sibling_relationships
            .iter()
            .find(|r| r.name() == request.relationship)
            .map(|r| (r.clone(), self.side.sibling()));
        let Some((rel, owner)) = own.or(sibling) else {
            return ToolResult::error(format!(
                "No subagent relationship `{}` on this side.",
                request.relationship
            ));
        };
        let mut spawn = request.spawn(&rel, String::new());
        spawn.mode = SpawnMode::Background;
        if spawn.message.trim().is_empty() {
            return ToolResult::error("`subagent_create` needs a message.");
        }
        match self.start(&rel, owner, spawn).await {
            Ok(run) => run.tool_result(self.project_agent(&rel.agent)),
            Err(refused) => refused,
        }
    }

    /// Sends `message` to a live child of this thread, by key; its answer comes back as an
    /// inbound message.
    pub async fn message_child(&self, key: &str, message: &str) -> Result<(), HandlerError> {
        let result = self
            .children
            .message(self.thread, key, message, (&[], &[]))
            .await
            .map_err(|e| HandlerError::new(format!("The subagent call failed inside duet: {e}")))?;
        if result.is_ok() {
            Ok(())
        } else {
            Err(HandlerError::new(result.content))
        }
    }

    /// Sends `content` to this thread's parent (the way a child with `parentCommunication:
    /// explicit` reports): a silent message on the owning side's perspective, after which the
    /// parent runs on if idle.
    pub async fn notify_parent(&self, content: &str) -> Result<(), HandlerError> {
        if content.trim().is_empty() {
            return Err(HandlerError::new("notify_parent needs content"));
        }
        if self.thread.parent.is_none() {
            return Err(HandlerError::new("this thread is not a subagent"));
        }
        self.children
            .notify_parent(self.thread, content)
            .await
            .map_err(|e| HandlerError::new(e.to_string()))
    }

    /// The subagent relationships this handler's side owns.
    pub fn relationships(&self) -> &[duet_spec::SubagentRelationship] {
        self.relationships
    }

    /// This thread's children, oldest first.
    pub async fn children(&self) -> Result<Vec<crate::types::Child>, HandlerError> {
        Ok(self.store.children(self.thread.id).await?)
    }

    /// The key of a child thread, from its registry entry.
    pub async fn child_key(
        &self,
        child: &crate::types::Child,
    ) -> Result<Option<String>, HandlerError> {
        Ok(self.store.thread_by_id(child.child).await?.map(|t| t.key))
    }

    /// Runs a tool and returns its result without storing a tool message.
    ///
    /// `name` may be a subagent relationship of this side or its sibling's (hidden ones too):
    /// that starts an instance, with the relationship's `init*Property` names mapping `args`
    /// (digest §5.5): the message is the `initUserMessageProperty` value (text, or JSON), else
    /// `args` as pretty-printed JSON; the instance name comes from `initAgentNameProperty` (in
    /// `args`, else the env); the rest of `args` are the child's arguments, checked against its
    /// side A `requiredSchema`. A blocking relationship returns the child's result; otherwise the
    /// result says it started, and its outcome comes back as an inbound message.
    pub async fn invoke_tool(&mut self, name: &str, args: serde_json::Value) -> ToolResult {
        match crate::lifecycle::canonical(name) {
            crate::lifecycle::CREATE => return self.lifecycle_create(&args).await,
            crate::lifecycle::MESSAGE => {
                let (reference, message) = crate::lifecycle::message_request(&args);
                let attachments = crate::lifecycle::message_attachments(&args);
                let pending = self.pending_files();
                return match self
                    .children
                    .message(self.thread, reference, message, (&attachments, &pending))
                    .await
                {
                    Ok(sent) if sent.is_ok() => ToolResult::ok(format!(
                        "Message sent to the subagent. Reference: {reference}"
                    )),
                    Ok(refused) => refused,
                    Err(e) => {
                        ToolResult::error(format!("The subagent call failed inside duet: {e}"))
                    }
                };
            }
            _ => {}
        }
        let own = self.relationships.iter().find(|r| r.name() == name);
        let sibling = self.sibling_relationships.iter().find(|r| r.name() == name);
        if let Some((rel, owner)) = own
            .map(|r| (r, self.side))
            .or_else(|| sibling.map(|r| (r, self.side.sibling())))
        {
            let env = |k: &str| self.env(k);
            if !rel.enabled(&env) {
                return ToolResult::error(format!(
                    "Subagent \"{name}\" is not enabled: its `optional` flag `{}` is not true, 1 or yes.",
                    rel.optional.as_deref().unwrap_or_default()
                ));
            }
            let spawn = crate::lifecycle::map_code_spawn(rel, &args, &env);
            if spawn.message.trim().is_empty() {
                return ToolResult::error(format!(
                    "`{name}` needs a message: `{}` is empty or missing.",
                    rel.init_user_message_property
                        .as_deref()
                        .unwrap_or("message")
                ));
            }
            let rel = rel.clone();
            return match self.start(&rel, owner, spawn).await {
                Ok(run) => run.tool_result(self.project_agent(&rel.agent)),
                Err(refused) => refused,
            };
        }
        let project = self.project;
        if let Some(tool) = project.tools.get(name)
            && let Some(duet_spec::ToolImpl::Code(code)) = &tool.def.implementation
        {
            // A `.ts` tool runs with this same state: what it writes is this delivery's (or the
            // calling code's), and nothing when it fails.
            let args = match self.tools.check(name, &tool.def, &args).await {
                Ok(args) => args.into_owned(),
                Err(refused) => return refused,
            };
            let hosting = self.tools.hosting.clone();
            let call_id = format!("invoke:{}:{name}", self.thread.next_seq);
            let before = self.writes.clone();
            let file = tool.source.file.as_str();
            let run = crate::call_code_tool(&hosting, self, (name, file, code), &args, &call_id);
            let result = Box::pin(run).await;
            if !result.is_ok() {
                self.writes = before;
            }
            return result;
        }
        let ctx = ToolContext {
            thread: self.thread.id,
            idempotency_key: format!("{}:handler:{}:{name}", self.thread.id, self.thread.next_seq),
        };
        let env = |k: &str| self.env(k);
        let (result, timer) = self.tools.call(ctx, name, &args, &env, self.now).await;
        // An `effect:` tool's timer is written with this delivery's commit.
        self.writes.timers.extend(timer);
        result
    }
}
