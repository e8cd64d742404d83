//! The server's shared state: [`Options`] (how `duet serve` behaves) and [`AppState`] (the
//! runtime, the key cache, the runs in flight, the closing token), which every handler shares.
//! The router that hands it to them is `router.rs`; what a caller may see of it is `auth.rs`.

use std::sync::Arc;
use std::time::Duration;

use duet_runtime::{Claim, RunError, Runtime, Settled};
use duet_server_store::ServerStore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::cache::KeyCache;

/// How `duet serve` behaves.
#[derive(Clone, Debug)]
pub struct Options {
    /// Require an API key on every request but the health checks (off only with `--no-auth`).
    pub auth: bool,
    /// The agent `POST /invoke` and `/control/*` serve.
    pub default_agent: Option<String>,
    /// The largest request body accepted, in bytes (413 above).
    pub body_limit: usize,
    /// How often every process looks for threads whose runner died (and runs them).
    pub recover_every: Duration,
    /// How long a shutdown waits for runs to reach their next commit before it exits anyway
    /// (their leases then run out and another process continues them).
    pub shutdown_grace: Duration,
    /// How often an idle SSE stream sends a comment, so proxies keep it open.
    pub heartbeat: Duration,
    /// The URL clients reach this server at, for the A2A cards' interface URLs (without it: a
    /// request's `Host` when it names a loopback host, else [`Self::listener`]); with
    /// `--no-auth`, a host served besides the loopback ones.
    pub public_url: Option<String>,
    /// Whether `X-Forwarded-Proto`/`X-Forwarded-Host` name the origin clients reached, for the
    /// A2A cards' URLs when there is no public URL: only behind a proxy that sets them (and
    /// drops a client's own). Off: any client could name any host in a card.
    pub trust_forwarded: bool,
    /// The address the server listens on (`duet serve` sets it): the A2A cards' origin for a
    /// request to a host that is not a loopback one, when nothing else is configured.
    pub listener: Option<std::net::SocketAddr>,
    /// Whether A2A push notifications and webhooks may go to private, loopback and link-local
    /// addresses (refused by default: a config must not turn the server against its own
    /// network).
    pub allow_private_push: bool,
    /// The most connections served at once. Past it, the connection idle the longest is closed to
    /// make room; when every one has a request in flight, a new connection is answered `503`
    /// with `Retry-After` (`/healthz` and `/readyz` are answered as usual), or closed.
    pub max_connections: usize,
    /// How long a client may take to send a request's head: from its connection's accept for
    /// the first request, from the head's first byte for later ones. The connection is closed
    /// past it.
    pub header_read_timeout: Duration,
    /// How long a connection with no request in flight stays open (HTTP/1.1 keep-alive, HTTP/2).
    /// A request in flight, an event stream included, is never idle.
    pub idle_timeout: Duration,

    /// How long `/readyz` reuses its probe's outcome (a read and a heartbeat write), so a load
    /// balancer's polling costs the database one write per this.
    pub ready_cache: Duration,
    /// The metrics `/metrics` serves: give the process's subscriber [`crate::metrics::Metrics::layer`]
    /// so they include the runtime's spans.
    pub metrics: crate::metrics::Metrics,
    /// How Slack is reached, and how its requests are checked (notifications, issue #31).
    pub slack: SlackOptions,
    /// Where notifications read their settings by name: the SMTP server (`DUET_SMTP_URL`,
    /// `DUET_SMTP_FROM`, `DUET_SMTP_CA_FILE`) and a webhook's `secretEnv`. The process
    /// environment by default; a test gives a map.
    pub env: Env,
}

/// A lookup of settings by name.
type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Settings read by name ([`Options::env`]).
#[derive(Clone)]
pub struct Env(std::sync::Arc<Lookup>);

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Env(std::sync::Arc::new(|name| std::env::var(name).ok()))
    }

    /// Exactly these values (nothing from the process environment).
    pub fn from_map(values: std::collections::BTreeMap<String, String>) -> Self {
        Env(std::sync::Arc::new(move |name| values.get(name).cloned()))
    }

    /// The value of `name`, if set.
    pub fn var(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::process()
    }
}

/// The values are not shown.
impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Env(…)")
    }
}

/// How the server talks to Slack: the Web API it posts to with the bot token, and the signing
/// secret `POST /slack/interactions` checks Slack's requests with. `duet serve` reads them from
/// `DUET_SLACK_API_URL`, `SLACK_BOT_TOKEN` and `SLACK_SIGNING_SECRET` ([`SlackOptions::from_env`]).
#[derive(Clone)]
pub struct SlackOptions {
    /// The Web API's base URL (`https://slack.com/api`; a test's stand-in elsewhere). Set by the
    /// operator, so not checked against private addresses.
    pub api_url: String,
    /// The bot token (`xoxb-…`) the messages are posted with; none: Slack deliveries fail,
    /// saying so.
    pub bot_token: Option<String>,
    /// The app's signing secret; none: the interactivity endpoint answers `404`.
    pub signing_secret: Option<String>,
}

impl SlackOptions {
    /// The options the variables `var` reads say (an empty one counts as unset).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Self {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        SlackOptions {
            api_url: set("DUET_SLACK_API_URL").unwrap_or_else(|| SlackOptions::default().api_url),
            bot_token: set("SLACK_BOT_TOKEN"),
            signing_secret: set("SLACK_SIGNING_SECRET"),
        }
    }
}

impl Default for SlackOptions {
    fn default() -> Self {
        SlackOptions {
            api_url: "https://slack.com/api".to_owned(),
            bot_token: None,
            signing_secret: None,
        }
    }
}

/// The secrets are not shown, only whether they are set.
impl std::fmt::Debug for SlackOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackOptions")
            .field("api_url", &self.api_url)
            .field("bot_token", &self.bot_token.as_ref().map(|_| "…"))
            .field("signing_secret", &self.signing_secret.as_ref().map(|_| "…"))
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            auth: true,
            default_agent: None,
            body_limit: 1024 * 1024,
            recover_every: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(10),
            heartbeat: Duration::from_secs(15),
            public_url: None,
            trust_forwarded: false,
            listener: None,
            allow_private_push: false,
            max_connections: crate::conn::default_max_connections(),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),

            ready_cache: Duration::from_secs(1),
            metrics: crate::metrics::Metrics::default(),
            slack: SlackOptions::default(),
            env: Env::default(),
        }
    }
}

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

struct Shared {
    runtime: Runtime,
    /// The server's own tables (API keys, sign-ins, A2A push), beside the runtime's store.
    tables: Arc<dyn ServerStore>,
    options: Options,
    keys: KeyCache,
    /// The runs this server started for requests that did not wait (and for those that did: a
    /// run outlives the request that started it).
    runs: TaskTracker,
    /// Cancelled at shutdown: SSE streams end, so the graceful shutdown is not held open.
    closing: CancellationToken,
    /// This server's incarnation, for the control plane's event envelope.
    epoch: String,
    /// Wakes the push sender when the outbox has something new.
    push: tokio::sync::Notify,
    /// Wakes the push notifier when a config was made here.
    push_configs: tokio::sync::Notify,
    /// The last readiness probe: when, and what it found.
    readiness: tokio::sync::Mutex<Option<(std::time::Instant, Result<(), String>)>>,
    /// The database's links secret, once read (`notify::links::secret`).
    links_secret: tokio::sync::OnceCell<Vec<u8>>,
}

impl AppState {
    /// The state for `runtime`, with the server's own tables `tables` (usually the same
    /// database: `duet_store::open`), under `options`.
    pub fn new(runtime: Runtime, tables: Arc<dyn ServerStore>, options: Options) -> Self {
        AppState(Arc::new(Shared {
            runtime,
            tables,
            options,
            keys: KeyCache::default(),
            runs: TaskTracker::new(),
            closing: CancellationToken::new(),
            epoch: uuid::Uuid::now_v7().to_string(),
            push: tokio::sync::Notify::new(),
            push_configs: tokio::sync::Notify::new(),
            readiness: tokio::sync::Mutex::new(None),
            links_secret: tokio::sync::OnceCell::new(),
        }))
    }

    /// Tells the push sender the outbox has something new.
    pub(crate) fn push_wake(&self) {
        self.0.push.notify_one();
    }

    /// Tells the outbox's sender something is due (the push sender is the outbox's).
    pub(crate) fn notify_wake(&self) {
        self.0.push.notify_one();
    }

    /// Tells the push notifier a config was made (it looks at every config at once).
    pub(crate) fn push_config_added(&self) {
        self.0.push_configs.notify_one();
    }

    /// Resolves when [`Self::push_config_added`] was called.
    pub(crate) async fn push_configs_changed(&self) {
        self.0.push_configs.notified().await;
    }

    /// Resolves when [`Self::push_wake`] was called (since the last time this resolved).
    pub(crate) async fn push_woken(&self) {
        self.0.push.notified().await;
    }

    /// Where the links secret is kept once read.
    pub(crate) fn links_secret(&self) -> &tokio::sync::OnceCell<Vec<u8>> {
        &self.0.links_secret
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.0.runtime
    }

    /// The server's own tables (for `service/` alone: tidy checks it).
    pub(crate) fn server_store(&self) -> &Arc<dyn ServerStore> {
        &self.0.tables
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.0.options
    }

    /// The last readiness probe (`service::health`).
    pub(crate) fn readiness(
        &self,
    ) -> &tokio::sync::Mutex<Option<(std::time::Instant, Result<(), String>)>> {
        &self.0.readiness
    }

    pub(crate) fn keys(&self) -> &KeyCache {
        &self.0.keys
    }

    /// Cancelled when the server starts shutting down.
    pub fn closing(&self) -> &CancellationToken {
        &self.0.closing
    }

    /// This server's incarnation (a new one each start): the control plane's `epoch`.
    pub(crate) fn epoch(&self) -> &str {
        &self.0.epoch
    }

    /// The runs this server started.
    pub(crate) fn runs(&self) -> &TaskTracker {
        &self.0.runs
    }

    /// Runs `claim` to its end in a task of its own (tracked for shutdown), whatever becomes of
    /// the request: the receiver gets its outcome.
    pub(crate) fn spawn_run(
        &self,
        claim: Claim,
    ) -> tokio::sync::oneshot::Receiver<Result<Settled, RunError>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let rt = self.runtime().clone();
        self.runs().spawn(async move {
            let cancel = CancellationToken::new();
            let outcome = rt
                .run_claimed(claim, &duet_runtime::EventSink::discard(), &cancel)
                .await;
            if let Err(e) = &outcome
                && !matches!(e, RunError::ShuttingDown)
            {
                tracing::warn!(error = %e, "a run failed");
            }
            let _ = tx.send(outcome);
        });
        rx
    }

    /// `events` as an SSE response with this server's heartbeat (`: ping` comments while idle,
    /// so proxies keep the stream open).
    pub(crate) fn sse(
        &self,
        events: futures::stream::BoxStream<
            'static,
            Result<axum::response::sse::Event, std::convert::Infallible>,
        >,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        use axum::response::sse::{KeepAlive, Sse};
        Sse::new(events)
            .keep_alive(
                KeepAlive::new()
                    .interval(self.options().heartbeat)
                    .text("ping"),
            )
            .into_response()
    }
}
