//! A question's or a pending call's deadline (issue #30): its timers written with the commit
//! that asks ([`Runtime::schedule_deadlines`], called by the one write path) and cancelled with
//! the one that takes the answer, and each timer acted on when it falls due
//! ([`Runtime::fire_deadline`]): `default` answers as a person would — through
//! `QueueStore::answer` or `QueueStore::decide`, so whichever of the deadline and a person
//! comes first wins and the other is refused with `already_answered` —; `remind` and
//! `escalate` write a record under the thread's lease, taken briefly (busy: deferred).

use uuid::Uuid;

use super::fire::Fired;
use super::write::{Around, Write};
use super::{DecisionInput, DecisionLanded, Runtime};
use crate::deadline::{self, Args, Subject, action};
use crate::delivery::{Accepted, Delivery, Origin};
use crate::error::RunError;
use crate::record::{Record, RecordBody};
use crate::store::{
    Commit, CommitOutcome, Timer, TimerKind, TimerOutcome, TimerQuery, TimerStatus,
};
use crate::types::{Role, Thread, ThreadStatus};
use duet_spec::{Deadline, DeadlineDefault, Decision};

/// How long a reminder or escalation waits when its thread is busy.
const BUSY_RETRY_MS: i64 = 1_000;

impl Runtime {
    /// Adds to `commit` (about to be written for `t`) the timers of the questions it asks — a
    /// park (its human side's `deadline`, or the one code set for it) and each pending call
    /// (its `approval_requested` record's `deadline`) — and cancels those of the calls it
    /// records a decision on. (A drain that answers a park cancels that park's itself.)
    pub(super) async fn schedule_deadlines(&self, t: &Thread, commit: &mut Commit) {
        let mut timers = Vec::new();
        for r in &commit.records {
            match &r.body {
                RecordBody::ApprovalRequested(asked) => {
                    if let Some(d) = &asked.deadline {
                        timers.extend(deadline::timers(d, Subject::Approval(r.seq), r.created_at));
                    }
                }
                RecordBody::ApprovalDecided(d) => {
                    commit
                        .cancel_subjects
                        .push(Subject::Approval(d.approval).to_string());
                }
                _ => {}
            }
        }
        let parks = commit.records.iter().any(|r| {
            matches!(
                r.body,
                RecordBody::Stopped {
                    status: ThreadStatus::AwaitingHuman,
                    ..
                }
            )
        });
        if parks && let Some(question) = Subject::parked(t) {
            let asked_at = commit
                .records
                .iter()
                .rev()
                .find(|r| matches!(r.body, RecordBody::Stopped { .. }))
                .map_or_else(|| self.now(), |r| r.created_at);
            if let Some(d) = self.question_deadline(t, commit).await {
                timers.extend(deadline::timers(&d, question, asked_at));
            }
        }
        commit.timers.extend(timers);
    }

    /// The deadline of the question `t` parks at: one code set for it (the durable value
    /// [`deadline::OVERRIDE_KEY`], consumed here), else its human side's.
    async fn question_deadline(&self, t: &Thread, commit: &mut Commit) -> Option<Deadline> {
        let key = deadline::OVERRIDE_KEY;
        let set = match commit.values.iter().rev().find(|(k, _)| k == key) {
            Some((_, v)) => v.clone(),
            // Known to the run when it was read with its start (only the run's commits write
            // it meanwhile).
            None => match self.inner.runs.known_override(t.id) {
                Some(known) => known,
                None => match self.inner.store.value(t.id, key).await {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::warn!(thread = %t.key, error = %e, "could not read a question's own deadline; the side's applies");
                        None
                    }
                },
            },
        };
        if let Some(v) = set {
            commit.values.push((key.to_owned(), None));
            match serde_json::from_value::<Deadline>(v) {
                Ok(d) => return d.acts().then_some(d),
                Err(e) => {
                    tracing::warn!(thread = %t.key, error = %e, "a question's own deadline does not read; the side's applies");
                }
            }
        }
        let agent = &self.inner.project.agents.get(&t.agent)?.def;
        match agent.side(agent.human_side()?) {
            duet_spec::Side::Human(h) => h.deadline.clone(),
            _ => None,
        }
    }

    /// Acts on the deadline `timer` stands for.
    pub(crate) async fn fire_deadline(&self, timer: &Timer, _owner: Uuid) -> Fired {
        let failed = |error: String| Fired::Outcome(TimerOutcome::Failed { error });
        let Some(subject) = timer.subject.as_deref() else {
            return failed("a deadline's timer names no subject".into());
        };
        let subject: Subject = match subject.parse() {
            Ok(s) => s,
            Err(e) => return failed(e),
        };
        let args: Args = match serde_json::from_value(timer.args.clone()) {
            Ok(a) => a,
            Err(e) => return failed(format!("a deadline's arguments do not read: {e}")),
        };
        let t = match self.inner.store.thread_by_id(timer.thread).await {
            Ok(Some(t)) => t,
            // The thread is gone: nothing waits.
            Ok(None) => return Fired::Outcome(TimerOutcome::Completed),
            Err(e) => return retry(self.now(), e.to_string()),
        };
        let acted = match timer.name.as_str() {
            action::DEFAULT => match args.default {
                Some(default) => self.answer_by_default(&t, subject, default).await,
                None => return failed("a deadline's default carries no answer".into()),
            },
            action::REMIND | action::ESCALATE => self.note(t, timer, subject, args).await,
            other => return failed(format!("no deadline action `{other}`")),
        };
        match acted {
            Ok(fired) => fired,
            Err(e) => retry(self.now(), e.to_string()),
        }
    }

    /// The deadline's answer to `subject` of `t`, given as a person's would be: refused
    /// (completed, doing nothing) when a person came first.
    async fn answer_by_default(
        &self,
        t: &Thread,
        subject: Subject,
        default: DeadlineDefault,
    ) -> Result<Fired, RunError> {
        let done = Ok(Fired::Outcome(TimerOutcome::Completed));
        let author = deadline::author();
        match subject {
            Subject::Question { .. } => {
                let Some(park) = t.park().filter(|_| Subject::parked(t) == Some(subject)) else {
                    return done;
                };
                let text = default.describe();
                let delivery = Delivery {
                    answers: Some(park),
                    origin: Origin {
                        principal: t.principal.as_deref(),
                        author: Some(&author),
                        ..Origin::default()
                    },
                    ..Delivery::new(&t.key, &text)
                };
                match self.accept(delivery).await {
                    Ok(Accepted::Claimed(claim)) => {
                        self.drive_in_background(claim.thread, claim.run);
                        done
                    }
                    Ok(_) => done,
                    // A person (or a termination) came first: they won.
                    Err(RunError::AlreadyAnswered { .. } | RunError::Terminated(_)) => done,
                    Err(e @ RunError::Stale { .. }) => Ok(Fired::Outcome(TimerOutcome::Failed {
                        error: e.to_string(),
                    })),
                    Err(e) => Err(e),
                }
            }
            Subject::Approval(seq) => {
                let (decision, reason) = match default {
                    DeadlineDefault::Decide { decision, reason } => (decision, reason),
                    DeadlineDefault::Answer(text) => (Decision::Reject, Some(text)),
                };
                let input = DecisionInput {
                    decision,
                    args: None,
                    reason,
                    text: None,
                    remember: None,
                };
                match self
                    .accept_decision(&t.key, seq, input, Some(author), None)
                    .await
                {
                    Ok(accepted) => {
                        if let DecisionLanded::Claimed(claim) = accepted.landed {
                            self.drive_in_background(claim.thread, claim.run);
                        }
                        done
                    }
                    Err(
                        RunError::DecisionTaken { .. }
                        | RunError::UnknownApproval { .. }
                        | RunError::Terminated(_),
                    ) => done,
                    Err(e @ RunError::DecisionRefused { .. }) => {
                        Ok(Fired::Outcome(TimerOutcome::Failed {
                            error: e.to_string(),
                        }))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// A reminder or an escalation: its record written under the thread's lease, taken for
    /// this one commit (busy: deferred), the timer finished in the same commit; a reminder's
    /// `question_reminder` hooks run just before it. Nothing when the question was answered
    /// meanwhile.
    async fn note(
        &self,
        t: Thread,
        timer: &Timer,
        subject: Subject,
        args: Args,
    ) -> Result<Fired, RunError> {
        let done = Ok(Fired::Outcome(TimerOutcome::Completed));
        let store = &self.inner.store;
        if !self.still_asks(&t, subject).await? {
            return done;
        }
        let run = Uuid::now_v7();
        if !store.claim(t.id, self.lease(run)).await? {
            return Ok(Fired::Outcome(TimerOutcome::Defer {
                at: self.now() + BUSY_RETRY_MS,
            }));
        }
        let mut t = match store.thread_by_id(t.id).await? {
            Some(t) if t.lease_owner == Some(run) => t,
            // The lease went to another run between the claim and the read: try again later.
            Some(_) => {
                return Ok(Fired::Outcome(TimerOutcome::Defer {
                    at: self.now() + BUSY_RETRY_MS,
                }));
            }
            None => return done,
        };
        if !self.still_asks(&t, subject).await? {
            store.release(t.id, run).await?;
            return done;
        }
        let now = self.now();
        let key = subject.to_string();
        let (body, n) = match (timer.name.as_str(), args) {
            (action::ESCALATE, Args { to: Some(to), .. }) => (
                RecordBody::QuestionEscalated {
                    subject: key.clone(),
                    to,
                },
                None,
            ),
            (_, args) => {
                let n = args.n.unwrap_or(1);
                (
                    RecordBody::QuestionReminded {
                        subject: key.clone(),
                        n,
                    },
                    Some(n),
                )
            }
        };
        // The hooks run before the commit that finishes the timer: a crash in between runs
        // them again (a reminder at least once), never not at all.
        if let Some(n) = n {
            self.remind_hooks(&t, subject, &key, n).await;
        }
        let record = Record::new(t.take_seq(), body, now);
        let mut write = Write::settle(vec![record]);
        write.commit.timers_done.push(timer.id);
        let outcome = self.persist(&mut t, write, Around::default()).await;
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                let _ = store.release(t.id, run).await;
                return Err(e);
            }
        };
        if let CommitOutcome::Committed { .. } = outcome {
            // An answer arrived while the lease was held: it runs now.
            self.drive_in_background(t.id, run);
        }
        Ok(Fired::Finished)
    }

    /// Whether `t` still waits on `subject`.
    async fn still_asks(&self, t: &Thread, subject: Subject) -> Result<bool, RunError> {
        Ok(match subject {
            Subject::Question { .. } => Subject::parked(t) == Some(subject),
            Subject::Approval(seq) => {
                if t.status != ThreadStatus::Waiting {
                    return Ok(false);
                }
                let store = &self.inner.store;
                let (records, messages) =
                    tokio::try_join!(store.records(t.id), store.messages(t.id))?;
                crate::approval::pending(&records, &messages)
                    .iter()
                    .any(|p| p.seq == seq)
            }
        })
    }

    /// Runs the `question_reminder` hooks in force for `t`'s agent.
    async fn remind_hooks(&self, t: &Thread, subject: Subject, key: &str, n: u32) {
        let Ok(agent) = self.agent_def(&t.agent) else {
            return;
        };
        let scope = match self.child_scope(t).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(thread = %t.key, error = %e, "question_reminder: no scope");
                return;
            }
        };
        let hooks = match self.hooks_for(agent, None, &self.env(agent, None, &scope.env)) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(thread = %t.key, error = %e, "question_reminder: hooks unavailable");
                return;
            }
        };
        let question = self.question_text(t, subject).await;
        let default_at = self
            .inner
            .store
            .timers(&TimerQuery {
                thread: Some(t.id),
                kind: Some(TimerKind::Deadline),
                name: Some(action::DEFAULT),
                status: Some(TimerStatus::Pending),
                limit: 64,
                ..TimerQuery::default()
            })
            .await
            .ok()
            .and_then(|ts| {
                ts.into_iter()
                    .find(|x| x.subject.as_deref() == Some(key) && !x.status.is_final())
            })
            .map(|x| x.due_at);
        let reminder = crate::hooks::Reminder {
            subject: key,
            n,
            question: &question,
            default_at,
        };
        hooks.question_reminder(t, &reminder).await;
    }

    /// What `subject` asks, in words: the last message before the park, or the pending call.
    async fn question_text(&self, t: &Thread, subject: Subject) -> String {
        let store = &self.inner.store;
        match subject {
            Subject::Question { .. } => store
                .messages(t.id)
                .await
                .ok()
                .and_then(|ms| {
                    ms.into_iter()
                        .rev()
                        .find(|m| !m.silent && m.role != Role::Tool)
                        .and_then(|m| m.content)
                })
                .unwrap_or_default(),
            Subject::Approval(seq) => store
                .records(t.id)
                .await
                .ok()
                .and_then(|rs| {
                    rs.into_iter().find_map(|r| match r.body {
                        RecordBody::ApprovalRequested(a) if r.seq == seq => {
                            Some(format!("{}({})", a.tool, a.arguments))
                        }
                        _ => None,
                    })
                })
                .unwrap_or_default(),
        }
    }
}

fn retry(now: i64, error: String) -> Fired {
    Fired::Outcome(TimerOutcome::Retry {
        at: now + BUSY_RETRY_MS,
        error,
    })
}
