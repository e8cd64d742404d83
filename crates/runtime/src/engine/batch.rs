//! The decisions one prompt carries (`invoke`'s `prompt.decisions`), applied as a batch: every
//! decision is checked before any is stored (a refusal writes nothing), then each is stored in
//! order — the first decision per approval wins — and the lease one of them may take is the
//! caller's to run. A decision that loses a race after an earlier one of the batch was stored is
//! reported beside the ones applied, never undone.

use super::Runtime;
use super::approvals::{DecisionInput, DecisionLanded, Prepared};
use crate::approval;
use crate::delivery::{Claim, Origin};
use crate::error::RunError;
use crate::types::{Park, ThreadId};

/// What applying a prompt's decisions did.
#[derive(Debug)]
pub(crate) struct Applied {
    /// The thread decided on.
    pub(crate) thread: ThreadId,
    /// The lease a stored decision took: the caller runs the thread. `None`: another run holds
    /// it and takes the decisions (or nothing new was stored).
    pub(crate) claim: Option<Claim>,
    /// The ids (`S:N`) of the decisions stored now, in order.
    pub(crate) decided: Vec<String>,
    /// The ids whose decision its message id brought before (nothing written for them).
    pub(crate) replayed: Vec<String>,
    /// Decisions refused after an earlier one of the batch was stored (a race lost).
    pub(crate) refused: Vec<(String, RunError)>,
}

impl Runtime {
    /// Applies `decisions` (`(id as given, its park form, the decision)`) to the pending calls
    /// of thread `key`, reached as a delivery for `agent` by `origin` would reach it. With
    /// `message_id`, each decision is idempotent by it (`ID` for one decision, `ID/SEQ` for
    /// each of several).
    pub(crate) async fn apply_decisions(
        &self,
        key: &str,
        agent: &str,
        origin: Origin<'_>,
        decisions: Vec<(String, Park, DecisionInput)>,
        message_id: Option<&str>,
    ) -> Result<Applied, RunError> {
        if self.inner.detached.is_cancelled() {
            return Err(RunError::ShuttingDown);
        }
        let store = &self.inner.store;
        let t = store
            .thread(key)
            .await?
            .ok_or_else(|| RunError::UnknownThread(key.to_owned()))?;
        let t = self.check(t, key, Some(agent), &origin)?;
        // An id names its session too: `S:N` of a call that waits is exactly as listed.
        let (records, messages) = tokio::try_join!(store.records(t.id), store.messages(t.id))?;
        let pending = approval::pending(&records, &messages);
        let author = origin.author.or(origin.principal).map(str::to_owned);
        let several = decisions.len() > 1;
        let mut prepared = Vec::with_capacity(decisions.len());
        for (id, park, input) in decisions {
            if pending.iter().any(|p| p.seq == park.seq && p.id != id) {
                return Err(RunError::UnknownApproval {
                    key: key.to_owned(),
                    approval: park.seq,
                });
            }
            let mid = message_id.map(|m| {
                if several {
                    format!("{m}/{}", park.seq)
                } else {
                    m.to_owned()
                }
            });
            let p = self
                .prepare_decision(key, park.seq, input, author.clone(), mid.as_deref())
                .await?;
            prepared.push((id, p));
        }
        let mut applied = Applied {
            thread: t.id,
            claim: None,
            decided: Vec::new(),
            replayed: Vec::new(),
            refused: Vec::new(),
        };
        for (id, p) in prepared {
            let stored = match p {
                Prepared::Replay(_) => {
                    applied.replayed.push(id);
                    continue;
                }
                Prepared::Ready(ready) => self.store_decision(&t, key, ready.1).await,
            };
            match stored {
                Ok(accepted) => match accepted.landed {
                    DecisionLanded::Claimed(claim) => {
                        applied.claim.get_or_insert(claim);
                        applied.decided.push(id);
                    }
                    DecisionLanded::Queued => applied.decided.push(id),
                    DecisionLanded::Duplicate => applied.replayed.push(id),
                },
                // Nothing of the batch stored yet: the refusal is the outcome.
                Err(e) if applied.decided.is_empty() => return Err(e),
                Err(e) => applied.refused.push((id, e)),
            }
        }
        Ok(applied)
    }
}

impl Runtime {
    /// How thread `id` stands now, as a settled run's outcome (with the calls it waits on
    /// decisions for): what a caller whose decisions another run takes is answered.
    pub(crate) async fn standing(&self, id: ThreadId) -> Result<crate::Settled, RunError> {
        let t = self
            .inner
            .store
            .thread_by_id(id)
            .await?
            .ok_or_else(|| RunError::UnknownThread(id.to_string()))?;
        Ok(self.with_approvals(crate::Settled::of(&t)).await)
    }
}
