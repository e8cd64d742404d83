//! The Agent Handler protocol as duet's embedding API: [`Agent::invoke`] takes a [`Scope`] and a
//! [`Prompt`] and returns a stream of [`AgentEvent`]s that ends in exactly one `completed` or
//! `failed` (or in nothing, when the caller drops it). [`collect`] is the buffered reduction.
//!
//! ```no_run
//! # async fn demo(runtime: duet_runtime::Runtime) -> Result<(), duet_runtime::AgentFailure> {
//! use duet_runtime::{Agent, Prompt, Scope, collect};
//! use futures::StreamExt;
//!
//! let gate = runtime.agent("approval_gate").expect("defined");
//! // Streaming: text and tool events as the run commits them.
//! let mut events = gate.invoke(Scope::new("ticket-42"), Prompt::text("Rotate the keys?"));
//! while let Some(event) = events.next().await {
//!     println!("{}", serde_json::to_string(&event).unwrap_or_default());
//! }
//! // Buffered: the text and the terminal data.
//! let done = collect(gate.invoke(Scope::new("ticket-42"), Prompt::text("Approved."))).await?;
//! println!("{} {:?}", done.text, done.data);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::codes;
use crate::delivery::{Delivered, Delivery, Origin, WhenBusy};
use crate::engine::Runtime;
use crate::error::RunError;
use crate::event::{AgentEvent, EventSink};
use crate::store::StoreError;
use crate::types::{ImageRef, Park};

mod decided;

/// Who is calling: an identity the runtime stores on the threads it creates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// What kind of identity it is (`type` on the wire), e.g. `user`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Who vouches for the identity (e.g. `https://id.example`): [`AuthLayer`] admits callers
    /// by it.
    ///
    /// [`AuthLayer`]: crate::middleware::AuthLayer
    pub issuer: String,
    /// The identity's name at its issuer (e.g. `alice`).
    pub subject: String,
}

impl Principal {
    /// The stored form: canonical JSON.
    pub fn canonical(&self) -> String {
        serde_json::json!({"type": self.kind, "issuer": self.issuer, "subject": self.subject})
            .to_string()
    }
}

/// An invocation's scope: the caller-owned session key, plus the extensions duet reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// The conversation anchor: the key of a thread (created on first use).
    pub session: String,
    /// Who is calling: a thread created under a principal answers to that principal alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
    /// Where the call comes from (free text), kept on a thread the call creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Scope {
    /// A scope for the session keyed `session`, with no principal and no source.
    pub fn new(session: impl Into<String>) -> Self {
        Scope {
            session: session.into(),
            principal: None,
            source: None,
        }
    }

    /// This scope, calling as `principal`.
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }
}

/// What the caller says.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// The message the session receives (empty when the prompt carries `decisions`).
    #[serde(default)]
    pub text: String,
    /// Images with the text: kept with the message and passed to models that take images
    /// (ignored by those whose definition says `supportsImages: false`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRef>,
    /// Paths of files of the session's thread that come with the text (uploaded before, e.g.
    /// `/attachments/report.pdf`): each must be a file of the thread, or the prompt fails
    /// (`invalid_prompt`) writing nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<String>,
    /// The park this answers (`S:N`, from a parked run's `completed.data.park`): refused with
    /// `already_answered`, writing nothing, once someone else answered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<String>,
    /// A caller-chosen message id: the same id delivered again to the session writes nothing
    /// and completes with the session as it stands (`data.duplicate: true`).
    #[serde(default, rename = "messageId", skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Decisions on the session's pending tool calls (ids from a run's
    /// `completed.data.approvals`), in place of a message: applied (the first decision per call
    /// wins), then the session runs on until it settles. A prompt carries decisions or a
    /// message (`text`, `images`, `answers`), not both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<PromptDecision>,
}

impl Prompt {
    /// A prompt of `text` alone, with no images.
    pub fn text(text: impl Into<String>) -> Self {
        Prompt {
            text: text.into(),
            images: Vec::new(),
            attachments: Vec::new(),
            answers: None,
            message_id: None,
            decisions: Vec::new(),
        }
    }

    /// A prompt that carries `decisions` and no message.
    pub fn decisions(decisions: Vec<PromptDecision>) -> Self {
        Prompt {
            decisions,
            ..Prompt::text("")
        }
    }
}

/// A decision a prompt carries: `{id, decision, args | reason | text, remember}`, as
/// `POST /approvals/{id}` takes one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptDecision {
    /// The pending call: `SESSION:SEQ`, its `id` in `completed.data.approvals`.
    pub id: String,
    /// approve, edit, reject or respond.
    pub decision: crate::approval::Decision,
    /// `edit`: the arguments the tool runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// `reject`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `respond`: the tool's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `approve` for the rest of this `session` or `thread`, when the approval offers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember: Option<crate::approval::RememberScope>,
}

impl PromptDecision {
    /// `(id, its park form, the decision)`, or why the id does not read.
    fn parsed(self) -> Result<(String, Park, crate::DecisionInput), String> {
        let park = self
            .id
            .parse::<Park>()
            .map_err(|_| format!("a decision's id is SESSION:SEQ, not `{}`", self.id))?;
        let input = crate::DecisionInput {
            decision: self.decision,
            args: self.args,
            reason: self.reason,
            text: self.text,
            remember: self.remember,
        };
        Ok((self.id, park, input))
    }
}

/// `prompt`'s decisions, checked: none with a message beside them, each id readable and named
/// once. `Ok(None)`: the prompt carries none.
type Decisions = Vec<(String, Park, crate::DecisionInput)>;

fn decisions_of(prompt: &Prompt) -> Result<Option<Decisions>, String> {
    if prompt.decisions.is_empty() {
        return Ok(None);
    }
    if !prompt.text.trim().is_empty()
        || !prompt.images.is_empty()
        || !prompt.attachments.is_empty()
        || prompt.answers.is_some()
    {
        return Err(
            "a prompt carries decisions or a message (text, images, attachments, answers), not both"
                .into(),
        );
    }
    let parsed = prompt
        .decisions
        .iter()
        .cloned()
        .map(PromptDecision::parsed)
        .collect::<Result<Vec<_>, String>>()?;
    for (i, (id, park, _)) in parsed.iter().enumerate() {
        if parsed[..i].iter().any(|(_, p, _)| p.seq == park.seq) {
            return Err(format!("the decision on `{id}` is given twice"));
        }
    }
    Ok(Some(parsed))
}

/// An agent: one call runs one turn (until the run settles) and streams its events.
///
/// The stream is `Send + 'static` and ends in exactly one terminal event when consumed to its
/// end; iterating it never panics or errors (failures are `failed` events); dropping it aborts
/// the work in flight and releases the session.
pub trait Agent: Send + Sync + 'static {
    /// Runs one turn of the session `scope.session` on `prompt`, streaming its events.
    fn invoke(&self, scope: Scope, prompt: Prompt) -> BoxStream<'static, AgentEvent>;
}

/// One agent of a project, run by a [`Runtime`].
#[derive(Clone)]
pub struct RuntimeAgent {
    runtime: Runtime,
    agent: String,
}

impl Runtime {
    /// The [`Agent`] for `name`, if the project defines it.
    pub fn agent(&self, name: &str) -> Option<RuntimeAgent> {
        self.project()
            .agents
            .contains_key(name)
            .then(|| RuntimeAgent {
                runtime: self.clone(),
                agent: name.to_owned(),
            })
    }
}

/// The `failed` event for a delivery that could not run.
fn failure(e: &RunError) -> AgentEvent {
    let (code, retryable) = match e {
        RunError::Busy(_) => (codes::SESSION_BUSY, true),
        RunError::Forbidden(_) => (codes::FORBIDDEN, false),
        RunError::UnknownAgent(_) | RunError::Store(StoreError::AgentMismatch { .. }) => {
            (codes::UNKNOWN_AGENT, false)
        }
        RunError::UnknownThread(_) => (codes::UNKNOWN_AGENT, false),
        RunError::Terminated(_) => (codes::TERMINATED, false),
        RunError::AlreadyAnswered { .. } => (codes::ALREADY_ANSWERED, false),
        RunError::Stale { .. } => (codes::STALE_DEFINITION, false),
        RunError::UnknownApproval { .. } => (codes::UNKNOWN_APPROVAL, false),
        RunError::DecisionTaken { .. } => (codes::ALREADY_ANSWERED, false),
        RunError::DecisionRefused {
            why: crate::approval::Refusal::Stale(_),
            ..
        } => (codes::STALE_DEFINITION, false),
        RunError::DecisionRefused { .. } => (codes::INVALID_DECISION, false),
        RunError::Attachment { .. } => (codes::INVALID_PROMPT, false),
        RunError::ShuttingDown => (codes::SHUTTING_DOWN, true),
        // Retrying cannot read a corrupt row; every other store failure may pass.
        RunError::Store(StoreError::Corrupt(_)) => (codes::INTERNAL, false),
        RunError::Store(
            StoreError::LeaseLost(_)
            | StoreError::NotFound(_)
            | StoreError::Conflict(_)
            | StoreError::Duplicate { .. }
            | StoreError::Backend { .. },
        ) => (codes::INTERNAL, true),
    };
    AgentEvent::Failed {
        details: e.to_string(),
        retryable,
        code: Some(code.to_owned()),
    }
}

/// What an invoke's run came to: a message delivered, or decisions applied.
enum Ran {
    Delivered(Delivered),
    Decided(decided::Decided),
}

enum Phase {
    Start(Box<(RuntimeAgent, Scope, Prompt)>),
    Running {
        rx: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
        run: tokio::task::JoinHandle<Result<Ran, RunError>>,
        /// Cancels the run when the stream is dropped (MUST 3).
        _guard: tokio_util::sync::DropGuard,
    },
    Done,
}

impl Agent for RuntimeAgent {
    fn invoke(&self, scope: Scope, prompt: Prompt) -> BoxStream<'static, AgentEvent> {
        let start = Phase::Start(Box::new((self.clone(), scope, prompt)));
        stream::unfold(start, |phase| async move {
            match phase {
                Phase::Done => None,
                Phase::Start(start) => {
                    let (me, scope, prompt) = *start;
                    let decisions = match decisions_of(&prompt) {
                        Ok(d) => d,
                        Err(details) => {
                            let event = AgentEvent::Failed {
                                details,
                                retryable: false,
                                code: Some(codes::INVALID_PROMPT.into()),
                            };
                            return Some((vec![event], Phase::Done));
                        }
                    };
                    if decisions.is_none()
                        && prompt.text.trim().is_empty()
                        && prompt.images.is_empty()
                    {
                        let event = AgentEvent::Failed {
                            details: "the prompt is empty".into(),
                            retryable: false,
                            code: Some(codes::INVALID_PROMPT.into()),
                        };
                        return Some((vec![event], Phase::Done));
                    }
                    // The run is a task of the caller's Tokio runtime; polled anywhere else, the
                    // stream fails instead of panicking.
                    let Ok(handle) = tokio::runtime::Handle::try_current() else {
                        let event = AgentEvent::Failed {
                            details: "invoke streams must be polled inside a Tokio runtime".into(),
                            retryable: false,
                            code: Some(codes::INTERNAL.into()),
                        };
                        return Some((vec![event], Phase::Done));
                    };
                    let answers = match prompt.answers.as_deref().map(str::parse::<Park>) {
                        None => None,
                        Some(Ok(park)) => Some(park),
                        Some(Err(why)) => {
                            let event = AgentEvent::Failed {
                                details: why,
                                retryable: false,
                                code: Some(codes::INVALID_PROMPT.into()),
                            };
                            return Some((vec![event], Phase::Done));
                        }
                    };
                    let cancel = CancellationToken::new();
                    let (sink, rx) = EventSink::channel();
                    let token = cancel.clone();
                    let run = handle.spawn(async move {
                        let principal = scope.principal.as_ref().map(Principal::canonical);
                        let origin = Origin {
                            principal: principal.as_deref(),
                            source: scope.source.as_deref(),
                            ..Origin::default()
                        };
                        if let Some(decisions) = decisions {
                            let asked = decided::Asked {
                                agent: &me.agent,
                                key: &scope.session,
                                origin,
                                decisions,
                                message_id: prompt.message_id.as_deref(),
                            };
                            return decided::decide(&me.runtime, asked, &sink, &token)
                                .await
                                .map(Ran::Decided);
                        }
                        let delivery = Delivery {
                            agent: Some(&me.agent),
                            origin,
                            when_busy: WhenBusy::Reject,
                            answers,
                            message_id: prompt.message_id.as_deref(),
                            images: &prompt.images,
                            attachments: &prompt.attachments,
                            ..Delivery::new(&scope.session, &prompt.text)
                        };
                        me.runtime
                            .deliver_message(delivery, &sink, &token)
                            .await
                            .map(Ran::Delivered)
                    });
                    Some((
                        Vec::new(),
                        Phase::Running {
                            rx,
                            run,
                            _guard: cancel.drop_guard(),
                        },
                    ))
                }
                Phase::Running {
                    mut rx,
                    run,
                    _guard,
                } => match rx.recv().await {
                    Some(event) => Some((vec![event], Phase::Running { rx, run, _guard })),
                    None => {
                        // The run is over (its sink is gone): its outcome is the terminal event.
                        let terminal = match run.await {
                            Ok(Ok(Ran::Decided(d))) => d.terminal_event(),
                            Ok(Ok(Ran::Delivered(Delivered::Settled(s)))) => s.terminal_event(),
                            Ok(Ok(Ran::Delivered(Delivered::Duplicate(s)))) => {
                                match s.terminal_event() {
                                    AgentEvent::Completed {
                                        data: Some(mut data),
                                    } => {
                                        data["duplicate"] = serde_json::json!(true);
                                        AgentEvent::Completed { data: Some(data) }
                                    }
                                    other => other,
                                }
                            }
                            Ok(Ok(Ran::Delivered(Delivered::Queued { .. }))) => {
                                AgentEvent::Failed {
                                    details: "session busy".into(),
                                    retryable: true,
                                    code: Some(codes::SESSION_BUSY.into()),
                                }
                            }
                            Ok(Err(e)) => failure(&e),
                            Err(e) => AgentEvent::Failed {
                                details: format!("the run failed inside duet: {e}"),
                                retryable: true,
                                code: Some(codes::INTERNAL.into()),
                            },
                        };
                        Some((vec![terminal], Phase::Done))
                    }
                },
            }
        })
        .flat_map(stream::iter)
        .boxed()
    }
}

/// What a buffered consumer gets: all `text` deltas, and the `completed` data.
#[derive(Clone, Debug, PartialEq)]
pub struct Collected {
    /// Every `text` delta, joined in order.
    pub text: String,
    /// The `completed` event's data, if it carried any.
    pub data: Option<serde_json::Value>,
}

/// A `failed` event, as an error.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{details}")]
pub struct AgentFailure {
    /// What went wrong, for people.
    pub details: String,
    /// Whether sending again to the same session may succeed.
    pub retryable: bool,
    /// What kind of failure it is: one of [`codes`], or another agent's own code.
    pub code: Option<String>,
}

/// Consumes a stream to its terminal event: text deltas added up (thinking ignored, unknown
/// events ignored), `completed` → `Ok`, `failed` → `Err`. A stream that ends without a terminal
/// event breaks MUST 1 and is an error too.
pub async fn collect(mut events: BoxStream<'_, AgentEvent>) -> Result<Collected, AgentFailure> {
    let mut text = String::new();
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::Text { delta } => text.push_str(&delta),
            AgentEvent::Completed { data } => return Ok(Collected { text, data }),
            AgentEvent::Failed {
                details,
                retryable,
                code,
            } => {
                return Err(AgentFailure {
                    details,
                    retryable,
                    code,
                });
            }
            _ => {}
        }
    }
    Err(AgentFailure {
        details: "stream ended without a terminal event".into(),
        retryable: false,
        code: None,
    })
}

/// An `Arc<dyn Agent>` is an agent too, so layers stack.
impl<A: Agent + ?Sized> Agent for Arc<A> {
    fn invoke(&self, scope: Scope, prompt: Prompt) -> BoxStream<'static, AgentEvent> {
        (**self).invoke(scope, prompt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(list: Vec<AgentEvent>) -> BoxStream<'static, AgentEvent> {
        stream::iter(list).boxed()
    }

    #[tokio::test]
    async fn collect_adds_text_ignores_the_rest_and_reports_failures() {
        let ok = collect(events(vec![
            AgentEvent::Thinking { delta: "hm".into() },
            AgentEvent::Text {
                delta: "Hello, ".into(),
            },
            AgentEvent::Other(serde_json::json!({"type": "citation"})),
            AgentEvent::Text {
                delta: "world".into(),
            },
            AgentEvent::Completed {
                data: Some(serde_json::json!({"n": 1})),
            },
        ]))
        .await;
        assert_eq!(
            ok,
            Ok(Collected {
                text: "Hello, world".into(),
                data: Some(serde_json::json!({"n": 1}))
            })
        );
        let failed = collect(events(vec![AgentEvent::Failed {
            details: "x".into(),
            retryable: true,
            code: Some("c".into()),
        }]))
        .await;
        assert_eq!(
            failed,
            Err(AgentFailure {
                details: "x".into(),
                retryable: true,
                code: Some("c".into())
            })
        );
        let cut = collect(events(vec![AgentEvent::Text {
            delta: "half".into(),
        }]))
        .await;
        assert_eq!(
            cut.err().map(|e| e.details),
            Some("stream ended without a terminal event".into())
        );
    }
}
