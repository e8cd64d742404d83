//! A scheduled effect, run when its timer falls due: the definition and code it names are
//! looked up, its stored arguments checked again against the definition as it is now, and its
//! code run with a [`ThreadState`] of the thread at rest (side A's view, no execution) under the
//! thread's lease. What the code wrote is committed in one commit with the timer marked
//! `completed`; then the thread runs on if that queued messages, else its lease settles.
//!
//! An effect that can never run (its definition or code gone, its arguments refused, its thread
//! terminated) is `failed` at once; a run whose code fails is retried (the timer loop sets
//! when); a thread busy with a run defers the effect without spending an attempt.

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::Runtime;
use super::fire::Fired;
use super::handler_turn::{checked_messages, commit_writes};
use super::lease::LeaseGuard;
use super::thread_state::Site;
use super::write::{Around, Write};
use crate::effect::Effect;
use crate::error::RunError;
use crate::record::{Record, RecordBody};
use crate::store::{Commit, CommitOutcome, RunStart, Timer, TimerOutcome};
use crate::types::{SideId, Thread, ThreadStatus};

/// How long an effect whose thread is busy waits before it is tried again (not an attempt).
pub(crate) const BUSY_DEFER_MS: i64 = 1_000;

/// What an attempt came to, before it is recorded.
enum Attempt {
    /// Ran and committed.
    Done,
    /// Cannot ever run: `failed`, no retry.
    Never(String),
    /// Failed this time: retried.
    Failed(String),
}

impl Runtime {
    /// Runs the effect `timer` names, with its thread's state.
    pub(crate) async fn fire_effect(&self, timer: &Timer, _owner: Uuid) -> Fired {
        match self.try_effect(timer).await {
            Ok(fired) => fired,
            // The store failed (or the lease was lost) mid-way: nothing was kept; try again.
            Err(e) => Fired::Outcome(TimerOutcome::Retry {
                at: self.now(),
                error: e.to_string(),
            }),
        }
    }

    async fn try_effect(&self, timer: &Timer) -> Result<Fired, RunError> {
        let never = |error: String| Ok(Fired::Outcome(TimerOutcome::Failed { error }));
        let project = self.inner.project.clone();
        let Some(def) = project.effects.get(&timer.name).map(|d| &d.def) else {
            return never(format!(
                "no effect `{}` in the project (revision {})",
                timer.name, project.revision
            ));
        };
        let code: Option<std::sync::Arc<dyn crate::effect::Effect>> = match &def.code {
            Some(_) if self.inner.effects.get(&def.builtin).is_some() => {
                return never(format!(
                    "effect `{}` is defined twice: by its own `handler` function and by the Rust \
                     effect registered as `{}`; keep one",
                    timer.name, def.builtin
                ));
            }
            Some(own) => {
                let file = project
                    .effects
                    .get(&timer.name)
                    .map(|d| d.source.file.clone())
                    .unwrap_or_default();
                Some(std::sync::Arc::new(crate::code::run::CodeEffect {
                    hosting: self.inner.tools.hosting.clone(),
                    file,
                    code: own.clone(),
                    timer: timer.id.to_string(),
                }))
            }
            None => self.inner.effects.get(&def.builtin).cloned(),
        };
        let Some(code) = code else {
            return never(format!(
                "effect `{}` needs the code registered as `{}`, which this runtime does not \
                 register (`RuntimeBuilder::effect(\"{}\", …)`)",
                timer.name, def.builtin, def.builtin
            ));
        };
        if let Err(why) = crate::schedule::check_args(def, &timer.args) {
            return never(why);
        }
        let store = self.store();
        let Some(thread) = store.thread_by_id(timer.thread).await? else {
            return never(format!("thread {} no longer exists", timer.thread));
        };
        if thread.status == ThreadStatus::Terminated {
            return never("thread terminated".to_owned());
        }
        let run = Uuid::now_v7();
        if !store.claim(thread.id, self.lease(run)).await? {
            return Ok(Fired::Outcome(TimerOutcome::Defer {
                at: self.now() + BUSY_DEFER_MS,
            }));
        }
        let guard = LeaseGuard::hold(self, thread.id, run, &CancellationToken::new());
        let attempted = self.attempt(timer, code.as_ref(), &guard).await;
        drop(guard);
        let (attempt, outcome) = match attempted {
            Ok(done) => done,
            Err(e) => {
                // Nothing was committed: give the lease back so the thread is free at once.
                if let Err(e) = store.release(thread.id, run).await {
                    tracing::warn!(thread = %thread.key, error = %e, "giving the lease back failed");
                }
                return Err(e);
            }
        };
        if let CommitOutcome::Committed { .. } = outcome {
            // Messages wait (the effect queued some, or a delivery queued while it ran): the
            // thread runs on under this lease, as a delivery's run does.
            self.drive_in_background(thread.id, run);
        }
        Ok(match attempt {
            Attempt::Done => Fired::Finished,
            Attempt::Never(error) => Fired::Outcome(TimerOutcome::Failed { error }),
            Attempt::Failed(error) => Fired::Outcome(TimerOutcome::Retry {
                at: self.now(),
                error,
            }),
        })
    }

    /// One attempt under the thread's lease: runs the code, then commits what it wrote (or,
    /// when it failed, an `effect_failed` record) and settles.
    async fn attempt(
        &self,
        timer: &Timer,
        code: &dyn Effect,
        guard: &LeaseGuard,
    ) -> Result<(Attempt, CommitOutcome), RunError> {
        let RunStart {
            thread,
            messages: mut msgs,
            ..
        } = self.store().run_start(timer.thread).await?;
        let mut t = thread.ok_or_else(|| RunError::UnknownThread(timer.thread.to_string()))?;
        if t.status == ThreadStatus::Terminated {
            let outcome = self
                .settle_failed(&mut t, timer, "thread terminated")
                .await?;
            return Ok((Attempt::Never("thread terminated".into()), outcome));
        }
        let project = self.inner.project.clone();
        let Some(agent) = project.agents.get(&t.agent).map(|d| &d.def) else {
            let error = format!("the thread's agent `{}` is no longer defined", t.agent);
            let outcome = self.settle_failed(&mut t, timer, &error).await?;
            return Ok((Attempt::Never(error), outcome));
        };
        let scope = self.child_scope(&t).await?;
        let env = self.env(agent, None, &scope.env);
        let hooks = match self.hooks_for(agent, None, &env) {
            Ok(active) => active,
            Err(e) => {
                let error = format!("hooks fail closed: {e}");
                let outcome = self.settle_failed(&mut t, timer, &error).await?;
                return Ok((Attempt::Failed(error), outcome));
            }
        };
        let mut state = self.thread_state(&Site {
            thread: &t,
            history: &msgs,
            agent,
            side: SideId::A,
            env: &env,
            arguments: &scope.arguments,
            hooks: &hooks,
        });
        let result = tokio::select! {
            () = guard.lost.cancelled() => {
                return Err(crate::store::StoreError::LeaseLost(t.id).into());
            }
            r = code.run(&mut state, &timer.args) => r,
        };
        let writes = std::mem::take(&mut state.writes);
        let mut hooks = std::mem::take(&mut state.hooks);
        drop(state);
        let now = self.now();
        if let Err(e) = result {
            let outcome = self.settle_failed(&mut t, timer, &e.0).await?;
            return Ok((Attempt::Failed(e.0), outcome));
        }
        if writes.stop.is_some() {
            // The spec's `stopSession` needs a running execution; an effect runs at rest.
            let error = "stop_session needs a running execution, and an effect runs at rest \
                         (queue a message that leads the thread to stop instead)";
            let outcome = self.settle_failed(&mut t, timer, error).await?;
            return Ok((Attempt::Never(error.into()), outcome));
        }
        // Each message it wrote passes `before_create_message`; a hook that fails fails the
        // attempt, as it rejects a handler's delivery.
        let written = match checked_messages(&hooks, &t, &writes.injected, now).await {
            Ok(written) => written,
            Err(e) => {
                let outcome = self.settle_failed(&mut t, timer, &e.0).await?;
                return Ok((Attempt::Failed(e.0), outcome));
            }
        };
        let mut commit = Commit {
            timers_done: vec![timer.id],
            settle: true,
            ..Commit::default()
        };
        commit_writes(&mut t, &mut commit, written, writes, now);
        let ran = RecordBody::EffectRan {
            id: timer.id,
            name: timer.name.clone(),
            attempt: timer.attempts,
            messages: commit.messages.iter().map(|m| m.seq).collect(),
        };
        let seq = t.take_seq();
        commit.records.push(Record::new(seq, ran, now));
        t.updated_at = now;
        let write = Write::new(commit).created().at(now);
        let around = Around {
            hooks: Some(&mut hooks),
            events: None,
            history: Some(&mut msgs),
        };
        let outcome = self.persist(&mut t, write, around).await?;
        Ok((Attempt::Done, outcome))
    }

    /// Journals a failed attempt (`effect_failed`) and settles the lease.
    async fn settle_failed(
        &self,
        t: &mut Thread,
        timer: &Timer,
        error: &str,
    ) -> Result<CommitOutcome, RunError> {
        let now = self.now();
        let body = RecordBody::EffectFailed {
            id: timer.id,
            name: timer.name.clone(),
            attempt: timer.attempts,
            error: error.to_owned(),
        };
        let record = Record::new(t.take_seq(), body, now);
        t.updated_at = now;
        self.persist(t, Write::settle(vec![record]), Around::default())
            .await
    }
}
