//! An `invoke` whose prompt carries decisions: applied as a batch
//! ([`crate::Runtime`]'s `apply_decisions`), then the session runs on here, streaming, until it
//! settles — or, when another run holds it, is answered as it stands.

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::Runtime;
use crate::delivery::{Origin, Settled};
use crate::error::RunError;
use crate::event::{AgentEvent, EventSink};
use crate::types::Park;

/// What the decisions came to, and how the session stands after them.
pub(super) struct Decided {
    settled: Settled,
    decided: Vec<String>,
    replayed: Vec<String>,
    refused: Vec<(String, RunError)>,
    /// Another run holds the session: it takes the decisions.
    queued: bool,
}

impl Decided {
    /// The run's terminal event with `data.decided` (the ids applied now); `refused` (a race
    /// lost after an earlier decision of the batch was stored), `queued` (another run takes
    /// them) and `duplicate` (every decision was a replay) when they apply.
    pub(super) fn terminal_event(&self) -> AgentEvent {
        let mut event = self.settled.terminal_event();
        if let AgentEvent::Completed { data: Some(data) } = &mut event {
            data["decided"] = json!(self.decided);
            if self.decided.is_empty() && !self.replayed.is_empty() {
                data["duplicate"] = json!(true);
            }
            if !self.refused.is_empty() {
                let refused: Vec<_> = self
                    .refused
                    .iter()
                    .map(|(id, e)| json!({"id": id, "code": e.kind(), "details": e.to_string()}))
                    .collect();
                data["refused"] = json!(refused);
            }
            if self.queued {
                data["queued"] = json!(true);
            }
        }
        event
    }
}

/// What one invoke of `agent` asks: `decisions` on session `key`, as `origin`.
pub(super) struct Asked<'a> {
    pub(super) agent: &'a str,
    pub(super) key: &'a str,
    pub(super) origin: Origin<'a>,
    pub(super) decisions: Vec<(String, Park, crate::DecisionInput)>,
    pub(super) message_id: Option<&'a str>,
}

/// Applies the decisions, then runs the session on when a decision took its lease.
pub(super) async fn decide(
    rt: &Runtime,
    asked: Asked<'_>,
    sink: &EventSink,
    cancel: &CancellationToken,
) -> Result<Decided, RunError> {
    let Asked {
        agent,
        key,
        origin,
        decisions,
        message_id,
    } = asked;
    let applied = rt
        .apply_decisions(key, agent, origin, decisions, message_id)
        .await?;
    let (settled, queued) = match applied.claim {
        Some(claim) => (rt.run_claimed(claim, sink, cancel).await?, false),
        None => (
            rt.standing(applied.thread).await?,
            !applied.decided.is_empty(),
        ),
    };
    Ok(Decided {
        settled,
        decided: applied.decided,
        replayed: applied.replayed,
        refused: applied.refused,
        queued,
    })
}
