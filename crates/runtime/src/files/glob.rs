//! `findFiles` patterns: `*` (any run of characters but `/`), `**` (any run, `/` included),
//! `?` (one character but `/`), everything else literal. A pattern with no `/` matches a file's
//! name; one with a `/` matches its whole path (a leading `/` optional).

use crate::FileError;

/// The longest pattern.
const MAX_PATTERN: usize = 512;

/// A checked pattern.
#[derive(Clone, Debug)]
pub struct Glob {
    pattern: Vec<char>,
    by_name: bool,
}

impl Glob {
    /// `pattern`, checked.
    pub fn new(pattern: &str) -> Result<Self, FileError> {
        if pattern.is_empty() || pattern.len() > MAX_PATTERN {
            return Err(FileError::Pattern(
                "a pattern is 1 to 512 characters".into(),
            ));
        }
        if pattern.contains('\0') {
            return Err(FileError::Pattern("a pattern holds no NUL".into()));
        }
        let by_name = !pattern.contains('/');
        let trimmed = pattern.strip_prefix('/').unwrap_or(pattern);
        Ok(Glob {
            pattern: trimmed.chars().collect(),
            by_name,
        })
    }

    /// Whether normalised `path` matches.
    pub fn matches(&self, path: &str) -> bool {
        let subject = if self.by_name {
            crate::files::path::name(path)
        } else {
            path.strip_prefix('/').unwrap_or(path)
        };
        let text: Vec<char> = subject.chars().collect();
        matches(&self.pattern, &text)
    }
}

/// Whether text `t` matches pattern `p` (no backtracking: one pass per pattern character).
fn matches(p: &[char], t: &[char]) -> bool {
    // Dynamic programming over (pattern, text) positions: O(|p|·|t|), bounded by the caps.
    let (n, m) = (p.len(), t.len());
    let mut row = vec![false; m + 1];
    row[0] = true;
    let mut i = 0;
    while i < n {
        let mut next = vec![false; m + 1];
        if p[i] == '*' && p.get(i + 1) == Some(&'*') {
            i += 2;
            if p.get(i) == Some(&'/') {
                // `**/`: zero or more whole segments — where the prefix matched, or just past a
                // `/` after it (`a/**/b` matches `a/b` and `a/x/b`, never `a/xb`).
                let mut seen = false;
                for j in 0..=m {
                    next[j] = row[j] || (seen && j > 0 && t[j - 1] == '/');
                    seen |= row[j];
                }
                i += 1;
            } else {
                // `**` at the end or before other characters: any run, `/` included.
                let mut seen = false;
                for j in 0..=m {
                    seen |= row[j];
                    next[j] = seen;
                }
            }
        } else if p[i] == '*' {
            let mut run = false;
            for j in 0..=m {
                run = row[j] || (run && j > 0 && t[j - 1] != '/');
                next[j] = run;
            }
            i += 1;
        } else {
            for j in 1..=m {
                next[j] = row[j - 1]
                    && (if p[i] == '?' {
                        t[j - 1] != '/'
                    } else {
                        p[i] == t[j - 1]
                    });
            }
            i += 1;
        }
        row = next;
    }
    row[m]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, path: &str) -> bool {
        Glob::new(p).map(|g| g.matches(path)).unwrap_or(false)
    }

    #[test]
    fn globs() {
        assert!(m("*.pdf", "/attachments/a.pdf"));
        assert!(!m("*.pdf", "/attachments/a.pdfx"));
        assert!(m("attachments/*.pdf", "/attachments/a.pdf"));
        assert!(!m("/*.pdf", "/attachments/a.pdf"));
        assert!(m("**/*.pdf", "/a/b/c.pdf"));
        assert!(m("/a/**/c.pdf", "/a/c.pdf"));
        assert!(m("/a/**", "/a/b/c"));
        assert!(m("r?port.md", "/x/report.md"));
        assert!(!m("a*", "/b/a/x"));
        assert!(!m("**/report.pdf", "/x/myreport.pdf"));
        assert!(m("**/report.pdf", "/report.pdf"));
        assert!(m("**/report.pdf", "/x/y/report.pdf"));
        assert!(!m("/a/**/b", "/a/xb"));
        assert!(m("/a/**/b", "/a/x/y/b"));
        assert!(Glob::new("").is_err());
    }
}
