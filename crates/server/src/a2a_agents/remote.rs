//! A remote A2A agent as a duet child: the handler on side A of the agent an
//! `agents/remotes/` definition defines. Each message it takes (the parent's, then a person's
//! answers) goes to the remote agent — into one remote task, its ids kept as the thread's
//! values — and what the remote task settles in decides the turn: asking for input, the
//! question is this side's message and the thread waits for a person; completed, the session
//! ends with its result; failed, rejected or canceled, the session ends saying so.

use std::time::Duration;

use async_trait::async_trait;
use duet_a2a::{
    A2aClient, Message as A2aMessage, Part, PartContent, Role, SendMessageResponse, Task, TaskState,
};
use duet_runtime::{Handler, HandlerError, Handlers, Message, ThreadState};
use duet_spec::{Project, RemoteAgentDef};
use tokio::sync::OnceCell;

const TASK: &str = "a2a.remote.task";
const CONTEXT: &str = "a2a.remote.context";

/// Every remote agent of `project` registered on `handlers`, each under its definition's
/// `builtin` name; tokens are read from the environment by `env`.
pub fn remote_agents(
    project: &Project,
    env: impl Fn(&str) -> Option<String>,
    mut handlers: Handlers,
) -> Handlers {
    for remote in project.remotes.values() {
        let def = remote.def.clone();
        let token = def.api_key_env.as_deref().and_then(&env);
        let url = expand(&def.url, &env);
        handlers = handlers.with(
            &def.builtin(),
            RemoteAgent {
                def,
                url,
                token,
                client: OnceCell::new(),
            },
        );
    }
    handlers
}

/// `{{env.NAME}}` placeholders filled in (an unset one left empty).
fn expand(url: &str, env: &impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = url;
    while let Some(start) = rest.find("{{env.") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 6..];
        match after.find("}}") {
            Some(end) => {
                out.push_str(&env(&after[..end]).unwrap_or_default());
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The handler speaking to one remote agent.
struct RemoteAgent {
    def: RemoteAgentDef,
    url: String,
    token: Option<String>,
    client: OnceCell<A2aClient>,
}

impl RemoteAgent {
    async fn client(&self) -> Result<&A2aClient, HandlerError> {
        let timeout = Duration::from_millis(u64::from(self.def.timeout_ms));
        self.client
            .get_or_try_init(|| A2aClient::connect(&self.url, self.token.clone(), timeout))
            .await
            .map_err(|e| HandlerError::new(format!("remote agent `{}`: {e}", self.def.name)))
    }

    /// Follows a task the remote answered before it settled, until it does (or the timeout).
    async fn settle(&self, client: &A2aClient, mut task: Task) -> Result<Task, HandlerError> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(u64::from(self.def.timeout_ms));
        let mut wait = Duration::from_millis(200);
        while !(task.status.state.is_terminal() || task.status.state.is_interrupted()) {
            if tokio::time::Instant::now() >= deadline {
                return Err(HandlerError::new(format!(
                    "remote agent `{}`: task {} still {} after {} ms",
                    self.def.name,
                    task.id,
                    task.status.state.as_str(),
                    self.def.timeout_ms
                )));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
            task = client.get_task(&task.id).await.map_err(|e| self.error(e))?;
        }
        Ok(task)
    }

    fn error(&self, e: duet_a2a::ClientError) -> HandlerError {
        HandlerError::new(format!("remote agent `{}`: {e}", self.def.name))
    }
}

#[async_trait]
impl Handler for RemoteAgent {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let text = message.content.clone().unwrap_or_default();
        let value = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_owned));
        let task_id = value(state.get_value(TASK).await?);
        // The context is this thread's, so a redelivered message (same id) is the same message
        // to the remote agent too.
        let context = value(state.get_value(CONTEXT).await?)
            .unwrap_or_else(|| format!("duet-{}", state.thread_id()));
        let outgoing = A2aMessage {
            message_id: format!("duet-{}-{}", state.thread_id(), message.seq),
            context_id: Some(context),
            task_id,
            role: Role::User,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: vec![],
            reference_task_ids: vec![],
        };
        let client = self.client().await?;
        let task = match client
            .send_message(outgoing, false)
            .await
            .map_err(|e| self.error(e))?
        {
            SendMessageResponse::Message(m) => {
                let said = m.text();
                state.reply(said.clone());
                state.stop_session(Some(said));
                return Ok(());
            }
            SendMessageResponse::Task(t) => self.settle(client, t).await?,
        };
        // An ended remote task takes no more messages: the child's next session starts another.
        let open = !task.status.state.is_terminal();
        state.set_value(TASK, open.then(|| task.id.clone().into()));
        state.set_value(CONTEXT, Some(task.context_id.clone().into()));
        match task.status.state {
            TaskState::InputRequired | TaskState::AuthRequired => {
                state.reply(question(&task));
            }
            TaskState::Completed => {
                let result = result(&task);
                state.reply(result.clone());
                state.stop_session(Some(result));
            }
            other => {
                let why = task
                    .status
                    .message
                    .as_ref()
                    .map(A2aMessage::text)
                    .unwrap_or_default();
                let said = format!(
                    "The remote agent `{}` ended its task {}: {why}",
                    self.def.name,
                    other.as_str()
                );
                state.reply(said.clone());
                state.stop_session(Some(said));
            }
        }
        Ok(())
    }
}

/// What the remote task asks: its status message, else its last agent message.
fn question(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .or_else(|| task.history.iter().rev().find(|m| m.role == Role::Agent))
        .map(A2aMessage::text)
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| "The remote agent asks for input.".to_owned())
}

/// A completed task's result: its artifacts' text (a `data` part as JSON), else its status
/// message.
fn result(task: &Task) -> String {
    let parts: Vec<String> = task
        .artifacts
        .iter()
        .flat_map(|a| &a.parts)
        .filter_map(|p| match &p.content {
            PartContent::Text(t) => Some(t.clone()),
            PartContent::Data(d) => Some(d.to_string()),
            PartContent::Url(u) => Some(u.clone()),
            PartContent::Raw(_) => None,
        })
        .collect();
    if parts.is_empty() {
        question(task)
    } else {
        parts.join("\n")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_filled_from_the_environment() {
        let env = |k: &str| (k == "HOST").then(|| "http://h:1".to_owned());
        assert_eq!(
            super::expand("{{env.HOST}}/a2a/x", &env),
            "http://h:1/a2a/x"
        );
        assert_eq!(super::expand("http://a/{{env.NOPE}}b", &env), "http://a/b");
        assert_eq!(super::expand("http://plain", &env), "http://plain");
    }
}
