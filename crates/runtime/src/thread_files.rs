//! [`ThreadFiles`]: the thread filesystem's operations on the store port, shared by every way in —
//! a run's `ThreadState` (whose writes go with its commit), uploads and downloads over HTTP,
//! A2A file parts, the CLI, copies between a parent and its children. It checks paths, kinds and
//! limits before anything is stored, stores content as chunks in the [`BlobStore`] as it arrives
//! (a stream is never held whole), and writes file rows either with a commit (the caller adds
//! [`ThreadFiles::plan_put`]'s writes to it) or at once ([`FileStore::write_files`]).

use std::sync::Arc;

use futures::{Stream, StreamExt};

use crate::files::{
    FileError, FileKind, FileLimits, FileQuery, FileRecord, FileStats, FileWrite, chunk, path,
    sniff,
};
use crate::store::{BlobStore, Store};
use crate::types::ThreadId;

mod copy;
mod view;
use view::View;

/// How old an unnamed chunk must be before [`ThreadFiles::sweep`] removes it in `duet serve`:
/// a day, far past any step or upload that stored it and has yet to write its row.
pub const SWEEP_GRACE_MS: i64 = 24 * 60 * 60 * 1000;

/// One match of [`ThreadFiles::grep`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GrepMatch {
    /// The file.
    pub path: String,
    /// The line's number, from 1.
    pub line: usize,
    /// The line (cut to 500 characters).
    pub text: String,
}

/// The thread filesystem of one store: see the module's documentation.
#[derive(Clone)]
pub struct ThreadFiles {
    store: Arc<dyn Store>,
    blobs: Arc<dyn BlobStore>,
    limits: FileLimits,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl ThreadFiles {
    /// Files of `store`, their chunks in `blobs`, within `limits`.
    pub fn new(store: Arc<dyn Store>, blobs: Arc<dyn BlobStore>, limits: FileLimits) -> Self {
        ThreadFiles {
            store,
            blobs,
            limits,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> FileLimits {
        self.limits
    }

    /// The chunk store.
    pub fn blobs(&self) -> &Arc<dyn BlobStore> {
        &self.blobs
    }

    /// Removes the chunks no file names that were stored more than `grace_ms` ago (a refused
    /// or broken-off upload's, a failed step's, a removed file's); how many went. `duet serve`
    /// runs it every hour with a day's grace ([`SWEEP_GRACE_MS`]).
    pub async fn sweep(&self, grace_ms: i64) -> Result<u64, FileError> {
        let before = now_ms().saturating_sub(grace_ms);
        let files: &dyn crate::store::FileStore = self.store.as_ref();
        Ok(self.blobs.sweep(files, before).await?)
    }

    /// The thread's files as the store has them with `pending` writes laid over them.
    fn view<'v>(&'v self, thread: ThreadId, pending: &'v [FileWrite]) -> View<'v> {
        View {
            files: self,
            thread,
            pending,
        }
    }

    /// The entry at `raw` (normalised), if any.
    pub async fn stat(&self, thread: ThreadId, raw: &str) -> Result<Option<FileRecord>, FileError> {
        let p = path::normalize_dir(raw)?;
        Ok(self.store.file(thread, &p).await?)
    }

    /// The entries directly inside directory `raw`, by path: at most `limit` (0: all) after
    /// `after`. `NotFound` when `raw` is neither `/` nor a directory; `WrongKind` for a file.
    pub async fn list(
        &self,
        thread: ThreadId,
        raw: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<FileRecord>, FileError> {
        let dir = path::normalize_dir(raw)?;
        self.expect_dir(thread, &dir).await?;
        let query = FileQuery {
            dir: Some(dir),
            after: after.map(str::to_owned),
            limit,
            ..FileQuery::default()
        };
        Ok(self.store.files(thread, &query).await?)
    }

    /// Every file under directory `raw` at any depth (no directories), by path, at most `limit`.
    pub async fn walk(
        &self,
        thread: ThreadId,
        raw: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<FileRecord>, FileError> {
        let dir = path::normalize_dir(raw)?;
        let query = FileQuery {
            under: Some(dir),
            files_only: true,
            after: after.map(str::to_owned),
            limit,
            ..FileQuery::default()
        };
        Ok(self.store.files(thread, &query).await?)
    }

    /// What the thread's filesystem holds.
    pub async fn stats(&self, thread: ThreadId) -> Result<FileStats, FileError> {
        Ok(self.store.file_stats(thread).await?)
    }

    /// [`ThreadFiles::stat`] with `pending` writes (a run's, not yet committed) laid over the
    /// stored files.
    pub async fn stat_in(
        &self,
        thread: ThreadId,
        raw: &str,
        pending: &[FileWrite],
    ) -> Result<Option<FileRecord>, FileError> {
        let p = path::normalize_dir(raw)?;
        let view = self.view(thread, pending);
        view.get(&p).await
    }

    /// The file at `raw` with `pending` writes laid over the stored files: `NotFound` when
    /// nothing is there, `WrongKind` for a directory.
    pub async fn file_in(
        &self,
        thread: ThreadId,
        raw: &str,
        pending: &[FileWrite],
    ) -> Result<FileRecord, FileError> {
        match self.stat_in(thread, raw, pending).await? {
            Some(r) if r.kind == FileKind::File => Ok(r),
            Some(r) => Err(FileError::WrongKind {
                path: r.path,
                found: "directory",
            }),
            None => Err(FileError::NotFound(raw.to_owned())),
        }
    }

    /// Every entry directly inside directory `raw`, by path, with `pending` writes laid over
    /// the stored files (`NotFound`, `WrongKind` as [`ThreadFiles::list`]).
    pub async fn list_in(
        &self,
        thread: ThreadId,
        raw: &str,
        pending: &[FileWrite],
    ) -> Result<Vec<FileRecord>, FileError> {
        let dir = path::normalize_dir(raw)?;
        let view = self.view(thread, pending);
        if dir != "/" {
            match view.get(&dir).await? {
                Some(r) if r.kind == FileKind::Directory => {}
                Some(_) => {
                    return Err(FileError::WrongKind {
                        path: dir,
                        found: "file",
                    });
                }
                None => return Err(FileError::NotFound(dir)),
            }
        }
        view.entries(Some(&dir), None, false, 0).await
    }

    /// [`ThreadFiles::stats`] with `pending` writes laid over the stored files.
    pub async fn stats_in(
        &self,
        thread: ThreadId,
        pending: &[FileWrite],
    ) -> Result<FileStats, FileError> {
        let view = self.view(thread, pending);
        view.stats().await
    }

    async fn expect_dir(&self, thread: ThreadId, dir: &str) -> Result<(), FileError> {
        if dir == "/" {
            return Ok(());
        }
        match self.store.file(thread, dir).await? {
            Some(r) if r.kind == FileKind::Directory => Ok(()),
            Some(_) => Err(FileError::WrongKind {
                path: dir.to_owned(),
                found: "file",
            }),
            None => Err(FileError::NotFound(dir.to_owned())),
        }
    }

    /// Stores `data` as the content of a file at `raw` and gives its record, not yet written to
    /// any thread (add [`ThreadFiles::plan_put`]'s writes to a commit, or call
    /// [`ThreadFiles::put`]). Refused over the per-file limit.
    pub async fn store_bytes(
        &self,
        raw: &str,
        data: &[u8],
        declared: Option<&str>,
    ) -> Result<FileRecord, FileError> {
        let p = path::normalize(raw)?;
        self.check_file_size(data.len() as u64)?;
        let mut chunks = Vec::new();
        for piece in chunk::split(data) {
            chunks.push(self.put_chunk(piece.to_vec()).await?);
        }
        Ok(self.record(p, data.len() as u64, chunks, data, declared))
    }

    /// Stores a stream of bytes as the content of a file at `raw`, chunk by chunk as it arrives
    /// (at most one chunk held), and gives its record, not yet written. Refused, with the rest
    /// of the stream unread, once it passes the per-file limit or `max` if smaller; a stream
    /// error is returned as it is (`E`), and what was stored of it is never named by a row.
    pub async fn store_stream<S, B, E>(
        &self,
        raw: &str,
        mut stream: S,
        declared: Option<&str>,
        max: Option<u64>,
    ) -> Result<FileRecord, StreamError<E>>
    where
        S: Stream<Item = Result<B, E>> + Unpin,
        B: AsRef<[u8]>,
    {
        let p = path::normalize(raw).map_err(StreamError::File)?;
        let limit = max.map_or(self.limits.max_file_bytes, |m| {
            m.min(self.limits.max_file_bytes)
        });
        let mut chunker = chunk::Chunker::new();
        let mut head: Vec<u8> = Vec::new();
        let mut chunks = Vec::new();
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(StreamError::Source)?;
            let bytes = piece.as_ref();
            if head.len() < 512 {
                head.extend_from_slice(&bytes[..bytes.len().min(512 - head.len())]);
            }
            if chunker.total() + bytes.len() as u64 > limit {
                return Err(StreamError::File(FileError::TooLarge {
                    what: "file",
                    size: chunker.total() + bytes.len() as u64,
                    limit,
                }));
            }
            for full in chunker.push(bytes) {
                chunks.push(self.put_chunk(full).await.map_err(StreamError::File)?);
            }
        }
        let size = chunker.total();
        if let Some(last) = chunker.finish() {
            chunks.push(self.put_chunk(last).await.map_err(StreamError::File)?);
        }
        Ok(self.record(p, size, chunks, &head, declared))
    }

    async fn put_chunk(&self, data: Vec<u8>) -> Result<String, FileError> {
        let hash = chunk::hash(&data);
        // Put even when stored: that renews its time, so a sweep under way leaves it to the
        // row about to name it.
        self.blobs.put_blob(&hash, data).await?;
        Ok(hash)
    }

    fn check_file_size(&self, size: u64) -> Result<(), FileError> {
        if size > self.limits.max_file_bytes {
            return Err(FileError::TooLarge {
                what: "file",
                size,
                limit: self.limits.max_file_bytes,
            });
        }
        Ok(())
    }

    fn record(
        &self,
        p: String,
        size: u64,
        chunks: Vec<String>,
        head: &[u8],
        declared: Option<&str>,
    ) -> FileRecord {
        let now = now_ms();
        let mime = sniff::choose(&p, &head[..head.len().min(512)], declared);
        FileRecord {
            path: p,
            kind: FileKind::File,
            size: i64::try_from(size).unwrap_or(i64::MAX),
            // As code declared it, but for NUL (`crate::nul`).
            mime_type: Some(crate::nul::cleaned(&mime)),
            declared_type: declared.map(|d| d.chars().take(127).map(crate::nul::char).collect()),
            chunks,
            meta: serde_json::Value::Null,
            created_at: now,
            updated_at: now,
        }
    }

    /// The writes that put `record` into `thread`, checked against what is there and against
    /// `pending` (writes not yet committed, in order): the directories above it that are
    /// missing, then the file. Refused when a directory is at its path, a file is where a
    /// directory above it would be, or the thread's limits would be passed. A replaced file
    /// keeps its `created_at`.
    pub async fn plan_put(
        &self,
        thread: ThreadId,
        mut record: FileRecord,
        pending: &[FileWrite],
    ) -> Result<Vec<FileWrite>, FileError> {
        let view = self.view(thread, pending);
        let existing = view.get(&record.path).await?;
        let is_new = existing.is_none();
        if let Some(e) = &existing {
            if e.kind == FileKind::Directory {
                return Err(FileError::WrongKind {
                    path: record.path,
                    found: "directory",
                });
            }
            record.created_at = e.created_at;
        }
        let mut writes = Vec::new();
        for dir in path::ancestors(&record.path) {
            match view.get(dir).await? {
                Some(d) if d.kind == FileKind::File => {
                    return Err(FileError::WrongKind {
                        path: dir.to_owned(),
                        found: "file",
                    });
                }
                Some(_) => {}
                None => writes.push(FileWrite::Mkdir(FileRecord::directory(
                    dir.to_owned(),
                    record.updated_at,
                ))),
            }
        }
        let stats = view.stats().await?;
        let old = existing.map_or(0, |e| e.size);
        let bytes = (stats.bytes - old + record.size).max(0) as u64;
        if bytes > self.limits.max_thread_bytes {
            return Err(FileError::TooLarge {
                what: "thread's files",
                size: bytes,
                limit: self.limits.max_thread_bytes,
            });
        }
        let entries = (stats.files + stats.directories).max(0) as u64
            + writes.len() as u64
            + u64::from(is_new);
        if entries > self.limits.max_entries {
            return Err(FileError::TooMany {
                limit: self.limits.max_entries,
            });
        }
        writes.push(FileWrite::Put(record));
        Ok(writes)
    }

    /// Stores `data` as the file at `raw` and plans its writes over `pending` (see
    /// [`ThreadFiles::plan_put`]): the record as it will be written, and the writes, for a
    /// caller that commits them (a handler's delivery, a hook's step).
    pub async fn plan_write(
        &self,
        thread: ThreadId,
        raw: &str,
        data: &[u8],
        declared: Option<&str>,
        pending: &[FileWrite],
    ) -> Result<(FileRecord, Vec<FileWrite>), FileError> {
        let record = self.store_bytes(raw, data, declared).await?;
        let writes = self.plan_put(thread, record, pending).await?;
        match writes.last() {
            Some(FileWrite::Put(r)) => Ok((r.clone(), writes)),
            _ => Err(FileError::NotFound(raw.to_owned())),
        }
    }

    /// Puts `record` (stored by [`ThreadFiles::store_bytes`] or [`ThreadFiles::store_stream`])
    /// into `thread` at once, outside any run. Gives it back as written.
    pub async fn put(&self, thread: ThreadId, record: FileRecord) -> Result<FileRecord, FileError> {
        let writes = self.plan_put(thread, record.clone(), &[]).await?;
        self.store.write_files(thread, writes).await?;
        Ok(self
            .store
            .file(thread, &record.path)
            .await?
            .unwrap_or(record))
    }

    /// Writes `data` at `raw` in `thread` at once, outside any run.
    pub async fn write(
        &self,
        thread: ThreadId,
        raw: &str,
        data: &[u8],
        declared: Option<&str>,
    ) -> Result<FileRecord, FileError> {
        let record = self.store_bytes(raw, data, declared).await?;
        self.put(thread, record).await
    }

    /// Copies file `from_path` of thread `from` to `to_path` of thread `to` at once (rows only:
    /// the chunks are shared). The copy's `meta.copiedFrom` names where it came from.
    pub async fn copy(
        &self,
        from: ThreadId,
        from_path: &str,
        to: ThreadId,
        to_path: &str,
    ) -> Result<FileRecord, FileError> {
        let record = self.copy_record(from, from_path, to_path).await?;
        self.put(to, record).await
    }

    /// The record a copy of file `from_path` of thread `from` to `to_path` would write (see
    /// [`ThreadFiles::copy`]), for a caller that writes it with a commit.
    pub async fn copy_record(
        &self,
        from: ThreadId,
        from_path: &str,
        to_path: &str,
    ) -> Result<FileRecord, FileError> {
        let src = self.file(from, from_path).await?;
        Self::copy_of(from, &src, to_path)
    }

    /// The file at `raw`: `NotFound` when nothing is there, `WrongKind` for a directory.
    pub async fn file(&self, thread: ThreadId, raw: &str) -> Result<FileRecord, FileError> {
        let p = path::normalize(raw)?;
        match self.store.file(thread, &p).await? {
            Some(r) if r.kind == FileKind::File => Ok(r),
            Some(_) => Err(FileError::WrongKind {
                path: p,
                found: "directory",
            }),
            None => Err(FileError::NotFound(p)),
        }
    }

    /// The whole content of `record` (a file's), chunk after chunk.
    pub async fn content(&self, record: &FileRecord) -> Result<Vec<u8>, FileError> {
        let mut out = Vec::with_capacity(usize::try_from(record.size).unwrap_or(0));
        for h in &record.chunks {
            out.extend(self.chunk(h).await?);
        }
        Ok(out)
    }

    async fn chunk(&self, hash: &str) -> Result<Vec<u8>, FileError> {
        self.blobs.blob(hash).await?.ok_or_else(|| {
            FileError::Store(crate::store::StoreError::Corrupt(format!(
                "file chunk {hash} is missing"
            )))
        })
    }

    /// Bytes `start..end` of `record` (end exclusive, clamped to its size) as a stream of
    /// pieces, one chunk read at a time.
    pub fn range(
        &self,
        record: &FileRecord,
        start: u64,
        end: u64,
    ) -> impl Stream<Item = Result<Vec<u8>, FileError>> + Send + 'static {
        let size = u64::try_from(record.size).unwrap_or(0);
        let end = end.min(size);
        let blobs = self.blobs.clone();
        let chunks = record.chunks.clone();
        let (first, last, offset) = chunk::span(start, end);
        let total = end.saturating_sub(start);
        let pieces: Vec<(usize, String)> = if total == 0 {
            Vec::new()
        } else {
            (first..=last.min(chunks.len().saturating_sub(1)))
                .filter_map(|i| chunks.get(i).map(|h| (i, h.clone())))
                .collect()
        };
        futures::stream::iter(pieces).then(move |(i, hash)| {
            let blobs = blobs.clone();
            async move {
                let data = blobs.blob(&hash).await?.ok_or_else(|| {
                    FileError::Store(crate::store::StoreError::Corrupt(format!(
                        "file chunk {hash} is missing"
                    )))
                })?;
                let base = (i * chunk::CHUNK_BYTES) as u64;
                let from = if i == first { offset } else { 0 };
                let to = usize::try_from((end - base).min(data.len() as u64)).unwrap_or(0);
                Ok(data.get(from..to).map(<[u8]>::to_vec).unwrap_or_default())
            }
        })
    }

    /// The writes that remove the file at `raw` (`NotFound`, `WrongKind` for a directory).
    pub async fn plan_unlink(
        &self,
        thread: ThreadId,
        raw: &str,
        pending: &[FileWrite],
    ) -> Result<Vec<FileWrite>, FileError> {
        let p = path::normalize(raw)?;
        let view = self.view(thread, pending);
        match view.get(&p).await? {
            Some(r) if r.kind == FileKind::File => Ok(vec![FileWrite::Remove(p)]),
            Some(_) => Err(FileError::WrongKind {
                path: p,
                found: "directory",
            }),
            None => Err(FileError::NotFound(p)),
        }
    }

    /// The writes that make directory `raw` and those above it (none when it exists;
    /// `WrongKind` when a file is in the way).
    pub async fn plan_mkdir(
        &self,
        thread: ThreadId,
        raw: &str,
        pending: &[FileWrite],
    ) -> Result<Vec<FileWrite>, FileError> {
        let p = path::normalize(raw)?;
        let view = self.view(thread, pending);
        let now = now_ms();
        let mut writes = Vec::new();
        for dir in path::ancestors(&p).into_iter().chain([p.as_str()]) {
            match view.get(dir).await? {
                Some(r) if r.kind == FileKind::File => {
                    return Err(FileError::WrongKind {
                        path: dir.to_owned(),
                        found: "file",
                    });
                }
                Some(_) => {}
                None => writes.push(FileWrite::Mkdir(FileRecord::directory(dir.to_owned(), now))),
            }
        }
        let stats = view.stats().await?;
        if (stats.files + stats.directories).max(0) as u64 + writes.len() as u64
            > self.limits.max_entries
        {
            return Err(FileError::TooMany {
                limit: self.limits.max_entries,
            });
        }
        Ok(writes)
    }

    /// The writes that remove empty directory `raw` (`NotEmpty` when it holds entries).
    pub async fn plan_rmdir(
        &self,
        thread: ThreadId,
        raw: &str,
        pending: &[FileWrite],
    ) -> Result<Vec<FileWrite>, FileError> {
        let p = path::normalize(raw)?;
        let view = self.view(thread, pending);
        match view.get(&p).await? {
            Some(r) if r.kind == FileKind::Directory => {}
            Some(_) => {
                return Err(FileError::WrongKind {
                    path: p,
                    found: "file",
                });
            }
            None => return Err(FileError::NotFound(p)),
        }
        if view.has_children(&p).await? {
            return Err(FileError::NotEmpty(p));
        }
        Ok(vec![FileWrite::Remove(p)])
    }

    /// Applies `writes` to `thread` at once, outside any run.
    pub async fn apply(&self, thread: ThreadId, writes: Vec<FileWrite>) -> Result<(), FileError> {
        Ok(self.store.write_files(thread, writes).await?)
    }

    /// Paths of `thread`'s files matching glob `pattern` ([`crate::files::glob::Glob`]), by
    /// path, at most the limits' `max_results`; `true` when more matched.
    pub async fn find(
        &self,
        thread: ThreadId,
        pattern: &str,
    ) -> Result<(Vec<String>, bool), FileError> {
        self.find_in(thread, pattern, &[]).await
    }

    /// [`ThreadFiles::find`] with `pending` writes laid over the stored files.
    pub async fn find_in(
        &self,
        thread: ThreadId,
        pattern: &str,
        pending: &[FileWrite],
    ) -> Result<(Vec<String>, bool), FileError> {
        let glob = crate::files::glob::Glob::new(pattern)?;
        let view = self.view(thread, pending);
        // Every file of the thread, at most `max_entries` of them: paths only are kept.
        let all = view.entries(None, Some("/"), true, 0).await?;
        let mut out = Vec::new();
        for r in &all {
            if glob.matches(&r.path) {
                if out.len() == self.limits.max_results {
                    return Ok((out, true));
                }
                out.push(r.path.clone());
            }
        }
        Ok((out, false))
    }

    /// Lines of `thread`'s text files matching regular expression `pattern`: at most the
    /// limits' `grep_files` files read, `grep_bytes` of each, `max_results` matches; `true` when
    /// it stopped at a limit. The pattern is compiled with a size limit (no pathological
    /// automaton), and matching is linear in the text.
    pub async fn grep(
        &self,
        thread: ThreadId,
        pattern: &str,
    ) -> Result<(Vec<GrepMatch>, bool), FileError> {
        self.grep_in(thread, pattern, &[]).await
    }

    /// [`ThreadFiles::grep`] with `pending` writes laid over the stored files.
    pub async fn grep_in(
        &self,
        thread: ThreadId,
        pattern: &str,
        pending: &[FileWrite],
    ) -> Result<(Vec<GrepMatch>, bool), FileError> {
        if pattern.len() > 1000 {
            return Err(FileError::Pattern(
                "a pattern is at most 1,000 characters".into(),
            ));
        }
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .dfa_size_limit(4 << 20)
            .build()
            .map_err(|e| FileError::Pattern(e.to_string()))?;
        let view = self.view(thread, pending);
        let files = view
            .entries(None, Some("/"), true, self.limits.grep_files + 1)
            .await?;
        let cut = files.len() > self.limits.grep_files;
        let mut out = Vec::new();
        for r in files.iter().take(self.limits.grep_files) {
            if !r.mime_type.as_deref().is_some_and(sniff::is_text) {
                continue;
            }
            let mut bytes = Vec::new();
            for h in &r.chunks {
                if bytes.len() >= self.limits.grep_bytes {
                    break;
                }
                bytes.extend(self.chunk(h).await?);
            }
            bytes.truncate(self.limits.grep_bytes);
            let text = String::from_utf8_lossy(&bytes);
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    if out.len() == self.limits.max_results {
                        return Ok((out, true));
                    }
                    out.push(GrepMatch {
                        path: r.path.clone(),
                        line: i + 1,
                        text: line.chars().take(500).collect(),
                    });
                }
            }
        }
        Ok((out, cut))
    }
}

/// A failed [`ThreadFiles::store_stream`]: the file API's refusal, or the stream's own error.
#[derive(Debug)]
pub enum StreamError<E> {
    /// Refused (a bad path, over a limit) or the store failed.
    File(FileError),
    /// The stream failed (a client that went away mid-upload).
    Source(E),
}
