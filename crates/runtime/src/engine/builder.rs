//! [`RuntimeBuilder`]: the parts a [`Runtime`] is made of.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

use duet_spec::Project;

use super::runs::{Background, Runs};
use super::{Inner, Runtime};
use crate::clock::{Clock, SystemClock};
use crate::code::{CodeHost, Fetcher};
use crate::effect::{Effect, EffectImpls};
use crate::handler::{Handler, Handlers};
use crate::hooks::Hooks;
use crate::model::Providers;
use crate::store::Store;
use crate::telemetry::TraceCarrier;
use crate::tools::{CodeSchemas, HttpTools, Tool, ToolServer, Tools};

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    project: Arc<Project>,
    store: Arc<dyn Store>,
    providers: Providers,
    handlers: Handlers,
    effects: EffectImpls,
    hooks: Hooks,
    tools: BTreeMap<String, Arc<dyn Tool>>,
    http: Option<Arc<dyn HttpTools>>,
    servers: BTreeMap<String, Arc<dyn ToolServer>>,
    code_schemas: Option<Arc<dyn CodeSchemas>>,
    code_host: Option<Arc<dyn CodeHost>>,
    fetcher: Option<Arc<dyn Fetcher>>,
    clock: Arc<dyn Clock>,
    lease_ms: i64,
    timer_claim_ms: i64,
    capture_content: bool,
    carrier: Option<Arc<dyn TraceCarrier>>,
    blobs: Option<Arc<dyn crate::store::BlobStore>>,
    file_limits: crate::files::FileLimits,
    hold_background: bool,
}

impl Runtime {
    /// A builder for a runtime of `project` on `store`, with no providers, handlers, hooks or
    /// builtin tools yet, the system clock and 30-second leases.
    pub fn builder(project: Arc<Project>, store: Arc<dyn Store>) -> RuntimeBuilder {
        RuntimeBuilder {
            project,
            store,
            providers: Providers::new(),
            handlers: Handlers::new(),
            effects: EffectImpls::new(),
            hooks: Hooks::new(),
            tools: BTreeMap::new(),
            http: None,
            servers: BTreeMap::new(),
            code_schemas: None,
            code_host: None,
            fetcher: None,
            clock: Arc::new(SystemClock),
            lease_ms: 30_000,
            timer_claim_ms: 300_000,
            capture_content: false,
            carrier: None,
            blobs: None,
            file_limits: crate::files::FileLimits::default(),
            hold_background: false,
        }
    }
}

impl RuntimeBuilder {
    /// The model providers, by name.
    pub fn providers(mut self, providers: Providers) -> Self {
        self.providers = providers;
        self
    }

    /// The handler implementations, by registered name.
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    /// The hook implementations, by registered name.
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Registers one more handler (beside those of [`RuntimeBuilder::handlers`]).
    pub fn handler(mut self, name: &str, handler: impl Handler) -> Self {
        self.handlers = std::mem::take(&mut self.handlers).with(name, handler);
        self
    }

    /// The effect implementations, by registered id (replacing any registered before).
    pub fn effects(mut self, effects: EffectImpls) -> Self {
        self.effects = effects;
        self
    }

    /// Registers effect code under `id` (an effect file's `builtin:`).
    pub fn effect(mut self, id: &str, effect: impl Effect) -> Self {
        self.effects = std::mem::take(&mut self.effects).with(id, effect);
        self
    }

    /// Registers a builtin tool under `name` (a tool file's `builtin:`).
    pub fn tool(mut self, name: &str, tool: impl Tool) -> Self {
        self.tools.insert(name.to_owned(), Arc::new(tool));
        self
    }

    /// Runs the project's `http` tools with `http` (without one, their calls fail).
    pub fn http_tools(mut self, http: impl HttpTools) -> Self {
        self.http = Some(Arc::new(http));
        self
    }

    /// Registers the tool server (an MCP server) the project declares as `name`.
    pub fn tool_server(mut self, name: &str, server: Arc<dyn ToolServer>) -> Self {
        self.servers.insert(name.to_owned(), server);
        self
    }

    /// Checks `.ts` tools' zod `args` with `code` (zod's own `safeParse`, in `duet-js`), so
    /// defaults, coercions and refinements behave as written; without it, their JSON Schema
    /// checks calls.
    pub fn code_schemas(mut self, code: Arc<dyn CodeSchemas>) -> Self {
        self.code_schemas = Some(code);
        self
    }

    /// Runs the project's own functions (a TS tool's `execute`, hooks, handlers, effects, thread
    /// endpoints) in `host` (`duet-js`'s embedded engine or its `node` host); without one, a
    /// definition that needs it fails its call, saying so.
    pub fn code_host(mut self, host: Arc<dyn CodeHost>) -> Self {
        self.code_host = Some(host);
        self
    }

    /// Makes code's `fetch` requests with `fetcher` (`duet-tools`: the project's allowlist and
    /// the private-address guard); without one, `fetch` throws.
    pub fn fetcher(mut self, fetcher: Arc<dyn Fetcher>) -> Self {
        self.fetcher = Some(fetcher);
        self
    }

    /// Keeps thread files' chunks in `blobs` (a directory: `duet_store::DirBlobs`) instead of
    /// the store's own table. The file rows stay in the store either way.
    pub fn blobs(mut self, blobs: Arc<dyn crate::store::BlobStore>) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// The limits threads' files keep (default [`crate::files::FileLimits::default`]).
    pub fn file_limits(mut self, limits: crate::files::FileLimits) -> Self {
        self.file_limits = limits;
        self
    }

    /// Uses `clock` for time (tests use a [`crate::ManualClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long a lease lasts without renewal (default 30 s); a runner renews it every third.
    pub fn lease_ms(mut self, ms: i64) -> Self {
        self.lease_ms = ms.max(3);
        self
    }

    /// How long a process's claim on a due timer lasts (default 5 min): a fire must end within
    /// four fifths of it (else it is stopped and retried), and a process that dies holding a
    /// timer has it taken over by another when the claim runs out.
    pub fn timer_claim_ms(mut self, ms: i64) -> Self {
        self.timer_claim_ms = ms.max(5);
        self
    }

    /// Whether each `chat` span carries the messages sent and the answer
    /// (`gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`, as
    /// JSON). Off by default: what people and models say is not for every trace backend.
    pub fn capture_content(mut self, on: bool) -> Self {
        self.capture_content = on;
        self
    }

    /// How trace context crosses the store (see [`TraceCarrier`]): set by whoever exports the
    /// spans, so that a child run in another process, or a run after a restart, continues the
    /// trace that queued its message, and a resumed park links to the step that asked. Without
    /// one (the default) nothing is saved.
    pub fn trace_carrier(mut self, carrier: Arc<dyn TraceCarrier>) -> Self {
        self.carrier = Some(carrier);
        self
    }

    /// Whether background runs (non-blocking children, the parent runs their results wake, and
    /// the like) wait for [`Runtime::quiesce`] to start them rather than starting at once. Off
    /// by default. For tests whose transcript must not depend on how a call's own run and the
    /// work it started interleave: with it on, the call's run ends before any of that work
    /// begins. Held work holds the runtime (and its leases, unrenewed) until a `quiesce`: a
    /// runtime dropped with work held is never freed.
    pub fn hold_background(mut self, on: bool) -> Self {
        self.hold_background = on;
        self
    }

    /// The runtime.
    pub fn build(self) -> Runtime {
        let mut tools = Tools::new(self.project.clone(), self.tools, self.http, self.servers)
            .with_code_schemas(self.code_schemas);
        tools.hosting = crate::code::Hosting {
            host: self.code_host,
            fetcher: self.fetcher,
        };
        let hooks = self.hooks.with_code(&self.project, &tools.hosting);
        Runtime {
            inner: Arc::new(Inner {
                project: self.project,
                files: crate::thread_files::ThreadFiles::new(
                    self.store.clone(),
                    self.blobs.unwrap_or_else(|| {
                        let store: Arc<dyn crate::store::BlobStore> = self.store.clone();
                        store
                    }),
                    self.file_limits,
                ),
                store: self.store,
                providers: self.providers,
                handlers: self.handlers,
                effects: self.effects,
                hooks,
                tools,
                clock: self.clock,
                lease_ms: self.lease_ms,
                timer_claim_ms: self.timer_claim_ms,
                timer_wakes: crate::store::WakeHub::default(),
                capture_content: self.capture_content,
                carrier: self.carrier,
                models: Mutex::new(HashMap::new()),
                runs: Runs::default(),
                held: super::held::Held::default(),
                background: if self.hold_background {
                    Background::holding()
                } else {
                    Background::default()
                },
                detached: CancellationToken::new(),
            }),
        }
    }
}
