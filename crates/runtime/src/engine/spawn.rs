//! The [`Children`] port on the runtime: spawning a child thread (registry entry, scoped env,
//! arguments, `maxInstances`), delivering to it, and what a child's settled run reports to its
//! parent — a blocking call's tool result (`awaits`), or a message on the owning side's
//! perspective.

use std::collections::BTreeMap;

use async_trait::async_trait;
use duet_spec::SubagentRelationship;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Runtime;
use crate::children::{ChildRun, Children, Spawn, SpawnMode, Spawner};
use crate::delivery::{Accepted, Delivered, Delivery, Origin, Settled, WhenBusy};
use crate::error::RunError;
use crate::event::EventSink;
use crate::files::AttachmentRef;
use crate::lifecycle::{self, instance_name, schema_errors};
use crate::tools::ToolResult;
use crate::types::{Child, ChildStatus, NewQueued, Role, SideId, Thread, ThreadId};

impl Runtime {
    /// Starts (or, at a `maxInstances: 1` blocking cap, continues) an instance of `rel`.
    pub(super) async fn spawn_child(
        &self,
        parent: &Thread,
        owner: SideId,
        rel: &SubagentRelationship,
        spawn: Spawn,
        caller: Spawner<'_>,
        cancel: &CancellationToken,
    ) -> Result<Result<ChildRun, ToolResult>, RunError> {
        let relationship = rel.name().to_owned();
        let Some(target) = self
            .inner
            .project
            .as_ref()
            .agents
            .get(&rel.agent)
            .map(|d| &d.def)
        else {
            return Ok(Err(ToolResult::error(format!(
                "Agent `{}` is not in the project.",
                rel.agent
            ))));
        };
        let arguments = match spawn.arguments {
            serde_json::Value::Null => json!({}),
            a @ serde_json::Value::Object(_) => a,
            _ => {
                return Ok(Err(ToolResult::error(
                    "subagent_create arguments must be an object when provided.",
                )));
            }
        };
        if spawn.check_arguments {
            let schema = crate::decide::side_a_schema(self.inner.project.as_ref(), target);
            let errors = schema_errors(&schema, &arguments);
            if !errors.is_empty() {
                return Ok(Err(ToolResult::error(format!(
                    "Invalid `arguments` for `{relationship}`: {}",
                    errors.join("; ")
                ))));
            }
        }
        let pending = caller.pending_files();
        let files = match self
            .attachment_files(
                parent.id,
                &spawn.attachments,
                (&pending, spawn.lenient_attachments),
            )
            .await?
        {
            Ok(files) => files,
            Err(refused) => return Ok(Err(refused)),
        };
        let store = &self.inner.store;
        let siblings: Vec<Child> = store
            .children(parent.id)
            .await?
            .into_iter()
            .filter(|c| c.relationship == relationship)
            .collect();
        let live: Vec<&Child> = siblings.iter().filter(|c| c.status.is_live()).collect();
        if let Some(cap) = rel.max_instances
            && live.len() >= cap as usize
        {
            if spawn.mode != SpawnMode::Background && cap == 1 && live.len() == 1 {
                // Create-or-continue: the one instance gets the message.
                let child = live[0];
                let Some(thread) = store.thread_by_id(child.child).await? else {
                    return Ok(Err(ToolResult::error("The subagent instance is gone.")));
                };
                let attached = match self.send_attachments(parent.id, &files, thread.id).await? {
                    Ok(attached) => attached,
                    Err(refused) => return Ok(Err(refused)),
                };
                return self
                    .run_child(
                        parent,
                        &thread.key,
                        &thread.origin,
                        (&spawn.message, &attached),
                        &spawn.mode,
                        child.child,
                        cancel,
                    )
                    .await
                    .map(Ok);
            }
            let mut refs = Vec::new();
            for c in &live {
                if let Some(t) = store.thread_by_id(c.child).await? {
                    refs.push(t.key);
                }
            }
            return Ok(Err(ToolResult::error(format!(
                "Subagent instance limit reached for \"{relationship}\" ({cap}). Use subagent_message with an existing reference instead. Active references: {}",
                refs.join(", ")
            ))));
        }
        // `scopedEnv`: the parent's values, copied into the child; every name must have one.
        let mut env = BTreeMap::new();
        let mut missing = Vec::new();
        for name in rel.scoped_env.iter().chain(&spawn.scoped) {
            match caller.env(name) {
                Some(v) => {
                    env.insert(name.clone(), v);
                }
                None => missing.push(name.as_str()),
            }
        }
        if !missing.is_empty() {
            return Ok(Err(ToolResult::error(format!(
                "Subagent \"{relationship}\" needs env values this thread does not have: {}. Set them on the parent (its agent's or prompt's `env`, or the process environment).",
                missing.join(", ")
            ))));
        }
        // A new child has no files: what would not fit it is refused before it exists.
        if let Err(e) = self.inner.files.fits_new(&files) {
            let first = files.first().map_or("", |f| f.path.as_str());
            return Ok(Err(super::attach::refused(first, &e)));
        }
        let key = format!("{}/{}-{}", parent.key, relationship, siblings.len() + 1);
        let child_id = uuid::Uuid::now_v7();
        let thread = store
            .open_thread(
                &key,
                crate::store::NewThread {
                    id: child_id,
                    agent: &rel.agent,
                    parent: Some(parent.id),
                    principal: parent.principal.as_deref(),
                    source: parent.source.as_deref(),
                    now: self.now_ms(),
                },
            )
            .await?;
        store
            .put_child(&Child {
                child: thread.id,
                parent: parent.id,
                relationship: relationship.clone(),
                owner,
                agent: rel.agent.clone(),
                name: spawn.name.as_deref().and_then(instance_name),
                blocking: spawn.mode != SpawnMode::Background,
                explicit: rel.parent_communication == duet_spec::ParentCommunication::Explicit,
                status: ChildStatus::Running,
                status_text: None,
                awaiting: match &spawn.mode {
                    SpawnMode::Await(call) => Some(call.clone()),
                    _ => None,
                },
                created_at: self.now_ms(),
                arguments: arguments.clone(),
                env,
            })
            .await?;
        caller.hooks.after_subagent_created(parent, &thread).await;
        // The child exists: its attachments are copied in before its message is delivered.
        let attached = match self.send_attachments(parent.id, &files, thread.id).await? {
            Ok(attached) => attached,
            Err(refused) => {
                // Its limits refused a copy after all: it is left idle, with no message.
                store.set_child_status(thread.id, ChildStatus::Idle).await?;
                return Ok(Err(refused));
            }
        };
        self.run_child(
            parent,
            &key,
            &rel.agent,
            (&spawn.message, &attached),
            &spawn.mode,
            thread.id,
            cancel,
        )
        .await
        .map(Ok)
    }

    /// Delivers `text` to a child as `mode` says: in the background (its result comes as a
    /// message), inline (its outcome comes back), or queued for a durable await (the caller runs
    /// it after committing the call; its result comes as the call's tool result).
    #[allow(clippy::too_many_arguments)]
    async fn run_child(
        &self,
        parent: &Thread,
        key: &str,
        agent: &str,
        (text, attachments): (&str, &[AttachmentRef]),
        mode: &SpawnMode,
        child: ThreadId,
        cancel: &CancellationToken,
    ) -> Result<ChildRun, RunError> {
        let store = &self.inner.store;
        store.set_child_status(child, ChildStatus::Running).await?;
        let origin = |inline| Origin {
            principal: parent.principal.as_deref(),
            source: parent.source.as_deref(),
            parent: Some(parent.id),
            inline,
            author: None,
        };
        match mode {
            SpawnMode::Await(call) => {
                let busy = store
                    .thread_by_id(child)
                    .await?
                    .is_some_and(|t| t.lease_owner.is_some() && t.lease_expires >= self.now());
                // Inside the parent's `execute_tool` span: whichever process runs the child
                // continues the parent's trace.
                let message = NewQueued {
                    trace: self.trace_here(),
                    attachments: attachments.to_vec(),
                    ..NewQueued::new(Role::User, SideId::B, text)
                };
                if busy {
                    // Another run has it: the message waits for that run, and its answer comes
                    // as an ordinary message.
                    store.enqueue(child, message, None, self.now()).await?;
                    return Ok(ChildRun::Queued(key.to_owned()));
                }
                store.set_awaiting(child, Some(call)).await?;
                store.enqueue(child, message, None, self.now()).await?;
                Ok(ChildRun::Awaiting {
                    child,
                    key: key.to_owned(),
                })
            }
            SpawnMode::Background => {
                // The message is queued here, in the parent's order (a second message to the
                // child, sent by the parent's next step, comes after it); only the child's run
                // goes on in the background.
                let trace = self.trace_here();
                let claimed = if attachments.is_empty() {
                    let delivery = Delivery {
                        agent: Some(agent),
                        origin: origin(false),
                        trace: trace.as_deref(),
                        ..Delivery::new(key, text)
                    };
                    match self.accept(delivery).await? {
                        Accepted::Claimed(claim) => Some(Run::Claimed(claim)),
                        Accepted::Queued { .. } | Accepted::Duplicate(_) => None,
                    }
                } else {
                    // The visible message carries its attachments: queued as it is.
                    let message = NewQueued {
                        trace,
                        attachments: attachments.to_vec(),
                        ..NewQueued::new(Role::User, SideId::B, text)
                    };
                    let t = store
                        .thread_by_id(child)
                        .await?
                        .ok_or_else(|| RunError::UnknownThread(key.to_owned()))?;
                    self.queue_claiming(&t, message)
                        .await?
                        .map(|run| Run::Queued(child, run))
                };
                if let Some(run) = claimed {
                    let (rt, child_key) = (self.clone(), key.to_owned());
                    self.spawn_background(async move {
                        let (sink, cancel) = (EventSink::discard(), CancellationToken::new());
                        let ran = match run {
                            Run::Claimed(claim) => rt.run_claimed(claim, &sink, &cancel).await,
                            Run::Queued(id, run) => rt.drive(id, run, &sink, &cancel, false).await,
                        };
                        if let Err(e) = ran {
                            tracing::warn!(child = %child_key, error = %e, "a background child's run failed");
                        }
                    });
                }
                Ok(ChildRun::Started(key.to_owned()))
            }
            SpawnMode::Inline => {
                let child_cancel = cancel.child_token();
                let sink = EventSink::discard();
                // The visible message carries its attachments (copied into the child already).
                let paths: Vec<String> = attachments.iter().map(|a| a.path.clone()).collect();
                let delivery = Delivery {
                    agent: Some(agent),
                    origin: origin(true),
                    when_busy: WhenBusy::Queue,
                    attachments: &paths,
                    ..Delivery::new(key, text)
                };
                let delivered = self.deliver_message(delivery, &sink, &child_cancel).await?;
                Ok(match delivered {
                    Delivered::Queued { .. } => ChildRun::Queued(key.to_owned()),
                    Delivered::Settled(s) | Delivered::Duplicate(s) => {
                        let agent = self.inner.project.agents.get(agent).map(|d| &d.def);
                        let returned = self.returned_files(&s, agent).await?;
                        ChildRun::Settled(key.to_owned(), Box::new(s), returned)
                    }
                })
            }
        }
    }

    /// `subagent_message`: `message` to the live child `reference` of `parent`, in the
    /// background (its answer comes back as a message).
    pub(super) async fn message_child(
        &self,
        parent: &Thread,
        reference: &str,
        message: &str,
        (attachments, pending): (&[String], &[crate::files::FileWrite]),
    ) -> Result<ToolResult, RunError> {
        let files = match self
            .attachment_files(parent.id, attachments, (pending, false))
            .await?
        {
            Ok(files) => files,
            Err(refused) => return Ok(refused),
        };
        let store = &self.inner.store;
        let inactive =
            || ToolResult::error(format!("Subagent reference \"{reference}\" is not active."));
        // No key holds a NUL (`crate::nul`): a reference with one names nothing.
        if reference.contains('\0') {
            return Ok(inactive());
        }
        let Some(thread) = store.thread(reference).await? else {
            return Ok(inactive());
        };
        let Some(entry) = store.child(thread.id).await? else {
            return Ok(inactive());
        };
        if entry.parent != parent.id || !entry.status.is_live() {
            return Ok(inactive());
        }
        // Follow-ups always go in the background: the answer comes back as a message.
        let cancel = CancellationToken::new();
        let attached = match self.send_attachments(parent.id, &files, thread.id).await? {
            Ok(attached) => attached,
            Err(refused) => return Ok(refused),
        };
        self.run_child(
            parent,
            &thread.key,
            &thread.origin,
            (message, &attached),
            &SpawnMode::Background,
            thread.id,
            &cancel,
        )
        .await?;
        Ok(ToolResult::ok(format!(
            "Message sent to subagent {reference}."
        )))
    }

    /// `subagents`: `parent`'s instances of `relationships`, with their status.
    pub(super) async fn list_children(
        &self,
        parent: &Thread,
        relationships: &[&SubagentRelationship],
    ) -> Result<ToolResult, RunError> {
        let store = &self.inner.store;
        let mut lines = Vec::new();
        for c in store.children(parent.id).await? {
            let Some(rel) = relationships.iter().find(|r| r.name() == c.relationship) else {
                continue;
            };
            let key = store
                .thread_by_id(c.child)
                .await?
                .map(|t| t.key)
                .unwrap_or_default();
            let description = rel.description.clone().unwrap_or_default();
            let status = match &c.status_text {
                Some(text) => format!("{}: {text}", c.status.as_str()),
                None => c.status.as_str().to_owned(),
            };
            lines.push(format!(
                "- {key}: {} — {status} ({description})",
                c.relationship
            ));
        }
        Ok(ToolResult::ok(if lines.is_empty() {
            "No active subagent instances.".to_owned()
        } else {
            lines.join("\n")
        }))
    }

    /// After a child's run: its registry status, then its outcome for the parent — the tool
    /// result of a call that waits for it, else (implicit communication) a message. `rest`: the
    /// run stopped at a session's end with more queued (the registry stays `running`). `inline`:
    /// the parent ran this child inside its own call and has its outcome already, so it gets no
    /// message (a waiting call is still answered). `trace`: the run's last step's context, which
    /// the report carries to the parent.
    pub(super) async fn after_child_settled(
        &self,
        settled: &Settled,
        inline: bool,
        rest: bool,
        trace: Option<&str>,
    ) {
        let store = &self.inner.store;
        let entry = match store.child(settled.thread).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(child = %settled.key, error = %e, "could not read the child's registry entry");
                return;
            }
        };
        let status = if rest {
            ChildStatus::Running
        } else {
            self.child_status(settled, &entry)
        };
        if entry.status.is_live()
            && let Err(e) = store.set_child_status(settled.thread, status).await
        {
            tracing::warn!(child = %settled.key, error = %e, "could not settle the child's registry entry");
        }
        self.report(settled, &entry, inline, trace).await;
    }

    /// A child's session ended but its run goes on (more messages were queued for it): that
    /// session's outcome reaches the parent now, before the next session's can.
    pub(super) async fn report_session(&self, t: &Thread, trace: Option<&str>) {
        let entry = match self.inner.store.child(t.id).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(child = %t.key, error = %e, "could not read the child's registry entry");
                return;
            }
        };
        self.report(&Settled::of(t), &entry, false, trace).await;
    }

    /// Reports `settled` to the parent: the waiting call's tool result, or a silent message
    /// (implicit communication) after which the parent runs on if idle. Either carries `trace`.
    async fn report(&self, settled: &Settled, entry: &Child, inline: bool, trace: Option<&str>) {
        match self.resolve_await(settled, entry, trace).await {
            Ok(true) => return,
            Ok(false) if inline => return,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(child = %settled.key, error = %e, "answering the parent's waiting call failed");
                return;
            }
        }
        let Some((parent, mut message)) = self.report_message(settled, entry).await else {
            return;
        };
        message.trace = trace.map(str::to_owned);
        if let Err(e) = self.deliver_queued(&parent, message).await {
            tracing::warn!(child = %settled.key, parent = %parent.key, error = %e, "reporting a child's result to its parent failed");
        }
    }

    /// The parent and the message that reports `settled` to it; `None` when nothing is to be
    /// reported (explicit communication, a parked or aborted child, no parent).
    async fn report_message(
        &self,
        settled: &Settled,
        entry: &Child,
    ) -> Option<(Thread, NewQueued)> {
        let parent_id = settled.parent?;
        if entry.explicit {
            return None;
        }
        let agent = self.inner.project.agents.get(&entry.agent).map(|d| &d.def);
        let outcome = lifecycle::outcome(settled, agent)?;
        let returned = match self.returned_files(settled, agent).await {
            Ok(returned) => returned,
            Err(e) => {
                tracing::warn!(child = %settled.key, error = %e, "could not copy the child's returned files to its parent");
                crate::children::Returned::default()
            }
        };
        let content = lifecycle::report_text(&settled.key, &outcome, &returned.text);
        let parent = match self.inner.store.thread_by_id(parent_id).await {
            Ok(parent) => parent?,
            Err(e) => {
                tracing::warn!(child = %settled.key, error = %e, "could not read the parent to report to");
                return None;
            }
        };
        let side = entry.owner.sibling();
        let message = NewQueued {
            silent: true,
            attachments: returned.attachments,
            ..NewQueued::new(Role::authored_by(side), side, content)
        };
        Some((parent, message))
    }
}

#[async_trait]
impl Children for Runtime {
    async fn spawn(
        &self,
        parent: &Thread,
        owner: SideId,
        rel: &SubagentRelationship,
        spawn: Spawn,
        caller: Spawner<'_>,
        cancel: &CancellationToken,
    ) -> Result<Result<ChildRun, ToolResult>, RunError> {
        self.spawn_child(parent, owner, rel, spawn, caller, cancel)
            .await
    }

    async fn message(
        &self,
        parent: &Thread,
        reference: &str,
        message: &str,
        attachments: (&[String], &[crate::files::FileWrite]),
    ) -> Result<ToolResult, RunError> {
        self.message_child(parent, reference, message, attachments)
            .await
    }

    async fn notify_parent(&self, child: &Thread, content: &str) -> Result<(), RunError> {
        let store = &self.inner.store;
        let Some(parent_id) = child.parent else {
            return Err(RunError::UnknownThread(format!(
                "`{}` is not a subagent",
                child.key
            )));
        };
        let entry = store.child(child.id).await?.ok_or_else(|| {
            RunError::UnknownThread(format!("`{}` is not in its parent's registry", child.key))
        })?;
        let parent = store
            .thread_by_id(parent_id)
            .await?
            .ok_or_else(|| RunError::UnknownThread(parent_id.to_string()))?;
        let side = entry.owner.sibling();
        let message = NewQueued {
            silent: true,
            trace: self.trace_here(),
            ..NewQueued::new(Role::authored_by(side), side, content)
        };
        let rt = self.clone();
        self.spawn_background(async move {
            if let Err(e) = rt.deliver_queued(&parent, message).await {
                tracing::warn!(parent = %parent.key, error = %e, "a child's notice to its parent failed");
            }
        });
        Ok(())
    }
}

/// A background child's run to start once its message is queued: the claim a delivery took, or
/// the run that took the lease with a queued message.
enum Run {
    Claimed(crate::delivery::Claim),
    Queued(ThreadId, uuid::Uuid),
}
