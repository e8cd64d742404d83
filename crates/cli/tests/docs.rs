//! The repository's documents stay true to what compiles and what exists: every Rust block of the
//! README and `docs/` is a region of an example that CI compiles and runs (`examples/`, between
//! `// README: begin` and `// README: end`), and every relative link of the Markdown files
//! reaches a file, and a heading when it names one. (The curl walkthrough is checked by
//! `scripts/walkthrough`, which runs the README's block itself.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced blocks of a Markdown text: (the line of the opening fence, its info string, its
/// body). An unclosed fence runs to the end.
fn fences(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                let info = line.trim_start().trim_start_matches('`').trim().to_owned();
                open = Some((i + 1, info, Vec::new()));
            }
            (Some(_), true) => {
                if let Some((at, info, body)) = open.take() {
                    out.push((at, info, body.join("\n")));
                }
            }
            (Some((_, _, body)), false) => body.push(line),
            (None, false) => {}
        }
    }
    if let Some((at, info, body)) = open {
        out.push((at, info, body.join("\n")));
    }
    out
}

/// `lines` without the indentation they share (a region may be the inside of a function).
fn dedent(lines: &[&str]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The regions of `examples/` the README may show: the lines between `// README: begin` and
/// `// README: end`, by file, without
/// their common indentation.
fn regions() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut dirs = vec![root().join("examples")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("examples/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for file in files {
        let text = read(&file);
        let mut region: Option<Vec<&str>> = None;
        for line in text.lines() {
            match (line.trim(), &mut region) {
                ("// README: begin", None) => region = Some(Vec::new()),
                ("// README: end", Some(lines)) => {
                    out.push((file.display().to_string(), dedent(lines)));
                    region = None;
                }
                (_, Some(lines)) => lines.push(line),
                _ => {}
            }
        }
    }
    out
}

/// The Markdown files whose Rust blocks are shown to readers (the crates' READMEs are doctests).
fn documents() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

#[test]
fn every_rust_block_of_the_readme_is_an_examples_region() {
    let regions = regions();
    assert!(
        !regions.is_empty(),
        "examples/ has README regions (`// README: begin` … `// README: end`)"
    );
    let mut problems = Vec::new();
    let mut shown = 0;
    for doc in [root().join("README.md")] {
        for (line, info, body) in fences(&read(&doc)) {
            if !info.split(',').any(|t| t.trim() == "rust") {
                continue;
            }
            shown += 1;
            if !regions.iter().any(|(_, region)| *region == body) {
                problems.push(format!(
                    "{}:{line}: this Rust block is not a README region of examples/ (copy the \
                     region between `// README: begin` and `// README: end` of the example it \
                     shows, exactly; the example is what CI compiles and runs)",
                    doc.display()
                ));
            }
        }
    }
    assert!(shown > 0, "the README shows Rust");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readmes_dependencies_name_every_crate_its_rust_uses() {
    let text = read(&root().join("README.md"));
    let blocks = fences(&text);
    let mut declared = BTreeSet::new();
    for (_, _, body) in blocks.iter().filter(|(_, info, _)| info == "toml") {
        let Ok(manifest) = body.parse::<toml::Table>() else {
            continue;
        };
        if let Some(deps) = manifest.get("dependencies").and_then(toml::Value::as_table) {
            declared.extend(deps.keys().map(|k| k.replace('-', "_")));
        }
    }
    assert!(
        declared.contains("duet"),
        "the README shows the Cargo.toml lines an embedder needs"
    );
    // A path's first segment in lower case is a crate (types and variants are capitalised).
    let mut used = BTreeSet::new();
    for (_, _, body) in blocks
        .iter()
        .filter(|(_, i, _)| i.split(',').any(|t| t == "rust"))
    {
        for (at, _) in body.match_indices("::") {
            let start = body[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &body[start..at];
            let preceded_by_path = body[..start].ends_with("::");
            if !preceded_by_path && name.starts_with(|c: char| c.is_ascii_lowercase()) {
                used.insert(name.to_owned());
            }
        }
    }
    let builtin = ["std", "core", "alloc", "crate", "self", "super"];
    let missing: Vec<&String> = used
        .iter()
        .filter(|u| !builtin.contains(&u.as_str()) && !declared.contains(*u))
        .collect();
    assert!(
        missing.is_empty(),
        "the README's Rust names crates its Cargo.toml lines do not: {missing:?}"
    );
}

#[test]
fn no_document_shows_rust_that_nothing_compiles() {
    // docs/*.md: compiled as doctests by the crate they document (`#[cfg(doctest)]` include).
    let compiled: BTreeSet<&str> = ["a2a.md"].into_iter().collect();
    let mut problems = Vec::new();
    for doc in documents().iter().skip(1) {
        let name = doc
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (line, info, _) in fences(&read(doc)) {
            let rust = info.split(',').any(|t| t.trim() == "rust") || info.is_empty();
            if rust && !compiled.contains(name.as_str()) {
                problems.push(format!(
                    "{}:{line}: a Rust block (or a fence without a language) in a document no \
                     crate compiles: include the document as a doctest, or show an example's \
                     region",
                    doc.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c == ' ' {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// A Markdown file's heading anchors (outside fenced blocks), duplicates numbered as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The link targets of a Markdown text outside fenced blocks and code spans: `](target)`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Code spans are not links: drop them first.
        let mut plain = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                plain.push(c);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push((i + 1, target.to_owned()));
            rest = &rest[end..];
        }
    }
    out
}

/// Every Markdown file of the repository outside build output and dependencies.
fn markdown_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder").flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                // A test's Markdown fixtures are inputs, not documents.
                let skipped = ["target", "node_modules", "tests"].contains(&name.as_str());
                if !name.starts_with('.') && !skipped {
                    dirs.push(path);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_relative_link_reaches_a_file_and_heading() {
    let files = markdown_files();
    assert!(files.len() > 3, "the repository's Markdown files");
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = read(file);
        let dir = file.parent().unwrap_or(Path::new("."));
        for (line, target) in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let goal = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            let at = format!("{}:{line}: `{target}`", file.display());
            if !goal.exists() {
                problems.push(format!("{at}: no such file"));
                continue;
            }
            if let Some(anchor) = anchor
                && goal.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&goal)).contains(anchor)
            {
                problems.push(format!("{at}: no heading with that anchor"));
            }
        }
    }
    assert!(checked > 5, "the documents link to each other");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_link_check_reads_anchors_and_links_as_github_does() {
    let text = "# duet\n## The server: `duet serve`\n```\n# not a heading\n```\n## Install\n## Install\n\
                see [the server](#the-server-duet-serve), `[not](a-link)` and ![img](docs/x.png \"t\")\n";
    let found = anchors(text);
    for anchor in ["duet", "the-server-duet-serve", "install", "install-1"] {
        assert!(found.contains(anchor), "{anchor}: {found:?}");
    }
    assert!(!found.contains("not-a-heading"));
    let targets: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, ["#the-server-duet-serve", "docs/x.png"]);
}
