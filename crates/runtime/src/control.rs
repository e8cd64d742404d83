//! The session control plane beside `invoke`: `dispatch` modulates a run (`steer`, `follow_up`,
//! `abort`) and never starts one; `state`, `entries` and `follow` observe a session. Steering and
//! follow-ups are durable: they are queue rows, so a crash loses neither.

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::Runtime;
use crate::agent::{Principal, Prompt, Scope};
use crate::store::{FeedEvent, JournalEntry, StoreError};
use crate::types::{NewQueued, Thread, ThreadId, ThreadStatus, side_str};

/// A command for a session's run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    /// Delivered before the run's next model call.
    Steer {
        /// What the person (the human side, or `user`) says.
        prompt: Prompt,
    },
    /// Delivered when the run would otherwise settle, in order.
    FollowUp {
        /// What the person (the human side, or `user`) says.
        prompt: Prompt,
    },
    /// Stops the run: its `invoke` stream ends with `failed{code:"aborted"}`.
    Abort,
}

/// The answer to a command: accepted (not yet an outcome) or rejected before acceptance (the only
/// result safe to retry blindly).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionResult {
    /// Accepted: the run it reached will act on it.
    Ok {
        /// The run that holds the session, when one does.
        run_id: Option<String>,
    },
    /// Refused before anything was written.
    Err {
        /// One of [`control_codes`].
        code: &'static str,
        /// Why, for people.
        message: String,
        /// Whether the same command may succeed later.
        retryable: bool,
    },
}

impl Serialize for SessionResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SessionResult::Ok { run_id: Some(id) } => json!({"ok": true, "runId": id}),
            SessionResult::Ok { run_id: None } => json!({"ok": true}),
            SessionResult::Err { code, message, retryable } => {
                json!({"ok": false, "error": {"code": code, "message": message, "retryable": retryable}})
            }
        }
        .serialize(s)
    }
}

/// The control plane's error codes (`shared/spec/protocols.md` §1.6, plus `forbidden`).
pub mod control_codes {
    /// `steer`, `follow_up` or `abort` on a session with no run in flight, or with no thread
    /// yet (as fastagent answers: a run starts with an invoke).
    pub const NO_ACTIVE_RUN: &str = "no_active_run";
    /// A malformed command (an empty prompt).
    pub const INVALID_COMMAND: &str = "invalid_command";
    /// No thread has this session key: fastagent's code for a boundary mutation on it. duet has
    /// none, so `dispatch` never answers it (a run command there is [`NO_ACTIVE_RUN`]).
    pub const NO_SUCH_SESSION: &str = "no_such_session";
    /// The run existed but the command could not be recorded (the store failed).
    pub const RUN_COMMAND_FAILED: &str = "run_command_failed";
    /// The session belongs to another principal.
    pub const FORBIDDEN: &str = "forbidden";
}

/// A session as an observer sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    /// `running`, `parked` (waiting for a person), or `idle`.
    pub status: &'static str,
    /// The run that holds the session's lease, while one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_run_id: Option<String>,
    /// Commands queued for that run.
    pub pending: Pending,
}

/// Commands waiting for the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// Messages to deliver before the next model call (`steer`, and plain inbound ones).
    pub steering: usize,
    /// Follow-ups, delivered when the run would otherwise settle.
    pub follow_up: usize,
}

/// One journal entry of a session, from an append-order cursor (`seq`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Its place in the thread's journal: the cursor to follow from.
    pub seq: i64,
    /// `message`, or a record kind (`turn_completed`, `session_ended`, ...).
    pub kind: String,
    /// The message's fields, or the record's.
    pub data: serde_json::Value,
    /// When it was committed (ms since the Unix epoch).
    pub created_at: i64,
}

impl From<JournalEntry> for Entry {
    fn from(entry: JournalEntry) -> Self {
        match entry {
            JournalEntry::Message(m) => {
                let mut data = json!({
                    "role": m.role.as_str(),
                    "side": m.side.map(side_str),
                    "content": m.content,
                    "thinking": m.thinking,
                    "toolCalls": m.tool_calls,
                    "toolCallId": m.tool_call_id,
                    "toolName": m.tool_name,
                    "toolStatus": m.tool_status.map(|s| s.as_str()),
                    "silent": m.silent,
                });
                if !m.images.is_empty() {
                    data["images"] = json!(m.images);
                }
                if !m.attachments.is_empty() {
                    data["attachments"] = json!(m.attachments);
                }
                if let Some(usage) = &m.usage {
                    data["usage"] = json!(usage);
                }
                Entry {
                    seq: m.seq,
                    kind: "message".into(),
                    created_at: m.created_at,
                    data,
                }
            }
            JournalEntry::Record(r) => Entry {
                seq: r.seq,
                kind: r.kind().into(),
                data: r.data(),
                created_at: r.created_at,
            },
        }
    }
}

/// Why an observation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// No thread has this key.
    #[error("no session `{0}`")]
    NoSuchSession(String),
    /// The thread is another principal's.
    #[error("session `{0}` belongs to another principal")]
    Forbidden(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn reject(code: &'static str, message: impl Into<String>, retryable: bool) -> SessionResult {
    SessionResult::Err {
        code,
        message: message.into(),
        retryable,
    }
}

impl Runtime {
    async fn session(&self, scope: &Scope) -> Result<Thread, ControlError> {
        let thread = self
            .store()
            .thread(&scope.session)
            .await?
            .ok_or_else(|| ControlError::NoSuchSession(scope.session.clone()))?;
        let caller = scope.principal.as_ref().map(Principal::canonical);
        // A thread is its owner's alone — and one with no owner is no principal's.
        if thread.principal != caller {
            return Err(ControlError::Forbidden(scope.session.clone()));
        }
        Ok(thread)
    }

    /// Applies `command` to the run of `scope.session`.
    pub async fn dispatch(&self, scope: &Scope, command: Command) -> SessionResult {
        let thread = match self.session(scope).await {
            Ok(t) => t,
            // As fastagent answers it: a session no invoke has created has no run either (its
            // clients start one with an invoke on `no_active_run`).
            Err(ControlError::NoSuchSession(s)) => {
                return reject(
                    control_codes::NO_ACTIVE_RUN,
                    format!("no run is in flight for session `{s}` (it has none yet); use invoke"),
                    false,
                );
            }
            Err(ControlError::Forbidden(s)) => {
                return reject(
                    control_codes::FORBIDDEN,
                    format!("session `{s}` belongs to another principal"),
                    false,
                );
            }
            Err(ControlError::Store(e)) => {
                return reject(control_codes::RUN_COMMAND_FAILED, e.to_string(), true);
            }
        };
        let now = self.now_ms();
        let (prompt, follow_up) = match command {
            Command::Abort => {
                // The session's own run first: were its children stopped first, a parent that
                // waits for one would take the aborted child's result and run on, and could
                // settle before its own abort is asked for.
                let local = self.cancel_local(thread.id);
                let requested = self.store().request_abort(thread.id, now).await;
                // Cancellation flows down: children still running stop with their parent.
                for child in self.store().children(thread.id).await.unwrap_or_default() {
                    if matches!(
                        child.status,
                        crate::types::ChildStatus::Running | crate::types::ChildStatus::Waiting
                    ) {
                        self.cancel_local(child.child);
                        let _ = self.store().request_abort(child.child, now).await;
                    }
                }
                return match requested {
                    Ok(Some(run)) => SessionResult::Ok {
                        run_id: Some(run.to_string()),
                    },
                    Ok(None) if local => SessionResult::Ok { run_id: None },
                    // No run, but a call that waits for a blocking child: the wait is aborted.
                    Ok(None) if thread.status == ThreadStatus::Waiting => {
                        match self.abort_wait(thread.id).await {
                            Ok(true) => SessionResult::Ok { run_id: None },
                            Ok(false) => reject(
                                control_codes::NO_ACTIVE_RUN,
                                "no run is in flight for this session",
                                false,
                            ),
                            Err(e) => {
                                reject(control_codes::RUN_COMMAND_FAILED, e.to_string(), true)
                            }
                        }
                    }
                    Ok(None) => reject(
                        control_codes::NO_ACTIVE_RUN,
                        "no run is in flight for this session",
                        false,
                    ),
                    Err(e) => reject(control_codes::RUN_COMMAND_FAILED, e.to_string(), true),
                };
            }
            Command::Steer { prompt } => (prompt, false),
            Command::FollowUp { prompt } => (prompt, true),
        };
        if prompt.text.trim().is_empty() {
            return reject(control_codes::INVALID_COMMAND, "the prompt is empty", false);
        }
        let Some(agent) = self.project().agents.get(&thread.agent) else {
            return reject(
                control_codes::RUN_COMMAND_FAILED,
                format!("agent `{}` is not in the project", thread.agent),
                false,
            );
        };
        // The whole prompt: its images go with its text, as an invoke's do.
        let message = NewQueued {
            follow_up,
            images: prompt.images,
            ..crate::decide::inbound(&agent.def, &prompt.text)
        };
        match self
            .store()
            .enqueue_if_running(thread.id, message, now)
            .await
        {
            Ok(Some(run)) => SessionResult::Ok {
                run_id: Some(run.to_string()),
            },
            Ok(None) => reject(
                control_codes::NO_ACTIVE_RUN,
                "no run is in flight for this session; use invoke",
                false,
            ),
            Err(e) => reject(control_codes::RUN_COMMAND_FAILED, e.to_string(), true),
        }
    }

    /// Terminates `scope.session` and, first, every descendant: runs stop (here at once,
    /// elsewhere at their next commit), queues are dropped, and deliveries are refused from then
    /// on. Returns how many threads were terminated.
    pub async fn terminate(&self, scope: &Scope) -> Result<usize, ControlError> {
        let thread = self.session(scope).await?;
        let mut pending = vec![thread.id];
        let mut all = Vec::new();
        while let Some(id) = pending.pop() {
            all.push(id);
            pending.extend(
                self.store()
                    .children(id)
                    .await?
                    .into_iter()
                    .map(|c| c.child),
            );
        }
        let now = self.now_ms();
        for id in all.iter().rev() {
            self.cancel_local(*id);
            self.store().terminate(*id, now).await?;
        }
        // A parent whose call waits for this thread gets the termination as that call's result.
        if let Err(e) = self.answer_terminated(&thread).await {
            tracing::warn!(thread = %thread.key, error = %e, "answering the parent's waiting call failed");
        }
        Ok(all.len())
    }

    /// Whether `scope.session` is running, parked or idle, and what commands wait for its run.
    pub async fn state(&self, scope: &Scope) -> Result<SessionState, ControlError> {
        let thread = self.session(scope).await?;
        let now = self.now_ms();
        let queue = self.store().queue(thread.id).await?;
        let follow_up = queue.iter().filter(|q| q.follow_up).count();
        let live = thread.lease_owner.filter(|_| thread.lease_expires >= now);
        let status = match (thread.status, live) {
            (ThreadStatus::Running, _) | (_, Some(_)) => "running",
            (ThreadStatus::AwaitingHuman, None) => "parked",
            _ => "idle",
        };
        Ok(SessionState {
            status,
            active_run_id: live.map(|r| r.to_string()),
            pending: Pending {
                steering: queue.len() - follow_up,
                follow_up,
            },
        })
    }

    /// The session's journal entries after `since` (0 for all), in order.
    pub async fn entries(&self, scope: &Scope, since: i64) -> Result<Vec<Entry>, ControlError> {
        let thread = self.session(scope).await?;
        self.entries_of(thread.id, since).await
    }

    async fn entries_of(&self, id: ThreadId, since: i64) -> Result<Vec<Entry>, ControlError> {
        let journal = self.store().journal_since(id, since).await?;
        Ok(journal.into_iter().map(Entry::from).collect())
    }

    /// Follows `scope.session` from the cursor `since`: every entry committed after it, as it
    /// commits, until the stream is dropped. It reads the journal after its cursor, then waits on
    /// the store's change feed for this thread (or a resync) and reads again: no polling. A failed
    /// read, or the feed ending, ends it.
    pub fn follow(&self, scope: Scope, since: i64) -> BoxStream<'static, Entry> {
        // Subscribed before the first read, so whatever commits after that read is announced.
        let follower = Follower {
            changes: self.store().changes(),
            rt: self.clone(),
            scope,
            thread: None,
            cursor: since,
        };
        stream::unfold(follower, |mut f| async move {
            let batch = f.next_batch().await?;
            Some((batch, f))
        })
        .flat_map(stream::iter)
        .boxed()
    }
}

/// The state of one `follow` stream.
struct Follower {
    rt: Runtime,
    scope: Scope,
    changes: BoxStream<'static, FeedEvent>,
    /// The session's thread, once resolved (on the first read).
    thread: Option<ThreadId>,
    /// The last seq handed out.
    cursor: i64,
}

impl Follower {
    /// The next non-empty batch of entries after the cursor; `None` ends the stream.
    async fn next_batch(&mut self) -> Option<Vec<Entry>> {
        loop {
            let id = match self.thread {
                Some(id) => {
                    self.wait(id).await?;
                    id
                }
                None => {
                    let id = self.rt.session(&self.scope).await.ok()?.id;
                    self.thread = Some(id);
                    id
                }
            };
            let batch = self.rt.entries_of(id, self.cursor).await.ok()?;
            if let Some(last) = batch.last() {
                self.cursor = last.seq;
                return Some(batch);
            }
        }
    }

    /// Waits until the feed says thread `id` went past the cursor, or asks for a resync.
    async fn wait(&mut self, id: ThreadId) -> Option<()> {
        loop {
            match self.changes.next().await? {
                FeedEvent::Changed(c) if c.thread == id && c.seq <= self.cursor => {}
                event if event.concerns(id) => return Some(()),
                _ => {}
            }
        }
    }
}
