//! Thread file paths: one normal form, confined to the thread. A path is absolute (`/a/b.txt`;
//! a relative one is taken from `/`), its segments joined by `/`, with no `.` or empty segment.
//! Refused outright rather than resolved: `..`, NUL and control characters, backslashes,
//! invisible format characters (zero-width, bidi overrides), characters that look like a slash,
//! a backslash or a dot, and percent-encoded dots, slashes, backslashes and NUL; paths over
//! [`MAX_PATH_BYTES`], segments over [`MAX_SEGMENT_BYTES`], depth over [`MAX_DEPTH`]. The file
//! table is keyed by this form, so no path reaches anything but its own thread's rows; the
//! directory blob backend names files by content hash, never by path.

use crate::FileError;

/// The longest normalised path, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// The longest segment, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;
/// The most segments.
pub const MAX_DEPTH: usize = 32;

/// Characters that look like a path separator or a dot and are refused in any path.
const LOOK_ALIKES: &[char] = &[
    '\u{2215}', // division slash
    '\u{2044}', // fraction slash
    '\u{FF0F}', // fullwidth solidus
    '\u{29F8}', // big solidus
    '\u{2571}', // box drawings diagonal
    '\u{FF3C}', // fullwidth reverse solidus
    '\u{FE68}', // small reverse solidus
    '\u{2216}', // set minus
    '\u{29F5}', // reverse solidus operator
    '\u{FF0E}', // fullwidth full stop
    '\u{2024}', // one dot leader
    '\u{2025}', // two dot leader
    '\u{FE52}', // small full stop
];

/// Percent-encodings refused in a segment (lowercase; matched without case).
const ENCODED: &[&str] = &["%2e", "%2f", "%5c", "%00"];

fn invalid(raw: &str, reason: &'static str) -> FileError {
    FileError::InvalidPath {
        path: raw.chars().take(200).collect(),
        reason,
    }
}

/// Whether `c` is a format character that changes how a name looks without being seen.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// The normal form of `raw`, a file's path; `/` itself is refused (it is no file).
pub fn normalize(raw: &str) -> Result<String, FileError> {
    let path = normalize_dir(raw)?;
    if path == "/" {
        return Err(invalid(raw, "the root is a directory, not a file"));
    }
    Ok(path)
}

/// The normal form of `raw`, a directory's path (`/` allowed).
pub fn normalize_dir(raw: &str) -> Result<String, FileError> {
    if raw.is_empty() {
        return Err(invalid(raw, "it is empty"));
    }
    if raw.len() > MAX_PATH_BYTES * 4 {
        return Err(invalid(raw, "it is too long"));
    }
    for c in raw.chars() {
        if c == '\0' {
            return Err(invalid(raw, "it holds a NUL character"));
        }
        if c.is_control() {
            return Err(invalid(raw, "it holds a control character"));
        }
        if c == '\\' {
            return Err(invalid(raw, "it holds a backslash (the separator is `/`)"));
        }
        if invisible(c) {
            return Err(invalid(raw, "it holds an invisible formatting character"));
        }
        if LOOK_ALIKES.contains(&c) {
            return Err(invalid(
                raw,
                "it holds a character that looks like `/`, `\\` or `.`",
            ));
        }
    }
    let mut out = String::with_capacity(raw.len() + 1);
    let mut depth = 0;
    for segment in raw.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return Err(invalid(raw, "`..` would leave the directory")),
            s => {
                let lower = s.to_ascii_lowercase();
                if ENCODED.iter().any(|e| lower.contains(e)) {
                    return Err(invalid(
                        raw,
                        "it holds a percent-encoded dot, slash, backslash or NUL",
                    ));
                }
                if s.len() > MAX_SEGMENT_BYTES {
                    return Err(invalid(raw, "a segment is longer than 255 bytes"));
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(invalid(raw, "it is more than 32 directories deep"));
                }
                out.push('/');
                out.push_str(s);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    if out.len() > MAX_PATH_BYTES {
        return Err(invalid(raw, "it is longer than 1024 bytes"));
    }
    Ok(out)
}

/// The directory holding normalised `path` (`/` for a top-level entry and for `/`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last segment of normalised `path` (empty for `/`).
pub fn name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

/// Every directory above normalised `path`, outermost first, `/` left out
/// (`/a/b/c.txt` → `/a`, `/a/b`).
pub fn ancestors(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut dir = parent(path);
    while dir != "/" {
        out.push(dir);
        dir = parent(dir);
    }
    out.reverse();
    out
}

/// Whether normalised `path` is `dir` or inside it.
pub fn is_within(path: &str, dir: &str) -> bool {
    dir == "/"
        || path == dir
        || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// `name` as a single safe segment: separators, `..`, control and look-alike characters replaced
/// by `_`, cut to 255 bytes on a character boundary; `file` when nothing is left. For names that
/// come from outside (an upload's file name, an A2A part's `name`).
pub fn safe_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() || invisible(c) || LOOK_ALIKES.contains(&c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    for e in ENCODED {
        while let Some(i) = out.to_ascii_lowercase().find(e) {
            out.replace_range(i..i + 3, "_");
        }
    }
    if out.chars().all(|c| c == '.') {
        out = String::new();
    }
    while out.len() > MAX_SEGMENT_BYTES {
        out.pop();
    }
    if out.trim().is_empty() {
        "file".to_owned()
    } else {
        out
    }
}

/// `name` with `-n` before its extension (`report.pdf`, 2 → `report-2.pdf`; a leading dot is
/// no extension: `.env` → `.env-2`), for a name already taken; kept within a segment's length.
pub fn numbered(name: &str, n: u32) -> String {
    let suffix = format!("-{n}");
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => name.split_at(i),
        _ => (name, ""),
    };
    let mut stem = stem.to_owned();
    while stem.len() + suffix.len() + ext.len() > MAX_SEGMENT_BYTES && !stem.is_empty() {
        stem.pop();
    }
    let mut out = format!("{stem}{suffix}{ext}");
    // An extension longer than the segment allows is cut too.
    while out.len() > MAX_SEGMENT_BYTES {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names() {
        for (name, n, want) in [
            ("report.pdf", 2, "report-2.pdf"),
            ("a.tar.gz", 3, "a.tar-3.gz"),
            (".env", 2, ".env-2"),
            ("plain", 10, "plain-10"),
        ] {
            assert_eq!(numbered(name, n), want);
        }
        assert!(numbered(&"x".repeat(255), 2).len() <= MAX_SEGMENT_BYTES);
        assert!(numbered(&format!("a.{}", "x".repeat(253)), 2).len() <= MAX_SEGMENT_BYTES);
    }

    #[test]
    fn normal_forms() {
        assert_eq!(normalize("/a/b.txt").ok().as_deref(), Some("/a/b.txt"));
        assert_eq!(normalize("a//./b.txt").ok().as_deref(), Some("/a/b.txt"));
        assert_eq!(normalize_dir("/").ok().as_deref(), Some("/"));
        assert_eq!(normalize_dir("/a/").ok().as_deref(), Some("/a"));
        assert!(normalize("/").is_err());
    }

    #[test]
    fn refusals() {
        for bad in [
            "/a/../b",
            "..",
            "/a\0b",
            "/a\\b",
            "/a/%2e%2e/b",
            "/a%2Fb",
            "/a\u{2215}b",
            "/a\u{FF0E}\u{FF0E}/b",
            "/a\u{202E}txt.exe",
            "/a\nb",
            "",
        ] {
            assert!(normalize(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(normalize(&format!("/{}", "a".repeat(256))).is_err());
        assert!(normalize(&"/a".repeat(33)).is_err());
    }

    #[test]
    fn relations() {
        assert_eq!(parent("/a/b/c"), "/a/b");
        assert_eq!(parent("/a"), "/");
        assert_eq!(name("/a/b.txt"), "b.txt");
        assert_eq!(ancestors("/a/b/c.txt"), vec!["/a", "/a/b"]);
        assert!(is_within("/a/b", "/a"));
        assert!(!is_within("/ab", "/a"));
        assert_eq!(safe_name("../x/y.pdf"), ".._x_y.pdf");
        assert_eq!(safe_name(".."), "file");
    }
}
