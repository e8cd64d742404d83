//! Copies between threads (attachments sent to a child, a child's files returned to its parent,
//! a `.ts` tool's returned files): a copy is a row naming the same chunks, and it lands under a
//! free name — a file already there with other content is kept, and the copy is numbered
//! (`report-2.pdf`); the same content there already is the copy (a copy made again after a
//! crash lands where it did).

use super::{ThreadFiles, now_ms};
use crate::files::{FileError, FileKind, FileRecord, FileWrite, path};
use crate::types::ThreadId;

impl ThreadFiles {
    /// The record a copy of `src` (a file of thread `from`, stored or pending) at `to_path` is:
    /// the same chunks, its `meta.copiedFrom` naming where it came from.
    pub fn copy_of(
        from: ThreadId,
        src: &FileRecord,
        to_path: &str,
    ) -> Result<FileRecord, FileError> {
        let now = now_ms();
        let mut meta = match &src.meta {
            serde_json::Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        };
        meta.insert(
            "copiedFrom".into(),
            serde_json::json!({"thread": from.to_string(), "path": src.path}),
        );
        Ok(FileRecord {
            path: path::normalize(to_path)?,
            meta: serde_json::Value::Object(meta),
            created_at: now,
            updated_at: now,
            ..src.clone()
        })
    }

    /// Where in directory `dir` of `thread` a file named `name` whose content is `chunks` goes:
    /// `dir/name` when nothing is there or the same content is, else the first of
    /// `dir/name-2…` that is free or holds the same content. `pending` (a run's writes) is laid
    /// over the stored files; `taken` are paths this caller has claimed already.
    pub async fn free_path(
        &self,
        thread: ThreadId,
        (dir, name): (&str, &str),
        chunks: &[String],
        pending: &[FileWrite],
        taken: &[String],
    ) -> Result<String, FileError> {
        let view = self.view(thread, pending);
        let dir = path::normalize_dir(dir)?;
        let name = path::safe_name(name);
        let bound = u32::try_from(self.limits.max_entries.saturating_add(2)).unwrap_or(u32::MAX);
        for n in 1..=bound {
            let candidate = if n == 1 {
                name.clone()
            } else {
                path::numbered(&name, n)
            };
            let p = path::normalize(&format!("{}/{candidate}", dir.trim_end_matches('/')))?;
            if taken.contains(&p) {
                continue;
            }
            match view.get(&p).await? {
                None => return Ok(p),
                Some(r) if r.kind == FileKind::File && r.chunks == chunks => return Ok(p),
                Some(_) => {}
            }
        }
        Err(FileError::TooMany {
            limit: self.limits.max_entries,
        })
    }

    /// Whether `files`, copied into a thread that has no files yet (a new child) under one
    /// directory, keep its limits: refused as a write past them would be.
    pub fn fits_new(&self, files: &[FileRecord]) -> Result<(), FileError> {
        let bytes: u64 = files.iter().map(|f| f.size.max(0) as u64).sum();
        if bytes > self.limits.max_thread_bytes {
            return Err(FileError::TooLarge {
                what: "thread's files",
                size: bytes,
                limit: self.limits.max_thread_bytes,
            });
        }
        if files.len() as u64 + 1 > self.limits.max_entries {
            return Err(FileError::TooMany {
                limit: self.limits.max_entries,
            });
        }
        Ok(())
    }
}
