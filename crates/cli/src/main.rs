//! `duet`: the command-line tool. This is the composition root: the only place (with the
//! server's `main`) that picks concrete implementations.

mod acting;
mod approve;
mod backup;
mod chat;
mod compose;
mod effects;
mod files;
mod keys;
mod mcp;
mod notifications;
mod otel;
mod out;
mod print;
mod run;
mod serve;
mod stale;
mod threads;
mod validate;

use crate::out::outln;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// jemalloc, for Rust's allocations and (unprefixed, on Linux) SQLite's: see `docs/decisions.md`.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// duet: a durable runtime for two-sided Standard Agents sessions.
#[derive(Parser)]
#[command(name = "duet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the project and the database are.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct Place {
    /// The project root (the folder holding `agents/`).
    #[arg(long, default_value = ".", global = true)]
    project: PathBuf,
    /// The database: `postgres://…`, or a SQLite file (default `PROJECT/.duet/duet.db`).
    #[arg(long, env = "DUET_DATABASE_URL", global = true)]
    db: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Check every definition of a Standard Agents project and list all problems at once.
    Validate(validate::Args),
    /// Start (or continue) a thread of AGENT and run it until it parks or its session ends.
    Run(run::RunArgs),
    /// Deliver a person's message to a thread and run it on.
    Send(run::SendArgs),
    /// Decide a tool call that waits for a person (approve, or --edit, --reject, --respond).
    Approve(approve::Args),
    /// List threads, or show one.
    Threads(threads::Args),
    /// List the timers (scheduled effects, questions' deadlines), or cancel a pending one.
    Effects(effects::Args),
    /// List, read, store or remove a thread's files (`ls`, `get`, `put`, `rm`).
    Files(files::Args),
    /// List notification deliveries, retry a failed one, or revoke an approval's links.
    Notifications(notifications::Args),
    /// Serve the project over HTTP: threads, approvals, events and the Agent Handler protocol.
    Serve(serve::Args),
    /// Create, list or revoke the API keys `duet serve` admits.
    Keys(keys::Args),
    /// Start the project's MCP servers and list the tools they offer.
    Mcp(mcp::Args),
    /// Continue every thread whose runner died mid-run.
    Recover {
        #[command(flatten)]
        place: Place,
    },
    /// Create or upgrade the database schema.
    Migrate {
        #[command(flatten)]
        place: Place,
    },
    /// Copy the SQLite database to a new file while it is in use (Postgres: see docs/operations.md).
    Backup(backup::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with success; usage errors exit 2.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if let Command::Validate(args) = &cli.command {
        return validate::run(args);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("duet: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        match cli.command {
            Command::Validate(_) => ExitCode::SUCCESS,
            Command::Run(args) => run::run(args).await,
            Command::Send(args) => run::send(args).await,
            Command::Approve(args) => approve::run(args).await,
            Command::Threads(args) => threads::run(args).await,
            Command::Effects(args) => effects::run(args).await,
            Command::Files(args) => files::run(args).await,
            Command::Notifications(args) => notifications::run(args).await,
            Command::Serve(args) => {
                let metrics = duet_server::metrics::Metrics::default();
                let traces = otel::provider();
                logs(args.log_format(), &metrics, traces.as_ref());
                let code = serve::run(args, metrics).await;
                otel::shutdown(traces);
                code
            }
            Command::Keys(args) => keys::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::Recover { place } => run::recover(place).await,
            Command::Backup(args) => backup::run(args).await,
            Command::Migrate { place } => match compose::store(&place).await {
                Ok(_) => {
                    outln!("database is up to date");
                    ExitCode::SUCCESS
                }
                Err(code) => code,
            },
        }
    })
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`): as text, or as one JSON object a
/// line; the runtime's spans into `metrics` (what `/metrics` serves), whatever the filter; and
/// those and the HTTP requests' spans to `traces`, when traces are exported.
fn logs(
    format: serve::LogFormat,
    metrics: &duet_server::metrics::Metrics,
    traces: Option<&opentelemetry_sdk::trace::SdkTracerProvider>,
) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // The runtime's spans are for metrics and traces; in log lines only when RUST_LOG asks.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,duet::telemetry=off"));
    let spans = tracing_subscriber::filter::Targets::new()
        .with_target(duet_runtime::telemetry::TARGET, tracing::Level::INFO);
    let text = matches!(format, serve::LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(filter.clone())
    });
    let json = matches!(format, serve::LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_filter(filter)
    });
    let exported = tracing_subscriber::filter::Targets::new()
        .with_target(duet_runtime::telemetry::TARGET, tracing::Level::INFO)
        .with_target(duet_server::metrics::HTTP_TARGET, tracing::Level::INFO);
    let _ = tracing_subscriber::registry()
        .with(text)
        .with(json)
        .with(metrics.layer().with_filter(spans))
        .with(traces.map(|p| otel::layer(p).with_filter(exported)))
        .try_init();
}
