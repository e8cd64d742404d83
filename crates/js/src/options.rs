//! How code is evaluated: the options an embedder sets, and the stacks the engine runs on.

use std::path::PathBuf;
use std::time::Duration;

/// The evaluation thread's stack: QuickJS recurses on the native stack, and its own limit
/// ([`JS_STACK`]) must sit well inside it whatever thread called.
pub(crate) const THREAD_STACK: usize = 64 << 20;
/// QuickJS's own stack limit.
pub(crate) const JS_STACK: usize = 8 << 20;

/// How a project's definitions are evaluated.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// The project's folder: helpers outside the listing and `node_modules` are found from
    /// here. `None` evaluates only the files handed in (no packages).
    pub root: Option<PathBuf>,
    /// More folders searched for packages, as Node's `NODE_PATH`.
    pub node_path: Vec<PathBuf>,
    /// The most one file's evaluation may take, its imports included.
    pub deadline: Duration,
    /// The engine's memory ceiling, in bytes.
    pub memory_limit: usize,
    /// A `host: node` project's: a package other than zod (or a `node:` builtin) a definition
    /// imports is a stand-in, not refused — node loads the real one when the code runs, and
    /// what a definition declares must not need it.
    pub stub_packages: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            root: None,
            node_path: Vec::new(),
            deadline: Duration::from_secs(2),
            memory_limit: 64 << 20,
            stub_packages: false,
        }
    }
}
