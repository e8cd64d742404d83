//! A thread endpoint's call (`agents/api/`, served under `/threads/{key}/api/…`): the route
//! found for the request, the thread's code run with a [`ThreadState`] at rest (side A's view,
//! the agent's env and hooks, `execution` null), and what it wrote committed through the one
//! write path.
//!
//! - A thread whose lease is free is held for the call, as an effect's run holds it: what the
//!   code wrote (values, messages, queued messages, timers, events, a status) is committed with
//!   the settle that gives the lease back, in one commit; the thread runs on if messages wait.
//!   A call that failed keeps nothing.
//! - A thread that runs (another holds its lease) or is terminated is read, not held: the
//!   endpoint answers from what is committed, and each `state` member that writes throws
//!   (an endpoint that lets it escape is `Busy` or `Terminated`: nothing was written). A lease
//!   taken away mid-call (the thread terminated) is the same: nothing is committed.

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::Runtime;
use super::handler_turn::{checked_messages, commit_writes};
use super::lease::LeaseGuard;
use super::thread_state::Site;
use super::write::{Around, Write};
use crate::endpoint::{EndpointError, EndpointRequest, EndpointResponse};
use crate::error::RunError;
use crate::handler::Writes;
use crate::hooks::ActiveHooks;
use crate::store::{Commit, CommitOutcome, RunStart, StoreError};
use crate::types::{Message, SideId, Thread, ThreadId, ThreadStatus};

/// What is called: the endpoint's file and handler, its `$request` and `params`, the call's id.
struct Call<'p> {
    file: &'p str,
    code: &'p duet_spec::CodeRef,
    args: (Value, Value),
    id: String,
}

/// One run of the code, with what it left.
struct Ran {
    t: Thread,
    msgs: Vec<Message>,
    hooks: ActiveHooks,
    writes: Writes,
    /// The code's answer; `Err` is the endpoint's failure, in words.
    answer: Result<EndpointResponse, String>,
    /// Whether the code tried a write the read-only state refused.
    refused: bool,
}

impl Runtime {
    /// Serves `request` with the endpoint of the thread whose stored key is `key` (the caller
    /// checked it may see it). [`EndpointError::NotFound`] for no thread or no route,
    /// [`EndpointError::MethodNotAllowed`] when the path answers other methods,
    /// [`EndpointError::Failed`] when the code failed (nothing it wrote is kept).
    pub async fn call_endpoint(
        &self,
        key: &str,
        request: EndpointRequest,
    ) -> Result<EndpointResponse, EndpointError> {
        if self.is_shutting_down() {
            return Err(RunError::ShuttingDown.into());
        }
        let project = self.inner.project.clone();
        let Some(thread) = self.inner.store.thread(key).await? else {
            return Err(EndpointError::NotFound(format!("no thread `{key}`")));
        };
        let found = match project.endpoint(&request.method, &request.path) {
            Ok(Some(found)) => found,
            Ok(None) => {
                return Err(EndpointError::NotFound(format!(
                    "thread `{key}` has no endpoint at `/api{}` (the project's `agents/api/` \
                     files route it)",
                    request.path
                )));
            }
            Err(allowed) => return Err(EndpointError::MethodNotAllowed(allowed)),
        };
        let call = Call {
            file: &found.def.file,
            code: &found.def.code,
            args: (
                request.to_json(),
                Value::Object(
                    found
                        .params
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect(),
                ),
            ),
            id: call_id(&request),
        };
        if thread.status == ThreadStatus::Terminated {
            let why = format!("thread `{key}` is terminated: its endpoints only read it");
            return self
                .endpoint_read_only(thread.id, call, &why, || {
                    EndpointError::Terminated(key.to_owned())
                })
                .await;
        }
        let run = Uuid::now_v7();
        if !self.inner.store.claim(thread.id, self.lease(run)).await? {
            let why = format!(
                "thread `{key}` is running: its endpoints only read it until the run settles"
            );
            return self
                .endpoint_read_only(thread.id, call, &why, || {
                    EndpointError::Busy(key.to_owned())
                })
                .await;
        }
        let guard = LeaseGuard::hold(self, thread.id, run, &CancellationToken::new());
        let held = self.endpoint_held(thread.id, call, &guard).await;
        drop(guard);
        match held {
            Ok((answer, outcome)) => {
                if let CommitOutcome::Committed { .. } = outcome {
                    // Messages wait (the endpoint queued some, or a delivery queued while it
                    // ran): the thread runs on under this lease.
                    self.drive_in_background(thread.id, run);
                }
                answer
            }
            Err(RunError::Store(StoreError::LeaseLost(_))) => {
                // Taken away mid-call (the thread was terminated, or another process took it
                // over): nothing was committed, as for a write to a thread held elsewhere.
                let now = self.inner.store.thread(key).await?;
                Err(match now {
                    Some(t) if t.status == ThreadStatus::Terminated => {
                        EndpointError::Terminated(key.to_owned())
                    }
                    _ => EndpointError::Busy(key.to_owned()),
                })
            }
            Err(e) => {
                // Nothing was committed: give the lease back so the thread is free at once.
                if let Err(e) = self.inner.store.release(thread.id, run).await {
                    tracing::warn!(thread = %key, error = %e, "giving the lease back failed");
                }
                Err(e.into())
            }
        }
    }

    /// The call under the thread's lease: what the code wrote committed with the settle (a
    /// failure settles with nothing).
    async fn endpoint_held(
        &self,
        id: ThreadId,
        call: Call<'_>,
        guard: &LeaseGuard,
    ) -> Result<(Result<EndpointResponse, EndpointError>, CommitOutcome), RunError> {
        let ran = tokio::select! {
            () = guard.lost.cancelled() => {
                return Err(StoreError::LeaseLost(id).into());
            }
            ran = self.run_endpoint(id, call, None) => ran?,
        };
        let Ran {
            mut t,
            mut msgs,
            mut hooks,
            writes,
            answer,
            ..
        } = ran;
        let now = self.now();
        let failed = match answer {
            Ok(response) => match checked_messages(&hooks, &t, &writes.injected, now).await {
                Ok(written) => {
                    let wrote = !is_empty(&writes);
                    let mut commit = Commit {
                        settle: true,
                        ..Commit::default()
                    };
                    commit_writes(&mut t, &mut commit, written, writes, now);
                    if wrote {
                        t.updated_at = now;
                    }
                    let write = Write::new(commit).created().at(now);
                    let around = Around {
                        hooks: Some(&mut hooks),
                        events: None,
                        history: Some(&mut msgs),
                    };
                    let outcome = self.persist(&mut t, write, around).await?;
                    return Ok((Ok(response), outcome));
                }
                Err(e) => e.0,
            },
            Err(e) => e,
        };
        tracing::warn!(thread = %t.key, error = %failed, "a thread endpoint failed");
        let outcome = self
            .persist(&mut t, Write::settle(Vec::new()), Around::default())
            .await?;
        Ok((Err(EndpointError::Failed(failed)), outcome))
    }

    /// The call on the thread as committed, holding nothing: `why` is what each write the code
    /// tries throws, and `refused` the error when the code let one escape (or wrote anyway).
    async fn endpoint_read_only(
        &self,
        id: ThreadId,
        call: Call<'_>,
        why: &str,
        refused: impl FnOnce() -> EndpointError,
    ) -> Result<EndpointResponse, EndpointError> {
        let ran = self.run_endpoint(id, call, Some(why)).await?;
        let wrote = !is_empty(&ran.writes) || !ran.hooks.failures.is_empty() || {
            let w = ran.hooks.take_writes();
            !(w.messages.is_empty()
                && w.values.is_empty()
                && w.queued.is_empty()
                && w.status.is_none()
                && w.timers.is_empty()
                && w.cancel.is_empty()
                && w.events.is_empty()
                && w.files.is_empty())
        };
        match ran.answer {
            Err(_) if ran.refused => Err(refused()),
            Err(e) => {
                tracing::warn!(thread = %ran.t.key, error = %e, "a thread endpoint failed");
                Err(EndpointError::Failed(e))
            }
            // Every member that writes throws here; a write that got through all the same is
            // not kept, and the caller is told.
            Ok(_) if wrote => Err(refused()),
            Ok(response) => Ok(response),
        }
    }

    /// Runs the endpoint's code on thread `id` as the store has it, side A's view at rest;
    /// with `read_only`, each member that writes throws that.
    async fn run_endpoint(
        &self,
        id: ThreadId,
        call: Call<'_>,
        read_only: Option<&str>,
    ) -> Result<Ran, RunError> {
        let RunStart {
            thread, messages, ..
        } = self.inner.store.run_start(id).await?;
        let t = thread.ok_or_else(|| RunError::UnknownThread(id.to_string()))?;
        let project = self.inner.project.clone();
        let fail = |t: Thread, msgs: Vec<Message>, why: String| Ran {
            t,
            msgs,
            hooks: ActiveHooks::default(),
            writes: Writes::default(),
            answer: Err(why),
            refused: false,
        };
        let Some(agent) = project.agents.get(&t.agent).map(|d| &d.def) else {
            let why = format!("the thread's agent `{}` is no longer defined", t.agent);
            return Ok(fail(t, messages, why));
        };
        let scope = self.child_scope(&t).await?;
        let env = self.env(agent, None, &scope.env);
        let hooks = match self.hooks_for(agent, None, &env) {
            Ok(active) => active,
            Err(e) => return Ok(fail(t, messages, format!("hooks fail closed: {e}"))),
        };
        let mut state = self.thread_state(&Site {
            thread: &t,
            history: &messages,
            agent,
            side: SideId::A,
            env: &env,
            arguments: &scope.arguments,
            hooks: &hooks,
        });
        let hosting = self.inner.tools.hosting.clone();
        let (result, refused) = crate::code::run::call_endpoint(
            &hosting,
            &mut state,
            (call.file, call.code),
            call.args,
            (call.id, read_only),
        )
        .await;
        let writes = std::mem::take(&mut state.writes);
        let hooks = std::mem::take(&mut state.hooks);
        drop(state);
        // The caller gets the code's message; its stack (file paths and lines) goes to the log.
        let answer = result
            .map_err(|e| {
                if let Some(stack) = &e.stack {
                    tracing::warn!(target: "duet::code", thread = %t.key, error = %e.message, stack = %stack, "a thread endpoint's code failed");
                }
                e.message
            })
            .and_then(EndpointResponse::of);
        Ok(Ran {
            t,
            msgs: messages,
            hooks,
            writes,
            answer,
            refused,
        })
    }
}

/// The call's id, which the code's `fetch` derives its `Idempotency-Key` from: the request's
/// own `Idempotency-Key` when it has a usable one (a client's retry then sends the same keys
/// on), else a new id.
fn call_id(request: &EndpointRequest) -> String {
    match request.header("idempotency-key") {
        Some(key)
            if (1..=200).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            format!("endpoint:{key}")
        }
        _ => format!("endpoint:{}", Uuid::now_v7()),
    }
}

/// Whether code wrote nothing through its `state`.
fn is_empty(w: &Writes) -> bool {
    w.injected.is_empty()
        && w.queued.is_empty()
        && w.values.is_empty()
        && w.status.is_none()
        && w.stop.is_none()
        && w.timers.is_empty()
        && w.cancel.is_empty()
        && w.events.is_empty()
        && w.files.is_empty()
}
