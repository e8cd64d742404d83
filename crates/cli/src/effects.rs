//! `duet effects list [--thread KEY] [--status S] [--kind K] [--json]` and `duet effects cancel
//! ID`: the timers on the database (scheduled effects, and questions' deadlines with `--kind
//! deadline`), for an operator; what `GET /threads/{key}/effects` shows one thread of.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::Write;
use std::process::ExitCode;

use duet_runtime::{CancelOutcome, Clock, Store, Timer, TimerKind, TimerQuery, TimerStatus};
use serde_json::json;

use crate::Place;

/// How many timers one read of the store takes.
const PAGE: usize = 500;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    place: Place,
}

#[derive(clap::Subcommand)]
enum Command {
    /// List timers in due order: ID, KIND, NAME, THREAD, STATUS, DUE, ATTEMPTS, LAST ERROR.
    List {
        /// Only this thread's (its key).
        #[arg(long)]
        thread: Option<String>,
        /// Only those with this status: pending, processing, completed, failed, cancelled.
        #[arg(long)]
        status: Option<String>,
        /// Only this kind: effect (scheduled effects) or deadline (questions' deadlines).
        /// Default: both.
        #[arg(long)]
        kind: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a pending timer: it will not run.
    Cancel {
        /// The timer's id.
        id: String,
    },
}

pub(crate) async fn run(args: Args) -> ExitCode {
    match args.command {
        Command::List {
            thread,
            status,
            kind,
            json,
        } => {
            let status = match status.as_deref().map(|s| (s, TimerStatus::parse(s))) {
                None => None,
                Some((_, Some(s))) => Some(s),
                Some((s, None)) => {
                    eprintln!(
                        "duet: unknown status `{s}`; statuses: pending, processing, completed, failed, cancelled"
                    );
                    return ExitCode::from(2);
                }
            };
            let kind = match kind.as_deref().map(|k| (k, TimerKind::parse(k))) {
                None => None,
                Some((_, Some(k))) => Some(k),
                Some((k, None)) => {
                    eprintln!("duet: unknown kind `{k}`; kinds: effect, deadline");
                    return ExitCode::from(2);
                }
            };
            let store = match crate::compose::store(&args.place).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            match list(store.as_ref(), thread.as_deref(), status, kind, json).await {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("duet: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Cancel { id } => {
            let Ok(id) = id.parse::<uuid::Uuid>() else {
                eprintln!("duet: `{id}` is not a timer id (a UUID, as `duet effects list` shows)");
                return ExitCode::from(2);
            };
            let store = match crate::compose::store(&args.place).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            let now = duet_runtime::SystemClock.now_ms();
            match store.cancel_timer(id, now).await {
                Ok(CancelOutcome::Cancelled(t)) => {
                    crate::out::outln!("cancelled {} {} {id}", t.kind.as_str(), t.name);
                    ExitCode::SUCCESS
                }
                Ok(CancelOutcome::NotPending(t)) => {
                    eprintln!(
                        "duet: timer {id} is {}: only a pending one can be cancelled",
                        t.status.as_str()
                    );
                    ExitCode::from(2)
                }
                Ok(CancelOutcome::NotFound) => {
                    eprintln!("duet: no timer {id}");
                    ExitCode::from(2)
                }
                Err(e) => {
                    eprintln!("duet: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

async fn list(
    store: &dyn Store,
    thread: Option<&str>,
    status: Option<TimerStatus>,
    kind: Option<TimerKind>,
    json: bool,
) -> Result<ExitCode, duet_runtime::StoreError> {
    let thread = match thread {
        Some(key) => match store.thread(key).await? {
            Some(t) => Some(t.id),
            None => {
                eprintln!("duet: no thread `{key}`");
                return Ok(ExitCode::from(2));
            }
        },
        None => None,
    };
    let mut keys: HashMap<uuid::Uuid, String> = HashMap::new();
    let mut out = std::io::stdout().lock();
    let mut rows = Vec::new();
    if !json {
        let _ = writeln!(
            out,
            "ID\tKIND\tNAME\tTHREAD\tSTATUS\tDUE\tATTEMPTS\tLAST ERROR"
        );
    }
    let mut after = None;
    loop {
        let query = TimerQuery {
            thread,
            status,
            kind,
            name: None,
            after,
            newest_first: false,
            limit: PAGE,
        };
        let page = store.timers(&query).await?;
        after = page.last().map(|t| (t.due_at, t.id));
        let full = page.len() == PAGE;
        for t in page {
            let key = match keys.entry(t.thread) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(
                    store
                        .thread_by_id(t.thread)
                        .await?
                        .map_or_else(|| t.thread.to_string(), |x| x.key),
                ),
            };
            let key = key.as_str();
            if json {
                rows.push(view(&t, key));
            } else {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}/{}\t{}",
                    t.id,
                    t.kind.as_str(),
                    t.name,
                    key,
                    t.status.as_str(),
                    crate::keys::rfc3339(t.due_at),
                    t.attempts,
                    t.max_attempts,
                    t.last_error.as_deref().unwrap_or("-")
                );
            }
        }
        if !full {
            break;
        }
    }
    if json {
        let _ = writeln!(out, "{}", serde_json::Value::Array(rows));
    }
    Ok(ExitCode::SUCCESS)
}

/// A timer as `--json` prints it (the REST view's fields, and its thread's key).
fn view(t: &Timer, key: &str) -> serde_json::Value {
    json!({
        "id": t.id.to_string(),
        "thread": key,
        "kind": t.kind.as_str(),
        "name": t.name,
        "args": t.args,
        "status": t.status.as_str(),
        "dueAt": t.due_at,
        "attempts": t.attempts,
        "maxAttempts": t.max_attempts,
        "lastError": t.last_error,
        "subject": t.subject,
        "createdAt": t.created_at,
        "updatedAt": t.updated_at,
    })
}
