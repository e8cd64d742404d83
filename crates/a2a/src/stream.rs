//! The SSE stream builder the seed offers as `env["a2a.stream"]`: `open(task_id, context_id,
//! body)` runs `body` with a [`StreamSink`] on a task of its own and answers with the stream,
//! framed for the binding (a JSON-RPC envelope per event, or the bare `StreamResponse`). The
//! sink keeps A2A's stream rules: the first event is the `Task` (or a lone `Message`), and the
//! stream closes after a terminal state, or an interrupted one in a status update. A body that
//! fails or panics ends the stream with an `event: error`; the stream is always finished.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::env::Binding;
use super::error::A2aError;
use super::types::{
    Artifact, Message, StreamResponse, Task, TaskArtifactUpdateEvent, TaskStatus,
    TaskStatusUpdateEvent,
};

/// How often an idle stream sends a `: ping` comment.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// Events buffered between the body and a slow client.
const BUFFER: usize = 64;

/// Offers streaming to the handler (the seed's `env["a2a.stream"]`).
#[derive(Debug, Clone)]
pub struct StreamBuilder {
    pub(crate) binding: Binding,
}

/// An open stream, ready to be answered (`Reply::Stream`).
#[derive(Debug)]
pub struct Stream {
    rx: mpsc::Receiver<Frame>,
    binding: Binding,
}

#[derive(Debug)]
enum Frame {
    Event(Box<StreamResponse>),
    Error(A2aError),
}

impl Frame {
    /// Whether the response ends after this frame (its last event, or an error), whatever the
    /// body still does.
    fn last(&self) -> bool {
        match self {
            Frame::Event(e) => closes_after(e),
            Frame::Error(_) => true,
        }
    }
}

impl StreamBuilder {
    /// Runs `body` on its own task with a sink for `task_id` in `context_id`, and returns the
    /// stream it writes to.
    pub fn open<F, Fut>(
        &self,
        task_id: impl Into<String>,
        context_id: impl Into<String>,
        body: F,
    ) -> Stream
    where
        F: FnOnce(StreamSink) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), A2aError>> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(BUFFER);
        let closed = Arc::new(AtomicBool::new(false));
        let sink = StreamSink {
            task_id: task_id.into(),
            context_id: context_id.into(),
            tx: tx.clone(),
            sent: 0,
            closed: closed.clone(),
        };
        tokio::spawn(async move {
            let outcome = std::panic::AssertUnwindSafe(body(sink))
                .catch_unwind()
                .await;
            let error = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(A2aError::internal("the stream's body panicked")),
            };
            // A closed stream (its last event sent, or the client gone) takes no error.
            if let Some(e) = error
                && !closed.load(Ordering::Acquire)
                && !tx.is_closed()
            {
                let _ = tx.send(Frame::Error(e)).await;
            }
        });
        Stream {
            rx,
            binding: self.binding.clone(),
        }
    }
}

/// Where a stream's body writes. Every method fills in the task and context ids; each returns
/// an error once the stream is closed, so `?` ends the body.
#[derive(Debug)]
pub struct StreamSink {
    task_id: String,
    context_id: String,
    tx: mpsc::Sender<Frame>,
    sent: usize,
    closed: Arc<AtomicBool>,
}

impl StreamSink {
    /// The task this stream is about.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// Its context.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// Sends the task snapshot (the first event of every task stream).
    pub async fn task(&mut self, task: Task) -> Result<(), A2aError> {
        self.send(StreamResponse::Task(task)).await
    }

    /// Sends a lone message; the stream closes after it.
    pub async fn message(&mut self, message: Message) -> Result<(), A2aError> {
        self.send(StreamResponse::Message(message)).await
    }

    /// Sends a status update.
    pub async fn status(&mut self, status: TaskStatus) -> Result<(), A2aError> {
        let event = TaskStatusUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status,
            metadata: None,
        };
        self.send(StreamResponse::StatusUpdate(event)).await
    }

    /// Sends an artifact: `append: false` creates it, `true` extends it, `last_chunk` ends it.
    pub async fn artifact(
        &mut self,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), A2aError> {
        let event = TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact,
            append,
            last_chunk,
            metadata: None,
        };
        self.send(StreamResponse::ArtifactUpdate(event)).await
    }

    /// Sends any event, checking the stream's rules.
    pub async fn send(&mut self, event: StreamResponse) -> Result<(), A2aError> {
        if self.is_closed() {
            return Err(A2aError::invalid_agent_response(
                "the stream is closed: the task already ended or the client left",
            ));
        }
        let first = self.sent == 0;
        if first && !matches!(event, StreamResponse::Task(_) | StreamResponse::Message(_)) {
            return Err(A2aError::invalid_agent_response(
                "a stream's first event must be the Task (or a lone Message)",
            ));
        }
        if !first && matches!(event, StreamResponse::Message(_)) {
            // A message after the task is a status message in A2A; only a lone one may stand.
            return Err(A2aError::invalid_agent_response(
                "a Message may only be a stream's one event",
            ));
        }
        let last = closes_after(&event);
        self.sent += 1;
        if self.tx.send(Frame::Event(Box::new(event))).await.is_err() {
            self.closed.store(true, Ordering::Release);
            return Err(A2aError::invalid_agent_response(
                "the client left the stream",
            ));
        }
        if last {
            self.closed.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Resolves when the client has left (the response is dropped).
    pub async fn client_gone(&self) {
        self.tx.closed().await;
    }

    /// Whether the stream has closed (its last event was sent, or the client left).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.tx.is_closed()
    }
}

/// Whether `event` is a stream's last: a lone message, a terminal state, or an interrupted
/// one in a status update.
fn closes_after(event: &StreamResponse) -> bool {
    match event {
        StreamResponse::Message(_) => true,
        StreamResponse::Task(t) => t.status.state.is_terminal(),
        StreamResponse::StatusUpdate(u) => {
            u.status.state.is_terminal() || u.status.state.is_interrupted()
        }
        StreamResponse::ArtifactUpdate(_) => false,
    }
}

impl Stream {
    /// The SSE response, framed for the binding, with heartbeats. It waits for the first
    /// event: an error before it is a plain error response, as A2A wants errors before a
    /// stream starts to be.
    pub(crate) async fn into_response(mut self) -> Result<Response, A2aError> {
        let first = match self.rx.recv().await {
            Some(Frame::Event(e)) => Frame::Event(e),
            Some(Frame::Error(e)) => return Err(e),
            None => {
                return Err(A2aError::invalid_agent_response(
                    "the stream ended before its first event",
                ));
            }
        };
        let binding = self.binding;
        // Nothing after the last frame is read: the response ends there.
        let rx = (!first.last()).then_some(self.rx);
        let rest = futures::stream::unfold(rx, |rx| async move {
            let mut rx = rx?;
            let frame = rx.recv().await?;
            let more = (!frame.last()).then_some(rx);
            Some((frame, more))
        });
        let events = futures::stream::once(async move { first })
            .chain(rest)
            .map(move |frame| Ok::<_, Infallible>(frame_event(&binding, frame)));
        let mut response = Sse::new(events)
            .keep_alive(KeepAlive::new().interval(HEARTBEAT).text("ping"))
            .into_response();
        let headers = response.headers_mut();
        headers.insert(
            axum::http::header::CACHE_CONTROL,
            axum::http::HeaderValue::from_static("no-store"),
        );
        headers.insert(
            "x-accel-buffering",
            axum::http::HeaderValue::from_static("no"),
        );
        Ok(response)
    }
}

fn frame_event(binding: &Binding, frame: Frame) -> Event {
    let (data, error) = match (binding, frame) {
        (Binding::JsonRpc { id }, Frame::Event(e)) => {
            (json!({"jsonrpc": "2.0", "id": id, "result": e}), false)
        }
        (Binding::JsonRpc { id }, Frame::Error(e)) => (
            json!({"jsonrpc": "2.0", "id": id, "error": e.to_jsonrpc()}),
            true,
        ),
        (Binding::Rest, Frame::Event(e)) => {
            (serde_json::to_value(*e).unwrap_or(Value::Null), false)
        }
        (Binding::Rest, Frame::Error(e)) => (e.to_rest(), true),
    };
    let event = Event::default().data(data.to_string());
    if error { event.event("error") } else { event }
}
