//! The thread filesystem as data (issue #34): what a file of a thread is ([`FileRecord`]), what a
//! write does to the file table ([`FileWrite`]), the limits a thread's files keep
//! ([`FileLimits`]), what a message or a tool result carries of a file ([`AttachmentRef`]), and
//! the errors of the file API ([`FileError`]). Paths are normalised and confined by
//! [`path::normalize`]; content is cut into content-addressed chunks ([`chunk`]) that a
//! [`crate::store::BlobStore`] keeps, so a copy to another thread writes rows, not bytes.
//!
//! A leaf: it names no engine or API module.

pub mod chunk;
pub mod glob;
pub mod path;
pub mod sniff;

use serde::{Deserialize, Serialize};

/// The standard area of a thread's filesystem, where attachments live (`/attachments/...`).
pub const ATTACHMENTS: &str = "/attachments";

/// The attachment paths `value` names (a tool's `attachments`, a binding's
/// `attachmentsProperty`): a string, or an array of strings (anything else: none).
pub fn attachment_paths(value: Option<&serde_json::Value>) -> Vec<String> {
    match value {
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(serde_json::Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The lines a message's or tool result's text ends with to name its attachments (empty for
/// none): `\n\nAttachments:` then `- PATH` each.
pub fn attachment_list(attachments: &[AttachmentRef]) -> String {
    if attachments.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n\nAttachments:");
    for a in attachments {
        out.push_str("\n- ");
        out.push_str(&a.path);
    }
    out
}

/// A file a tool's result returns (spec §8 `ToolResult.attachments`): a file of the thread
/// (an `AttachmentRef`, by its path), or new content (a `ToolAttachment`, its `data` decoded),
/// stored under `/attachments/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReturnedFile {
    /// A file the thread has (the tool wrote it, or it was there).
    Path(String),
    /// Content to store as `/attachments/<name>`.
    Data {
        /// The file's name (made safe when stored).
        name: String,
        /// The type the tool declared.
        mime: Option<String>,
        /// The bytes.
        data: Vec<u8>,
    },
}

/// Whether an entry is a file or a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// A file: bytes in chunks.
    File,
    /// A directory (made by `mkdirFile`, or as the ancestor of a file written).
    Directory,
}

impl FileKind {
    /// The stored spelling (`file`, `directory`).
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Directory => "directory",
        }
    }

    /// The kind a stored spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "file" => Some(FileKind::File),
            "directory" => Some(FileKind::Directory),
            _ => None,
        }
    }
}

/// One entry of a thread's filesystem, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileRecord {
    /// The normalised absolute path (`/attachments/report.pdf`).
    pub path: String,
    /// File or directory.
    pub kind: FileKind,
    /// Bytes (0 for a directory).
    pub size: i64,
    /// The type duet serves and sends it as: sniffed from the bytes when they say, else the
    /// writer's declared type, else by extension, else `application/octet-stream` (`None` for a
    /// directory).
    pub mime_type: Option<String>,
    /// The type the writer declared, kept apart (a declared `image/png` whose bytes are a PDF
    /// is served as a PDF, and the lie stays visible).
    pub declared_type: Option<String>,
    /// The content's chunks in order: the SHA-256 of each, hex. Every chunk but the last is
    /// [`chunk::CHUNK_BYTES`] long.
    pub chunks: Vec<String>,
    /// Free metadata kept with the file (`width`, `height`, `description`, where a copy came from).
    pub meta: serde_json::Value,
    /// When it was first written (ms since the epoch).
    pub created_at: i64,
    /// When it was last written (ms since the epoch).
    pub updated_at: i64,
}

impl FileRecord {
    /// A directory at `path`, made at `at`.
    pub fn directory(path: String, at: i64) -> Self {
        FileRecord {
            path,
            kind: FileKind::Directory,
            size: 0,
            mime_type: None,
            declared_type: None,
            chunks: Vec::new(),
            meta: serde_json::Value::Null,
            created_at: at,
            updated_at: at,
        }
    }

    /// The directory holding it (`/` for a top-level entry).
    pub fn parent(&self) -> &str {
        path::parent(&self.path)
    }

    /// Its last path segment.
    pub fn name(&self) -> &str {
        path::name(&self.path)
    }

    /// What a message or tool result carries of it.
    pub fn attachment(&self) -> AttachmentRef {
        let meta = |k: &str| self.meta.get(k);
        AttachmentRef {
            path: self.path.clone(),
            name: self.name().to_owned(),
            mime_type: self
                .mime_type
                .clone()
                .unwrap_or_else(|| sniff::OCTET_STREAM.to_owned()),
            size: self.size,
            width: meta("width").and_then(serde_json::Value::as_i64),
            height: meta("height").and_then(serde_json::Value::as_i64),
            description: meta("description")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        }
    }
}

/// One change to a thread's file table. A commit's writes apply in order, in its transaction;
/// so do [`crate::store::FileStore::write_files`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileWrite {
    /// Create or replace the entry at `record.path` (its chunks already in the blob store).
    Put(FileRecord),
    /// Create the directory `record.path` if nothing is there (an existing entry is kept).
    Mkdir(FileRecord),
    /// Remove the entry at this path, if any.
    Remove(String),
}

impl FileWrite {
    /// The path it writes.
    pub fn path(&self) -> &str {
        match self {
            FileWrite::Put(r) | FileWrite::Mkdir(r) => &r.path,
            FileWrite::Remove(p) => p,
        }
    }
}

/// A listing of a thread's files ([`crate::store::FileStore::files`]), by path, keyset-paged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileQuery {
    /// Only the entries directly inside this directory (`/` for the top level).
    pub dir: Option<String>,
    /// Only the entries under this directory, at any depth (`/` for all).
    pub under: Option<String>,
    /// Only files (no directories).
    pub files_only: bool,
    /// Only entries whose path sorts after this one.
    pub after: Option<String>,
    /// At most this many (0: no limit).
    pub limit: usize,
}

/// What a thread's filesystem holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileStats {
    /// Files.
    pub files: i64,
    /// Directories.
    pub directories: i64,
    /// The files' bytes, summed.
    pub bytes: i64,
}

/// The limits a thread's files keep, checked before anything is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLimits {
    /// Bytes in one file.
    pub max_file_bytes: u64,
    /// Bytes in all of one thread's files.
    pub max_thread_bytes: u64,
    /// Entries (files and directories) in one thread.
    pub max_entries: u64,
    /// Files `grepFiles` reads, and bytes of each.
    pub grep_files: usize,
    /// Bytes of one file `grepFiles` reads (longer files are read this far).
    pub grep_bytes: usize,
    /// Matches `grepFiles` returns, and paths `findFiles` returns.
    pub max_results: usize,
}

impl Default for FileLimits {
    /// 256 MiB a file, 1 GiB and 10,000 entries a thread; grep reads 1,000 files, 1 MiB each;
    /// 500 results.
    fn default() -> Self {
        FileLimits {
            max_file_bytes: 256 << 20,
            max_thread_bytes: 1 << 30,
            max_entries: 10_000,
            grep_files: 1_000,
            grep_bytes: 1 << 20,
            max_results: 500,
        }
    }
}

/// What a message, a queued message or a tool result carries of a thread file: the spec's
/// `AttachmentRef` (`type: 'file'`; its `id` is the path).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentRef {
    /// The file's path in the thread that holds the message.
    pub path: String,
    /// Its last path segment.
    pub name: String,
    /// Its type.
    pub mime_type: String,
    /// Bytes.
    pub size: i64,
    /// An image's width, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<i64>,
    /// An image's height, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<i64>,
    /// A description, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The file API's failures, by kind; the text says which path and why, for a person or a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The path is not one a thread file may have (`..`, NUL, a backslash, too long, …).
    #[error("invalid path `{path}`: {reason}")]
    InvalidPath {
        /// The path as given (cut to 200 characters).
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// Nothing at the path.
    #[error("no such file or directory: {0}")]
    NotFound(String),
    /// A directory where a file was meant, or the reverse.
    #[error("{path} is a {found}")]
    WrongKind {
        /// The path.
        path: String,
        /// What is there (`file`, `directory`).
        found: &'static str,
    },
    /// A directory that holds entries cannot be removed.
    #[error("directory not empty: {0}")]
    NotEmpty(String),
    /// A limit would be passed; nothing was written.
    #[error("{what}: {size} bytes is over the limit of {limit}")]
    TooLarge {
        /// Which limit (`file`, `thread's files`).
        what: &'static str,
        /// The size it would reach.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The thread holds as many entries as it may.
    #[error("the thread holds {limit} files and directories, its limit")]
    TooMany {
        /// The limit.
        limit: u64,
    },
    /// A pattern (`grepFiles`, `findFiles`) that cannot be used.
    #[error("invalid pattern: {0}")]
    Pattern(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::StoreError),
}

impl FileError {
    /// A short code for the kind (`invalid_path`, `not_found`, `wrong_kind`, `not_empty`,
    /// `too_large`, `too_many`, `invalid_pattern`, `store`), for HTTP bodies and tool errors.
    pub fn code(&self) -> &'static str {
        match self {
            FileError::InvalidPath { .. } => "invalid_path",
            FileError::NotFound(_) => "not_found",
            FileError::WrongKind { .. } => "wrong_kind",
            FileError::NotEmpty(_) => "not_empty",
            FileError::TooLarge { .. } => "too_large",
            FileError::TooMany { .. } => "too_many",
            FileError::Pattern(_) => "invalid_pattern",
            FileError::Store(_) => "store",
        }
    }
}
