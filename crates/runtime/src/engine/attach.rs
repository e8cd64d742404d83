//! Attachments between a parent and its children (#34, spec §5.4): the paths a
//! `subagent_create` / `subagent_message` call (or a code-issued spawn's
//! `initAttachmentsProperty`) names are checked against the parent's files, copied into the
//! child under `/attachments/<name>` (rows only: the chunks are shared), and announced to the
//! child by a silent `user` message each ("Initial asset attachment path: …") before the
//! visible message, which carries them as `attachments`.

use super::Runtime;
use crate::error::RunError;
use crate::files::{ATTACHMENTS, AttachmentRef, FileError, FileRecord, path};
use crate::tools::ToolResult;
use crate::types::{NewQueued, Role, SideId, ThreadId};

/// The silent message that tells a child where an attachment is.
pub(super) fn note(path: &str) -> String {
    format!("Initial asset attachment path: {path}")
}

impl Runtime {
    /// The files of thread `from` at `paths`. Strict: a path that is not a file of `from`
    /// (missing, a directory, or outside the thread) is a tool error naming it. Lenient (a
    /// code-issued spawn's `initAttachmentsProperty`): only `/attachments/...` files that exist
    /// are taken.
    pub(super) async fn attachment_files(
        &self,
        from: ThreadId,
        paths: &[String],
        lenient: bool,
    ) -> Result<Result<Vec<FileRecord>, ToolResult>, RunError> {
        let mut out: Vec<FileRecord> = Vec::new();
        for raw in paths {
            match self.inner.files.file(from, raw).await {
                Ok(r) if lenient && !path::is_within(&r.path, ATTACHMENTS) => {}
                Ok(r) => {
                    if !out.iter().any(|o| o.path == r.path) {
                        out.push(r);
                    }
                }
                Err(FileError::Store(e)) => return Err(e.into()),
                Err(_) if lenient => {}
                Err(e) => {
                    return Ok(Err(ToolResult::error(format!(
                        "Attachment `{}` cannot be sent: {e}. Each attachment must be a file of \
                         this thread (see its files under /attachments).",
                        raw.chars().take(200).collect::<String>()
                    ))));
                }
            }
        }
        Ok(Ok(out))
    }

    /// Copies `files` of thread `from` into thread `to` under `dir` (each by its name; a name
    /// taken already gets a number), at once; what was written.
    pub(super) async fn copy_attachments(
        &self,
        from: ThreadId,
        files: &[FileRecord],
        to: ThreadId,
        dir: &str,
    ) -> Result<Vec<AttachmentRef>, RunError> {
        let mut out: Vec<AttachmentRef> = Vec::new();
        for f in files {
            let name = path::safe_name(f.name());
            let mut target = format!("{dir}/{name}");
            let mut n = 1;
            while out.iter().any(|a| a.path == target) {
                n += 1;
                target = format!("{dir}/{n}-{name}");
            }
            let copied = self
                .inner
                .files
                .copy(from, &f.path, to, &target)
                .await
                .map_err(|e| match e {
                    FileError::Store(e) => RunError::from(e),
                    other => RunError::from(crate::store::StoreError::Corrupt(other.to_string())),
                })?;
            out.push(copied.attachment());
        }
        Ok(out)
    }

    /// Copies `files` of `parent` into `child` under `/attachments` and queues the child's
    /// silent note for each; the attachments the visible message carries.
    pub(super) async fn send_attachments(
        &self,
        parent: ThreadId,
        files: &[FileRecord],
        child: ThreadId,
    ) -> Result<Vec<AttachmentRef>, RunError> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let copied = self
            .copy_attachments(parent, files, child, ATTACHMENTS)
            .await?;
        for a in &copied {
            let message = NewQueued {
                silent: true,
                ..NewQueued::new(Role::User, SideId::B, note(&a.path))
            };
            self.inner
                .store
                .enqueue(child, message, None, self.now())
                .await?;
        }
        Ok(copied)
    }
}
