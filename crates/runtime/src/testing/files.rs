//! The memory store's thread filesystem: [`FileStore`] and [`BlobStore`] with the SQL stores'
//! semantics, and what a commit writes to the file table.

use async_trait::async_trait;

use super::{Files, MemoryStore, State};
use crate::files::{FileKind, FileQuery, FileRecord, FileStats, FileWrite, path};
use crate::store::{BlobStore, FileStore, StoreError};
use crate::types::ThreadId;

impl Files {
    /// Applies `writes` to `thread`'s rows, in order.
    pub(super) fn apply(&mut self, thread: ThreadId, writes: Vec<FileWrite>) {
        for w in writes {
            match w {
                FileWrite::Put(r) => {
                    self.rows.insert((thread, r.path.clone()), r);
                }
                FileWrite::Mkdir(r) => {
                    self.rows.entry((thread, r.path.clone())).or_insert(r);
                }
                FileWrite::Remove(p) => {
                    self.rows.remove(&(thread, p));
                }
            }
        }
    }

    fn of(&self, thread: ThreadId) -> impl Iterator<Item = &FileRecord> {
        self.rows
            .range((thread, String::new())..)
            .take_while(move |((t, _), _)| *t == thread)
            .map(|(_, r)| r)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl State {
    fn files_of(&self, thread: ThreadId, query: &FileQuery) -> Vec<FileRecord> {
        let limit = if query.limit == 0 {
            usize::MAX
        } else {
            query.limit
        };
        self.files
            .of(thread)
            .filter(|r| {
                query
                    .dir
                    .as_deref()
                    .is_none_or(|d| r.parent() == d && r.path != "/")
            })
            .filter(|r| {
                query
                    .under
                    .as_deref()
                    .is_none_or(|d| path::is_within(&r.path, d) && r.path != d)
            })
            .filter(|r| !query.files_only || r.kind == FileKind::File)
            .filter(|r| query.after.as_deref().is_none_or(|a| r.path.as_str() > a))
            .take(limit)
            .cloned()
            .collect()
    }
}

#[async_trait]
impl FileStore for MemoryStore {
    async fn file(&self, thread: ThreadId, path: &str) -> Result<Option<FileRecord>, StoreError> {
        Ok(self
            .state()
            .files
            .rows
            .get(&(thread, path.to_owned()))
            .cloned())
    }

    async fn files(
        &self,
        thread: ThreadId,
        query: &FileQuery,
    ) -> Result<Vec<FileRecord>, StoreError> {
        Ok(self.state().files_of(thread, query))
    }

    async fn file_stats(&self, thread: ThreadId) -> Result<FileStats, StoreError> {
        let state = self.state();
        let mut stats = FileStats::default();
        for r in state.files.of(thread) {
            match r.kind {
                FileKind::File => {
                    stats.files += 1;
                    stats.bytes += r.size;
                }
                FileKind::Directory => stats.directories += 1,
            }
        }
        Ok(stats)
    }

    async fn write_files(
        &self,
        thread: ThreadId,
        writes: Vec<FileWrite>,
    ) -> Result<(), StoreError> {
        let mut state = self.state();
        if state.row(thread).is_none() {
            return Err(StoreError::NotFound(thread.to_string()));
        }
        state.files.apply(thread, writes);
        Ok(())
    }

    async fn blobs_named(&self, hashes: &[String]) -> Result<Vec<String>, StoreError> {
        let state = self.state();
        let named: std::collections::HashSet<&String> =
            state.files.rows.values().flat_map(|r| &r.chunks).collect();
        Ok(hashes
            .iter()
            .filter(|h| named.contains(h))
            .cloned()
            .collect())
    }

    async fn sweep_blobs(&self, before: i64) -> Result<u64, StoreError> {
        let mut state = self.state();
        let named: std::collections::HashSet<String> = state
            .files
            .rows
            .values()
            .flat_map(|r| r.chunks.iter().cloned())
            .collect();
        let stale: Vec<String> = state
            .files
            .blobs
            .iter()
            .filter(|(h, (_, at))| *at < before && !named.contains(*h))
            .map(|(h, _)| h.clone())
            .collect();
        for h in &stale {
            state.files.blobs.remove(h);
        }
        Ok(stale.len() as u64)
    }
}

#[async_trait]
impl BlobStore for MemoryStore {
    /// A chunk stored already is kept, its time made now (a sweep's grace), as on SQL.
    async fn put_blob(&self, hash: &str, data: Vec<u8>) -> Result<(), StoreError> {
        let now = now_ms();
        self.state()
            .files
            .blobs
            .entry(hash.to_owned())
            .and_modify(|(_, at)| *at = now)
            .or_insert_with(|| (data, now));
        Ok(())
    }

    async fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.state().files.blobs.get(hash).map(|(b, _)| b.clone()))
    }

    async fn sweep(&self, _: &dyn FileStore, before: i64) -> Result<u64, StoreError> {
        self.sweep_blobs(before).await
    }

    async fn has_blob(&self, hash: &str) -> Result<bool, StoreError> {
        Ok(self.state().files.blobs.contains_key(hash))
    }
}
