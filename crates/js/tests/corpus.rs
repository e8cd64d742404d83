//! The definitions corpus: each folder of `tests/definitions/` is a small project, loaded as
//! `duet validate` loads it (`duet_js::load`: `.ts`/`.js` definitions evaluated), and its
//! `expected` file lists every issue loading it must produce, one per line:
//! `FILE:LINE:COLUMN CODE PATH`. Adding a case is adding a folder.
//!
//! A case may also have a `hints` file: one `CODE PATH => TEXT` a line, each naming an issue of
//! the case whose hint must contain TEXT, and a `messages` file, the same for its message (both
//! are prose: only what matters is pinned). Packages
//! (zod) come from `<repo>/.ci/node/node_modules` (`scripts/test-servers` installs them), unless
//! the case has a file `no-node-path`.
//!
//! `DUET_BLESS=1 cargo test -p duet-js --test corpus` rewrites the `expected` files; review the
//! diff before committing it.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use duet_spec::{Code, Issue};
use support::{corpus_dir, load_case};

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

/// What the case's `hints` (or `messages`) file pins and no issue says: one `CODE PATH => TEXT`
/// a line, each naming an issue whose hint (or message) contains TEXT.
fn prose(
    case: &Path,
    file: &str,
    issues: &[Issue],
    text_of: fn(&Issue) -> Option<&str>,
) -> Vec<String> {
    let Ok(pins) = std::fs::read_to_string(case.join(file)) else {
        return Vec::new();
    };
    pins.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let (at, text) = line.split_once(" => ").expect("CODE PATH => TEXT");
            let found = issues.iter().any(|i| {
                let path = if i.path.is_empty() { "-" } else { &i.path };
                format!("{} {path}", i.code) == at && text_of(i).is_some_and(|t| t.contains(text))
            });
            (!found).then(|| {
                format!(
                    "== {}: no `{at}` whose {file} say {text:?}: {issues:#?}",
                    case.display()
                )
            })
        })
        .collect()
}

#[test]
fn every_case_produces_exactly_its_expected_issues() {
    let bless = std::env::var_os("DUET_BLESS").is_some();
    let mut failures = Vec::new();
    support::node_modules();
    let cases = cases();
    assert!(cases.len() >= 30, "the corpus lost cases: {}", cases.len());
    for case in &cases {
        let loaded = load_case(case);
        let actual = render(&loaded.issues);
        let expected_path = case.join("expected");
        if bless {
            std::fs::write(&expected_path, &actual).expect("write expected");
            continue;
        }
        failures.extend(prose(case, "hints", &loaded.issues, |i| i.hint.as_deref()));
        failures.extend(prose(case, "messages", &loaded.issues, |i| {
            Some(&i.message)
        }));
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
    (
        Code::TsNotStatic,
        "static reading only: crates/spec/src/ts.rs unit tests, crates/spec/tests/ts_reading.rs",
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
