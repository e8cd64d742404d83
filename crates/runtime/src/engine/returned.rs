//! Files back from a child (#34, spec §4 "Session result", §5.7): a session that ended on its
//! bound `sessionStop`/`sessionFail` tool returns that call's attachments (the tool result's,
//! merged with its `attachmentsProperty` paths, checked when the call was made). They are
//! copied into the parent under `/attachments/<relationship>-<n>/` (the child's key says which
//! instance) and listed in the parent's tool result or report message, which carry them.
//! The check at the call (`bind_attachments`) is here too: a path that is not a file of the
//! child makes the call an error, so the session does not end.

use duet_spec::{AgentDef, PromptSide};

use super::Runtime;
use crate::children::Returned;
use crate::delivery::Settled;
use crate::error::RunError;
use crate::files::{
    ATTACHMENTS, AttachmentRef, FileError, FileRecord, FileWrite, attachment_list,
    attachment_paths, path,
};
use crate::lifecycle;
use crate::tools::ToolResult;
use crate::types::{Role, StopReason, ThreadId, ToolCall, ToolStatus};

/// The directory of the parent where a child's files land: `/attachments/<relationship>-<n>`
/// (the last segment of the child's key).
fn landing(child_key: &str) -> String {
    let instance = child_key.rsplit('/').next().unwrap_or(child_key);
    format!("{ATTACHMENTS}/{}", path::safe_name(instance))
}

impl Runtime {
    /// What `settled`'s session returns to its parent (`agent`: the child's definition),
    /// copied into the parent at once. Nothing unless the session ended on a bound terminal
    /// tool. A file that cannot be copied (gone, or past the parent's limits) is named in the
    /// text instead.
    pub(super) async fn returned_files(
        &self,
        settled: &Settled,
        agent: Option<&AgentDef>,
    ) -> Result<Returned, RunError> {
        let (Some(parent), Some(agent), Some(reason)) =
            (settled.parent, agent, settled.stop_reason)
        else {
            return Ok(Returned::default());
        };
        if !matches!(reason, StopReason::SessionStop | StopReason::SessionFail)
            || lifecycle::outcome(settled, Some(agent)).is_none()
        {
            return Ok(Returned::default());
        }
        let names = lifecycle::terminal_tools(agent, reason);
        let messages = self.inner.store.messages(settled.thread).await?;
        let Some(bound) = messages.iter().rev().find(|m| {
            m.session == settled.session
                && m.role == Role::Tool
                && m.tool_status == Some(ToolStatus::Success)
                && m.tool_name.as_deref().is_some_and(|n| names.contains(&n))
        }) else {
            return Ok(Returned::default());
        };
        if bound.attachments.is_empty() {
            return Ok(Returned::default());
        }
        let dir = landing(&settled.key);
        let mut out = Returned::default();
        let mut failed: Vec<String> = Vec::new();
        let mut taken: Vec<String> = Vec::new();
        for a in &bound.attachments {
            match self.return_one(settled, parent, a, &dir, &taken).await {
                Ok(r) => {
                    taken.push(r.path.clone());
                    out.attachments.push(r.attachment());
                }
                Err(FileError::Store(e)) => return Err(e.into()),
                // Named by its file name and the kind of refusal: the error's text holds the
                // child's own path, which must not reach the parent.
                Err(e) => failed.push(format!("- `{}` ({})", path::safe_name(&a.name), e.code())),
            }
        }
        out.text = attachment_list(&out.attachments);
        if !failed.is_empty() {
            out.text
                .push_str("\n\nNot returned (could not be copied):\n");
            out.text.push_str(&failed.join("\n"));
        }
        Ok(out)
    }

    /// Copies the child's file `a` into `parent` under `dir`.
    async fn return_one(
        &self,
        settled: &Settled,
        parent: ThreadId,
        a: &AttachmentRef,
        dir: &str,
        taken: &[String],
    ) -> Result<FileRecord, FileError> {
        let tf = &self.inner.files;
        let src = tf.file(settled.thread, &a.path).await?;
        let target = tf
            .free_path(parent, (dir, src.name()), &src.chunks, &[], taken)
            .await?;
        let record = crate::ThreadFiles::copy_of(settled.thread, &src, &target)?;
        tf.put(parent, record).await
    }
}

impl Runtime {
    /// A successful call `call` of `cfg`'s bound `sessionStop`/`sessionFail` tool whose binding
    /// has an `attachmentsProperty`: the paths that argument names (a string or an array) must
    /// be files of `thread` (`pending`: its writes not committed yet), and join the result's
    /// attachments; otherwise the call becomes an error naming the path (and ends nothing).
    pub(super) async fn bind_attachments(
        &self,
        cfg: &PromptSide,
        call: &ToolCall,
        (thread, pending): (ThreadId, &[FileWrite]),
        mut result: ToolResult,
    ) -> ToolResult {
        let Some(property) = lifecycle::terminal_binding(cfg, &call.name)
            .and_then(|b| b.attachments_property.as_deref())
        else {
            return result;
        };
        if !result.is_ok() {
            return result;
        }
        let paths = attachment_paths(call.arguments.get(property));
        for raw in &paths {
            let found = self.inner.files.file_in(thread, raw, pending).await;
            match found {
                Ok(r) => {
                    if !result.attachments.iter().any(|a| a.path == r.path) {
                        result.attachments.push(r.attachment());
                    }
                }
                Err(e) => {
                    return ToolResult::error(format!(
                        "`{}` did not end the session: attachment `{}` (in `{property}`) is not \
                         a file of this thread: {e}.",
                        call.name,
                        raw.chars().take(200).collect::<String>()
                    ));
                }
            }
        }
        result
    }
}
