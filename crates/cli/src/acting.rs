//! `--principal NAME` (or `DUET_PRINCIPAL`): whom `duet run`, `duet send` and `duet threads`
//! act as. A principal's threads live in its own key space (`alice/ticket-42`, which alice
//! calls `ticket-42`), as `duet serve` keeps them for an API key's principal; without the flag
//! the CLI acts as no principal (the threads it and a server without keys make) and lists
//! every thread by its stored key. This is addressing, not authentication: whoever can open
//! the database can act as anyone. Both ways of missing a thread say which principal has it.

use std::process::ExitCode;

use duet_runtime::Thread;
use duet_server::auth::Caller;

/// The flag.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct Acting {
    /// Act as this principal (an API key's `--principal`): its threads, named as it names them
    /// (`ticket-42` for the stored `alice/ticket-42`). Not authentication: whoever can open the
    /// database can act as anyone.
    #[arg(long, env = "DUET_PRINCIPAL", value_name = "NAME")]
    principal: Option<String>,
}

/// Whom a command acts as.
pub(crate) struct Who {
    /// The principal's name (`alice`), if any.
    name: Option<String>,
    caller: Option<Caller>,
}

impl Acting {
    /// Whom the flag names; a name no key could have is refused (exit 2).
    pub(crate) fn who(&self) -> Result<Who, ExitCode> {
        match self.principal.as_deref().filter(|p| !p.is_empty()) {
            None => Ok(Who {
                name: None,
                caller: None,
            }),
            Some(name) => match Caller::acting_as(name) {
                Ok(caller) => Ok(Who {
                    name: Some(name.to_owned()),
                    caller: Some(caller),
                }),
                Err(e) => {
                    eprintln!("duet: --principal: {e}");
                    Err(ExitCode::from(2))
                }
            },
        }
    }
}

impl Who {
    /// The stored key of the thread this principal calls `key`.
    pub(crate) fn stored(&self, key: &str) -> String {
        self.caller
            .as_ref()
            .map_or_else(|| key.to_owned(), |c| c.stored_key(key))
    }

    /// The key this principal calls the thread stored as `stored`.
    pub(crate) fn visible(&self, stored: &str) -> String {
        self.caller
            .as_ref()
            .map_or_else(|| stored.to_owned(), |c| c.visible_key(stored))
    }

    /// The principal as threads store it (canonical JSON).
    pub(crate) fn principal(&self) -> Option<&str> {
        self.caller.as_ref().and_then(|c| c.canonical.as_deref())
    }

    /// Whether `t` is this principal's (or, acting as none, nobody's).
    pub(crate) fn owns(&self, t: &Thread) -> bool {
        t.principal.as_deref() == self.principal()
    }

    /// Says the thread `key` names is another principal's: whose, and how to act as them.
    pub(crate) fn not_yours(&self, key: &str, t: &Thread) -> String {
        match t.principal.as_deref().map(Caller::author_name) {
            Some(owner) => {
                let theirs = Caller::acting_as(&owner)
                    .map_or_else(|_| t.key.clone(), |c| c.visible_key(&t.key));
                format!(
                    "thread `{key}` belongs to principal `{owner}`{}; to act as them: --principal {owner} {theirs} (or DUET_PRINCIPAL={owner}; anyone who can open the database can act as any principal)",
                    self.name
                        .as_ref()
                        .map(|n| format!(", not `{n}`"))
                        .unwrap_or_default()
                )
            }
            None => format!(
                "thread `{}` belongs to no principal (the CLI's own, or a server's without keys), not `{}`; leave out --principal (and DUET_PRINCIPAL) to reach it",
                t.key,
                self.name.as_deref().unwrap_or_default()
            ),
        }
    }

    /// Says there is no thread `key` for this principal, naming the principals (those with API
    /// keys) and the no-principal space that have one by that name.
    pub(crate) async fn not_found(
        &self,
        store: &dyn duet_runtime::Store,
        tables: &dyn duet_server_store::ServerStore,
        key: &str,
    ) -> String {
        let mut found = Vec::new();
        let mut names: Vec<String> = tables
            .keys()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|k| k.principal)
            .collect();
        names.sort();
        names.dedup();
        for name in names.iter().filter(|n| Some(*n) != self.name.as_ref()) {
            if let Ok(caller) = Caller::acting_as(name)
                && let Ok(Some(_)) = store.thread(&caller.stored_key(key)).await
            {
                found.push(format!("--principal {name} {key}"));
            }
        }
        if self.name.is_some()
            && let Ok(Some(t)) = store.thread(key).await
            && t.principal.is_none()
        {
            found.push(format!("{key} without --principal"));
        }
        let whose = self
            .name
            .as_ref()
            .map_or_else(String::new, |n| format!(" for principal `{n}`"));
        if found.is_empty() {
            let how = if self.name.is_none() {
                " (a thread made over HTTP with an API key is its principal's: --principal NAME or DUET_PRINCIPAL reaches it)"
            } else {
                ""
            };
            format!("no thread `{key}`{whose}{how}")
        } else {
            format!(
                "no thread `{key}`{whose}; there is one as: {} (anyone who can open the database can act as any principal)",
                found.join(", ")
            )
        }
    }
}
