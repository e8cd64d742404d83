//! A handler's turn: one delivery per inbound message past the side's watermark, each with a
//! [`ThreadState`] whose writes are buffered and committed with that delivery; then the turn's
//! end (a `stopSession`, the exchange cap, a park, or the sibling's turn).

use duet_spec::HandlerSide;

use super::thread_state::Site;
use super::write::{Around, Emit, Write};
use super::{Flow, Runtime, Turn};
use crate::decide;
use crate::error::RunError;
use crate::handler::{HandlerError, Writes};
use crate::record::{Record, RecordBody};
use crate::store::{Commit, CommitOutcome};
use crate::transition;
use crate::types::{Message, Role, SideId, StopReason, Thread};

impl Runtime {
    pub(super) async fn handler_turn(
        &self,
        cfg: &HandlerSide,
        turn: &Turn<'_>,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
    ) -> Result<Flow, RunError> {
        let Turn {
            agent,
            side,
            scope,
            events,
            cancel,
        } = *turn;
        let project = self.inner.project.clone();
        let defined = project.handlers.get(&cfg.handler);
        let builtin = defined.map_or(cfg.handler.as_str(), |h| h.def.builtin.as_str());
        let handler: Option<std::sync::Arc<dyn crate::handler::Handler>> =
            match defined.and_then(|d| d.def.code.as_ref().map(|c| (d, c))) {
                Some((d, _)) if self.inner.handlers.get(builtin).is_some() => {
                    return self
                        .step_error(
                            t,
                            &format!(
                                "handler `{}` is defined twice: by its own `execute` in {} and by \
                                 the Rust handler registered as `{builtin}`; keep one",
                                cfg.handler, d.source.file
                            ),
                        )
                        .await;
                }
                Some((d, code)) => Some(std::sync::Arc::new(crate::code::run::CodeHandler {
                    hosting: self.inner.tools.hosting.clone(),
                    file: d.source.file.clone(),
                    code: code.clone(),
                })),
                None => self.inner.handlers.get(builtin).cloned(),
            };
        let Some(handler) = handler else {
            return self
                .step_error(
                    t,
                    &format!(
                        "handler `{builtin}` is not registered in this runtime: register it with \
                         `RuntimeBuilder::handler(\"{builtin}\", …)` (duet's own handlers are \
                         `.handlers(duet_handlers::handlers())`, which `duet::compose` registers)"
                    ),
                )
                .await;
        };
        let env = self.env(agent, None, &scope.env);
        // A handler side has no prompt: the agent's hooks (and its children's parent hooks).
        let hooks = match self.hooks_for(agent, None, &env) {
            Ok(active) => active,
            Err(e) => return self.step_error(t, &format!("hooks fail closed: {e}")).await,
        };
        let inbound: Vec<Message> = msgs
            .iter()
            .filter(|m| {
                m.side == Some(side.sibling())
                    && matches!(m.role, Role::User | Role::Assistant)
                    && m.seq > t.watermarks[side]
            })
            .cloned()
            .collect();
        let mut stop_result: Option<Option<String>> = None;
        let mut queued = false;
        for m in &inbound {
            if cancel.is_cancelled() {
                return self.abort(t, msgs).await.map(Flow::Done);
            }
            let mut state = self.thread_state(&Site {
                thread: t,
                history: msgs,
                agent,
                side,
                env: &env,
                arguments: &scope.arguments,
                hooks: &hooks,
            });
            let result = tokio::select! {
                () = cancel.cancelled() => return self.abort(t, msgs).await.map(Flow::Done),
                r = handler.handle(&mut state, m) => r,
            };
            let writes = std::mem::take(&mut state.writes);
            let mut hooks = std::mem::take(&mut state.hooks);
            drop(state);
            let now = self.now();
            // Each message the handler wrote passes `before_create_message`; a hook that fails
            // rejects the delivery like a handler error.
            let mut written = Vec::new();
            let mut result = result;
            if result.is_ok() {
                match checked_messages(&hooks, t, &writes.injected, now).await {
                    Ok(checked) => written = checked,
                    Err(e) => result = Err(e),
                }
            }
            // The watermark moves before the effects apply: delivery is at most once.
            t.watermarks[side] = m.seq;
            let mut commit = Commit::default();
            match result {
                Ok(()) => {
                    stop_result = writes.stop.clone();
                    commit_writes(t, &mut commit, written, writes, now);
                }
                Err(e) => {
                    let seq = t.take_seq();
                    let body = RecordBody::HandlerError {
                        handler: builtin.to_owned(),
                        message: m.seq,
                        error: e.to_string(),
                    };
                    commit.records.push(Record::new(seq, body, now));
                }
            }
            t.updated_at = now;
            let write = Write::new(commit).created().emit(Emit::Messages).at(now);
            let outcome = self
                .persist(t, write, Around::new(&mut hooks, events, msgs))
                .await?;
            queued |= outcome == CommitOutcome::Committed { queued: true };
            if stop_result.is_some() {
                break;
            }
        }

        let now = self.now();
        let mut records = Vec::new();
        if !inbound.is_empty() {
            records.push(transition::turn_completed(t, side, now));
        }
        let mut settle = true;
        if let Some(result) = stop_result {
            let result = result.unwrap_or_else(|| "Session stopped.".to_owned());
            records.push(transition::end_session(
                t,
                StopReason::StateStopSession,
                Some(result),
                now,
            ));
        } else {
            let next = decide::after_handler_turn(agent, t, side, !inbound.is_empty());
            settle = transition::apply_after_turn(
                agent,
                t,
                next,
                transition::History::of(msgs),
                now,
                &mut records,
            );
        }
        t.updated_at = now;
        let write = Write::new(Commit {
            records,
            settle,
            ..Commit::default()
        });
        let outcome = self.persist(t, write, Around::default()).await?;
        Ok(match Flow::of(outcome, t) {
            Flow::Continue { queued: more } => Flow::Continue {
                queued: queued || more,
            },
            done => done,
        })
    }
}

/// The messages code wrote (`ThreadState`'s `reply` and `inject_message`), each through the
/// `before_create_message` hooks; a hook that fails fails them all (the delivery, or the
/// effect's attempt), as the code's own error would.
pub(super) async fn checked_messages(
    hooks: &crate::hooks::ActiveHooks,
    t: &Thread,
    injected: &[crate::handler::Injected],
    now: i64,
) -> Result<Vec<Message>, HandlerError> {
    let mut written = Vec::with_capacity(injected.len());
    for w in injected {
        let writer = match w.role {
            Role::Assistant => Some(SideId::A),
            Role::User => Some(SideId::B),
            _ => None,
        };
        let mut msg = Message::text(0, t.session, w.role, writer, w.content.clone(), now);
        msg.silent = w.silent;
        msg.attachments.clone_from(&w.attachments);
        let msg = hooks
            .before_create_message_strict(t, msg)
            .await
            .map_err(|e| HandlerError::new(e.0))?;
        written.push(msg);
    }
    Ok(written)
}

/// Adds to `commit` what code wrote through a `ThreadState` (its checked messages at `t`'s next
/// seqs, queued messages, values, timers scheduled and cancelled, a status as its record); its
/// `stop` is the caller's to act on.
pub(super) fn commit_writes(
    t: &mut Thread,
    commit: &mut Commit,
    written: Vec<Message>,
    writes: Writes,
    now: i64,
) {
    for mut msg in written {
        msg.seq = t.take_seq();
        commit.messages.push(msg);
    }
    commit.enqueue.extend(writes.queued);
    commit.values.extend(writes.values);
    commit.timers.extend(writes.timers);
    commit.cancel_timers.extend(writes.cancel);
    commit.files.extend(writes.files);
    for (event, data) in writes.events {
        let seq = t.take_seq();
        commit
            .records
            .push(Record::new(seq, RecordBody::Emitted { event, data }, now));
    }
    if let Some(text) = writes.status {
        t.status_text = Some(text.clone());
        let seq = t.take_seq();
        commit
            .records
            .push(Record::new(seq, RecordBody::Status { text }, now));
    }
}
