//! Repository rules that no compiler checks: the crate dependency arrows of ARCHITECTURE.md,
//! and a `//!` line opening every Rust file.

use std::path::{Path, PathBuf};

/// Which workspace crates each crate may depend on (normal dependencies).
const ALLOWED: &[(&str, &[&str])] = &[
    ("spec", &[]),
    ("runtime", &["duet-spec"]),
    ("store", &["duet-runtime", "duet-spec"]),
    ("models", &["duet-runtime", "duet-spec"]),
    ("handlers", &["duet-runtime", "duet-spec"]),
    (
        "server",
        &[
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
        ],
    ),
];

/// Crates that only their owner may name.
const OWNED: &[(&str, &str)] = &[("sqlx", "store"), ("axum", "server"), ("reqwest", "models")];

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
            if let Some((_, owner)) = OWNED.iter().find(|(d, _)| *d == dep)
                && *owner != name
            {
                problems.push(format!("{package} names {dep}; only duet-{owner} may"));
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
