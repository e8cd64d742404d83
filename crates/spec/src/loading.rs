//! Loading a project: every file read into its definitions (`project.rs`), then the checks
//! across definitions (`validate.rs`) — here, so that the project's types do not depend on the
//! validation that reads them.

use crate::project::{Listing, Loaded, Project, SourceFile, skipped_issue};
use crate::validate;

impl Project {
    /// Loads and validates the definitions among `files`. Paths not under `agents/` are ignored.
    pub fn from_files(files: impl IntoIterator<Item = SourceFile>) -> Loaded {
        Project::from_listing(Listing {
            files: files.into_iter().collect(),
            skipped: Vec::new(),
        })
    }

    /// As [`Project::from_files`], with an issue for each entry that was not read (what
    /// [`crate::fs::read_project`] gives).
    pub fn from_listing(listing: Listing) -> Loaded {
        let Listing { mut files, skipped } = listing;
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut project = Project {
            revision: revision(&files),
            ..Project::default()
        };
        let mut issues = Vec::new();
        for file in &files {
            project.load_file(file, &mut issues);
        }
        for entry in &skipped {
            issues.extend(skipped_issue(entry));
        }
        issues.extend(validate::check(&project));
        crate::cascade::order(&mut issues);
        Loaded { project, issues }
    }
}

/// The revision of `files` (sorted by path): SHA-256 over each file's path and bytes, each
/// length-prefixed so no two listings hash alike, as 12 hex digits.
fn revision(files: &[SourceFile]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for file in files.iter().filter(|f| f.path.starts_with("agents/")) {
        for part in [file.path.as_bytes(), &file.bytes] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
    }
    hash.finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}
