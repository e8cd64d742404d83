//! What the tests over `tests/definitions/` share: where the corpus and the test packages are,
//! and loading a case as `duet validate` does.
#![allow(dead_code, reason = "each test binary uses part of it")]

use std::path::{Path, PathBuf};

use duet_spec::Loaded;

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/definitions/`.
pub(crate) fn corpus_dir() -> PathBuf {
    repo().join("tests/definitions")
}

/// Where the test packages are installed (`.ci/node/node_modules`); fails at once when zod is
/// not there.
pub(crate) fn node_modules() -> PathBuf {
    let dir = repo().join(".ci/node/node_modules");
    assert!(
        dir.join("zod/package.json").is_file(),
        "zod is not installed in {}: run scripts/test-servers",
        dir.display()
    );
    dir
}

/// Loads the case folder `case` with its definitions evaluated; packages come from
/// [`node_modules`] unless the case has a file `no-node-path`.
pub(crate) fn load_case(case: &Path) -> Loaded {
    let node_path = if case.join("no-node-path").exists() {
        Vec::new()
    } else {
        vec![node_modules()]
    };
    duet_js::load(case, &node_path).unwrap_or_else(|e| panic!("{}: {e}", case.display()))
}
