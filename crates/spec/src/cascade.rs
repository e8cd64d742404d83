//! Root causes before their cascades. A key nested one level too deep (`sideB` indented under
//! `sideA`) is an unknown field where it stands *and* a missing field where it belongs; the
//! issues are sorted by position, which puts the missing one (reported at the object above, on
//! an earlier line) first. Here each such pair is recognised — an `unknown_field` at `P.k` and
//! an issue at `Q.k` in the same file, `Q` an ancestor of `P` — the unknown field is said to be
//! a matter of indentation, and the issues it caused follow every other issue of their file.

use crate::issue::{Code, Issue};

/// The path above `path` (`sideA.subagents[0]` → `sideA`; `sideA` → ``).
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    Some(path.rfind(['.', '[']).map_or("", |i| &path[..i]))
}

/// `key` at `path`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Puts `issues` in the order `duet validate` lists them: by file and position, each misplaced
/// key's issue hinted and before the issues it caused. Idempotent, so a caller that adds issues
/// of its own (the builtins this build lacks, unset provider keys) orders them all again.
pub fn order(issues: &mut Vec<Issue>) {
    issues.sort_by(|a, b| {
        (&a.file, a.line, a.column, a.code).cmp(&(&b.file, b.line, b.column, b.code))
    });
    issues.dedup();
    *issues = root_causes_first(std::mem::take(issues));
}

/// `issues` (sorted by position) with each misplaced key's issue hinted and placed before the
/// issues it caused.
fn root_causes_first(mut issues: Vec<Issue>) -> Vec<Issue> {
    let mut caused = vec![false; issues.len()];
    for u in 0..issues.len() {
        if issues[u].code != Code::UnknownField {
            continue;
        }
        let (file, path) = (issues[u].file.clone(), issues[u].path.clone());
        let Some(within) = parent(&path) else {
            continue;
        };
        let key = path[within.len()..].trim_start_matches('.').to_owned();
        // Where the key belongs: an ancestor of the object it sits in, whose own issue names it.
        let mut above = parent(within);
        while let Some(level) = above {
            let belongs = join(level, &key);
            let effects: Vec<usize> = (0..issues.len())
                .filter(|&i| i != u && issues[i].file == file && issues[i].path == belongs)
                .collect();
            if !effects.is_empty() {
                let line = issues[u]
                    .line
                    .map(|l| format!(" (line {l})"))
                    .unwrap_or_default();
                let owner = if level.is_empty() {
                    "the definition itself".to_owned()
                } else {
                    format!("`{level}`")
                };
                issues[u].hint = Some(format!(
                    "`{key}` is indented under `{within}`, but it is a field of {owner}: indent it as `{within}` is (its sibling), not inside it"
                ));
                for i in effects {
                    caused[i] = true;
                    let note =
                        format!("probably a consequence of `{path}`{line}: a key indented too far");
                    issues[i].hint = Some(match issues[i].hint.take() {
                        Some(h) => format!("{note}; {h}"),
                        None => note,
                    });
                }
                break;
            }
            above = parent(level);
        }
    }
    // Stable: within a file, every root cause and independent issue first, in position order.
    let mut ranked: Vec<(usize, Issue)> = issues.into_iter().enumerate().collect();
    ranked.sort_by(|(a, x), (b, y)| (&x.file, caused[*a], *a).cmp(&(&y.file, caused[*b], *b)));
    ranked.into_iter().map(|(_, i)| i).collect()
}
