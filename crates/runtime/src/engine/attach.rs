//! Attachments between a parent and its children (#34, spec §5.4): the paths a
//! `subagent_create` / `subagent_message` call (or a code-issued spawn's
//! `initAttachmentsProperty`) names are checked against the parent's files, copied into the
//! child under `/attachments/<name>` (rows only: the chunks are shared), and announced to the
//! child by a silent `user` message each ("Initial asset attachment path: …") before the
//! visible message, which carries them as `attachments`. A name the child has already, for
//! other content, is numbered (`report-2.pdf`); the parent's writes not yet committed (a
//! handler's, a `.ts` tool's earlier in the step) can be sent.

use super::Runtime;
use crate::ThreadFiles;
use crate::error::RunError;
use crate::files::{ATTACHMENTS, AttachmentRef, FileError, FileRecord, FileWrite, path};
use crate::tools::ToolResult;
use crate::types::{NewQueued, Role, SideId, ThreadId};

/// The silent message that tells a child where an attachment is.
pub(super) fn note(path: &str) -> String {
    format!("Initial asset attachment path: {path}")
}

/// Why an attachment could not be copied, as the tool error the caller reports.
pub(super) fn refused(path: &str, e: &FileError) -> ToolResult {
    ToolResult::error(format!(
        "Attachment `{}` cannot be sent: {e}. Each attachment must be a file of this thread \
         (see its files under /attachments), within the receiving thread's file limits.",
        path.chars().take(200).collect::<String>()
    ))
}

impl Runtime {
    /// The files of thread `from` at `paths`, with `pending` (the caller's writes not yet
    /// committed) laid over the stored ones. Strict: a path that is not a file of `from`
    /// (missing, a directory, or outside the thread) is a tool error naming it. Lenient (a
    /// code-issued spawn's `initAttachmentsProperty`): only `/attachments/...` files that exist
    /// are taken.
    pub(super) async fn attachment_files(
        &self,
        from: ThreadId,
        paths: &[String],
        (pending, lenient): (&[FileWrite], bool),
    ) -> Result<Result<Vec<FileRecord>, ToolResult>, RunError> {
        let mut out: Vec<FileRecord> = Vec::new();
        for raw in paths {
            let found = self.inner.files.file_in(from, raw, pending).await;
            match found {
                Ok(r) if lenient && !path::is_within(&r.path, ATTACHMENTS) => {}
                Ok(r) => {
                    if !out.iter().any(|o| o.path == r.path) {
                        out.push(r);
                    }
                }
                Err(FileError::Store(e)) => return Err(e.into()),
                Err(_) if lenient => {}
                Err(e) => return Ok(Err(refused(raw, &e))),
            }
        }
        Ok(Ok(out))
    }

    /// Copies `files` of thread `from` into thread `to` under `dir`, at once: each under its
    /// name, numbered when a file with other content has it (`report-2.pdf`). What was written,
    /// or a tool error naming the file a limit of `to` refused.
    pub(super) async fn copy_attachments(
        &self,
        from: ThreadId,
        files: &[FileRecord],
        to: ThreadId,
        dir: &str,
    ) -> Result<Result<Vec<AttachmentRef>, ToolResult>, RunError> {
        let tf = &self.inner.files;
        let mut out: Vec<AttachmentRef> = Vec::new();
        let mut taken: Vec<String> = Vec::new();
        for f in files {
            let copied = match tf
                .free_path(to, (dir, f.name()), &f.chunks, &[], &taken)
                .await
            {
                Ok(target) => match ThreadFiles::copy_of(from, f, &target) {
                    Ok(record) => tf.put(to, record).await,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            match copied {
                Ok(r) => {
                    taken.push(r.path.clone());
                    out.push(r.attachment());
                }
                Err(FileError::Store(e)) => return Err(e.into()),
                Err(e) => return Ok(Err(refused(&f.path, &e))),
            }
        }
        Ok(Ok(out))
    }

    /// Copies `files` of `parent` into `child` under `/attachments` and queues the child's
    /// silent note for each; the attachments the visible message carries, or a tool error when
    /// the child's limits refused one.
    pub(super) async fn send_attachments(
        &self,
        parent: ThreadId,
        files: &[FileRecord],
        child: ThreadId,
    ) -> Result<Result<Vec<AttachmentRef>, ToolResult>, RunError> {
        if files.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let copied = match self
            .copy_attachments(parent, files, child, ATTACHMENTS)
            .await?
        {
            Ok(copied) => copied,
            Err(refused) => return Ok(Err(refused)),
        };
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
        Ok(Ok(copied))
    }
}
