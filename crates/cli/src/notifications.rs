//! `duet notifications list [--status S] [--thread KEY] [--limit N] [--json]`, `duet
//! notifications retry ID` and `duet notifications revoke APPROVAL`: the notification outbox on
//! the database, for an operator (every principal's deliveries, as an admin sees them over
//! `GET /notifications`); a failed delivery put back to be sent again by a running `duet
//! serve`; an approval's one-time links revoked.

use std::io::Write;
use std::process::ExitCode;

use duet_runtime::{Clock, StoreError, SystemClock};
use duet_server::DeliveryView;
use duet_server_store::{DeliveryQuery, DeliveryStatus, ServerStore};

use crate::Place;
use crate::out::outln;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    place: Place,
}

#[derive(clap::Subcommand)]
enum Command {
    /// List deliveries, newest first: ID, CHANNEL, EVENT, TARGET, STATUS, ATTEMPTS, LAST ERROR.
    List {
        /// Only those with this status: pending, delivered, failed.
        #[arg(long)]
        status: Option<String>,
        /// Only about this thread (its key as stored: `PRINCIPAL/KEY` for a principal's).
        #[arg(long)]
        thread: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON: an array of the fields `GET /notifications` shows.
        #[arg(long)]
        json: bool,
    },
    /// Put a failed delivery back in the outbox: a running `duet serve` sends it again.
    Retry {
        /// The delivery's id, as `duet notifications list` shows it.
        id: String,
    },
    /// Revoke the one-time links sent about an approval that are not used yet.
    Revoke {
        /// The approval id (`THREAD:SESSION:SEQ`).
        approval: String,
    },
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let place = args.place;
    match args.command {
        Command::List {
            status,
            thread,
            limit,
            json,
        } => {
            let status = match status.as_deref().map(|s| (s, DeliveryStatus::parse(s))) {
                None => None,
                Some((_, Some(s))) => Some(s),
                Some((s, None)) => {
                    eprintln!("duet: unknown status `{s}`; statuses: pending, delivered, failed");
                    return ExitCode::from(2);
                }
            };
            if limit == 0 {
                eprintln!("duet: --limit is at least 1");
                return ExitCode::from(2);
            }
            match crate::compose::stores(&place).await {
                Ok(stores) => report(list(&stores, status, thread.as_deref(), limit, json).await),
                Err(code) => code,
            }
        }
        Command::Retry { id } => {
            let Ok(id) = id.parse::<i64>() else {
                eprintln!(
                    "duet: `{id}` is not a delivery id (a number, as `duet notifications list` shows)"
                );
                return ExitCode::from(2);
            };
            match crate::compose::stores(&place).await {
                Ok(stores) => report(retry(stores.server.as_ref(), id).await),
                Err(code) => code,
            }
        }
        Command::Revoke { approval } => match crate::compose::stores(&place).await {
            Ok(stores) => report(revoke(stores.server.as_ref(), &approval).await),
            Err(code) => code,
        },
    }
}

/// The exit code of a command, a store's failure said in one line.
fn report(done: Result<ExitCode, StoreError>) -> ExitCode {
    done.unwrap_or_else(|e| {
        eprintln!("duet: {e}");
        ExitCode::from(1)
    })
}

async fn revoke(server: &dyn ServerStore, approval: &str) -> Result<ExitCode, StoreError> {
    let n = server.revoke_links(approval, SystemClock.now_ms()).await?;
    outln!(
        "revoked {n} link{} to {approval}",
        if n == 1 { "" } else { "s" }
    );
    Ok(ExitCode::SUCCESS)
}

async fn retry(server: &dyn ServerStore, id: i64) -> Result<ExitCode, StoreError> {
    if server.retry_delivery(id, SystemClock.now_ms()).await? {
        outln!("delivery {id} is pending again: a running `duet serve` sends it");
        return Ok(ExitCode::SUCCESS);
    }
    match server.delivery(id).await? {
        Some(d) => eprintln!(
            "duet: delivery {id} is {}, not failed: only a failed delivery is retried",
            d.status.as_str()
        ),
        None => eprintln!("duet: no delivery {id}"),
    }
    Ok(ExitCode::from(2))
}

async fn list(
    stores: &duet_store::Stores,
    status: Option<DeliveryStatus>,
    thread: Option<&str>,
    limit: usize,
    json: bool,
) -> Result<ExitCode, StoreError> {
    let thread = match thread {
        Some(key) => match stores.engine.thread(key).await? {
            Some(t) => Some(t),
            None => {
                eprintln!("duet: no thread `{key}`");
                return Ok(ExitCode::from(2));
            }
        },
        None => None,
    };
    let query = DeliveryQuery {
        status: status.into_iter().collect(),
        thread: thread.as_ref().map(|t| t.id),
        limit,
        ..DeliveryQuery::default()
    };
    let found = stores.server.deliveries(&query).await?;
    let mut keys: std::collections::HashMap<duet_runtime::ThreadId, Option<String>> =
        std::collections::HashMap::new();
    let mut views = Vec::with_capacity(found.len());
    for d in &found {
        let key = match d.thread {
            Some(id) => match keys.get(&id) {
                Some(k) => k.clone(),
                None => {
                    let k = stores.engine.thread_by_id(id).await?.map(|t| t.key);
                    keys.insert(id, k.clone());
                    k
                }
            },
            None => None,
        };
        views.push(DeliveryView::of(d, key));
    }
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string(&views).unwrap_or_else(|_| "[]".to_owned());
        let _ = writeln!(out, "{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let _ = writeln!(
        out,
        "ID\tCHANNEL\tEVENT\tTARGET\tSTATUS\tATTEMPTS\tLAST ERROR"
    );
    for v in &views {
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            v.id,
            v.channel,
            v.event,
            v.target,
            v.status,
            v.attempts,
            one_line(v.last_error.as_deref().unwrap_or("-"))
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `s` on one line (a table row): its line breaks and tabs as spaces.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r', '\t'], " ")
}
