//! The thread filesystem for hooks ([`HookContext`]): read what the thread holds — its files
//! with the step's pending writes laid over them — and write files that are committed with the
//! step the hook runs in (`after_create_message`, which runs after its commit, only reads). The
//! same operations as a handler's `ThreadState` file API (`handler/files.rs`), on the step's
//! hook buffer.

use super::{HookContext, HookError};
use crate::files::{FileError, FileKind, FileRecord, FileStats, FileWrite};
use crate::thread_files::{GrepMatch, ThreadFiles};

impl HookContext<'_> {
    fn files(&self) -> Result<&ThreadFiles, FileError> {
        self.state.files.as_ref().ok_or_else(|| {
            FileError::Store(crate::StoreError::Corrupt(
                "this hook runs without a thread filesystem".into(),
            ))
        })
    }

    fn pending(&self) -> Vec<FileWrite> {
        self.state
            .writes
            .lock()
            .map(|w| w.files.clone())
            .unwrap_or_default()
    }

    fn add(&self, writes: Vec<FileWrite>) -> Result<(), FileError> {
        self.write(|w| w.files.extend(writes))
            .map_err(|HookError(why)| FileError::InvalidPath {
                path: String::new(),
                reason: if why.contains("cannot write") {
                    "this hook runs after its commit: it cannot write files"
                } else {
                    "the hook's writes are unavailable"
                },
            })
    }

    /// Writes `data` as the file at `path` (directories made as needed), committed with the
    /// step.
    pub async fn write_file(
        &self,
        path: &str,
        data: &[u8],
        mime: Option<&str>,
    ) -> Result<FileRecord, FileError> {
        if !self.writable {
            return Err(FileError::InvalidPath {
                path: path.chars().take(200).collect(),
                reason: "this hook runs after its commit: it cannot write files",
            });
        }
        let (written, writes) = self
            .files()?
            .plan_write(self.thread.id, path, data, mime, &self.pending())
            .await?;
        self.add(writes)?;
        Ok(written)
    }

    /// The entry at `path`, if any.
    pub async fn stat_file(&self, path: &str) -> Result<Option<FileRecord>, FileError> {
        self.files()?
            .stat_in(self.thread.id, path, &self.pending())
            .await
    }

    /// The content of the file at `path`; `None` when nothing is there.
    pub async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, FileError> {
        match self.stat_file(path).await? {
            None => Ok(None),
            Some(r) if r.kind == FileKind::Directory => Err(FileError::WrongKind {
                path: r.path,
                found: "directory",
            }),
            Some(r) => Ok(Some(self.files()?.content(&r).await?)),
        }
    }

    /// The entries directly inside directory `path`.
    pub async fn readdir_file(&self, path: &str) -> Result<Vec<FileRecord>, FileError> {
        self.files()?
            .list_in(self.thread.id, path, &self.pending())
            .await
    }

    /// Removes the file at `path`, with the step.
    pub async fn unlink_file(&self, path: &str) -> Result<(), FileError> {
        let writes = self
            .files()?
            .plan_unlink(self.thread.id, path, &self.pending())
            .await?;
        self.add(writes)
    }

    /// Makes directory `path` (and those above it), with the step.
    pub async fn mkdir_file(&self, path: &str) -> Result<(), FileError> {
        let writes = self
            .files()?
            .plan_mkdir(self.thread.id, path, &self.pending())
            .await?;
        self.add(writes)
    }

    /// Removes empty directory `path`, with the step.
    pub async fn rmdir_file(&self, path: &str) -> Result<(), FileError> {
        let writes = self
            .files()?
            .plan_rmdir(self.thread.id, path, &self.pending())
            .await?;
        self.add(writes)
    }

    /// What the thread's filesystem holds.
    pub async fn file_stats(&self) -> Result<FileStats, FileError> {
        self.files()?
            .stats_in(self.thread.id, &self.pending())
            .await
    }

    /// Lines of the thread's text files matching `pattern` (bounded; `true` when cut).
    pub async fn grep_files(&self, pattern: &str) -> Result<(Vec<GrepMatch>, bool), FileError> {
        self.files()?
            .grep_in(self.thread.id, pattern, &self.pending())
            .await
    }

    /// Paths of the thread's files matching glob `pattern` (bounded; `true` when cut).
    pub async fn find_files(&self, pattern: &str) -> Result<(Vec<String>, bool), FileError> {
        self.files()?
            .find_in(self.thread.id, pattern, &self.pending())
            .await
    }
}
