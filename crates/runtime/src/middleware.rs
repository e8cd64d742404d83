//! Middleware: agents that wrap agents, in the shape of tower's `Layer`. Each relays every event
//! of the agent it wraps unchanged — unknown ones included (MUST 5) — and adds only its own
//! `failed` when it stops a run. Stopping means dropping the inner stream, which aborts the run.
//!
//! - [`BudgetLayer`]: tool calls, tokens, text length and wall time →
//!   `failed{code:"budget_exceeded"}`.
//! - [`TraceLayer`]: a `tracing` span per invocation, an event per agent event.
//! - [`AuthLayer`]: a principal from an allowed issuer, or `failed{code:"unauthorized"}`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{self, BoxStream};

use crate::agent::{Agent, Prompt, Scope};
use crate::codes;
use crate::event::AgentEvent;

/// Wraps an agent in another.
pub trait Layer {
    /// `inner`, wrapped in this layer.
    fn layer(&self, inner: Arc<dyn Agent>) -> Arc<dyn Agent>;
}

/// Limits on one invocation. `None` means no limit.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budget {
    /// The most tool calls (`tool_started` events) the invocation may start.
    pub max_tool_calls: Option<u32>,
    /// Characters of `text` (for agents whose models report no tokens).
    pub max_text_chars: Option<usize>,
    /// Tokens the models read and wrote, as their providers count them (the `usage` events:
    /// input plus output).
    pub max_tokens: Option<u64>,
    /// The longest the invocation may run, from its start to its terminal event.
    pub max_wall_time: Option<Duration>,
}

/// Stops an invocation that exceeds its [`Budget`].
#[derive(Clone, Copy, Debug)]
pub struct BudgetLayer(pub Budget);

impl Layer for BudgetLayer {
    fn layer(&self, inner: Arc<dyn Agent>) -> Arc<dyn Agent> {
        Arc::new(BudgetAgent {
            inner,
            budget: self.0,
        })
    }
}

struct BudgetAgent {
    inner: Arc<dyn Agent>,
    budget: Budget,
}

struct Spent {
    inner: Option<BoxStream<'static, AgentEvent>>,
    tool_calls: u32,
    text_chars: usize,
    tokens: u64,
    deadline: Option<tokio::time::Instant>,
}

fn exceeded(what: &str) -> AgentEvent {
    AgentEvent::Failed {
        details: format!("budget exceeded: {what}"),
        retryable: false,
        code: Some(codes::BUDGET_EXCEEDED.into()),
    }
}

impl Agent for BudgetAgent {
    fn invoke(&self, scope: Scope, prompt: Prompt) -> BoxStream<'static, AgentEvent> {
        let budget = self.budget;
        let state = Spent {
            inner: Some(self.inner.invoke(scope, prompt)),
            tool_calls: 0,
            text_chars: 0,
            tokens: 0,
            deadline: budget
                .max_wall_time
                .map(|d| tokio::time::Instant::now() + d),
        };
        stream::unfold(state, move |mut st| async move {
            let inner = st.inner.as_mut()?;
            let next = match st.deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, inner.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        st.inner = None; // dropping it aborts the run
                        return Some((exceeded("wall time"), st));
                    }
                },
                None => inner.next().await,
            }?;
            match &next {
                AgentEvent::ToolStarted { .. } => st.tool_calls += 1,
                AgentEvent::Text { delta } => st.text_chars += delta.chars().count(),
                AgentEvent::Other(v) if v["type"] == crate::event::USAGE_EVENT => {
                    let count = |k: &str| v[k].as_u64().unwrap_or(0);
                    st.tokens += count("inputTokens") + count("outputTokens");
                }
                _ => {}
            }
            if budget.max_tokens.is_some_and(|m| st.tokens > m) {
                st.inner = None;
                return Some((exceeded("tokens"), st));
            }
            if budget.max_tool_calls.is_some_and(|m| st.tool_calls > m) {
                st.inner = None;
                return Some((exceeded("tool calls"), st));
            }
            if budget.max_text_chars.is_some_and(|m| st.text_chars > m) {
                st.inner = None;
                return Some((exceeded("text length"), st));
            }
            if next.is_terminal() {
                st.inner = None;
            }
            Some((next, st))
        })
        .boxed()
    }
}

/// Records each invocation as a `tracing` span (`duet.invoke`, with the session and source) and
/// each event inside it; terminal events at `info`, the rest at `debug`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceLayer;

impl Layer for TraceLayer {
    fn layer(&self, inner: Arc<dyn Agent>) -> Arc<dyn Agent> {
        Arc::new(TraceAgent { inner })
    }
}

struct TraceAgent {
    inner: Arc<dyn Agent>,
}

impl Agent for TraceAgent {
    fn invoke(&self, scope: Scope, prompt: Prompt) -> BoxStream<'static, AgentEvent> {
        let span = tracing::info_span!("duet.invoke", session = %scope.session, source = scope.source.as_deref().unwrap_or(""));
        let inner = self.inner.invoke(scope, prompt);
        inner
            .inspect(move |event| {
                let _entered = span.enter();
                match event {
                    AgentEvent::Completed { .. } => tracing::info!(event = "completed", "invoke completed"),
                    AgentEvent::Failed { details, code, .. } => {
                        tracing::info!(event = "failed", code = code.as_deref().unwrap_or(""), details = %details, "invoke failed")
                    }
                    AgentEvent::Other(v) => tracing::debug!(event = "other", value = %v, "unknown event relayed"),
                    other => tracing::debug!(event = ?other, "agent event"),
                }
            })
            .boxed()
    }
}

/// Admits invocations whose principal comes from one of the allowed issuers.
#[derive(Clone, Debug)]
pub struct AuthLayer {
    issuers: Arc<Vec<String>>,
}

impl AuthLayer {
    /// Admits principals whose `issuer` is one of `issuers`.
    pub fn issuers(issuers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        AuthLayer {
            issuers: Arc::new(issuers.into_iter().map(Into::into).collect()),
        }
    }
}

impl Layer for AuthLayer {
    fn layer(&self, inner: Arc<dyn Agent>) -> Arc<dyn Agent> {
        Arc::new(AuthAgent {
            inner,
            issuers: self.issuers.clone(),
        })
    }
}

struct AuthAgent {
    inner: Arc<dyn Agent>,
    issuers: Arc<Vec<String>>,
}

impl Agent for AuthAgent {
    fn invoke(&self, scope: Scope, prompt: Prompt) -> BoxStream<'static, AgentEvent> {
        let refusal = match &scope.principal {
            None => Some("no principal: this agent needs an authenticated caller".to_owned()),
            Some(p) if !self.issuers.contains(&p.issuer) => {
                Some(format!("issuer `{}` is not allowed", p.issuer))
            }
            Some(_) => None,
        };
        match refusal {
            Some(details) => stream::once(async move {
                AgentEvent::Failed {
                    details,
                    retryable: false,
                    code: Some(codes::UNAUTHORIZED.into()),
                }
            })
            .boxed(),
            None => self.inner.invoke(scope, prompt),
        }
    }
}
