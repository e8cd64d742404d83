//! `duet keys create|list|revoke`: the API keys `duet serve` admits. A key is shown once, when it
//! is made; the database keeps only its hash.

use crate::out::outln;
use std::process::ExitCode;

use crate::Place;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Make a key for a principal and print it (once).
    Create {
        /// Who the key acts as: its threads are theirs alone.
        #[arg(long)]
        principal: String,
        /// The key sees and acts on every principal's threads.
        #[arg(long)]
        admin: bool,
        /// A role the key holds (repeatable): it may see and decide the tool calls whose
        /// `approval.approvers.roles` name it, whoever's threads they are on.
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// A note on what the key is for.
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        place: Place,
    },
    /// List the keys (never the keys themselves). Times are RFC 3339, in UTC.
    List {
        /// One JSON array: `id`, `principal`, `admin`, `roles`, `label`, and `createdAt` / `revokedAt`
        /// in milliseconds since the Unix epoch (the stored form; `revokedAt` null while live).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        place: Place,
    },
    /// Revoke a key by its id (every server refuses it within seconds).
    Revoke {
        /// The key's id, as `duet keys list` shows it.
        id: String,
        #[command(flatten)]
        place: Place,
    },
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A stored moment (milliseconds since the Unix epoch) as RFC 3339 in UTC, to the second; the
/// number itself when it is out of range.
pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

pub(crate) async fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Create {
            principal,
            admin,
            roles,
            label,
            place,
        } => {
            let new = match duet_server::auth::new_key(&principal, admin, label, now())
                .and_then(|k| k.with_roles(&roles))
            {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("duet: {e}");
                    return ExitCode::from(2);
                }
            };
            let store = match crate::compose::stores(&place).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            if let Err(e) = store.server.create_key(&new.key, &new.hash).await {
                eprintln!("duet: cannot store the key: {e}");
                return ExitCode::from(1);
            }
            let roles = if new.key.roles.is_empty() {
                String::new()
            } else {
                format!(" with role {}", new.key.roles.join(", "))
            };
            eprintln!(
                "duet: key {} for {}{}{roles} — shown once, keep it secret:",
                new.key.id,
                new.key.principal,
                if admin { " (admin)" } else { "" }
            );
            // The one time the token exists: a reader that went away loses it, so that is a
            // failure (the key is stored and useless), not a quiet exit.
            let shown = {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", new.token).and_then(|()| out.flush())
            };
            if let Err(e) = shown {
                eprintln!(
                    "duet: the key's token could not be written ({e}); it is lost: revoke the key with `duet keys revoke {}` and make another",
                    new.key.id
                );
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Command::List { json, place } => {
            let store = match crate::compose::stores(&place).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            match store.server.keys().await {
                Ok(keys) if json => {
                    let list: Vec<serde_json::Value> = keys
                        .iter()
                        .map(|k| {
                            serde_json::json!({
                                "id": k.id,
                                "principal": k.principal,
                                "admin": k.admin,
                                "roles": k.roles,
                                "label": k.label,
                                "createdAt": k.created_at,
                                "revokedAt": k.revoked_at,
                            })
                        })
                        .collect();
                    outln!("{}", serde_json::Value::Array(list));
                    ExitCode::SUCCESS
                }
                Ok(keys) => {
                    outln!("ID\tPRINCIPAL\tADMIN\tCREATED\tREVOKED\tROLES\tLABEL");
                    for k in keys {
                        outln!(
                            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                            k.id,
                            k.principal,
                            k.admin,
                            rfc3339(k.created_at),
                            k.revoked_at.map_or("-".to_owned(), rfc3339),
                            if k.roles.is_empty() {
                                "-".to_owned()
                            } else {
                                k.roles.join(",")
                            },
                            k.label.unwrap_or_default()
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("duet: cannot read the keys: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Revoke { id, place } => {
            let store = match crate::compose::stores(&place).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            match store.server.revoke_key(&id, now()).await {
                Ok(true) => {
                    eprintln!("duet: key {id} revoked");
                    ExitCode::SUCCESS
                }
                Ok(false) => {
                    eprintln!("duet: no live key {id}");
                    ExitCode::from(1)
                }
                Err(e) => {
                    eprintln!("duet: cannot revoke the key: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
