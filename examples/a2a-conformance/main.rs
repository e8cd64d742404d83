//! The A2A TCK's system under test, written on duet's A2A library: every behaviour the TCK
//! drives by `messageId` prefix (`a2aproject/a2a-tck`, branch `1.0-dev`, `scenarios/*.feature`)
//! over tasks kept in memory — send (blocking or not), stream, get, list, cancel, subscribe,
//! multi-turn. See this folder's README for running the TCK against it.
//!
//! `cargo run -p duet-a2a --example a2a_conformance -- [ADDR]` (default `127.0.0.1:9999`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use duet_a2a::*;
use tokio::sync::broadcast;

/// One thing a scenario does to its task.
#[derive(Clone)]
enum Step {
    Status(TaskState, Option<&'static str>),
    Artifact(Part, bool, bool),
    Wait(Duration),
}

/// What a message makes happen, by its id's prefix.
enum Script {
    Steps(Vec<Step>),
    /// A direct message instead of a task.
    Reply(&'static str),
    /// The request fails (no task).
    Fail(&'static str),
}

fn script(message_id: &str) -> Script {
    use Step::*;
    use TaskState::*;
    let text = |t: &'static str| Part::text(t);
    let file = || Part {
        filename: Some("output.txt".into()),
        media_type: Some("text/plain".into()),
        ..Part::of_raw("dGNr")
    };
    let url = || Part {
        filename: Some("output.txt".into()),
        media_type: Some("text/plain".into()),
        ..Part::of_url("https://example.com/output.txt")
    };
    let working = || Status(Working, None);
    let done = || Status(Completed, None);
    let art = |p: Part| Artifact(p, false, true);
    let steps = |s: Vec<Step>| Script::Steps(s);
    let prefixed = |p: &str| message_id.starts_with(p);
    // Longer prefixes first: `tck-artifact-file-url` before `tck-artifact-file`.
    if prefixed("tck-stream-artifact-chunked") {
        steps(vec![
            working(),
            Artifact(text("chunk-1 "), false, false),
            Artifact(text("chunk-2"), true, true),
            done(),
        ])
    } else if prefixed("test-resubscribe-message-id") {
        let timeout: f64 = std::env::var("TCK_STREAMING_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2.0);
        steps(vec![
            working(),
            Wait(Duration::from_secs_f64(timeout * 2.0)),
            done(),
        ])
    } else if prefixed("tck-stream-artifact-text") {
        steps(vec![working(), art(text("Streamed text content")), done()])
    } else if prefixed("tck-stream-artifact-file") {
        steps(vec![working(), art(file()), done()])
    } else if prefixed("tck-stream-ordering-001") {
        steps(vec![working(), art(text("Ordered output")), done()])
    } else if prefixed("tck-stream-001") {
        steps(vec![working(), art(text("Stream hello from TCK")), done()])
    } else if prefixed("tck-stream-002") {
        steps(vec![done()])
    } else if prefixed("tck-stream-003") {
        steps(vec![working(), art(text("Stream task lifecycle")), done()])
    } else if prefixed("tck-artifact-file-url") {
        steps(vec![art(url()), done()])
    } else if prefixed("tck-artifact-text") {
        steps(vec![art(text("Generated text content")), done()])
    } else if prefixed("tck-artifact-file") {
        steps(vec![art(file()), done()])
    } else if prefixed("tck-artifact-data") {
        steps(vec![
            art(Part::data(serde_json::json!({"key": "value", "count": 42}))),
            done(),
        ])
    } else if prefixed("tck-message-response") {
        Script::Reply("Direct message response")
    } else if prefixed("tck-input-required") {
        steps(vec![Status(InputRequired, Some("What else do you need?"))])
    } else if prefixed("tck-reject-task") {
        Script::Fail("rejected")
    } else {
        // `tck-complete-task`, and every other message: complete with a status message.
        steps(vec![Status(Completed, Some("Hello from TCK"))])
    }
}

/// A task and the channel its updates go out on.
struct Entry {
    task: Task,
    updates: broadcast::Sender<StreamResponse>,
}

#[derive(Clone, Default)]
struct Book(Arc<Mutex<HashMap<String, Entry>>>);

impl Book {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Entry>) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn get(&self, id: &str) -> Handled<Task> {
        self.with(|b| b.get(id).map(|e| e.task.clone()))
            .ok_or_else(|| A2aError::task_not_found(id))
    }

    /// Applies `event` to its task and tells every follower, in one step (so order holds).
    fn apply(&self, id: &str, event: StreamResponse) {
        self.with(|b| {
            if let Some(e) = b.get_mut(id) {
                match &event {
                    StreamResponse::StatusUpdate(u) => e.task.status = u.status.clone(),
                    StreamResponse::ArtifactUpdate(u) => {
                        match e
                            .task
                            .artifacts
                            .iter_mut()
                            .find(|a| a.artifact_id == u.artifact.artifact_id)
                        {
                            Some(a) if u.append => a.parts.extend(u.artifact.parts.clone()),
                            Some(a) => *a = u.artifact.clone(),
                            None => e.task.artifacts.push(u.artifact.clone()),
                        }
                    }
                    _ => {}
                }
                let _ = e.updates.send(event);
            }
        });
    }
}

/// The TCK agent.
#[derive(Clone, Default)]
pub struct Conformance {
    book: Book,
}

impl Conformance {
    /// The task a message starts or continues (the message in its history), and its script.
    fn begin(&self, req: &SendMessageRequest) -> Handled<Result<(Task, Vec<Step>), Message>> {
        let m = &req.message;
        let steps = match script(&m.message_id) {
            Script::Reply(text) => {
                let mut reply = Message::agent_text(uuid::Uuid::now_v7().to_string(), text);
                reply.context_id = m
                    .context_id
                    .clone()
                    .or_else(|| Some(uuid::Uuid::now_v7().to_string()));
                return Ok(Err(reply));
            }
            Script::Fail(why) => return Err(A2aError::custom(-32603, 500, "REJECTED", why)),
            Script::Steps(s) => s,
        };
        let mut message = m.clone();
        let task = self.book.with(|b| -> Handled<Task> {
            let task = match &m.task_id {
                Some(id) => {
                    let e = b.get_mut(id).ok_or_else(|| A2aError::task_not_found(id))?;
                    if e.task.status.state.is_terminal() {
                        return Err(A2aError::unsupported_operation(format!(
                            "task {id} is {}: it takes no more messages",
                            e.task.status.state.as_str()
                        )));
                    }
                    if m.context_id
                        .as_ref()
                        .is_some_and(|c| *c != e.task.context_id)
                    {
                        return Err(A2aError::invalid_params(
                            "contextId does not match the task's",
                            vec![("message.contextId".into(), "not the task's context".into())],
                        ));
                    }
                    message.context_id = Some(e.task.context_id.clone());
                    e.task.history.push(message.clone());
                    e.task.status = TaskStatus::now(TaskState::Submitted);
                    e.task.clone()
                }
                None => {
                    let id = uuid::Uuid::now_v7().to_string();
                    let context = m
                        .context_id
                        .clone()
                        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
                    message.task_id = Some(id.clone());
                    message.context_id = Some(context.clone());
                    let task = Task {
                        id: id.clone(),
                        context_id: context,
                        status: TaskStatus::now(TaskState::Submitted),
                        artifacts: vec![],
                        history: vec![message.clone()],
                        metadata: None,
                    };
                    let (updates, _) = broadcast::channel(64);
                    b.insert(
                        id,
                        Entry {
                            task: task.clone(),
                            updates,
                        },
                    );
                    task
                }
            };
            Ok(task)
        })?;
        Ok(Ok((task, steps)))
    }

    /// Plays `steps` on the task, on a task of its own (a stream's client leaving does not stop
    /// it); resolves when the task settles.
    fn play(&self, task: &Task, steps: Vec<Step>) -> tokio::sync::oneshot::Receiver<()> {
        let (done, settled) = tokio::sync::oneshot::channel();
        let (book, id, context) = (self.book.clone(), task.id.clone(), task.context_id.clone());
        tokio::spawn(async move {
            for step in steps {
                if book.get(&id).is_ok_and(|t| t.status.state.is_terminal()) {
                    break; // canceled meanwhile
                }
                let event = match step {
                    Step::Wait(d) => {
                        tokio::time::sleep(d).await;
                        continue;
                    }
                    Step::Status(state, text) => {
                        let mut status = TaskStatus::now(state);
                        status.message = text.map(|t| {
                            let mut m = Message::agent_text(uuid::Uuid::now_v7().to_string(), t);
                            m.task_id = Some(id.clone());
                            m.context_id = Some(context.clone());
                            m
                        });
                        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                            task_id: id.clone(),
                            context_id: context.clone(),
                            status,
                            metadata: None,
                        })
                    }
                    Step::Artifact(part, append, last_chunk) => {
                        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                            task_id: id.clone(),
                            context_id: context.clone(),
                            artifact: Artifact {
                                artifact_id: format!("{id}-artifact"),
                                name: Some("output".into()),
                                description: None,
                                parts: vec![part],
                                metadata: None,
                                extensions: vec![],
                            },
                            append,
                            last_chunk,
                            metadata: None,
                        })
                    }
                };
                book.apply(&id, event);
            }
            let _ = done.send(());
        });
        settled
    }

    /// A stream of the task from now: `first` (the task), then its updates to a settled state.
    fn follow(
        &self,
        cx: &Context,
        first: Task,
        mut updates: broadcast::Receiver<StreamResponse>,
    ) -> Stream {
        let (id, context) = (first.id.clone(), first.context_id.clone());
        cx.stream.open(id, context, move |mut s| async move {
            let settled = |st: TaskState| st.is_terminal() || st.is_interrupted();
            let already = settled(first.status.state) && first.status.state.is_terminal();
            s.task(first).await?;
            if already {
                return Ok(());
            }
            while let Ok(event) = updates.recv().await {
                let end = event.state().is_some_and(settled);
                s.send(event).await?;
                if end {
                    break;
                }
            }
            Ok(())
        })
    }

    fn trimmed(mut task: Task, history: usize) -> Task {
        task.trim_history(history);
        task
    }
}

impl A2aAgent for Conformance {
    async fn send_message(
        &self,
        req: SendMessageRequest,
        cx: Context,
    ) -> Handled<SendMessageResponse> {
        let (task, steps) = match self.begin(&req)? {
            Ok(started) => started,
            Err(reply) => return Ok(SendMessageResponse::Message(reply)),
        };
        let settled = self.play(&task, steps);
        if !req.return_immediately() {
            let _ = settled.await;
        }
        Ok(SendMessageResponse::Task(Self::trimmed(
            self.book.get(&task.id)?,
            cx.history_length,
        )))
    }

    async fn send_streaming_message(
        &self,
        req: SendMessageRequest,
        cx: Context,
    ) -> Handled<Stream> {
        let (task, steps) = match self.begin(&req)? {
            Ok(started) => started,
            Err(reply) => {
                let (id, context) = (String::new(), reply.context_id.clone().unwrap_or_default());
                return Ok(cx.stream.open(id, context, move |mut s| async move {
                    s.message(reply).await
                }));
            }
        };
        let updates = self
            .book
            .with(|b| b.get(&task.id).map(|e| e.updates.subscribe()));
        let updates = updates.ok_or_else(|| A2aError::task_not_found(&task.id))?;
        // The task runs on whether or not anyone follows it.
        drop(self.play(&task, steps));
        Ok(self.follow(&cx, Self::trimmed(task, cx.history_length), updates))
    }

    async fn get_task(&self, req: GetTaskRequest, cx: Context) -> Handled<Task> {
        Ok(Self::trimmed(self.book.get(&req.id)?, cx.history_length))
    }

    async fn list_tasks(&self, req: ListTasksRequest, cx: Context) -> Handled<ListTasksResponse> {
        let after = req.status_after();
        let mut all: Vec<Task> = self
            .book
            .with(|b| b.values().map(|e| e.task.clone()).collect());
        all.retain(|t| {
            req.context_id.as_ref().is_none_or(|c| *c == t.context_id)
                && req.status.is_none_or(|s| s == t.status.state)
                && after.is_none_or(|a| {
                    t.status
                        .timestamp
                        .as_deref()
                        .and_then(|ts| chrono::DateTime::parse_from_rfc3339(ts).ok())
                        .is_some_and(|ts| ts > a)
                })
        });
        // Newest status first; ties by id, so pages are stable.
        all.sort_by(|a, b| {
            b.status
                .timestamp
                .cmp(&a.status.timestamp)
                .then(b.id.cmp(&a.id))
        });
        let total = all.len();
        let start = match req.page_token.as_deref() {
            Some(tok) => all
                .iter()
                .position(|t| t.id == tok)
                .map(|i| i + 1)
                .ok_or_else(|| {
                    A2aError::invalid_params(
                        "pageToken is not one this server gave",
                        vec![("pageToken".into(), "unknown".into())],
                    )
                })?,
            None => 0,
        };
        let page: Vec<Task> = all.into_iter().skip(start).take(cx.page_size).collect();
        let next = if start + page.len() < total {
            page.last().map(|t| t.id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        let include = req.include_artifacts.unwrap_or(false);
        let tasks = page
            .into_iter()
            .map(|mut t| {
                if !include {
                    t.artifacts.clear();
                }
                Self::trimmed(t, cx.history_length)
            })
            .collect();
        Ok(ListTasksResponse {
            tasks,
            next_page_token: next,
            page_size: i32::try_from(cx.page_size).unwrap_or(i32::MAX),
            total_size: i32::try_from(total).unwrap_or(i32::MAX),
        })
    }

    async fn cancel_task(&self, req: CancelTaskRequest, _cx: Context) -> Handled<Task> {
        let task = self.book.get(&req.id)?;
        if task.status.state.is_terminal() {
            return Err(A2aError::task_not_cancelable(&req.id, task.status.state));
        }
        self.book.apply(
            &req.id,
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: TaskStatus::now(TaskState::Canceled),
                metadata: None,
            }),
        );
        self.book.get(&req.id)
    }

    async fn subscribe_to_task(&self, req: SubscribeToTaskRequest, cx: Context) -> Handled<Stream> {
        let (task, updates) = self
            .book
            .with(|b| {
                b.get(&req.id)
                    .map(|e| (e.task.clone(), e.updates.subscribe()))
            })
            .ok_or_else(|| A2aError::task_not_found(&req.id))?;
        if task.status.state.is_terminal() {
            return Err(A2aError::unsupported_operation(format!(
                "task {} is {}: there is nothing to subscribe to",
                req.id,
                task.status.state.as_str()
            )));
        }
        Ok(self.follow(&cx, Self::trimmed(task, cx.history_length), updates))
    }
}

/// The card: streaming on, push off, JSON-RPC and HTTP+JSON.
pub fn card() -> AgentCard {
    let mut card = AgentCard::new(
        "duet A2A conformance",
        "The A2A TCK's scenarios, on duet's A2A library.",
    );
    card.capabilities.streaming = true;
    card.provider = Some(AgentProvider {
        url: "https://github.com/duet".into(),
        organization: "duet".into(),
    });
    card.skills = vec![AgentSkill {
        id: "tck".into(),
        name: "TCK conformance".into(),
        description: "Answers the TCK's messages by their messageId prefix.".into(),
        tags: vec!["tck".into()],
        examples: vec![],
        input_modes: vec![],
        output_modes: vec![],
    }];
    card
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9999".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "a2a conformance agent: http://{}/.well-known/agent-card.json",
        listener.local_addr()?
    );
    let service = A2aServer::new(card()).agent(Conformance::default());
    axum::serve(listener, service.into_router()).await
}
