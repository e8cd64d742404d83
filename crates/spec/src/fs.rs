//! Reading a project directory into [`SourceFile`]s: the only file-system access in this crate.
//!
//! Only regular files are read, and only after their metadata says they are small enough: a
//! named pipe, a socket, a device or a symbolic link to a folder is never opened (opening a pipe
//! would wait for a writer forever), and a file over [`MAX_FILE_BYTES`] is never read. Each
//! becomes a [`Skipped`] entry, which loading turns into an issue, and the rest of the project
//! is read on. A symbolic link to a regular file is followed: linking a shared definition into
//! a project is ordinary, and the target is read like any file.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::project::{Kind, Listing, MAX_FILE_BYTES, SkipReason, Skipped, SourceFile};

/// Why a directory could not be read as a project.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Neither the directory nor its `agents/` child looks like a Standard Agents project.
    #[error("{0} is not a Standard Agents project: it has no `agents/` folder and is not one")]
    NotAProject(PathBuf),
    /// The file system refused.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file or folder that could not be read.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
}

/// The project root for `dir`: `dir` itself when it holds `agents/`, or its parent when `dir` is
/// that `agents/` folder (it holds kind folders such as `prompts/` but no `agents/agents/`).
pub fn project_root(dir: &Path) -> Result<PathBuf, LoadError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Io { path, source }
    };
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    if !meta.is_dir() {
        return Err(LoadError::NotAProject(dir.to_path_buf()));
    }
    let has_kind_folders = |d: &Path| Kind::ALL.iter().any(|k| d.join(k.folder()).is_dir());
    let agents = dir.join("agents");
    if agents.is_dir() && (has_kind_folders(&agents) || !has_kind_folders(dir)) {
        return Ok(dir.to_path_buf());
    }
    if has_kind_folders(dir) {
        let abs = std::fs::canonicalize(dir).map_err(io(dir))?;
        if let Some(parent) = abs.parent()
            && abs.file_name().is_some_and(|n| n == "agents")
        {
            return Ok(parent.to_path_buf());
        }
    }
    Err(LoadError::NotAProject(dir.to_path_buf()))
}

/// Every file under `ROOT/agents/` (dot files and `node_modules` skipped), with paths relative
/// to `root`, and every entry that was not read. `Err` only when a folder cannot be listed.
pub fn read_project(root: &Path) -> Result<Listing, LoadError> {
    let mut out = Listing::default();
    walk(root, Path::new("agents"), &mut out)?;
    Ok(out)
}

fn walk(root: &Path, rel: &Path, out: &mut Listing) -> Result<(), LoadError> {
    let dir = root.join(rel);
    let entries = std::fs::read_dir(&dir).map_err(|source| LoadError::Io {
        path: dir.clone(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| LoadError::Io {
            path: dir.clone(),
            source,
        })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        let rel_path = rel.join(&*name);
        let path = root.join(&rel_path);
        let shown = rel_path
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let mut skip = |reason| {
            out.skipped.push(Skipped {
                path: shown.clone(),
                reason,
            });
        };
        // The entry itself, not what a link points at.
        let file_type = match entry.file_type() {
            Ok(t) => t,
            Err(e) => {
                skip(SkipReason::Unreadable(e.to_string()));
                continue;
            }
        };
        if file_type.is_dir() {
            walk(root, &rel_path, out)?;
            continue;
        }
        // Metadata without opening anything: a link's target's, else the entry's own.
        let meta = if file_type.is_symlink() {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => m,
                Ok(m) => {
                    let what = describe(m.file_type());
                    skip(SkipReason::NotAFile(format!("a symbolic link to {what}")));
                    continue;
                }
                Err(e) => {
                    skip(SkipReason::NotAFile(format!(
                        "a symbolic link whose target cannot be reached ({e})"
                    )));
                    continue;
                }
            }
        } else if file_type.is_file() {
            match entry.metadata() {
                Ok(m) => m,
                Err(e) => {
                    skip(SkipReason::Unreadable(e.to_string()));
                    continue;
                }
            }
        } else {
            skip(SkipReason::NotAFile(describe(file_type)));
            continue;
        };
        if meta.len() > MAX_FILE_BYTES as u64 {
            skip(SkipReason::TooLarge(meta.len()));
            continue;
        }
        match read_small(&path) {
            Ok(bytes) => out.files.push(SourceFile { path: shown, bytes }),
            Err(e) => skip(SkipReason::Unreadable(e.to_string())),
        }
    }
    Ok(())
}

/// Reads a regular file, at most one byte past [`MAX_FILE_BYTES`] (a file that grew since its
/// metadata was read is then refused by size when it is loaded, not read whole).
fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// What an entry that is not a regular file is, in words.
fn describe(t: std::fs::FileType) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a named pipe (FIFO)".into();
        }
        if t.is_socket() {
            return "a socket".into();
        }
        if t.is_block_device() {
            return "a block device".into();
        }
        if t.is_char_device() {
            return "a character device".into();
        }
    }
    if t.is_dir() {
        "a folder (links to folders are not followed)".into()
    } else if t.is_symlink() {
        "a symbolic link".into()
    } else {
        "not a regular file".into()
    }
}
