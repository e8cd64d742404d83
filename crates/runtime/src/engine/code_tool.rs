//! A step's call of a `.ts` tool: its arguments checked (zod's `safeParse` where the tool's
//! `args` are zod), its `execute(state, args)` run by the code host with a [`ThreadState`] of
//! the acting side, and what the code wrote through `state` committed with the step (a call
//! that failed writes nothing).

use duet_spec::CodeRef;

use super::router::{Dispatched, StepCalls};
use super::{Runtime, Turn};
use crate::handler::{ThreadState, Writes};
use crate::tools::ToolResult;
use crate::types::ToolCall;

impl Runtime {
    /// Runs `call` of the tool whose `execute` is `code` in `file`.
    pub(super) async fn code_tool(
        &self,
        turn: &Turn<'_>,
        call: &ToolCall,
        step: &mut StepCalls<'_>,
        (file, code): (&str, &CodeRef),
    ) -> Dispatched {
        let project = &self.inner.project;
        let tools = &self.inner.tools;
        let Some(tool) = project.tools.get(&call.name) else {
            return Dispatched::Done(ToolResult::error(format!("Unknown tool `{}`.", call.name)));
        };
        let args = match tools.check(&call.name, &tool.def, &call.arguments).await {
            Ok(args) => args.into_owned(),
            Err(refused) => return Dispatched::Done(refused),
        };
        let agent = turn.agent;
        let mut state = ThreadState {
            thread: step.thread,
            messages: step.history,
            side: turn.side,
            env: step.env,
            store: self.inner.store.as_ref(),
            tools,
            children: self,
            project,
            relationships: agent.side(turn.side).subagents(),
            sibling_relationships: agent.side(turn.side.sibling()).subagents(),
            arguments: &turn.scope.arguments,
            hooks: step.hooks.clone(),
            writes: Writes::default(),
            now: self.now(),
        };
        let hosting = tools.hosting.clone();
        let result = crate::code::run::call_tool(
            &hosting,
            &mut state,
            (&call.name, file, code),
            &args,
            &call.id,
        )
        .await;
        let writes = std::mem::take(&mut state.writes);
        drop(state);
        if result.is_ok() {
            step.hooks.absorb(writes);
        }
        Dispatched::Done(result)
    }
}
