//! The handler contract and the error boundary around it. An agent implements [`A2aAgent`]:
//! either the per-operation methods it answers (the others answer `UnsupportedOperationError`
//! without a line of code), or [`A2aAgent::handle`] with one `match` on the [`Operation`].
//! [`answer`] is the stack's terminal app: it builds the [`Context`], runs the handler, turns a
//! panic into `-32603`, and checks the reply answers the operation.

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::request::Parts;
use axum::response::Response;
use futures::FutureExt;

use super::card::AgentCard;
use super::env::{Card, HistoryLength, MessageText, PageSize, outcome};
use super::error::A2aError;
use super::operation::{Operation, Reply};
use super::requests::*;
use super::stream::{Stream, StreamBuilder};
use super::types::{SendMessageResponse, Task};

/// What the middleware found out about the request (the seed's enriched env).
#[derive(Debug)]
pub struct Context {
    /// The operation's name (`env["a2a.operation"]`).
    pub operation: &'static str,
    /// The joined text of the request's message (`env["a2a.message"]`).
    pub message: Option<String>,
    /// The SSE stream builder (`env["a2a.stream"]`).
    pub stream: StreamBuilder,
    /// `min(client requested, server cap)` (`env["a2a.history_length"]`).
    pub history_length: usize,
    /// The requested page size clamped to `[1, server cap]` (`env["a2a.page_size"]`).
    pub page_size: usize,
    /// The card as served for this request (`env["a2a.agent_card"]`).
    pub agent_card: Arc<AgentCard>,
    /// The HTTP request's head: headers, and extensions an outer layer set (e.g. the caller).
    pub request: Parts,
}

/// The result of one operation.
pub type Handled<T> = Result<T, A2aError>;

/// An A2A agent. Every method has a default: `handle` dispatches to the per-operation methods,
/// and each of those answers `UnsupportedOperationError` (-32004), so an agent writes only the
/// operations it serves. The futures must be `Send`; `async fn` in an impl is fine.
pub trait A2aAgent: Send + Sync + 'static {
    /// Answers one validated operation. Override it to `match` on the operation yourself.
    fn handle(&self, op: Operation, cx: Context) -> impl Future<Output = Handled<Reply>> + Send {
        async move {
            match op {
                Operation::SendMessage(r) => self.send_message(r, cx).await.map(Reply::from),
                Operation::SendStreamingMessage(r) => {
                    self.send_streaming_message(r, cx).await.map(Reply::from)
                }
                Operation::GetTask(r) => self.get_task(r, cx).await.map(Reply::from),
                Operation::ListTasks(r) => self.list_tasks(r, cx).await.map(Reply::Tasks),
                Operation::CancelTask(r) => self.cancel_task(r, cx).await.map(Reply::from),
                Operation::SubscribeToTask(r) => {
                    self.subscribe_to_task(r, cx).await.map(Reply::from)
                }
                Operation::CreateTaskPushNotificationConfig(r) => {
                    self.create_push_config(r, cx).await.map(Reply::PushConfig)
                }
                Operation::GetTaskPushNotificationConfig(r) => {
                    self.get_push_config(r, cx).await.map(Reply::PushConfig)
                }
                Operation::ListTaskPushNotificationConfigs(r) => {
                    self.list_push_configs(r, cx).await.map(Reply::PushConfigs)
                }
                Operation::DeleteTaskPushNotificationConfig(r) => self
                    .delete_push_config(r, cx)
                    .await
                    .map(|()| Reply::Deleted),
                Operation::GetExtendedAgentCard(r) => self
                    .get_extended_agent_card(r, cx)
                    .await
                    .map(|c| Reply::AgentCard(Box::new(c))),
            }
        }
    }

    fn send_message(
        &self,
        _req: SendMessageRequest,
        cx: Context,
    ) -> impl Future<Output = Handled<SendMessageResponse>> + Send {
        async move { Err(unsupported(&cx)) }
    }

    fn send_streaming_message(
        &self,
        _req: SendMessageRequest,
        cx: Context,
    ) -> impl Future<Output = Handled<Stream>> + Send {
        async move { Err(unsupported(&cx)) }
    }

    fn get_task(
        &self,
        _req: GetTaskRequest,
        cx: Context,
    ) -> impl Future<Output = Handled<Task>> + Send {
        async move { Err(unsupported(&cx)) }
    }

    fn list_tasks(
        &self,
        _req: ListTasksRequest,
        cx: Context,
    ) -> impl Future<Output = Handled<ListTasksResponse>> + Send {
        async move { Err(unsupported(&cx)) }
    }

    fn cancel_task(
        &self,
        _req: CancelTaskRequest,
        cx: Context,
    ) -> impl Future<Output = Handled<Task>> + Send {
        async move { Err(unsupported(&cx)) }
    }

    fn subscribe_to_task(
        &self,
        _req: SubscribeToTaskRequest,
        cx: Context,
    ) -> impl Future<Output = Handled<Stream>> + Send {
        async move { Err(unsupported(&cx)) }
    }

    fn create_push_config(
        &self,
        _req: TaskPushNotificationConfig,
        _cx: Context,
    ) -> impl Future<Output = Handled<TaskPushNotificationConfig>> + Send {
        async move { Err(A2aError::push_notification_not_supported()) }
    }

    fn get_push_config(
        &self,
        _req: TaskPushNotificationConfigRef,
        _cx: Context,
    ) -> impl Future<Output = Handled<TaskPushNotificationConfig>> + Send {
        async move { Err(A2aError::push_notification_not_supported()) }
    }

    fn list_push_configs(
        &self,
        _req: ListTaskPushNotificationConfigsRequest,
        _cx: Context,
    ) -> impl Future<Output = Handled<ListTaskPushNotificationConfigsResponse>> + Send {
        async move { Err(A2aError::push_notification_not_supported()) }
    }

    fn delete_push_config(
        &self,
        _req: TaskPushNotificationConfigRef,
        _cx: Context,
    ) -> impl Future<Output = Handled<()>> + Send {
        async move { Err(A2aError::push_notification_not_supported()) }
    }

    /// The default says the card promised an extended card but none is configured.
    fn get_extended_agent_card(
        &self,
        _req: GetExtendedAgentCardRequest,
        _cx: Context,
    ) -> impl Future<Output = Handled<AgentCard>> + Send {
        async move { Err(A2aError::extended_agent_card_not_configured()) }
    }
}

fn unsupported(cx: &Context) -> A2aError {
    A2aError::unsupported_operation(format!("{} is not supported by this agent", cx.operation))
}

/// An agent written as one closure over the operation (a `match` with a last arm
/// `op => Err(op.unsupported())`).
pub struct AgentFn<F>(pub F);

impl<F, Fut> A2aAgent for AgentFn<F>
where
    F: Fn(Operation, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Handled<Reply>> + Send,
{
    fn handle(&self, op: Operation, cx: Context) -> impl Future<Output = Handled<Reply>> + Send {
        (self.0)(op, cx)
    }
}

/// The terminal app of the stack: the agent's answer to a request the layers above prepared.
pub(crate) async fn answer<A: A2aAgent>(agent: Arc<A>, req: Request) -> Response {
    let (mut parts, _) = req.into_parts();
    let ext = &mut parts.extensions;
    let (Some(op), Some(Card(card)), Some(stream)) = (
        ext.remove::<Operation>(),
        ext.remove::<Card>(),
        ext.remove::<StreamBuilder>(),
    ) else {
        return outcome(Err(A2aError::internal(
            "the agent was reached outside the stack",
        )));
    };
    let name = op.name();
    let cx = Context {
        operation: name,
        message: ext.remove::<MessageText>().map(|m| m.0),
        stream,
        history_length: ext.remove::<HistoryLength>().map_or(0, |h| h.0),
        page_size: ext.remove::<PageSize>().map_or(1, |p| p.0),
        agent_card: card,
        request: parts,
    };
    let streaming = op.is_streaming();
    // Boxed: the handler's future is the largest of the stack's, and every layer above would
    // otherwise hold (and move) a copy of its size.
    let handled = std::panic::AssertUnwindSafe(Box::pin(agent.handle(op, cx)))
        .catch_unwind()
        .await;
    let reply = match handled {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return outcome(Err(e)),
        Err(_) => {
            return outcome(Err(A2aError::internal(format!(
                "the agent panicked in {name}"
            ))));
        }
    };
    match reply {
        Reply::Stream(s) if streaming => {
            s.into_response().await.unwrap_or_else(|e| outcome(Err(e)))
        }
        Reply::Stream(_) => outcome(Err(A2aError::invalid_agent_response(format!(
            "the agent answered {name} with a stream"
        )))),
        _ if streaming => outcome(Err(A2aError::invalid_agent_response(format!(
            "{name} is answered with a stream"
        )))),
        other => outcome(other.into_json(name)),
    }
}
