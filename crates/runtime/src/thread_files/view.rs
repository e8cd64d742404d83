//! [`View`]: a thread's files as the store has them with a run's pending writes laid over them,
//! so the file API reads what the run wrote before its commit (read-your-writes), and checks its
//! next write against both.

use std::collections::BTreeMap;

use crate::ThreadFiles;
use crate::files::{FileError, FileKind, FileQuery, FileRecord, FileStats, FileWrite, path};
use crate::types::ThreadId;

/// A thread's files as the store has them with `pending` writes laid over them, applied in
/// order as the store applies them (`Put` replaces, `Mkdir` keeps what is there, `Remove`
/// removes).
pub(super) struct View<'a> {
    pub(super) files: &'a ThreadFiles,
    pub(super) thread: ThreadId,
    pub(super) pending: &'a [FileWrite],
}

impl View<'_> {
    /// The entry at normalised `p`.
    pub(super) async fn get(&self, p: &str) -> Result<Option<FileRecord>, FileError> {
        // `None`: no pending write touched it yet (the stored entry stands).
        let mut state: Option<Option<FileRecord>> = None;
        for w in self.pending.iter().filter(|w| w.path() == p) {
            state = Some(match (w, state) {
                (FileWrite::Put(r), _) => Some(r.clone()),
                (FileWrite::Remove(_), _) => None,
                (FileWrite::Mkdir(_), Some(Some(there))) => Some(there),
                (FileWrite::Mkdir(r), Some(None)) => Some(r.clone()),
                (FileWrite::Mkdir(r), None) => Some(
                    self.files
                        .store
                        .file(self.thread, p)
                        .await?
                        .unwrap_or_else(|| r.clone()),
                ),
            });
        }
        match state {
            Some(found) => Ok(found),
            None => Ok(self.files.store.file(self.thread, p).await?),
        }
    }

    /// Whether directory `dir` holds any entry.
    pub(super) async fn has_children(&self, dir: &str) -> Result<bool, FileError> {
        Ok(!self.entries(Some(dir), None, false, 1).await?.is_empty())
    }

    /// Entries directly in `dir` (or, with `dir` `None`, under `under` at any depth), files
    /// only if `files_only`, by path, the first `limit` (0: all).
    pub(super) async fn entries(
        &self,
        dir: Option<&str>,
        under: Option<&str>,
        files_only: bool,
        limit: usize,
    ) -> Result<Vec<FileRecord>, FileError> {
        let wanted = |p: &str| match (dir, under) {
            (Some(d), _) => p != "/" && path::parent(p) == d,
            (None, Some(u)) => path::is_within(p, u) && p != u,
            (None, None) => true,
        };
        let touched: std::collections::BTreeSet<&str> = self
            .pending
            .iter()
            .map(FileWrite::path)
            .filter(|p| wanted(p))
            .collect();
        // Each pending path can hide at most one stored entry: read that many more.
        let query = FileQuery {
            dir: dir.map(str::to_owned),
            under: under.map(str::to_owned),
            files_only,
            after: None,
            limit: if limit == 0 { 0 } else { limit + touched.len() },
        };
        let mut out: BTreeMap<String, FileRecord> = self
            .files
            .store
            .files(self.thread, &query)
            .await?
            .into_iter()
            .map(|r| (r.path.clone(), r))
            .collect();
        for p in touched {
            match self.get(p).await? {
                Some(r) if !files_only || r.kind == FileKind::File => {
                    out.insert(p.to_owned(), r);
                }
                _ => {
                    out.remove(p);
                }
            }
        }
        let mut out: Vec<FileRecord> = out.into_values().collect();
        if limit != 0 {
            out.truncate(limit);
        }
        Ok(out)
    }

    /// What the thread's filesystem holds.
    pub(super) async fn stats(&self) -> Result<FileStats, FileError> {
        let mut stats = self.files.store.file_stats(self.thread).await?;
        let mut seen = std::collections::BTreeSet::new();
        for w in self.pending.iter().rev() {
            if !seen.insert(w.path()) {
                continue;
            }
            let stored = self.files.store.file(self.thread, w.path()).await?;
            let now = self.get(w.path()).await?;
            for (r, sign) in [(stored, -1), (now, 1)] {
                if let Some(r) = r {
                    match r.kind {
                        FileKind::File => {
                            stats.files += sign;
                            stats.bytes += sign * r.size;
                        }
                        FileKind::Directory => stats.directories += sign,
                    }
                }
            }
        }
        Ok(stats)
    }
}
