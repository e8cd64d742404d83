//! Tool calls that wait for a person's decision (a tool's `approval`, issue #29), in the shape
//! of a blocking subagent await (`awaits`): the step commits with the thread `waiting` and one
//! `approval_requested` record per pending call; a decision is queued on the thread like a late
//! tool result ([`crate::QueueStore::decide`], the first one wins). A reject or respond is
//! drained at once, written as `approval_decided` with the call's result; an approve or edit
//! stays queued until `run_approved` has run the tool and writes the record, the result and the
//! drained row in one commit. Once no call of the step is open, the step completes as any step
//! whose calls all answered. A crash between the decision and the tool's result leaves the
//! decision queued, so recovery runs the tool (at least once, as any tool call); a rejected call
//! never runs.

use duet_spec::{AgentDef, Decision, Side};
use uuid::Uuid;

use super::write::{Around, Emit, Write};
use super::{ChildScope, Runtime};
use crate::approval::{self, Asked, Decided};
use crate::error::RunError;
use crate::event::EventSink;
use crate::hooks::Policy;
use crate::record::RecordBody;
use crate::store::{Commit, DecideOutcome};
use crate::tools::ToolContext;
use crate::transition;
use crate::types::{Message, Role, Thread, ToolCall};

/// What a person decides on a pending call (the wire's `{"decision": …}`).
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionInput {
    /// approve, edit, reject or respond.
    pub decision: Decision,
    /// `edit`: the arguments the tool runs with.
    pub args: Option<serde_json::Value>,
    /// `reject`: why (may be empty).
    pub reason: Option<String>,
    /// `respond`: the tool's result.
    pub text: Option<String>,
    /// `approve` for the rest of this session or thread (when the approval offers it).
    pub remember: Option<duet_spec::RememberScope>,
}

/// How a decision landed ([`Runtime::accept_decision`]).
#[derive(Debug)]
pub enum DecisionLanded {
    /// Stored, and this caller took the lease: it must run the thread
    /// ([`Runtime::run_claimed`]).
    Claimed(crate::delivery::Claim),
    /// Stored; the run that holds the thread takes it.
    Queued,
    /// Its message id (`Idempotency-Key`) came with this decision before: nothing was written,
    /// and the decision is the one recorded then.
    Duplicate,
}

/// A decision checked and not yet stored ([`Runtime::prepare_decision`]).
pub(super) enum Prepared {
    /// Its message id brought this decision before: nothing is to be written.
    Replay(Box<AcceptedDecision>),
    /// Checked: the thread as read and the decision as it is to be recorded.
    Ready(Box<(Thread, Decided)>),
}

/// A decision stored (or replayed): what was recorded and how it landed.
#[derive(Debug)]
pub struct AcceptedDecision {
    /// The decision as recorded.
    pub decided: Decided,
    /// The thread it was queued on.
    pub thread: crate::types::ThreadId,
    /// How it landed.
    pub landed: DecisionLanded,
}

impl Runtime {
    /// Decides pending tool call `approval` (the seq of its `approval_requested` record) of
    /// thread `key`, as `author`, and — if no run holds the thread — runs the thread on here
    /// until it settles ([`Runtime::accept_decision`], then [`Runtime::run_claimed`]).
    pub async fn decide(
        &self,
        key: &str,
        approval: i64,
        input: DecisionInput,
        author: Option<String>,
    ) -> Result<Decided, RunError> {
        let accepted = self
            .accept_decision(key, approval, input, author, None)
            .await?;
        if let DecisionLanded::Claimed(claim) = accepted.landed {
            let (sink, cancel) = (
                EventSink::discard(),
                tokio_util::sync::CancellationToken::new(),
            );
            if let Err(e) = self.run_claimed(claim, &sink, &cancel).await {
                tracing::warn!(thread = %key, error = %e, "the run after a decision failed");
            }
        }
        Ok(accepted.decided)
    }

    /// Stores a decision on pending tool call `approval` of thread `key`, as `author`, without
    /// running anything: a caller that answers at once (HTTP's `202 Accepted`) runs the claim
    /// it may get with [`Runtime::run_claimed`]. Checked against the definitions first (the
    /// approval pins its call: a tool gone, an approval removed or arguments its schema no
    /// longer takes refuse it as stale; an edit's arguments must match the tool's `args`), then
    /// queued — the first decision wins. With `message_id` (a client's `Idempotency-Key`), the
    /// same id again replays the decision taken with it and writes nothing. Nothing is written
    /// when it is refused.
    pub async fn accept_decision(
        &self,
        key: &str,
        approval: i64,
        input: DecisionInput,
        author: Option<String>,
        message_id: Option<&str>,
    ) -> Result<AcceptedDecision, RunError> {
        match self
            .prepare_decision(key, approval, input, author, message_id)
            .await?
        {
            Prepared::Replay(accepted) => Ok(*accepted),
            Prepared::Ready(ready) => {
                let (t, decided) = *ready;
                self.store_decision(&t, key, decided).await
            }
        }
    }

    /// Whether decision `input` on pending tool call `approval` of thread `key` would be taken
    /// now, without writing anything: the checks [`Runtime::accept_decision`] makes before it
    /// stores (the call still waits, with no decision queued for it; the decision is offered;
    /// an edit's arguments match the tool's `args`; the definitions still pin the call). A
    /// caller with several decisions checks them all before storing any.
    pub async fn check_decision(
        &self,
        key: &str,
        approval: i64,
        input: DecisionInput,
    ) -> Result<Decided, RunError> {
        let decided = match self
            .prepare_decision(key, approval, input, None, None)
            .await?
        {
            Prepared::Ready(ready) => ready.1,
            Prepared::Replay(accepted) => return Ok(accepted.decided),
        };
        let store = &self.inner.store;
        let t = store
            .thread(key)
            .await?
            .ok_or_else(|| RunError::UnknownThread(key.to_owned()))?;
        // A decision queued and not yet written (an approve whose tool has not run) came first.
        let queued = store
            .queue(t.id)
            .await?
            .into_iter()
            .filter_map(|q| q.decision)
            .find(|d| d.approval == approval);
        match queued {
            Some(first) => Err(RunError::DecisionTaken {
                key: key.to_owned(),
                approval,
                first: Box::new(first),
            }),
            None => Ok(decided),
        }
    }

    /// Everything [`Runtime::accept_decision`] checks, writing nothing: the decision as it would
    /// be recorded, or the replay of the one its message id brought before.
    pub(super) async fn prepare_decision(
        &self,
        key: &str,
        approval: i64,
        input: DecisionInput,
        author: Option<String>,
        message_id: Option<&str>,
    ) -> Result<Prepared, RunError> {
        let store = &self.inner.store;
        let t = store
            .thread(key)
            .await?
            .ok_or_else(|| RunError::UnknownThread(key.to_owned()))?;
        if let Some(id) = message_id
            && store.delivered(t.id, id).await?
        {
            return self
                .replayed(&t, key, approval, id)
                .await
                .map(|a| Prepared::Replay(Box::new(a)));
        }
        if t.status == crate::types::ThreadStatus::Terminated {
            return Err(RunError::Terminated(key.to_owned()));
        }
        // Messages first, then records: the commit that writes a call's result writes its
        // decision too, so a result seen here means the decision is in the records read after
        // (read together, a late decision could see the result and miss the decision: `404`
        // instead of `409` naming the first).
        let messages = store.messages(t.id).await?;
        let records = store.records(t.id).await?;
        // Asked, and its call not answered yet (decided and applied, or ended by an abort).
        let open = approval::pending(&records, &messages)
            .iter()
            .any(|p| p.seq == approval);
        let asked = records
            .iter()
            .find_map(|r| match &r.body {
                RecordBody::ApprovalRequested(a) if r.seq == approval => Some(a.clone()),
                _ => None,
            })
            .ok_or_else(|| RunError::UnknownApproval {
                key: key.to_owned(),
                approval,
            })?;
        if !open {
            // The first decision (already applied) is what a late one is told about.
            let first = records.iter().find_map(|r| match &r.body {
                RecordBody::ApprovalDecided(d) if d.approval == approval => Some(d.clone()),
                _ => None,
            });
            return Err(match first {
                Some(first) => RunError::DecisionTaken {
                    key: key.to_owned(),
                    approval,
                    first: Box::new(first),
                },
                None => RunError::UnknownApproval {
                    key: key.to_owned(),
                    approval,
                },
            });
        }
        let refused = |why| RunError::DecisionRefused {
            key: key.to_owned(),
            approval,
            why,
        };
        let decided = Decided {
            approval,
            call: asked.call.clone(),
            tool: asked.tool.clone(),
            decision: input.decision,
            args: input.args.filter(|_| input.decision == Decision::Edit),
            reason: input.reason.filter(|_| input.decision == Decision::Reject),
            text: input.text.filter(|_| input.decision == Decision::Respond),
            remember: input.remember,
            author,
            at: self.now(),
            message_id: message_id.map(str::to_owned),
        };
        match decided.decision {
            Decision::Edit if decided.args.is_none() => {
                return Err(refused(approval::Refusal::Incomplete(
                    "an edit carries the arguments the tool runs with (`args`)".into(),
                )));
            }
            Decision::Respond if decided.text.is_none() => {
                return Err(refused(approval::Refusal::Incomplete(
                    "a response carries the text that is the tool's result (`text`)".into(),
                )));
            }
            _ => {}
        }
        let tool = self.inner.project.tools.get(&asked.tool).map(|d| &d.def);
        approval::check(&asked, tool, &decided).map_err(refused)?;
        Ok(Prepared::Ready(Box::new((t, decided))))
    }

    /// Queues a prepared decision: the first one per approval wins.
    pub(super) async fn store_decision(
        &self,
        t: &Thread,
        key: &str,
        decided: Decided,
    ) -> Result<AcceptedDecision, RunError> {
        let approval = decided.approval;
        let side = t.acting.unwrap_or(crate::types::SideId::A);
        let run = Uuid::now_v7();
        let outcome = self
            .inner
            .store
            .decide(t.id, decided.clone(), side, self.lease(run))
            .await?;
        let landed = match outcome {
            DecideOutcome::NotPending => {
                return Err(RunError::UnknownApproval {
                    key: key.to_owned(),
                    approval,
                });
            }
            DecideOutcome::Refused { first } => {
                return Err(RunError::DecisionTaken {
                    key: key.to_owned(),
                    approval,
                    first,
                });
            }
            DecideOutcome::Duplicate => {
                let id = decided.message_id.as_deref().unwrap_or_default();
                return self.replayed(t, key, approval, id).await;
            }
            DecideOutcome::Accepted { claimed: true } => {
                DecisionLanded::Claimed(crate::delivery::Claim {
                    thread: t.id,
                    run,
                    inline: false,
                    start: None,
                    report: false,
                })
            }
            DecideOutcome::Accepted { claimed: false } => DecisionLanded::Queued,
        };
        Ok(AcceptedDecision {
            decided,
            thread: t.id,
            landed,
        })
    }

    /// The decision on `approval` that message id `id` brought before (queued, or written by
    /// the run): a replay. An id that brought something else to the thread is refused.
    async fn replayed(
        &self,
        t: &Thread,
        key: &str,
        approval: i64,
        id: &str,
    ) -> Result<AcceptedDecision, RunError> {
        let store = &self.inner.store;
        let (records, queue) = tokio::try_join!(store.records(t.id), store.queue(t.id))?;
        let written = records.into_iter().filter_map(|r| match r.body {
            RecordBody::ApprovalDecided(d) => Some(d),
            _ => None,
        });
        let first = queue
            .into_iter()
            .filter_map(|q| q.decision)
            .chain(written)
            .find(|d| d.approval == approval && d.message_id.as_deref() == Some(id));
        match first {
            Some(decided) => Ok(AcceptedDecision {
                decided,
                thread: t.id,
                landed: DecisionLanded::Duplicate,
            }),
            None => Err(RunError::DecisionRefused {
                key: key.to_owned(),
                approval,
                why: approval::Refusal::Incomplete(format!(
                    "Idempotency-Key `{id}` came with another message or decision of this thread; give a new key"
                )),
            }),
        }
    }

    /// Runs the open calls of a waiting thread that a person approved (or edited) — their
    /// decisions still queued — and writes each decision with its tool's result, in one
    /// commit. `false`: there were none.
    pub(super) async fn run_approved(
        &self,
        agent: &AgentDef,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        scope: &ChildScope,
        events: &EventSink,
    ) -> Result<bool, RunError> {
        let Some(side) = t.acting else {
            return Ok(false);
        };
        let open: Vec<ToolCall> = transition::open_calls(msgs, side)
            .into_iter()
            .cloned()
            .collect();
        if open.is_empty() {
            return Ok(false);
        }
        // Approve and edit decisions stay queued until the tool's result is written with them.
        let decided: Vec<(i64, ToolCall, Decided)> = self
            .inner
            .store
            .queue(t.id)
            .await?
            .into_iter()
            .filter_map(|q| Some((q.id, q.decision?)))
            .filter(|(_, d)| d.result().is_none())
            .filter_map(|(id, d)| Some((id, open.iter().find(|c| c.id == d.call)?.clone(), d)))
            .collect();
        if decided.is_empty() {
            return Ok(false);
        }
        let prompt = match agent.side(side) {
            Side::Prompt(cfg) => self.inner.project.prompts.get(&cfg.prompt).map(|d| &d.def),
            _ => None,
        };
        let env = self.env(agent, prompt, &scope.env);
        let lookup = |k: &str| crate::context::env_value(&env, k);
        // The side's `tool_result` hooks see an approved call's result as any other; should
        // they not resolve, the result is kept as the tool gave it.
        let mut hooks = Some(self.side_hooks(agent, side, scope).unwrap_or_default());
        let now = self.now();
        let mut commit = Commit::default();
        for (queued, call, d) in decided {
            let ctx = ToolContext {
                thread: t.id,
                idempotency_key: format!("{}:{}", t.id, call.id),
            };
            let args = d.arguments(&call.arguments);
            let span = crate::telemetry::execute_tool(&call.name, &call.id);
            let (result, timer) = if self.is_code_tool(&call.name) {
                // A `.ts` tool runs with the thread's state; its writes go with this commit
                // through the hooks' buffer.
                let site = super::thread_state::Site {
                    thread: t,
                    history: msgs,
                    agent,
                    side,
                    env: &env,
                    arguments: &scope.arguments,
                    hooks: hooks.get_or_insert_with(Default::default),
                };
                let run = self.run_code_tool(&site, &call.name, args, &call.id);
                (tracing::Instrument::instrument(run, span).await, None)
            } else {
                tracing::Instrument::instrument(
                    self.inner.tools.call(ctx, &call.name, args, &lookup, now),
                    span,
                )
                .await
            };
            // A call whose decision is committed stays in the history: a hook's `None` keeps the
            // result as it was.
            let result = match hooks.as_mut() {
                Some(h) => h
                    .tool_result(t, &call, result.clone())
                    .await
                    .unwrap_or(result),
                None => result,
            };
            // An `effect:` tool's timer is written with the decision, unless a hook failed it.
            commit.timers.extend(timer.filter(|_| result.is_ok()));
            commit.records.push(crate::record::Record::new(
                t.take_seq(),
                RecordBody::ApprovalDecided(d.clone()),
                now,
            ));
            commit.drained.push(queued);
            if let Some(scope) = d.remember {
                commit.values.push((
                    approval::remembered_key(&d.tool),
                    Some(approval::remembered_value(scope, t.session)),
                ));
            }
            let mut m = Message::text(
                t.take_seq(),
                t.session,
                Role::Tool,
                Some(side),
                result.content,
                now,
            );
            m.tool_call_id = Some(call.id.clone());
            m.tool_name = Some(call.name.clone());
            m.tool_status = Some(result.status);
            commit.messages.push(m);
        }
        t.updated_at = now;
        let around = Around {
            hooks: hooks.as_mut(),
            events: Some(events),
            history: Some(msgs),
        };
        self.persist(t, Write::new(commit).emit(Emit::ToolEnds).at(now), around)
            .await?;
        Ok(true)
    }
}

impl Runtime {
    /// `settled`, with the calls it waits on decisions for when it settled `waiting`.
    pub(super) async fn with_approvals(&self, mut settled: crate::Settled) -> crate::Settled {
        if settled.status != crate::types::ThreadStatus::Waiting {
            return settled;
        }
        let store = &self.inner.store;
        match tokio::try_join!(
            store.records(settled.thread),
            store.messages(settled.thread)
        ) {
            Ok((records, messages)) => settled.approvals = approval::pending(&records, &messages),
            Err(e) => {
                tracing::warn!(thread = %settled.key, error = %e, "listing pending approvals failed")
            }
        }
        settled
    }

    /// Whether a remembered approval ("approve for the rest of this session / thread") covers
    /// a call of `tool` on `t` now.
    pub(super) async fn remembered(&self, t: &Thread, tool: &str) -> bool {
        match self
            .inner
            .store
            .value(t.id, &approval::remembered_key(tool))
            .await
        {
            Ok(Some(v)) => approval::remembered_covers(&v, t.session),
            Ok(None) => false,
            Err(e) => {
                // Fail closed: the call waits for a person.
                tracing::warn!(thread = %t.key, error = %e, "reading a remembered approval failed");
                false
            }
        }
    }
}

/// What becomes of a tool call before it runs.
#[derive(Debug, PartialEq)]
pub(super) enum Gate {
    /// It runs now.
    Run,
    /// A policy hook denied it: it never runs.
    Deny {
        /// The hook's id.
        hook: String,
        /// Why.
        reason: String,
    },
    /// It waits for a person: what its `approval_requested` record holds.
    Wait(Box<Asked>),
}

/// The decisions a policy hook's `Ask` offers on a tool with no `approval` of its own.
const ASKED_BY_POLICY: [Decision; 2] = [Decision::Approve, Decision::Reject];

/// What `tool`'s `approval` (which `applies` or not to the call's arguments), a policy hook's
/// verdict (`policy`: the hook's id and answer) and a remembered approval make of `call`:
/// `Deny` wins; `Ask` waits (a remembered approval does not cover it); `Allow` waives an
/// approval that applies only when it is `waivable`; with no opinion, the tool's approval
/// decides as before (a remembered approval covers it).
pub(super) fn gate(
    tool: &duet_spec::ToolDef,
    call: &ToolCall,
    revision: &str,
    policy: Option<(String, Policy)>,
    applies: bool,
    remembered: bool,
) -> Gate {
    let approval = tool.approval.as_ref();
    let asked = |decisions: Vec<Decision>, by: Option<String>, deadline| Asked {
        call: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
        decisions,
        remember: approval.map(|a| a.remember.clone()).unwrap_or_default(),
        approvers: approval.map(|a| a.approvers.clone()).unwrap_or_default(),
        revision: Some(revision.to_owned()),
        policy: by,
        deadline,
    };
    let tool_deadline = || approval.and_then(|a| a.deadline.clone());
    let by_tool = || {
        asked(
            approval.map(|a| a.decisions.clone()).unwrap_or_default(),
            None,
            tool_deadline(),
        )
    };
    match policy {
        Some((hook, Policy::Deny { reason })) => Gate::Deny { hook, reason },
        Some((
            hook,
            Policy::Ask {
                decisions,
                deadline,
            },
        )) => {
            let decisions = decisions
                .filter(|d| !d.is_empty())
                .or_else(|| approval.map(|a| a.decisions.clone()))
                .unwrap_or_else(|| ASKED_BY_POLICY.to_vec());
            let deadline = deadline
                .or_else(tool_deadline)
                .and_then(|d| crate::deadline::fit_to(d, &decisions));
            Gate::Wait(Box::new(asked(decisions, Some(hook), deadline)))
        }
        Some((_, Policy::Allow)) if applies && !approval.is_some_and(|a| a.waivable) => {
            Gate::Wait(Box::new(by_tool()))
        }
        Some((_, Policy::Allow)) => Gate::Run,
        Some((_, Policy::NoOpinion)) | None if applies && !remembered => {
            Gate::Wait(Box::new(by_tool()))
        }
        Some((_, Policy::NoOpinion)) | None => Gate::Run,
    }
}
