//! A `.ts` tool's call, wherever a tool is called from — a step, an approved call, a
//! sub-prompt's model: its arguments checked (zod's `safeParse` where the tool's `args` are
//! zod), its `execute(state, args)` run by the code host with a [`ThreadState`] of the acting
//! side, the messages it wrote through `before_create_message`, and what it wrote added to the
//! hooks' buffer, which the caller's commit writes (a call that failed writes nothing).

use duet_spec::ToolImpl;

use super::Runtime;
use super::thread_state::Site;
use crate::tools::ToolResult;

impl Runtime {
    /// Whether `name` is a `.ts` tool (its `execute` is the project's code).
    pub(super) fn is_code_tool(&self, name: &str) -> bool {
        self.inner
            .project
            .tools
            .get(name)
            .is_some_and(|t| matches!(t.def.implementation, Some(ToolImpl::Code(_))))
    }

    /// Runs `.ts` tool `name` with `args` (checked here) as call `call_id` at `site`.
    pub(super) async fn run_code_tool(
        &self,
        site: &Site<'_>,
        name: &str,
        args: &serde_json::Value,
        call_id: &str,
    ) -> ToolResult {
        let project = &self.inner.project;
        let tools = &self.inner.tools;
        let Some(tool) = project.tools.get(name) else {
            return ToolResult::error(format!("Unknown tool `{name}`."));
        };
        let Some(ToolImpl::Code(code)) = &tool.def.implementation else {
            return ToolResult::error(format!("Tool `{name}` is not the project's code."));
        };
        let args = match tools.check(name, &tool.def, args).await {
            Ok(args) => args.into_owned(),
            Err(refused) => return refused,
        };
        let mut state = self.thread_state(site);
        let hosting = tools.hosting.clone();
        let file = tool.source.file.as_str();
        let result =
            crate::code::run::call_tool(&hosting, &mut state, (name, file, code), &args, call_id)
                .await;
        let mut writes = std::mem::take(&mut state.writes);
        drop(state);
        if !result.is_ok() {
            return result;
        }
        // The messages it wrote pass `before_create_message` as a handler's do; a hook that
        // fails them fails the call, and nothing it wrote is kept.
        let now = self.now();
        match super::handler_turn::checked_messages(site.hooks, site.thread, &writes.injected, now)
            .await
        {
            Ok(checked) => {
                writes.injected = checked
                    .into_iter()
                    .map(|m| crate::handler::Injected {
                        role: m.role,
                        content: m.content.unwrap_or_default(),
                        silent: m.silent,
                        attachments: m.attachments,
                    })
                    .collect();
            }
            Err(e) => {
                return ToolResult::error(format!(
                    "Failed to execute tool `{name}`: a message it wrote was refused: {e}"
                ));
            }
        }
        site.hooks.absorb(writes);
        result
    }
}
