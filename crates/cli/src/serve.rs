//! `duet serve`: the HTTP server on the project's runtime (SQLite by default, Postgres with
//! `--db postgres://…`), until SIGINT or SIGTERM.

use crate::out::outln;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use duet_server::Options;

use crate::Place;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Where to listen (`127.0.0.1:0` picks a free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8787", env = "DUET_LISTEN")]
    listen: SocketAddr,
    /// The agent `POST /invoke` and `/control/*` serve.
    #[arg(long, value_name = "AGENT")]
    default_agent: Option<String>,
    /// Serve without API keys: every caller sees every thread. For local development only.
    #[arg(long)]
    no_auth: bool,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1024 * 1024, value_name = "BYTES")]
    body_limit: usize,
    /// How often to look for threads whose runner died, in milliseconds.
    #[arg(
        long,
        default_value_t = 5_000,
        value_name = "MS",
        env = "DUET_RECOVER_EVERY_MS"
    )]
    recover_every_ms: u64,
    /// How long a shutdown waits for runs and connections, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    shutdown_grace_ms: u64,
    /// The most connections served at once (default: three quarters of `ulimit -n`, less 32, at
    /// most 10,000).
    /// Past it the connection idle the longest makes room; with every one busy, a new one is
    /// answered 503 with Retry-After (`/healthz` and `/readyz` still answer), or closed.
    #[arg(long, value_name = "N", env = "DUET_MAX_CONNECTIONS",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections: Option<usize>,
    /// How long a client may take to send a request's head, in milliseconds (from the accept
    /// for its first request, from the head's first byte for later ones).
    #[arg(long, default_value_t = 10_000, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_ms: u64,
    /// How long a connection with no request in flight stays open, in milliseconds (an event
    /// stream is never idle).
    #[arg(long, default_value_t = 75_000, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout_ms: u64,
    /// The URL clients reach this server at (`https://agents.example.com`), for the A2A agent
    /// cards' interface URLs; without it they are built from a request's `Host` when it is a
    /// loopback name, else from the listening address. With `--no-auth`, a host served besides
    /// the loopback ones.
    #[arg(long, value_name = "URL", env = "DUET_PUBLIC_URL")]
    public_url: Option<String>,
    /// Build the A2A cards' URLs from `X-Forwarded-Proto` and `X-Forwarded-Host` (when there is
    /// no `--public-url`). Only behind a proxy that sets them and drops a client's own.
    #[arg(long, env = "DUET_TRUST_FORWARDED")]
    trust_forwarded: bool,
    /// Let A2A push notifications and webhooks go to private, loopback and link-local addresses
    /// (refused by default). For development and tests on one machine.
    #[arg(long)]
    allow_private_push: bool,
    /// Print the OpenAPI document and exit.
    #[arg(long)]
    openapi: bool,
    /// How logs are written to stderr: `text`, or `json` (one object a line).
    #[arg(long, value_enum, default_value = "text", env = "DUET_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(flatten)]
    place: Place,
}

/// How `duet serve` writes its logs.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// For people.
    Text,
    /// One JSON object a line, for log collectors.
    Json,
}

impl Args {
    pub(crate) fn log_format(&self) -> LogFormat {
        self.log_format
    }
}

pub(crate) async fn run(args: Args, metrics: duet_server::metrics::Metrics) -> ExitCode {
    if args.openapi {
        match serde_json::to_string_pretty(&duet_server::openapi()) {
            Ok(doc) => {
                outln!("{doc}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("duet: cannot write the OpenAPI document: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let (runtime, tables) = match crate::compose::compose(&args.place).await {
        Ok(composed) => composed,
        Err(code) => return code,
    };
    if let Some(agent) = &args.default_agent
        && !runtime.project().agents.contains_key(agent)
    {
        eprintln!("duet: --default-agent {agent}: no agent of that name in the project");
        return ExitCode::from(2);
    }
    if args.no_auth {
        tracing::warn!(
            "--no-auth: every caller sees and acts on every thread. For local development only; never expose this server."
        );
    } else {
        match tables.keys().await {
            Ok(keys) if keys.iter().all(|k| k.revoked_at.is_some()) => tracing::warn!(
                "no API keys yet: every request will be refused. Create one with `duet keys create --principal NAME`."
            ),
            Ok(_) => {}
            Err(e) => {
                eprintln!("duet: cannot read the API keys: {e}");
                return ExitCode::from(1);
            }
        }
    }
    // Signals are caught from here on: a SIGTERM right after start is a graceful stop.
    let shutdown = duet_server::shutdown_signal();
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("duet: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(1);
        }
    };
    let addr = listener.local_addr().map_or(args.listen, |a| a);
    let max_connections = args
        .max_connections
        .unwrap_or_else(duet_server::default_max_connections);
    if args.public_url.is_none() && !args.trust_forwarded && !addr.ip().is_loopback() {
        tracing::warn!(
            address = %addr,
            "listening beyond loopback without --public-url: A2A agent cards and the links notifications carry name this address (or localhost when it is every address), not the name clients use; set --public-url"
        );
    }
    let options = Options {
        auth: !args.no_auth,
        default_agent: args.default_agent,
        body_limit: args.body_limit,
        recover_every: Duration::from_millis(args.recover_every_ms),
        shutdown_grace: Duration::from_millis(args.shutdown_grace_ms),
        public_url: args.public_url,
        trust_forwarded: args.trust_forwarded,
        listener: Some(addr),
        allow_private_push: args.allow_private_push,
        max_connections,
        header_read_timeout: Duration::from_millis(args.header_timeout_ms),
        idle_timeout: Duration::from_millis(args.idle_timeout_ms),
        metrics,
        slack: duet_server::SlackOptions::from_env(|name| std::env::var(name).ok()),
        ..Options::default()
    };
    let state = duet_server::AppState::new(runtime, tables, options);
    // A database it can read but not write (a read-only file) would serve reads and fail every
    // answer: refused here, before the address is announced.
    if let Err(why) = duet_server::check_writable(&state).await {
        eprintln!("duet: cannot serve: {why}");
        return ExitCode::from(1);
    }
    // The one plain line, whatever the log format: where to reach the server (scripts read it).
    eprintln!("duet serve: listening on http://{addr}");
    tracing::info!(address = %addr, max_connections, "listening");
    match duet_server::serve(state, listener, shutdown).await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("duet: the server failed: {e}");
            ExitCode::from(1)
        }
    }
}
