//! Reading a project directory into [`SourceFile`]s: the only file-system access in this crate.

use std::path::{Path, PathBuf};

use crate::project::{Kind, SourceFile};

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
        path: PathBuf,
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
/// to `root`.
pub fn read_project(root: &Path) -> Result<Vec<SourceFile>, LoadError> {
    let mut out = Vec::new();
    walk(root, Path::new("agents"), &mut out)?;
    Ok(out)
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<SourceFile>) -> Result<(), LoadError> {
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
        let file_type = entry.file_type().map_err(|source| LoadError::Io {
            path: path.clone(),
            source,
        })?;
        if file_type.is_dir() {
            walk(root, &rel_path, out)?;
        } else {
            let bytes = std::fs::read(&path).map_err(|source| LoadError::Io {
                path: path.clone(),
                source,
            })?;
            let path = rel_path
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            out.push(SourceFile { path, bytes });
        }
    }
    Ok(())
}
