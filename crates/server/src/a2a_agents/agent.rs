//! A duet agent as an A2A agent, on the A2A library's handler contract: a message is delivered
//! to the thread its context names (created when new), as the side the client plays; a message
//! with a task id continues that session (the answer to its question when it is parked); get,
//! list, cancel and subscribe read the thread and its journal. See `docs/a2a.md` for the
//! mapping.

use duet_a2a::{
    A2aAgent, A2aError, CancelTaskRequest, Context, GetTaskRequest, Handled,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, PartContent, SendMessageRequest, SendMessageResponse,
    Stream, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
    TaskPushNotificationConfigRef, TaskState,
};
use duet_runtime::{Accepted, Delivery, Origin, RunError, SideId, Thread, WhenBusy};

use super::files_in::{self, Incoming};
use super::files_out;
use super::follow;
use super::tasks::{TaskRef, View};
use crate::auth::Caller;
use crate::input::{self, Fault, Kind};
use crate::service;
use crate::service::tasks::Named;
use crate::state::AppState;

/// One project agent served over A2A.
pub(crate) struct DuetAgent {
    pub state: AppState,
    pub agent: String,
    /// The side the A2A client plays: the human side, else B.
    pub client: SideId,
}

/// What a message says, for duet: its text and its file parts (bytes or URLs), checked.
struct Said {
    text: String,
    files: Vec<Incoming>,
}

/// Whether the write that delivers `req` tells a replay of it on its own: a message of words
/// alone (no file, no data part, no push config) to the task that is parked at a question now
/// — the answer it carries is this task's, and a message id already delivered to the thread
/// makes the write deliver nothing (the task is then returned as it stands).
fn replay_in_write(
    req: &SendMessageRequest,
    said: &Said,
    named: Option<&(Thread, TaskRef)>,
) -> bool {
    said.files.is_empty()
        && req
            .message
            .parts
            .iter()
            .all(|p| !matches!(p.content, PartContent::Data(_)))
        && req
            .configuration
            .as_ref()
            .is_none_or(|c| c.task_push_notification_config.is_none())
        && named.is_some_and(|(t, r)| {
            t.status == duet_runtime::ThreadStatus::AwaitingHuman
                && t.session_open
                && TaskRef::next_for(t) == *r
        })
}

/// What a message says, checked as every door checks its input ([`input`]) before anything is
/// read: its ids, its text, its file parts (each a `raw` within the per-file limit `max`, or a
/// `url`: [`files_in`]). Every raw part is a file, an image too (see `docs/decisions.md`).
fn said(req: &SendMessageRequest, max: u64) -> Result<Said, A2aError> {
    let m = &req.message;
    input::id(Kind::MessageId, "message.messageId", &m.message_id).map_err(Fault::into_a2a)?;
    if let Some(context) = &m.context_id {
        input::key("message.contextId", context).map_err(Fault::into_a2a)?;
    }
    let mut text = Vec::new();
    let mut files = Vec::new();
    for (i, part) in m.parts.iter().enumerate() {
        let about = (part.media_type.as_deref(), part.filename.as_deref());
        match &part.content {
            PartContent::Text(t) => {
                input::text(&format!("message.parts[{i}].text"), t).map_err(Fault::into_a2a)?;
                text.push(t.clone());
            }
            // Serialized JSON: a NUL in it is the escape `\u0000`, never the character.
            PartContent::Data(d) => text.push(d.to_string()),
            PartContent::Raw(data) => files.push(files_in::raw(i, data, about, max)?),
            PartContent::Url(u) => files.push(files_in::url(i, u, about)?),
        }
    }
    let text = text.join("\n");
    if text.trim().is_empty() && files.is_empty() {
        return Err(A2aError::invalid_params(
            "the message has no text",
            vec![(
                "message.parts".into(),
                "at least one non-empty text or data part, or a file".into(),
            )],
        ));
    }
    Ok(Said { text, files })
}

/// Where a message goes: the stored key, the thread if it exists, the task it joins, and the
/// park it answers.
struct Target {
    key: String,
    thread: Option<Thread>,
    task: Option<TaskRef>,
    context: String,
    /// The named task's state, read with `thread` (a message without `taskId`: none).
    named: Option<TaskState>,
}

/// The message metadata key with which a client asks that a message to a working task be
/// queued as a follow-up of it.
pub(crate) const FOLLOW_UP: &str = "followUp";

/// Whether the message asks to be a follow-up (`metadata.followUp: true`).
fn asks_follow_up(req: &SendMessageRequest) -> bool {
    req.message
        .metadata
        .as_ref()
        .and_then(|m| m.get(FOLLOW_UP))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

impl DuetAgent {
    pub(crate) fn caller(cx: &Context) -> Result<Caller, A2aError> {
        cx.request
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| A2aError::internal("an A2A request without a caller"))
    }

    fn view(&self, caller: &Caller, t: &Thread, history: usize, artifacts: bool) -> View {
        View {
            context: caller.visible_key(&t.key),
            client: self.client,
            history,
            artifacts,
            origin: None,
        }
    }

    /// The task `id`, if the caller may see it and it is this agent's.
    pub(crate) async fn find(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<(Thread, TaskRef), A2aError> {
        let not_found = || A2aError::task_not_found(id);
        let r = TaskRef::parse(id).ok_or_else(not_found)?;
        let t = service::tasks::find(&self.state, caller, &self.agent, r.thread, r.session)
            .await
            .map_err(A2aError::internal)?
            .ok_or_else(not_found)?;
        Ok((t, r))
    }

    /// Where a message goes; `task` is the task its `taskId` names, as this request found it
    /// ([`DuetAgent::named_task`]).
    async fn target(
        &self,
        caller: &Caller,
        req: &SendMessageRequest,
        task: Option<&(Thread, TaskRef)>,
    ) -> Result<Target, A2aError> {
        let m = &req.message;
        if let Some(id) = &m.task_id {
            let Some((t, r)) = task else {
                return Err(A2aError::task_not_found(id));
            };
            let r = *r;
            let context = caller.visible_key(&t.key);
            if m.context_id.as_ref().is_some_and(|c| *c != context) {
                return Err(A2aError::invalid_params(
                    "contextId is not the task's context",
                    vec![(
                        "message.contextId".into(),
                        format!("task {id} is in context {context}"),
                    )],
                ));
            }
            // Parked at a question in this very task: the client's turn, on the thread alone
            // (a question waits on no decision, and its session is open), so its journal is
            // not read.
            if t.status == duet_runtime::ThreadStatus::AwaitingHuman
                && t.session_open
                && TaskRef::next_for(t) == r
            {
                return Ok(Target {
                    key: t.key.clone(),
                    task: Some(r),
                    thread: Some(t.clone()),
                    context,
                    named: Some(super::tasks::current_state(t)),
                });
            }
            let view = self.view(caller, t, 0, false);
            // The thread as read with the task: the park an answer carries is the one the
            // state it is checked against shows.
            let (t, task, _) = follow::read_on(&self.state, t.clone(), r, &view).await?;
            // Its calls came to wait on decisions since the message was looked at: words are
            // no decision.
            let pending = super::asking::pending_ids(&task);
            if !pending.is_empty() {
                return Err(A2aError::invalid_params(
                    format!("task {id} waits for decisions on tool calls, not words"),
                    vec![(
                        "message.parts".into(),
                        format!("a data part with `decisions` for {}", pending.join(", ")),
                    )],
                )
                .with("taskId", id.as_str())
                .with("pendingApprovals", pending.join(",")));
            }
            if task.status.state.is_terminal() || TaskRef::next_for(&t) != r {
                return Err(A2aError::unsupported_operation(format!(
                    "task {id} is {}: it takes no more messages; send one without taskId to start another",
                    task.status.state.as_str()
                ))
                .with("taskId", id.as_str())
                .with("state", task.status.state.as_str()));
            }
            return Ok(Target {
                key: t.key.clone(),
                task: Some(r),
                thread: Some(t),
                context,
                named: Some(task.status.state),
            });
        }
        let context = match &m.context_id {
            Some(c) => c.clone(),
            None => uuid::Uuid::now_v7().to_string(),
        };
        // A context the client named was checked with the message (`said`); ours is a UUID.
        let key = caller.stored_key(&context);
        let thread = match service::tasks::named(&self.state, caller, &self.agent, &context)
            .await
            .map_err(A2aError::internal)?
        {
            Named::Free => None,
            // Someone else's name: refused, never replaced by a context of our choosing.
            Named::Hidden => {
                return Err(A2aError::invalid_params(
                    "this contextId cannot be used",
                    vec![(
                        "message.contextId".into(),
                        "not available to this caller".into(),
                    )],
                ));
            }
            Named::OtherAgent => {
                return Err(A2aError::invalid_params(
                    format!("context {context} belongs to another agent"),
                    vec![("message.contextId".into(), "another agent's context".into())],
                ));
            }
            Named::Ours(t) if t.status == duet_runtime::ThreadStatus::Terminated => {
                return Err(A2aError::unsupported_operation(format!(
                    "context {context} has ended (its task was canceled)"
                )));
            }
            Named::Ours(t) => Some(*t),
        };
        Ok(Target {
            key,
            task: thread.as_ref().map(TaskRef::next_for),
            thread,
            context,
            named: None,
        })
    }

    /// A message sent before (same `messageId`, same task): the task as it is, nothing new
    /// written.
    async fn replay(
        &self,
        caller: &Caller,
        req: &SendMessageRequest,
        history: usize,
        task: Option<&(Thread, TaskRef)>,
    ) -> Result<Option<Task>, A2aError> {
        let Some((t, r)) = task else {
            return Ok(None);
        };
        let r = *r;
        if !service::messages::delivered(&self.state, t, &req.message.message_id)
            .await
            .map_err(A2aError::internal)?
        {
            return Ok(None);
        }
        let view = self.view(caller, t, history, true);
        Ok(Some(follow::read(&self.state, r, &view).await?.1))
    }

    /// The task a message's `taskId` names, found once for the request (its replay, its
    /// decisions and its delivery each look at it).
    async fn named_task(
        &self,
        caller: &Caller,
        req: &SendMessageRequest,
    ) -> Result<Option<(Thread, TaskRef)>, A2aError> {
        match &req.message.task_id {
            Some(id) => Ok(Some(self.find(caller, id).await?)),
            None => Ok(None),
        }
    }

    /// Stores the message and starts (or queues) its run: the task it is part of, the journal
    /// floor its outcome lies past (none for a replayed message id), and the end of the run
    /// when this process started it. `waits`: the caller waits for that end and answers with
    /// the task, which the run's settling write then reads.
    async fn deliver(
        &self,
        caller: &Caller,
        req: &SendMessageRequest,
        said: Said,
        task: Option<&(Thread, TaskRef)>,
        waits: bool,
    ) -> Result<(TaskRef, View, Option<i64>, Option<follow::RunEnd>), A2aError> {
        let target = self.target(caller, req, task).await?;
        let floor = target.thread.as_ref().map_or(0, |t| t.next_seq);
        let answers = target.thread.as_ref().and_then(Thread::park);
        // A message naming a task that does not wait for input is no answer: queued only when
        // the client asked for a follow-up, so an answer that lost a race is never applied as
        // a second one.
        if let (Some(state), Some(t), Some(r)) = (target.named, &target.thread, target.task)
            && !state.is_interrupted()
            && !asks_follow_up(req)
        {
            return Err(self.not_waiting(t, r, state).await);
        }
        let attachments = self.files_in(caller, &target, said.files).await?;
        // A message of files alone says which.
        let text = if said.text.trim().is_empty() {
            format!("Attachments:\n- {}", attachments.join("\n- "))
        } else {
            said.text
        };
        let delivery = Delivery {
            key: &target.key,
            agent: Some(&self.agent),
            text: &text,
            images: &[],
            attachments: &attachments,
            origin: Origin {
                principal: caller.acting_for(target.thread.as_ref()),
                author: caller.canonical.as_deref(),
                source: Some("a2a"),
                ..Origin::default()
            },
            when_busy: WhenBusy::Queue,
            answers,
            message_id: Some(&req.message.message_id),
            trace: None,
        };
        // The target's thread as read just now (none: its context's key held none) — unless
        // its files opened the thread since: then it is read.
        let runtime = self.state.runtime();
        let accepted = match (&target.thread, attachments.is_empty()) {
            (None, false) => runtime.accept(delivery).await,
            (known, _) => runtime.accept_to(known.as_ref(), delivery).await,
        }
        .map_err(|e| run_error(e, &target.context))?;
        let (thread, floor, run) = match accepted {
            Accepted::Claimed(claim) => {
                let id = claim.thread();
                // A caller that waits answers with the session the run settles in: read by
                // the settling write where the store can.
                let claim = if waits {
                    claim.reporting_session()
                } else {
                    claim
                };
                let run = self.state.spawn_run(claim);
                (id, Some(floor), Some(run))
            }
            Accepted::Queued { thread } => (thread, Some(floor), None),
            Accepted::Duplicate(settled) => (settled.thread, None, None),
        };
        let r = match floor {
            Some(_) => target.task.unwrap_or(TaskRef { thread, session: 1 }),
            // A message delivered before: its task is the thread's current session (not the
            // next one this delivery would have opened).
            None => match service::threads::reread(&self.state, thread).await {
                Ok(Some(t)) => TaskRef::current(&t),
                Ok(None) => TaskRef { thread, session: 1 },
                Err(e) => return Err(A2aError::internal(e)),
            },
        };
        let view = View {
            context: target.context,
            client: self.client,
            history: 0,
            artifacts: true,
            origin: None,
        };
        Ok((TaskRef { thread, ..r }, view, floor, run))
    }
}

impl DuetAgent {
    /// Stores a message's file parts as files of its target's thread (opened idle first for a
    /// new context, as an upload opens one): their paths.
    async fn files_in(
        &self,
        caller: &Caller,
        target: &Target,
        files: Vec<Incoming>,
    ) -> Result<Vec<String>, A2aError> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        // Every URL fetched first: a refused one opens no thread.
        let files = files_in::fetched(&self.state, files).await?;
        let opened;
        let t = match &target.thread {
            Some(t) => t,
            None => {
                opened = service::files::for_upload(
                    &self.state,
                    caller,
                    &target.context,
                    Some(&self.agent),
                    "a2a",
                )
                .await
                .map_err(|e| match e {
                    service::ServiceError::Store(e) => A2aError::internal(e),
                    other => A2aError::invalid_params(
                        format!("context {} cannot take files: {other}", target.context),
                        vec![("message.contextId".into(), other.to_string())],
                    ),
                })?;
                &opened
            }
        };
        files_in::store(&self.state, t, files).await
    }

    /// Why a message to task `r` (of thread `t`, in `state`) that did not ask to be a
    /// follow-up is refused: the answer that came first when the session's last park has one.
    async fn not_waiting(&self, t: &Thread, r: TaskRef, state: TaskState) -> A2aError {
        let last = match service::approvals::last_answered(&self.state, t.id).await {
            Ok(last) => last,
            Err(e) => return A2aError::internal(e),
        };
        match last.filter(|a| a.park.session == r.session) {
            Some(a) => run_error(
                RunError::AlreadyAnswered {
                    key: t.key.clone(),
                    park: a.park,
                    first: Some(a.answer),
                },
                "",
            ),
            None => A2aError::unsupported_operation(format!(
                "task {} is {} and does not wait for input; to queue this message behind its work, set `metadata.{FOLLOW_UP}` to true",
                r.id(),
                state.as_str()
            )),
        }
        .with("taskId", r.id())
        .with("state", state.as_str())
    }
}

/// A refused delivery as an A2A error.
fn run_error(e: RunError, context: &str) -> A2aError {
    match e {
        RunError::AlreadyAnswered { park, first, .. } => {
            let mut err = A2aError::unsupported_operation(format!(
                "the task is no longer waiting for this answer: another answer to {park} came first"
            ));
            if let Some(first) = first {
                err = err.with("answeredAt", first.at.to_string()).with(
                    "answeredBy",
                    first
                        .author
                        .map(|a| Caller::author_name(&a))
                        .unwrap_or_default(),
                );
            }
            err
        }
        RunError::Terminated(_) => {
            A2aError::unsupported_operation(format!("context {context} has ended"))
        }
        RunError::Forbidden(_) => A2aError::invalid_params(
            "this contextId cannot be used",
            vec![(
                "message.contextId".into(),
                "not available to this caller".into(),
            )],
        ),
        RunError::ShuttingDown => A2aError::custom(
            -32050,
            503,
            "SHUTTING_DOWN",
            "the server is shutting down; send again (the same messageId is safe)",
        ),
        e @ RunError::Stale { .. } => A2aError::unsupported_operation(e.to_string()),
        other => A2aError::internal(other),
    }
}

impl A2aAgent for DuetAgent {
    async fn send_message(
        &self,
        req: SendMessageRequest,
        cx: Context,
    ) -> Handled<SendMessageResponse> {
        let caller = Self::caller(&cx)?;
        let said = said(&req, service::files::max_file_bytes(&self.state))?;
        let named = self.named_task(&caller, &req).await?;
        // A plain answer to a task parked at a question is told from a replay by its own write
        // (a message id is delivered to a thread once: `Accepted::Duplicate`), a driver call
        // fewer; anything else is looked up first (a replay must store no file, push config
        // or decision again, nor be refused as no answer to a task that has moved on).
        if !replay_in_write(&req, &said, named.as_ref())
            && let Some(task) = self
                .replay(&caller, &req, cx.history_length, named.as_ref())
                .await?
        {
            return Ok(SendMessageResponse::Task(task));
        }
        let push = self.inline_push(&req).await?;
        let (r, mut view, floor, run) = match self.decisions(&caller, &req, named.as_ref()).await? {
            Some((r, view, floor)) => (r, view, floor, None),
            None => {
                let waits = !req.return_immediately();
                self.deliver(&caller, &req, said, named.as_ref(), waits)
                    .await?
            }
        };
        if let Some(config) = push {
            self.store_push(&caller, r, config).await?;
        }
        view.history = cx.history_length;
        view.origin = Some(files_out::origin(&self.state, Some(&cx.request)));
        let task = if req.return_immediately() {
            follow::read(&self.state, r, &view).await?.1
        } else {
            follow::settled(&self.state, r, &view, floor, run).await?
        };
        Ok(SendMessageResponse::Task(task))
    }

    async fn send_streaming_message(
        &self,
        req: SendMessageRequest,
        cx: Context,
    ) -> Handled<Stream> {
        let caller = Self::caller(&cx)?;
        let said = said(&req, service::files::max_file_bytes(&self.state))?;
        let push = self.inline_push(&req).await?;
        let named = self.named_task(&caller, &req).await?;
        let (r, mut view, floor) = match self.decisions(&caller, &req, named.as_ref()).await? {
            Some(decided) => decided,
            // A stream follows every commit of the run: its end is not waited for apart.
            None => {
                let (r, view, floor, _run) = self
                    .deliver(&caller, &req, said, named.as_ref(), false)
                    .await?;
                (r, view, floor)
            }
        };
        if let Some(config) = push {
            self.store_push(&caller, r, config).await?;
        }
        view.history = cx.history_length;
        view.origin = Some(files_out::origin(&self.state, Some(&cx.request)));
        self.open(cx, r, view, Some(floor)).await
    }

    async fn get_task(&self, req: GetTaskRequest, cx: Context) -> Handled<Task> {
        let caller = Self::caller(&cx)?;
        let (t, r) = self.find(&caller, &req.id).await?;
        let mut view = self.view(&caller, &t, cx.history_length, true);
        view.origin = Some(files_out::origin(&self.state, Some(&cx.request)));
        Ok(follow::read(&self.state, r, &view).await?.1)
    }

    async fn list_tasks(&self, req: ListTasksRequest, cx: Context) -> Handled<ListTasksResponse> {
        let caller = Self::caller(&cx)?;
        self.tasks(&caller, req, &cx).await
    }

    async fn cancel_task(&self, req: CancelTaskRequest, cx: Context) -> Handled<Task> {
        let caller = Self::caller(&cx)?;
        let (t, r) = self.find(&caller, &req.id).await?;
        let view = self.view(&caller, &t, cx.history_length, true);
        let (_, task, _) = follow::read(&self.state, r, &view).await?;
        if task.status.state.is_terminal() {
            return Err(A2aError::task_not_cancelable(&req.id, task.status.state));
        }
        service::threads::terminate(&self.state, &t)
            .await
            .map_err(A2aError::internal)?;
        Ok(follow::read(&self.state, r, &view).await?.1)
    }

    async fn create_push_config(
        &self,
        req: TaskPushNotificationConfig,
        cx: Context,
    ) -> Handled<TaskPushNotificationConfig> {
        let caller = Self::caller(&cx)?;
        let task = req.task_id.clone();
        self.put_push(&caller, &task, req).await
    }

    async fn get_push_config(
        &self,
        req: TaskPushNotificationConfigRef,
        cx: Context,
    ) -> Handled<TaskPushNotificationConfig> {
        self.get_push(req, &cx).await
    }

    async fn list_push_configs(
        &self,
        req: ListTaskPushNotificationConfigsRequest,
        cx: Context,
    ) -> Handled<ListTaskPushNotificationConfigsResponse> {
        self.list_push(req, &cx).await
    }

    async fn delete_push_config(
        &self,
        req: TaskPushNotificationConfigRef,
        cx: Context,
    ) -> Handled<()> {
        self.delete_push(req, &cx).await
    }

    async fn subscribe_to_task(&self, req: SubscribeToTaskRequest, cx: Context) -> Handled<Stream> {
        let caller = Self::caller(&cx)?;
        let (t, r) = self.find(&caller, &req.id).await?;
        let mut view = self.view(&caller, &t, cx.history_length, true);
        view.origin = Some(files_out::origin(&self.state, Some(&cx.request)));
        self.open(cx, r, view, None).await
    }
}

impl DuetAgent {
    /// The push config a `SendMessage` carries, checked before the message is delivered (a
    /// refused URL delivers nothing); stored for the task once the message has one.
    async fn inline_push(
        &self,
        req: &SendMessageRequest,
    ) -> Result<Option<TaskPushNotificationConfig>, A2aError> {
        let Some(config) = req
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.clone())
        else {
            return Ok(None);
        };
        self.check_push(&config).await?;
        Ok(Some(config))
    }

    /// A stream of the task: its snapshot first, then its updates until it settles. `new`: the
    /// stream of a message just delivered, with its journal floor (`None` inside: replayed).
    async fn open(
        &self,
        cx: Context,
        r: TaskRef,
        view: View,
        new: Option<Option<i64>>,
    ) -> Handled<Stream> {
        let (new, floor) = (new.is_some(), new.flatten());
        let (_, snapshot, seen, seqs) = follow::read_seqs(&self.state, r, &view).await?;
        if snapshot.status.state.is_terminal() && !new {
            return Err(A2aError::unsupported_operation(format!(
                "task {} is {}: there is nothing to subscribe to",
                snapshot.id,
                snapshot.status.state.as_str()
            )));
        }
        let state = self.state.clone();
        let first = if new && snapshot.status.state != TaskState::Submitted {
            Task {
                status: duet_a2a::TaskStatus::now(TaskState::Working),
                artifacts: vec![],
                ..snapshot.clone()
            }
        } else {
            snapshot.clone()
        };
        let (task_id, context) = (snapshot.id.clone(), snapshot.context_id.clone());
        // The stream ends (closed, no error) once the caller's key is revoked.
        let credential = Self::caller(&cx)?.credential;
        Ok(cx
            .stream
            .open(task_id, context, move |mut sink| async move {
                sink.task(first.clone()).await?;
                let seen = if new { 0 } else { seen };
                let ended = service::keys::ended(state.clone(), credential);
                tokio::select! {
                    followed = follow::stream(state, r, view, sink, (first, seqs), (seen, floor)) => followed,
                    () = ended => Ok(()),
                }
            }))
    }
}
