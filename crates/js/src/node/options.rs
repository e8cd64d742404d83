//! How the node host starts node.

use std::path::PathBuf;
use std::time::Duration;

/// How the node host starts node.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The `node` executable (Node.js 18.19 or later: `module.register`): by default the
    /// environment's `DUET_NODE`, else `node`, found on `PATH`.
    pub node: PathBuf,
    /// Folders searched for packages after the project's own `node_modules` (`NODE_PATH`).
    pub node_path: Vec<PathBuf>,
    /// Environment variables the process gets besides `PATH`, `HOME`, `TMPDIR`, the locale and
    /// `TZ` (duet's own environment is not passed on).
    pub env: Vec<(String, String)>,
    /// How long the process has, once a call ran past its deadline, to show that its event loop
    /// still turns (it answers a ping) before it is killed as stuck: 1 s unless set.
    pub grace: Duration,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            node: std::env::var_os("DUET_NODE")
                .filter(|v| !v.is_empty())
                .map_or_else(|| PathBuf::from("node"), PathBuf::from),
            node_path: Vec::new(),
            env: Vec::new(),
            grace: Duration::from_secs(1),
        }
    }
}
