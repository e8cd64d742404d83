//! duet's embedded JavaScript engine (QuickJS-NG through `rquickjs`), for the project's own
//! TypeScript: [`JsEvaluator`] evaluates `.ts`/`.js` definitions for duet-spec's loader, [`load`]
//! reads a project folder with it, [`ZodArgs`] checks a TS tool's arguments with its zod schema
//! and [`EmbeddedHost`] runs the project's functions (the runtime's `CodeHost`).
//!
//! The code gets no ambient authority: no `process`, timers or file system, and no network but
//! the `fetch` a code host forwards to the runtime. A definition imports the project's own files
//! (never outside the project), `@standardagents/spec` and the provider packages (which duet
//! provides) and zod (from the project's `node_modules`). Each file or call has a deadline and a
//! memory ceiling; code past either is stopped and reported.
//!
//! [`EmbeddedHost`] runs a project's functions in the same engine (the default);
//! [`NodeHost`] in a `node` process instead (opt-in, for code that needs npm packages or Node
//! APIs).

mod args;
mod describe;
mod engine;
mod evaluate;
mod failure;
mod host;
mod node;
mod options;
mod resolve;
mod sandbox;
mod strip;
mod thrown;

use std::path::{Path, PathBuf};

pub use args::ZodArgs;
pub use evaluate::JsEvaluator;
pub use host::{EmbeddedHost, HostOptions};
pub use node::{NodeHost, NodeOptions};
pub use options::EvalOptions;

use duet_spec::{LoadError, Loaded, Project};

/// Loads and validates the project at `dir` (a project root, or its `agents/` folder) with its
/// `.ts`/`.js` definitions evaluated: what `duet validate`, `duet run` and `duet serve` read.
/// Packages are found in `node_modules` from the project's folder up, then in `node_path`.
pub fn load(dir: &Path, node_path: &[PathBuf]) -> Result<Loaded, LoadError> {
    let root = duet_spec::fs::project_root(dir)?;
    let listing = duet_spec::fs::read_project(&root)?;
    // A `host: node` project's packages are node's: its definitions are read with stand-ins.
    let stub_packages = duet_spec::host_of(&listing.files) == duet_spec::HostKind::Node;
    let evaluator = JsEvaluator::new(EvalOptions {
        root: Some(root.clone()),
        node_path: node_path.to_vec(),
        stub_packages,
        ..EvalOptions::default()
    });
    Ok(Project::from_listing_with(listing, Some(&evaluator)))
}

/// The folders of `NODE_PATH` (`:`-separated, as Node reads it).
pub fn node_path_from_env() -> Vec<PathBuf> {
    std::env::var_os("NODE_PATH")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}
