//! The one way the engine makes a [`ThreadState`] for code to act through (a handler's
//! delivery, an effect's run, a thread endpoint, a `.ts` tool's call): where it acts — the
//! thread as the caller has it, the acting side and its env, the hooks — and nothing written
//! yet.

use std::collections::BTreeMap;

use duet_spec::AgentDef;

use super::Runtime;
use crate::handler::{ThreadState, Writes};
use crate::hooks::ActiveHooks;
use crate::types::{Message, SideId, Thread};

/// Where code acts: the thread as the caller has it, the acting side and its env, and the
/// hooks whose buffer the caller's commit writes.
pub(super) struct Site<'a> {
    pub(super) thread: &'a Thread,
    pub(super) history: &'a [Message],
    pub(super) agent: &'a AgentDef,
    pub(super) side: SideId,
    pub(super) env: &'a BTreeMap<String, String>,
    pub(super) arguments: &'a serde_json::Value,
    pub(super) hooks: &'a ActiveHooks,
}

impl Runtime {
    /// A [`ThreadState`] at `site`: the side's relationships and its sibling's, the hooks'
    /// shared buffer, the time now.
    pub(super) fn thread_state<'a>(&'a self, site: &Site<'a>) -> ThreadState<'a> {
        ThreadState {
            thread: site.thread,
            messages: site.history,
            side: site.side,
            env: site.env,
            store: self.inner.store.as_ref(),
            files: &self.inner.files,
            tools: &self.inner.tools,
            children: self,
            project: &self.inner.project,
            relationships: site.agent.side(site.side).subagents(),
            sibling_relationships: site.agent.side(site.side.sibling()).subagents(),
            arguments: site.arguments,
            hooks: site.hooks.clone(),
            writes: Writes::default(),
            now: self.now(),
        }
    }
}
