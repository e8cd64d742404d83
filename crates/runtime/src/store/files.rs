//! The thread filesystem's tables (issue #34): [`FileStore`], each thread's file rows (paths,
//! kinds, sizes, types, the chunks that hold the bytes), and [`BlobStore`], the chunks
//! themselves by content hash. A run writes file rows with its commit ([`super::Commit::files`],
//! under its lease, all or nothing); writes from outside a run — an upload, a copy into a child or
//! back into its parent — are [`FileStore::write_files`], one transaction of their own. Chunks are
//! stored first and may outlive a write that failed (they are named by content, so nothing reads
//! them); [`FileStore::sweep_blobs`] removes those no row names.

use async_trait::async_trait;

use super::StoreError;
use crate::files::{FileQuery, FileRecord, FileStats, FileWrite};
use crate::types::ThreadId;

/// A thread's file rows.
#[async_trait]
pub trait FileStore: Send + Sync {
    /// The entry at normalised `path` of thread `thread`.
    async fn file(&self, thread: ThreadId, path: &str) -> Result<Option<FileRecord>, StoreError>;

    /// Entries of thread `thread` as `query` says, by path.
    async fn files(
        &self,
        thread: ThreadId,
        query: &FileQuery,
    ) -> Result<Vec<FileRecord>, StoreError>;

    /// What thread `thread`'s filesystem holds.
    async fn file_stats(&self, thread: ThreadId) -> Result<FileStats, StoreError>;

    /// Applies `writes` to thread `thread`'s files, in order, in one transaction (no lease: the
    /// writes of an upload, or of a copy between threads). `NotFound` when there is no such thread.
    async fn write_files(&self, thread: ThreadId, writes: Vec<FileWrite>)
    -> Result<(), StoreError>;

    /// Of `hashes`, those some file row of any thread names (for a blob backend's sweep).
    async fn blobs_named(&self, hashes: &[String]) -> Result<Vec<String>, StoreError>;

    /// Removes the database's chunks that no file row names and that were stored before
    /// `before` (ms since the epoch; a grace for writes under way); how many went.
    async fn sweep_blobs(&self, before: i64) -> Result<u64, StoreError>;
}

/// Chunks by content hash (`crate::files::chunk::hash`). The database is the default backend
/// (the store's own `blobs` table, so SQLite stays one file); a directory of files is the other.
#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// Stores chunk `data` as `hash` (its SHA-256, hex). Idempotent: a chunk already stored is
    /// kept. The caller computed `hash` from `data`.
    async fn put_blob(&self, hash: &str, data: Vec<u8>) -> Result<(), StoreError>;

    /// Chunk `hash`, if stored.
    async fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Whether chunk `hash` is stored.
    async fn has_blob(&self, hash: &str) -> Result<bool, StoreError>;

    /// Removes the chunks stored (or last stored again) before `before` (ms since the epoch)
    /// that no file row of `files` names; how many went. The grace keeps the chunks of writes
    /// under way, whose rows are not written yet.
    async fn sweep(&self, files: &dyn FileStore, before: i64) -> Result<u64, StoreError>;
}
