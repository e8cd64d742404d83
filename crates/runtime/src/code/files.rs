//! The thread filesystem for code: `state.writeFile`, `readFile`, `statFile`, `readdirFile`,
//! `unlinkFile`, `mkdirFile`, `rmdirFile`, `getFileStats`, `grepFiles`, `findFiles`, and
//! `readFileChunk` (the glue's `readFileStream` reads a file through it, one
//! [`CHUNK_BYTES`] piece per call), answered with the [`ThreadState`] file API, so a write is
//! committed with the step, delivery or effect run the code ran in. Bytes cross the bridge as
//! `{"$bytes": base64}` ([`shape::bytes`]).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::shape;
use crate::files::chunk::CHUNK_BYTES;
use crate::files::{FileError, FileRecord, FileStats};
use crate::handler::ThreadState;
use crate::hooks::HookContext;
use crate::thread_files::{GrepMatch, ThreadFiles};

/// What answers code's file members: a handler's, tool's or effect's `ThreadState`, or a
/// hook's context (both write with the step or delivery the code runs in).
#[async_trait]
pub(crate) trait FileApi: Send {
    fn thread_files(&self) -> Option<&ThreadFiles>;
    async fn write_file(
        &mut self,
        path: &str,
        data: &[u8],
        mime: Option<&str>,
    ) -> Result<FileRecord, FileError>;
    async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, FileError>;
    async fn stat_file(&self, path: &str) -> Result<Option<FileRecord>, FileError>;
    async fn readdir_file(&self, path: &str) -> Result<Vec<FileRecord>, FileError>;
    async fn unlink_file(&mut self, path: &str) -> Result<(), FileError>;
    async fn mkdir_file(&mut self, path: &str) -> Result<(), FileError>;
    async fn rmdir_file(&mut self, path: &str) -> Result<(), FileError>;
    async fn file_stats(&self) -> Result<FileStats, FileError>;
    async fn grep_files(&self, pattern: &str) -> Result<(Vec<GrepMatch>, bool), FileError>;
    async fn find_files(&self, pattern: &str) -> Result<(Vec<String>, bool), FileError>;
}

/// Both implementations delegate to the inherent methods of the same names.
macro_rules! file_api {
    ($ty:ty, $files:ident) => {
        #[async_trait]
        impl FileApi for $ty {
            fn thread_files(&self) -> Option<&ThreadFiles> {
                $files(self)
            }
            async fn write_file(
                &mut self,
                path: &str,
                data: &[u8],
                mime: Option<&str>,
            ) -> Result<FileRecord, FileError> {
                <$ty>::write_file(self, path, data, mime).await
            }
            async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, FileError> {
                <$ty>::read_file(self, path).await
            }
            async fn stat_file(&self, path: &str) -> Result<Option<FileRecord>, FileError> {
                <$ty>::stat_file(self, path).await
            }
            async fn readdir_file(&self, path: &str) -> Result<Vec<FileRecord>, FileError> {
                <$ty>::readdir_file(self, path).await
            }
            async fn unlink_file(&mut self, path: &str) -> Result<(), FileError> {
                <$ty>::unlink_file(self, path).await
            }
            async fn mkdir_file(&mut self, path: &str) -> Result<(), FileError> {
                <$ty>::mkdir_file(self, path).await
            }
            async fn rmdir_file(&mut self, path: &str) -> Result<(), FileError> {
                <$ty>::rmdir_file(self, path).await
            }
            async fn file_stats(&self) -> Result<FileStats, FileError> {
                <$ty>::file_stats(self).await
            }
            async fn grep_files(&self, pattern: &str) -> Result<(Vec<GrepMatch>, bool), FileError> {
                <$ty>::grep_files(self, pattern).await
            }
            async fn find_files(&self, pattern: &str) -> Result<(Vec<String>, bool), FileError> {
                <$ty>::find_files(self, pattern).await
            }
        }
    };
}

fn state_files<'s>(s: &'s ThreadState<'_>) -> Option<&'s ThreadFiles> {
    Some(s.files)
}

fn hook_files<'s>(s: &'s HookContext<'_>) -> Option<&'s ThreadFiles> {
    s.state.files.as_ref()
}

file_api!(ThreadState<'_>, state_files);
file_api!(HookContext<'_>, hook_files);

/// The members this module answers.
pub(crate) const MEMBERS: &[&str] = &[
    "writeFile",
    "readFile",
    "readFileChunk",
    "statFile",
    "readdirFile",
    "unlinkFile",
    "mkdirFile",
    "rmdirFile",
    "getFileStats",
    "grepFiles",
    "findFiles",
];

/// The most bytes one `writeFile` or `readFile` moves across the bridge (as base64 they are a
/// third more, inside one JSON line): larger files are read with `readFileStream`, and written
/// by Rust code or an upload.
pub(crate) const BRIDGE_BYTES: usize = 16 << 20;

fn too_big(what: &str) -> String {
    format!(
        "{what} moves at most {} MiB through code at once (too_large); read larger files with readFileStream",
        BRIDGE_BYTES >> 20
    )
}

fn text<'v>(params: &'v Value, key: &str) -> Result<&'v str, String> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` is required and is a string"))
}

fn failed(e: FileError) -> String {
    format!("{e} ({})", e.code())
}

/// Answers `member` (one of [`MEMBERS`]) with `state`.
pub(crate) async fn call<S: FileApi + ?Sized>(
    state: &mut S,
    member: &str,
    params: &Value,
) -> Result<Value, String> {
    match member {
        "writeFile" => {
            let path = text(params, "path")?;
            // Sized before anything is decoded.
            let encoded = match params.get("data") {
                Some(Value::String(s)) => s.len(),
                Some(v) => v
                    .get("$bytes")
                    .and_then(Value::as_str)
                    .map_or(0, |b| b.len() / 4 * 3),
                None => 0,
            };
            if encoded > BRIDGE_BYTES {
                return Err(too_big("writeFile"));
            }
            let data = match params.get("data") {
                Some(Value::String(s)) => s.as_bytes().to_vec(),
                Some(v) => shape::bytes_of(v)
                    .ok_or("`data` is an ArrayBuffer, a typed array, a DataView or a string")??,
                None => return Err("`data` is required".into()),
            };
            let mime = params.get("mimeType").and_then(Value::as_str);
            let record = state.write_file(path, &data, mime).await.map_err(failed)?;
            Ok(shape::file(&record))
        }
        "readFile" => {
            let path = text(params, "path")?;
            if let Some(r) = state.stat_file(path).await.map_err(failed)?
                && usize::try_from(r.size).unwrap_or(usize::MAX) > BRIDGE_BYTES
            {
                return Err(too_big("readFile"));
            }
            Ok(state
                .read_file(path)
                .await
                .map_err(failed)?
                .map_or(Value::Null, |b| shape::bytes(&b)))
        }
        "readFileChunk" => chunk(state, params).await,
        "statFile" => {
            let path = text(params, "path")?;
            Ok(state
                .stat_file(path)
                .await
                .map_err(failed)?
                .map_or(Value::Null, |r| shape::file(&r)))
        }
        "readdirFile" => {
            let path = params.get("path").and_then(Value::as_str).unwrap_or("/");
            let entries = state.readdir_file(path).await.map_err(failed)?;
            Ok(json!({ "entries": entries.iter().map(shape::file).collect::<Vec<_>>() }))
        }
        "unlinkFile" => {
            state
                .unlink_file(text(params, "path")?)
                .await
                .map_err(failed)?;
            Ok(Value::Null)
        }
        "mkdirFile" => {
            state
                .mkdir_file(text(params, "path")?)
                .await
                .map_err(failed)?;
            Ok(Value::Null)
        }
        "rmdirFile" => {
            state
                .rmdir_file(text(params, "path")?)
                .await
                .map_err(failed)?;
            Ok(Value::Null)
        }
        "getFileStats" => {
            let s = state.file_stats().await.map_err(failed)?;
            Ok(json!({ "files": s.files, "directories": s.directories, "bytes": s.bytes }))
        }
        "grepFiles" => {
            let (found, _cut) = state
                .grep_files(text(params, "pattern")?)
                .await
                .map_err(failed)?;
            Ok(json!(found))
        }
        "findFiles" => {
            let (paths, truncated) = state
                .find_files(text(params, "pattern")?)
                .await
                .map_err(failed)?;
            Ok(json!({ "paths": paths, "truncated": truncated }))
        }
        other => Err(format!("`state.{other}` is not a file member")),
    }
}

/// `readFileChunk({path, offset, updatedAt?})`: the [`CHUNK_BYTES`] of the file at `path` from
/// `offset`, as `{data: {"$bytes"}, offset, size, updatedAt}`; `null` when nothing is there. A
/// file whose `updatedAt` is no longer the one given (it was written since the first chunk) is
/// an error: a stream never mixes two versions.
async fn chunk<S: FileApi + ?Sized>(state: &mut S, params: &Value) -> Result<Value, String> {
    let path = text(params, "path")?;
    let offset = params.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let Some(record) = state.stat_file(path).await.map_err(failed)? else {
        return Ok(Value::Null);
    };
    if record.kind != crate::files::FileKind::File {
        return Err(failed(FileError::WrongKind {
            path: record.path,
            found: "directory",
        }));
    }
    if let Some(seen) = params.get("updatedAt").and_then(Value::as_i64)
        && seen != record.updated_at
    {
        return Err(format!(
            "{} was written while it was read: read it again",
            record.path
        ));
    }
    let end = offset.saturating_add(CHUNK_BYTES as u64);
    let mut data = Vec::new();
    let files = state
        .thread_files()
        .ok_or("this code runs without a thread filesystem")?;
    let mut pieces = std::pin::pin!(files.range(&record, offset, end));
    while let Some(piece) = futures::StreamExt::next(&mut pieces).await {
        data.extend(piece.map_err(failed)?);
    }
    Ok(json!({
        "data": shape::bytes(&data),
        "offset": offset,
        "size": record.size,
        "updatedAt": record.updated_at,
    }))
}
