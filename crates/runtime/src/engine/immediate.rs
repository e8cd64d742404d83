//! `immediate` children: started when their side activates — its first step on the thread, or
//! its first after a handoff brought the agent in — each one with no live instance, before the
//! side's first model call. A blocking one's result (or why it could not start) is written into
//! the history, silent, on the owning side's perspective, in the commit that marks activation.

use std::collections::BTreeMap;

use duet_spec::{AgentDef, PromptSide, SubagentRelationship};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::write::{Around, Write};
use super::{Flow, Runtime};
use crate::children::{ChildRun, Spawn, SpawnMode, Spawner};
use crate::delivery::Settled;
use crate::error::RunError;
use crate::hooks::ActiveHooks;
use crate::lifecycle;
use crate::store::Commit;
use crate::types::{Message, Role, SideId, Thread, ThreadStatus};

/// Whether the side `cfg` has `immediate` children (only then does [`Runtime::spawn_immediate`]
/// have anything to do: a step calls it only for such a side).
pub(super) fn has_immediate(cfg: &PromptSide) -> bool {
    cfg.subagents.iter().any(|r| r.immediate.is_some())
}

impl Runtime {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn spawn_immediate(
        &self,
        agent: &AgentDef,
        cfg: &PromptSide,
        side: SideId,
        t: &mut Thread,
        msgs: &mut Vec<Message>,
        env: &BTreeMap<String, String>,
        hooks: &mut ActiveHooks,
        cancel: &CancellationToken,
    ) -> Result<Option<Flow>, RunError> {
        // Activation is durable: marked in the commit that writes what the children reported,
        // so a run that dies in between activates again (and finds the children it started).
        let mark = lifecycle::activation_key(&t.agent, side);
        if self.inner.store.value(t.id, &mark).await?.is_some() {
            return Ok(None);
        }
        let caller = Spawner {
            env,
            hooks,
            files: Vec::new(),
        };
        let notes = self
            .immediate_spawns(agent, cfg, side, t, msgs, caller, cancel)
            .await?;
        let now = self.now();
        // On the owning side's perspective, like every child-to-parent message.
        let notes: Vec<Message> = notes
            .into_iter()
            .map(|note| {
                let mut m = Message::text(
                    t.take_seq(),
                    t.session,
                    Role::authored_by(side.sibling()),
                    Some(side.sibling()),
                    note,
                    now,
                );
                m.silent = true;
                m
            })
            .collect();
        t.updated_at = now;
        let write = Write::new(Commit {
            messages: notes,
            // An aborted activation is not complete: the next run starts what it did not.
            values: if cancel.is_cancelled() {
                Vec::new()
            } else {
                vec![(mark, Some(json!(true)))]
            },
            ..Commit::default()
        })
        .at(now);
        let around = Around {
            hooks: Some(hooks),
            events: None,
            history: Some(msgs),
        };
        self.persist(t, write, around).await?;
        if cancel.is_cancelled() {
            return self.abort(t, msgs).await.map(|s| Some(Flow::Done(s)));
        }
        Ok(None)
    }

    /// The `immediate` relationships of `side` to start now, before its model is first called:
    /// at the side's first step on this thread, or its first after a handoff brought the agent
    /// in (digest §5.8), each one with no live instance. Returns the messages for the parent's
    /// history: a blocking child's result or failure, or why a spawn could not be made (silent,
    /// on the owning side's perspective).
    #[allow(clippy::too_many_arguments)]
    async fn immediate_spawns(
        &self,
        agent: &duet_spec::AgentDef,
        cfg: &PromptSide,
        side: SideId,
        parent: &Thread,
        msgs: &[crate::types::Message],
        caller: Spawner<'_>,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, RunError> {
        let env_fn = |k: &str| caller.env(k);
        let due: Vec<&SubagentRelationship> = cfg
            .subagents
            .iter()
            .filter(|r| r.immediate.is_some() && r.enabled(&env_fn))
            .collect();
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let existing = self.inner.store.children(parent.id).await?;
        let mut notes = Vec::new();
        let (env, hooks) = (caller.env, caller.hooks);
        for rel in due {
            let live = existing
                .iter()
                .find(|c| c.relationship == rel.name() && c.status.is_live());
            if let Some(live) = live {
                // Started by a run that died before its activation was committed: a blocking
                // child's finished result is not in the history yet. (One still running reports
                // through the queue when recovery finishes it.)
                let child_def = self.inner.project.agents.get(&rel.agent).map(|d| &d.def);
                if rel.blocking
                    && let Some(child) = self.inner.store.thread_by_id(live.child).await?
                    && child.status != ThreadStatus::Running
                    && let settled = Settled::of(&child)
                    && let Some(outcome) = lifecycle::outcome(&settled, child_def)
                    && let returned = self.returned_files(&settled, child_def).await?
                    && let text = lifecycle::report_text(&child.key, &outcome, &returned.text)
                    && !msgs
                        .iter()
                        .any(|m| m.content.as_deref() == Some(text.as_str()))
                {
                    notes.push(text);
                }
                continue;
            }
            let how = rel.immediate.clone().unwrap_or(duet_spec::Immediate {
                name_env: None,
                description_env: None,
                scoped_env: Vec::new(),
            });
            // Only `nameEnv` and `descriptionEnv` may reach a model; `scopedEnv` values go into
            // the child's env and nowhere else.
            let lookup =
                |k: &Option<String>| k.as_deref().and_then(|k| crate::context::env_value(env, k));
            let name = lookup(&how.name_env);
            let mut message = format!(
                "You were started automatically by `{}` when it began.",
                agent.name
            );
            if let Some(n) = &name {
                message.push_str(&format!("\n\nName: {n}"));
            }
            if let Some(d) = lookup(&how.description_env) {
                message.push_str(&format!("\n\nDescription: {d}"));
            }
            let spawn = Spawn {
                message,
                name: name.or_else(|| Some(rel.name().to_owned())),
                arguments: json!({}),
                check_arguments: false,
                mode: if rel.blocking {
                    SpawnMode::Inline
                } else {
                    SpawnMode::Background
                },
                scoped: how.scoped_env,
                attachments: Vec::new(),
                lenient_attachments: false,
            };
            let caller = Spawner {
                env,
                hooks: &mut *hooks,
                files: Vec::new(),
            };
            let run: futures::future::BoxFuture<'_, _> =
                Box::pin(self.spawn_child(parent, side, rel, spawn, caller, cancel));
            match run.await? {
                Err(refused) => notes.push(format!(
                    "Subagent \"{}\" (immediate) could not be started: {}",
                    rel.name(),
                    refused.content
                )),
                Ok(ChildRun::Settled(key, settled, returned)) => {
                    let child_def = self.inner.project.agents.get(&rel.agent).map(|d| &d.def);
                    if let Some(outcome) = lifecycle::outcome(&settled, child_def) {
                        notes.push(lifecycle::report_text(&key, &outcome, &returned.text));
                    }
                }
                Ok(ChildRun::Started(_) | ChildRun::Queued(_) | ChildRun::Awaiting { .. }) => {}
            }
            if cancel.is_cancelled() {
                break;
            }
        }
        Ok(notes)
    }
}
