//! Repository rules that no compiler checks: the crate dependency arrows of ARCHITECTURE.md
//! (and which crates may name sqlx, axum, reqwest and rmcp), and a `//!` line opening every
//! Rust file.

use std::path::{Path, PathBuf};

/// Which workspace crates each crate may depend on (normal dependencies).
const ALLOWED: &[(&str, &[&str])] = &[
    ("spec", &[]),
    ("a2a", &[]),
    ("runtime", &["duet-spec"]),
    ("store", &["duet-runtime", "duet-spec"]),
    ("models", &["duet-runtime", "duet-spec"]),
    ("handlers", &["duet-runtime", "duet-spec"]),
    ("tools", &["duet-runtime", "duet-spec"]),
    (
        "server",
        &[
            "duet-a2a",
            "duet-runtime",
            "duet-spec",
            "duet-store",
            "duet-models",
            "duet-handlers",
        ],
    ),
    (
        "cli",
        &[
            "duet-runtime",
            "duet-spec",
            "duet-store",
            "duet-models",
            "duet-handlers",
            "duet-server",
            "duet-tools",
        ],
    ),
];

/// Crates that only their owners may name.
const OWNED: &[(&str, &[&str])] = &[
    ("sqlx", &["store"]),
    ("axum", &["a2a", "server"]),
    ("reqwest", &["models", "tools", "a2a", "server"]),
    ("rmcp", &["tools"]),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deps(manifest: &toml::Value) -> Vec<String> {
    manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn dependency_arrows_hold() {
    let mut problems = Vec::new();
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/");
    let mut seen = 0;
    for entry in crates {
        let dir = entry.expect("entry").path();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        let manifest: toml::Value = toml::from_str(&text).expect("valid TOML");
        let package = manifest["package"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if package != format!("duet-{name}") {
            problems.push(format!(
                "crates/{name} is named `{package}`, not `duet-{name}`"
            ));
        }
        let Some((_, allowed)) = ALLOWED.iter().find(|(c, _)| *c == name) else {
            problems.push(format!(
                "crates/{name} is not in the tidy test's table: add its arrows"
            ));
            continue;
        };
        seen += 1;
        for dep in deps(&manifest) {
            if dep.starts_with("duet-") && !allowed.contains(&dep.as_str()) {
                problems.push(format!(
                    "{package} depends on {dep}, which ARCHITECTURE.md forbids"
                ));
            }
            if let Some((_, owners)) = OWNED.iter().find(|(d, _)| *d == dep)
                && !owners.contains(&name.as_str())
            {
                let owners: Vec<String> = owners.iter().map(|o| format!("duet-{o}")).collect();
                problems.push(format!(
                    "{package} names {dep}; only {} may",
                    owners.join(" and ")
                ));
            }
        }
    }
    assert_eq!(seen, ALLOWED.len(), "a crate folder is missing");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_doc_line() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    assert!(files.len() > 10);
    let missing: Vec<String> = files
        .iter()
        .filter(|f| {
            !std::fs::read_to_string(f)
                .unwrap_or_default()
                .starts_with("//!")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` first line:\n{}",
        missing.join("\n")
    );
}

/// The runtime's ports, which must not name the engine (it depends on them, never the reverse).
const PORTS: &[&str] = &[
    "store.rs",
    "model.rs",
    "tools.rs",
    "handler.rs",
    "hooks.rs",
    "children.rs",
    "clock.rs",
    "subagents.rs",
    "decide.rs",
    "transition.rs",
    "record.rs",
    "types.rs",
];

#[test]
fn no_rust_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .count();
            (lines > 800).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these by responsibility:\n{}",
        long.join("\n")
    );
}

#[test]
fn ports_do_not_import_the_engine() {
    let src = root().join("crates/runtime/src");
    let mut problems = Vec::new();
    for port in PORTS {
        let text = std::fs::read_to_string(src.join(port)).expect("a port module");
        for (i, line) in text.lines().enumerate() {
            if line.contains("crate::engine") || line.contains("Runtime") && line.contains("use ") {
                problems.push(format!("{port}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Tests wait on events (a channel, a `Notify`, the change feed, a child's output), not on
/// time; a sleep is allowed only where time itself is the condition, said in a
/// `tidy:allow-sleep` comment right above it.
#[test]
fn tests_do_not_sleep_to_wait() {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(root().join("crates"))
        .expect("crates/")
        .flatten()
    {
        let tests = dir.path().join("tests");
        if tests.is_dir() {
            rust_files(&tests, &mut files);
        }
    }
    let mut problems = Vec::new();
    for f in &files {
        if f.ends_with("tidy.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let sleeps = line.contains("thread::sleep(") || line.contains("time::sleep(");
            let allowed = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("//"))
                .any(|l| l.contains("tidy:allow-sleep"));
            if sleeps && !allowed {
                problems.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
