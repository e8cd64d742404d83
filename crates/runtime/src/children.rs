//! The children port: what code running on a thread (a handler, the tool router) may do with
//! subagents — spawn one, message one, report to the parent, list them — without knowing the
//! engine. The [`crate::Runtime`] implements it.

use std::collections::BTreeMap;

use async_trait::async_trait;
use duet_spec::SubagentRelationship;
use tokio_util::sync::CancellationToken;

use crate::delivery::Settled;
use crate::error::RunError;
use crate::hooks::ActiveHooks;
use crate::tools::ToolResult;
use crate::types::{SideId, Thread, ThreadId};

/// How a spawned child runs relative to the call that started it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SpawnMode {
    /// In the background; its result comes back as a message.
    Background,
    /// The caller waits for the child's session (a handler's or an `immediate` blocking spawn).
    Inline,
    /// A model's blocking call: the tool call with this id waits durably; the child's session
    /// result becomes its tool result, whenever it comes.
    Await(String),
}

/// One spawn, however it was asked for: by a model (`subagent_create`), by code (a handler
/// invoking the relationship by name), or by the runtime (`immediate`).
#[derive(Clone, Debug)]
pub(crate) struct Spawn {
    pub(crate) message: String,
    pub(crate) name: Option<String>,
    /// The child's arguments (an object): persisted with it, its prompts' `{{name}}` variables.
    pub(crate) arguments: serde_json::Value,
    /// Whether `arguments` must satisfy the child's side A `requiredSchema`.
    pub(crate) check_arguments: bool,
    pub(crate) mode: SpawnMode,
    /// Per-instance env names on top of the relationship's `scopedEnv` (an immediate spawn's).
    pub(crate) scoped: Vec<String>,
    /// Paths of the parent's files to copy into the child under `/attachments` (#34).
    pub(crate) attachments: Vec<String>,
    /// Whether a path that is not an existing `/attachments/...` file is left out (a
    /// code-issued spawn's `initAttachmentsProperty`) rather than refusing the spawn.
    pub(crate) lenient_attachments: bool,
}

/// Who makes a spawn: the calling side's env (the source of `scopedEnv` values) and its hooks
/// (`after_subagent_created` runs on them).
pub(crate) struct Spawner<'a> {
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) hooks: &'a mut ActiveHooks,
    /// The caller's own file writes not committed yet (a handler's): attachments may name them.
    pub(crate) files: Vec<crate::files::FileWrite>,
}

impl Spawner<'_> {
    /// An env value: the side's, then the process environment.
    pub(crate) fn env(&self, name: &str) -> Option<String> {
        crate::context::env_value(self.env, name)
    }

    /// The file writes of the caller not committed yet: its step's `.ts` tools', then its own.
    pub(crate) fn pending_files(&self) -> Vec<crate::files::FileWrite> {
        let mut pending = self.hooks.pending_files();
        pending.extend(self.files.iter().cloned());
        pending
    }
}

/// The files a child's session returned to its parent (its `sessionStop`/`sessionFail` call's
/// attachments), as copied into the parent, and the text that lists them (with any that could
/// not be copied) for the parent's tool result or message.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Returned {
    pub(crate) attachments: Vec<crate::files::AttachmentRef>,
    pub(crate) text: String,
}

/// How a child's run went, for its parent.
#[derive(Clone, Debug)]
pub(crate) enum ChildRun {
    /// Running in the background; its result comes as a message.
    Started(String),
    /// Another runner holds it; the message is queued.
    Queued(String),
    /// An inline run came back (finished, failed, stopped or waiting for a person), with the
    /// files its session returned, copied into the parent.
    Settled(String, Box<Settled>, Returned),
    /// Started (or continued) for a durable await: its result comes as the call's tool result.
    Awaiting { child: ThreadId, key: String },
}

impl ChildRun {
    /// The child's key (its reference).
    pub(crate) fn key(&self) -> &str {
        match self {
            ChildRun::Started(key)
            | ChildRun::Queued(key)
            | ChildRun::Settled(key, ..)
            | ChildRun::Awaiting { key, .. } => key,
        }
    }
}

/// Subagents, for code that runs on a thread.
#[async_trait]
pub(crate) trait Children: Send + Sync {
    /// Starts (or, at a `maxInstances: 1` blocking cap, continues) an instance of `rel` for
    /// `parent`'s `owner` side. `Ok(Err(result))` is a refusal the caller reports as a tool error.
    async fn spawn(
        &self,
        parent: &Thread,
        owner: SideId,
        rel: &SubagentRelationship,
        spawn: Spawn,
        caller: Spawner<'_>,
        cancel: &CancellationToken,
    ) -> Result<Result<ChildRun, ToolResult>, RunError>;

    /// Sends `message` to `parent`'s live child `reference` (its key), in the background, with
    /// the parent's files at `attachments.0` (`attachments.1`: its writes not committed yet).
    async fn message(
        &self,
        parent: &Thread,
        reference: &str,
        message: &str,
        attachments: (&[String], &[crate::files::FileWrite]),
    ) -> Result<ToolResult, RunError>;

    /// Sends `content` to `child`'s parent: a silent message on the owning side's perspective,
    /// after which the parent runs on if idle.
    async fn notify_parent(&self, child: &Thread, content: &str) -> Result<(), RunError>;
}
