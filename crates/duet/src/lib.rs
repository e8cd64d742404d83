//! duet as one dependency: the runtime, the stores, the server and the A2A library.
//!
//! The crate's README follows; its Rust blocks are doctests. The repository's `examples/` are
//! complete programs on this crate (`cargo run -p duet --example embed`, `custom_code`,
//! `router`).
//!
#![doc = include_str!("../README.md")]

use std::path::Path;
use std::sync::Arc;

/// The A2A 1.0 library (`duet-a2a`): write an A2A agent in Rust, or call one.
pub use duet_a2a as a2a;
/// duet's built-in handlers (`echo`, `keyword_router`, `relay`) and hooks (`approval_audit`).
pub use duet_handlers as handlers;
/// The embedded JavaScript engine that evaluates TS definitions (`duet-js`; [`load`] uses it).
pub use duet_js as js;
/// The model providers: `scripted`, `openai` (every OpenAI-compatible server), `anthropic`.
pub use duet_models as models;
/// The session engine and its ports (`duet-runtime`): everything beyond the re-exports below.
pub use duet_runtime as runtime;
/// The HTTP server (`duet-server`): [`server::router`] to mount, [`server::serve`] to run.
pub use duet_server as server;
/// The server's own tables as ports (API keys, sign-ins, A2A push).
pub use duet_server_store as server_store;
/// Standard Agents definitions and their validation ([`spec::load`] reads TS statically,
/// [`load`] evaluates it).
pub use duet_spec as spec;
/// The SQLite and Postgres stores ([`store::connect`], [`store::open`]).
pub use duet_store as store;
/// The tools that reach out: `http` tools and MCP servers.
pub use duet_tools as tools;

pub use duet_runtime::hooks::{Hook, HookContext, HookError, Hooks};
pub use duet_runtime::{
    Agent, AgentEvent, Collected, Handler, HandlerError, Handlers, Principal, Prompt, Providers,
    Runtime, RuntimeBuilder, Scope, Store, ThreadState, collect,
};
pub use duet_server::{AppState, Background, Options, router};
pub use duet_spec::{Loaded, Project};

/// Loads and validates the project at `dir` (a project root, or its `agents/` folder), its
/// `.ts`/`.js` definitions evaluated in the embedded JavaScript engine (`duet-js`): zod
/// schemas, provider factories, templates and imports as their authors write them. Packages
/// (zod) are found in `node_modules` from the project's folder up, then in `NODE_PATH`.
pub fn load(dir: &Path) -> Result<Loaded, duet_spec::LoadError> {
    duet_js::load(dir, &duet_js::node_path_from_env())
}
pub use duet_store::{Stores, connect, open};

/// The code host for `project`'s own functions, as its `agents/code.yaml` says: the embedded
/// engine (default) or a `node` process; `None` when the project has no code (or the engine's
/// snapshot of the project could not be read: its calls then say there is no host).
pub fn code_host(project: &Project, root: &Path) -> Option<Arc<dyn duet_runtime::CodeHost>> {
    if !project.has_code() {
        return None;
    }
    let node_path = duet_js::node_path_from_env();
    match project.code.host {
        duet_spec::HostKind::Embedded => {
            match duet_js::EmbeddedHost::new(root, node_path, duet_js::HostOptions::default()) {
                Ok(host) => Some(Arc::new(host)),
                Err(e) => {
                    // The folder was read a moment ago to load the project: this is rare.
                    eprintln!(
                        "duet: the project's code cannot be read into the embedded engine: {e}"
                    );
                    None
                }
            }
        }
        duet_spec::HostKind::Node => Some(Arc::new(duet_js::NodeHost::new(
            root,
            duet_js::NodeOptions {
                node_path,
                ..duet_js::NodeOptions::default()
            },
        ))),
    }
}

/// The runtime `duet run` and `duet serve` compose for `project` (loaded from the folder `root`,
/// which holds `agents/`) on `store`: the built-in model providers and the project's own
/// (`agents/providers/`, keys from the variables they name), the built-in handlers and one for
/// each remote A2A agent (`agents/remotes/`, tokens from the variables they name), the built-in
/// hooks and effects, `.ts` tools' zod `args` checked with zod itself ([`js::ZodArgs`]), the
/// `http` tools (a host an argument chooses must be public unless
/// `DUET_ALLOW_PRIVATE_TARGETS=1`) and the MCP servers of `agents/mcp/` (started on first use).
///
/// Add your own on the builder it returns — [`RuntimeBuilder::handler`], [`RuntimeBuilder::tool`],
/// [`RuntimeBuilder::hooks`] (which replaces the set: start from [`handlers::hooks`]) — then
/// [`RuntimeBuilder::build`].
pub fn compose(project: Arc<Project>, root: &Path, store: Arc<dyn Store>) -> RuntimeBuilder {
    let handlers = duet_server::remote_agents(
        &project,
        |var| std::env::var(var).ok().filter(|v| !v.is_empty()),
        duet_handlers::handlers(),
    );
    let mut builder = Runtime::builder(project.clone(), store)
        .providers(duet_models::providers_for(&project))
        .handlers(handlers)
        .hooks(duet_handlers::hooks())
        .effects(duet_handlers::effects());
    let zod = duet_js::ZodArgs::new(
        &project,
        duet_js::EvalOptions {
            root: Some(root.to_path_buf()),
            node_path: duet_js::node_path_from_env(),
            stub_packages: project.code.host == duet_spec::HostKind::Node,
            ..duet_js::EvalOptions::default()
        },
    );
    if let Some(zod) = zod {
        builder = builder.code_schemas(Arc::new(zod));
    }
    if let Some(host) = code_host(&project, root) {
        builder = builder.code_host(host);
    }
    let private = std::env::var("DUET_ALLOW_PRIVATE_TARGETS")
        .is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let http = duet_tools::HttpClient::new().allow_private_targets(private);
    duet_tools::register_with(builder, &project, root, http)
}
