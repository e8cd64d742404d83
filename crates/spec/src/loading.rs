//! Loading a project: every file read into its definitions (`project.rs`), then the checks
//! across definitions (`validate.rs`) — here, so that the project's types do not depend on the
//! validation that reads them.

use std::collections::{BTreeMap, BTreeSet};

use crate::endpoint;
use crate::eval::Evaluator;
use crate::issue::Code;
use crate::project::{
    Listing, Loaded, Project, SourceFile, Syntax, classify_syntax, skipped_issue,
};
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
        Project::from_listing_with(listing, None)
    }

    /// As [`Project::from_listing`], with `.ts`, `.js` and `.mjs` definitions evaluated by
    /// `evaluator` (values computed, zod schemas turned into JSON Schema, provider factories
    /// into providers) instead of read statically.
    pub fn from_listing_with(listing: Listing, evaluator: Option<&dyn Evaluator>) -> Loaded {
        let Listing { mut files, skipped } = listing;
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut project = Project {
            revision: revision(&files),
            ..Project::default()
        };
        let mut issues = Vec::new();
        let evaluations = match evaluator {
            Some(evaluator) => {
                let targets: Vec<&str> = files
                    .iter()
                    .map(|f| f.path.as_str())
                    .filter(|p| classify_syntax(p) == Some(Syntax::Ts) || endpoint::is_endpoint(p))
                    .collect();
                let results = evaluator.evaluate(&files, &targets);
                targets
                    .iter()
                    .map(|t| (*t).to_owned())
                    .zip(results)
                    .collect::<BTreeMap<_, _>>()
            }
            None => BTreeMap::new(),
        };
        for file in &files {
            let evaluation = evaluations.get(&file.path);
            if endpoint::is_endpoint(&file.path) {
                let text = String::from_utf8_lossy(&file.bytes);
                let (def, found) = endpoint::check(&file.path, &text, evaluation);
                issues.extend(found);
                project.endpoints.extend(def);
            } else if crate::code::is_config(&file.path) {
                let text = String::from_utf8_lossy(&file.bytes);
                project.code = crate::code::decode_config(&file.path, &text, &mut issues);
            } else {
                project.load_file(file, evaluation, &mut issues);
            }
        }
        // A helper a definition imports is part of the project, not a stray file (one that
        // threw while the definition was evaluated was imported too).
        let imported: BTreeSet<&str> = evaluations
            .values()
            .flat_map(|r| match r {
                Ok(e) => e.imports.iter().map(String::as_str).collect::<Vec<_>>(),
                Err(e) => e.file.as_deref().into_iter().collect(),
            })
            .collect();
        issues.retain(|i| {
            i.code != Code::UnsupportedFile
                || i.file.as_deref().is_none_or(|f| !imported.contains(f))
        });
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
