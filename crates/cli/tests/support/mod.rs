//! Shared by the CLI's and the server's end-to-end tests: the backends to run against
//! (`duet_store::testing`: SQLite always, Postgres too when `DATABASE_URL` is set), the
//! repository's project, scratch projects, and small helpers.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use duet_runtime::{Runtime, Store};

#[allow(unused_imports)]
pub use duet_runtime::testing::{
    Scratch, Slow, kill_mid_step, must_load as project, repo, send, texts,
};
#[allow(unused_imports)]
pub use duet_store::testing::{Backend, backends, psql};

/// A runtime with this build's providers, handlers, http client and the project's MCP servers
/// (stdio servers run in the repository root).
pub fn runtime(
    project: Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
) -> duet_runtime::RuntimeBuilder {
    let providers = duet_models::providers_for(&project);
    // Remote A2A agents' tokens: from the project's own `env`-like convention, the process env.
    let handlers = duet_server::remote_agents(
        &project,
        |var| std::env::var(var).ok(),
        duet_handlers::handlers(),
    );
    let builder = Runtime::builder(project.clone(), store)
        .providers(providers)
        .handlers(handlers)
        .hooks(duet_handlers::hooks());
    duet_tools::register(builder, &project, &repo())
}
