//! The thread filesystem on [`ThreadState`] (the spec's `writeFile`, `readFile`, `statFile`,
//! `readdirFile`, `unlinkFile`, `mkdirFile`, `rmdirFile`, `getFileStats`, `grepFiles`,
//! `findFiles`), and a reply that carries files. Content is stored as chunks at once
//! (content-addressed: a chunk no row names is harmless); the file rows are buffered in
//! [`crate::handler::Writes`]' `files` and written with the delivery's (or the step's) commit,
//! so a delivery or tool call that fails writes no file. Reads see the delivery's own writes,
//! and those of the step's earlier `.ts` tools.

use crate::files::{
    ATTACHMENTS, FileError, FileKind, FileRecord, FileStats, FileWrite, ReturnedFile,
};
use crate::handler::{HandlerError, ThreadState};
use crate::thread_files::GrepMatch;
use crate::tools::ToolResult;

impl From<FileError> for HandlerError {
    fn from(e: FileError) -> Self {
        HandlerError(e.to_string())
    }
}

impl ThreadState<'_> {
    /// The file writes not committed yet: the step's earlier `.ts` tools', then this state's.
    pub(crate) fn pending_files(&self) -> Vec<FileWrite> {
        let mut pending = self.hooks.pending_files();
        pending.extend(self.writes.files.iter().cloned());
        pending
    }

    /// Writes `data` as the file at `path` (its directories made as needed), with `mime` as its
    /// declared type; committed with this delivery. Refused over the limits, at a directory's
    /// path, or below a file.
    pub async fn write_file(
        &mut self,
        path: &str,
        data: &[u8],
        mime: Option<&str>,
    ) -> Result<FileRecord, FileError> {
        let pending = self.pending_files();
        let (written, writes) = self
            .files
            .plan_write(self.thread.id, path, data, mime, &pending)
            .await?;
        self.writes.files.extend(writes);
        Ok(written)
    }

    /// Writes a message authored by this handler's side, as [`ThreadState::reply`] does, that
    /// carries the files at `paths` as its attachments (each a file of the thread, this
    /// delivery's writes included; `NotFound` or `WrongKind` otherwise, and nothing is written).
    /// The session's last such message is what an A2A task's file artifact shows.
    pub async fn reply_with_files(
        &mut self,
        content: impl Into<String>,
        paths: &[&str],
    ) -> Result<(), FileError> {
        let mut attachments = Vec::with_capacity(paths.len());
        for path in paths {
            match self.stat_file(path).await? {
                Some(r) if r.kind == FileKind::File => attachments.push(r.attachment()),
                Some(r) => {
                    return Err(FileError::WrongKind {
                        path: r.path,
                        found: "directory",
                    });
                }
                None => return Err(FileError::NotFound((*path).to_owned())),
            }
        }
        let role = crate::types::Role::authored_by(self.side);
        let mut message = crate::handler::Injected::new(role, content.into(), false);
        message.attachments = attachments;
        self.writes.injected.push(message);
        Ok(())
    }

    /// The content of the file at `path`; `None` when nothing is there (`WrongKind` for a
    /// directory).
    pub async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, FileError> {
        match self.stat_file(path).await? {
            None => Ok(None),
            Some(r) if r.kind == FileKind::Directory => Err(FileError::WrongKind {
                path: r.path,
                found: "directory",
            }),
            Some(r) => Ok(Some(self.files.content(&r).await?)),
        }
    }

    /// The entry (file or directory) at `path`, if any.
    pub async fn stat_file(&self, path: &str) -> Result<Option<FileRecord>, FileError> {
        let pending = self.pending_files();
        self.files.stat_in(self.thread.id, path, &pending).await
    }

    /// The entries directly inside directory `path` (`/` for the top), by path.
    pub async fn readdir_file(&self, path: &str) -> Result<Vec<FileRecord>, FileError> {
        let pending = self.pending_files();
        self.files.list_in(self.thread.id, path, &pending).await
    }

    /// Removes the file at `path` (`NotFound`; `WrongKind` for a directory).
    pub async fn unlink_file(&mut self, path: &str) -> Result<(), FileError> {
        let pending = self.pending_files();
        let writes = self
            .files
            .plan_unlink(self.thread.id, path, &pending)
            .await?;
        self.writes.files.extend(writes);
        Ok(())
    }

    /// Makes directory `path` and those above it (nothing when it exists).
    pub async fn mkdir_file(&mut self, path: &str) -> Result<(), FileError> {
        let pending = self.pending_files();
        let writes = self
            .files
            .plan_mkdir(self.thread.id, path, &pending)
            .await?;
        self.writes.files.extend(writes);
        Ok(())
    }

    /// Removes empty directory `path` (`NotEmpty` when it holds entries).
    pub async fn rmdir_file(&mut self, path: &str) -> Result<(), FileError> {
        let pending = self.pending_files();
        let writes = self
            .files
            .plan_rmdir(self.thread.id, path, &pending)
            .await?;
        self.writes.files.extend(writes);
        Ok(())
    }

    /// What the thread's filesystem holds, this delivery's writes included.
    pub async fn file_stats(&self) -> Result<FileStats, FileError> {
        let pending = self.pending_files();
        self.files.stats_in(self.thread.id, &pending).await
    }

    /// Lines of the thread's text files matching regular expression `pattern`, bounded by the
    /// file limits; `true` when it stopped at one.
    pub async fn grep_files(&self, pattern: &str) -> Result<(Vec<GrepMatch>, bool), FileError> {
        let pending = self.pending_files();
        self.files.grep_in(self.thread.id, pattern, &pending).await
    }

    /// `result` with the files a tool returned (`returned`, read from its result) as its
    /// attachments: new content stored under `/attachments/` (numbered when the name holds
    /// other content), a path checked to be a file of the thread. A bad one fails the call.
    pub(crate) async fn returned_files(
        &mut self,
        mut result: ToolResult,
        returned: Result<Vec<ReturnedFile>, String>,
    ) -> ToolResult {
        if !result.is_ok() {
            return result;
        }
        let returned = match returned {
            Ok(returned) => returned,
            Err(why) => return ToolResult::error(format!("The tool's result is invalid: {why}.")),
        };
        for file in returned {
            let record = match file {
                ReturnedFile::Path(p) => match self.stat_file(&p).await {
                    Ok(Some(r)) if r.kind == FileKind::File => Ok(r),
                    Ok(_) => Err(FileError::NotFound(p)),
                    Err(e) => Err(e),
                },
                ReturnedFile::Data { name, mime, data } => {
                    self.store_returned(&name, mime.as_deref(), &data).await
                }
            };
            match record {
                Ok(r) => {
                    if !result.attachments.iter().any(|a| a.path == r.path) {
                        result.attachments.push(r.attachment());
                    }
                }
                Err(e) => {
                    return ToolResult::error(format!(
                        "The tool's result names an attachment that cannot be kept: {e}."
                    ));
                }
            }
        }
        result
    }

    /// Stores a returned file's `data` under `/attachments/` by `name`.
    async fn store_returned(
        &mut self,
        name: &str,
        mime: Option<&str>,
        data: &[u8],
    ) -> Result<FileRecord, FileError> {
        let chunks: Vec<String> = data
            .chunks(crate::files::chunk::CHUNK_BYTES)
            .map(crate::files::chunk::hash)
            .collect();
        let pending = self.pending_files();
        let target = self
            .files
            .free_path(self.thread.id, (ATTACHMENTS, name), &chunks, &pending, &[])
            .await?;
        self.write_file(&target, data, mime).await
    }

    /// Paths of the thread's files matching glob `pattern`, bounded by the file limits; `true`
    /// when more matched.
    pub async fn find_files(&self, pattern: &str) -> Result<(Vec<String>, bool), FileError> {
        let pending = self.pending_files();
        self.files.find_in(self.thread.id, pattern, &pending).await
    }
}
