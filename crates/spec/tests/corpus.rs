//! The definitions corpus: each folder of `tests/definitions/` is a small project, and its
//! `expected` file lists every issue loading it must produce, one per line:
//! `FILE:LINE:COLUMN CODE PATH`. Adding a case is adding a folder.
//!
//! A case may also have a `hints` file: one `CODE PATH => TEXT` a line, each naming an issue of
//! the case whose hint must contain TEXT (hints are prose: only what matters is pinned).
//!
//! `DUET_BLESS=1 cargo test -p duet-spec --test corpus` rewrites the `expected` files; review the
//! diff before committing it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use duet_spec::{Code, Issue};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/definitions")
}

fn render(issues: &[Issue]) -> String {
    let mut out = String::new();
    for i in issues {
        let place = match (i.line, i.column) {
            (Some(l), Some(c)) => format!("{l}:{c}"),
            _ => "-:-".to_owned(),
        };
        let file = i.file.as_deref().unwrap_or("-");
        let path = if i.path.is_empty() { "-" } else { &i.path };
        out.push_str(&format!("{file}:{place} {} {path}\n", i.code));
    }
    out
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/definitions exists")
        .map(|e| e.expect("readable").path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_case_produces_exactly_its_expected_issues() {
    let bless = std::env::var_os("DUET_BLESS").is_some();
    let mut failures = Vec::new();
    let cases = cases();
    assert!(cases.len() >= 30, "the corpus lost cases: {}", cases.len());
    for case in &cases {
        let loaded = duet_spec::load(case).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let actual = render(&loaded.issues);
        let expected_path = case.join("expected");
        if bless {
            std::fs::write(&expected_path, &actual).expect("write expected");
            continue;
        }
        if let Ok(hints) = std::fs::read_to_string(case.join("hints")) {
            for line in hints.lines().filter(|l| !l.trim().is_empty()) {
                let (at, text) = line.split_once(" => ").expect("CODE PATH => TEXT");
                let found = loaded.issues.iter().any(|i| {
                    let path = if i.path.is_empty() { "-" } else { &i.path };
                    format!("{} {path}", i.code) == at
                        && i.hint.as_deref().is_some_and(|h| h.contains(text))
                });
                if !found {
                    failures.push(format!(
                        "== {}: no `{at}` hinting {text:?}: {:#?}",
                        case.display(),
                        loaded.issues
                    ));
                }
            }
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if actual != expected {
            failures.push(format!(
                "== {}\n-- expected\n{expected}-- actual\n{actual}",
                case.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ));
        }
        assert!(
            !loaded.is_ok()
                || loaded
                    .issues
                    .iter()
                    .any(|i| i.code.severity() == duet_spec::Severity::Warning),
            "{}: a corpus case must produce issues",
            case.display()
        );
    }
    assert!(
        failures.is_empty(),
        "{} case(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Codes the corpus cannot produce from files alone, each with where it is tested instead.
const ELSEWHERE: &[(Code, &str)] = &[
    (
        Code::UnknownBuiltin,
        "needs a registry of builtins: crates/spec/tests/builtins.rs",
    ),
    (
        Code::ProviderKeyUnset,
        "needs an environment: crates/spec/tests/providers.rs",
    ),
    (
        Code::ProviderKeyShort,
        "needs an environment: crates/spec/tests/providers.rs",
    ),
];

#[test]
fn the_corpus_covers_every_code() {
    let mut seen = BTreeSet::new();
    for case in cases() {
        let expected = std::fs::read_to_string(case.join("expected")).unwrap_or_default();
        for line in expected.lines() {
            if let Some(code) = line.split(' ').nth(1) {
                seen.insert(code.to_owned());
            }
        }
    }
    let missing: Vec<&str> = Code::ALL
        .iter()
        .filter(|c| !ELSEWHERE.iter().any(|(e, _)| e == *c))
        .map(|c| c.as_str())
        .filter(|c| !seen.contains(*c))
        .collect();
    assert!(missing.is_empty(), "no corpus case produces: {missing:?}");
}
