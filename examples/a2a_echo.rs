//! An A2A echo agent on duet's A2A library, its tasks in memory: `SendMessage` answers with the
//! text as an artifact (a message starting with "hold" waits in `INPUT_REQUIRED` for the next
//! message of the same task), `SendStreamingMessage` streams it word by word, `GetTask` and
//! `CancelTask` find the task or answer `TaskNotFound`.
//!
//! `cargo run -p duet-a2a --example a2a_echo -- [ADDR]` (default `127.0.0.1:9999`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use duet_a2a::*;

type Tasks = Arc<Mutex<HashMap<String, Task>>>;

#[derive(Default)]
pub struct Echo {
    tasks: Tasks,
}

fn save(tasks: &Tasks, task: &Task) {
    let mut tasks = tasks.lock().unwrap_or_else(|p| p.into_inner());
    tasks.insert(task.id.clone(), task.clone());
}

impl Echo {
    fn save(&self, task: &Task) {
        save(&self.tasks, task);
    }

    fn find(&self, id: &str) -> Handled<Task> {
        let tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks
            .get(id)
            .cloned()
            .ok_or_else(|| A2aError::task_not_found(id))
    }

    /// The task this message starts or continues, with the message in its history.
    fn task_for(&self, mut message: Message) -> Handled<Task> {
        let mut task = match &message.task_id {
            Some(id) => {
                let task = self.find(id)?;
                if task.status.state.is_terminal() {
                    return Err(A2aError::unsupported_operation("the task has ended"));
                }
                if message
                    .context_id
                    .as_ref()
                    .is_some_and(|c| *c != task.context_id)
                {
                    return Err(A2aError::invalid_params(
                        "contextId is not the task's",
                        vec![],
                    ));
                }
                task
            }
            None => Task {
                id: uuid::Uuid::now_v7().to_string(),
                context_id: message
                    .context_id
                    .clone()
                    .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
                status: TaskStatus::now(TaskState::Submitted),
                artifacts: vec![],
                history: vec![],
                metadata: None,
            },
        };
        message.task_id = Some(task.id.clone());
        message.context_id = Some(task.context_id.clone());
        task.history.push(message);
        Ok(task)
    }
}

fn echo_of(task: &Task, text: &str) -> (Artifact, TaskStatus) {
    let artifact = Artifact {
        artifact_id: format!("{}-echo", task.id),
        name: Some("echo".into()),
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: vec![],
    };
    let state = if text.starts_with("hold") {
        TaskState::InputRequired
    } else {
        TaskState::Completed
    };
    (artifact, TaskStatus::now(state))
}

impl A2aAgent for Echo {
    async fn send_message(
        &self,
        req: SendMessageRequest,
        cx: Context,
    ) -> Handled<SendMessageResponse> {
        let mut task = self.task_for(req.message)?;
        let (artifact, status) = echo_of(&task, cx.message.as_deref().unwrap_or(""));
        task.artifacts = vec![artifact];
        task.status = status;
        self.save(&task);
        task.trim_history(cx.history_length);
        Ok(SendMessageResponse::Task(task))
    }

    async fn send_streaming_message(
        &self,
        req: SendMessageRequest,
        cx: Context,
    ) -> Handled<Stream> {
        let mut task = self.task_for(req.message)?;
        self.save(&task);
        let text = cx.message.unwrap_or_default();
        let (artifact, status) = echo_of(&task, &text);
        let (id, context) = (task.id.clone(), task.context_id.clone());
        let tasks = self.tasks.clone();
        Ok(cx.stream.open(id, context, move |mut s| async move {
            s.task(task.clone()).await?;
            s.status(TaskStatus::now(TaskState::Working)).await?;
            let words: Vec<&str> = text.split_inclusive(' ').collect();
            for (i, word) in words.iter().enumerate() {
                let chunk = Artifact {
                    parts: vec![Part::text(*word)],
                    ..artifact.clone()
                };
                s.artifact(chunk, i > 0, i + 1 == words.len()).await?;
            }
            task.artifacts = vec![artifact];
            task.status = status.clone();
            save(&tasks, &task);
            s.status(status).await
        }))
    }

    async fn get_task(&self, req: GetTaskRequest, cx: Context) -> Handled<Task> {
        let mut task = self.find(&req.id)?;
        task.trim_history(cx.history_length);
        Ok(task)
    }

    async fn cancel_task(&self, req: CancelTaskRequest, _cx: Context) -> Handled<Task> {
        let mut task = self.find(&req.id)?;
        if task.status.state.is_terminal() {
            return Err(A2aError::task_not_cancelable(&task.id, task.status.state));
        }
        task.status = TaskStatus::now(TaskState::Canceled);
        self.save(&task);
        Ok(task)
    }
}

/// The echo agent's card: streaming on, push notifications off.
pub fn card() -> AgentCard {
    let mut card = AgentCard::new(
        "echo",
        "Says back what it is sent; \"hold …\" waits for more.",
    );
    card.capabilities.streaming = true;
    card.skills = vec![AgentSkill {
        id: "echo".into(),
        name: "Echo".into(),
        description: "Echoes the text of a message as an artifact.".into(),
        tags: vec!["echo".into()],
        examples: vec!["hello".into()],
        input_modes: vec![],
        output_modes: vec![],
    }];
    card
}

/// The echo agent's service.
pub fn service() -> A2aService {
    A2aServer::new(card()).agent(Echo::default())
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9999".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "a2a echo agent: http://{}/.well-known/agent-card.json",
        listener.local_addr()?
    );
    axum::serve(listener, service().into_router()).await
}
