//! The composition root: the database a place names (both its ports) and the runtime this build
//! of `duet` composes on it — the project, the model providers, the built-in handlers and remote
//! A2A agents, the hooks, the http client and MCP servers, trace export, the lease length.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use duet_runtime::{Runtime, Store};

use crate::Place;

/// The database `place` names: `--db` as given, else `PROJECT/.duet/duet.db`. Refused in one
/// line when it cannot be what the user meant: an empty `--db`, a SQLite file in a folder that
/// does not exist (only the default `.duet/` is ever created), or a project folder without
/// `agents/` (which would otherwise get an empty database of its own).
pub(crate) fn database(place: &Place) -> anyhow::Result<String> {
    if duet_spec::fs::project_root(&place.project).is_err() {
        anyhow::bail!(
            "{} is not a Standard Agents project (no `agents/` folder); pass --project DIR",
            place.project.display()
        );
    }
    match &place.db {
        Some(url) if url.trim().is_empty() => {
            anyhow::bail!("--db is empty: give a SQLite file or a postgres:// URL")
        }
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(url.clone())
        }
        Some(url) => {
            let (path, _) =
                duet_store::sqlite_location(url).map_err(|e| anyhow::anyhow!("--db {e}"))?;
            let folder = path.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(folder) = folder
                && !folder.is_dir()
            {
                anyhow::bail!(
                    "--db {url}: the folder {} does not exist (duet creates only the default .duet/)",
                    folder.display()
                );
            }
            Ok(url.clone())
        }
        None => {
            let root = duet_spec::fs::project_root(&place.project)
                .unwrap_or_else(|_| place.project.clone());
            let dir = root.join(".duet");
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            Ok(dir.join("duet.db").display().to_string())
        }
    }
}

/// Opens the store `place` names (migrating it): the engine's port. A place that cannot be
/// meant exits 2, a database that cannot be opened 1, each said in one line.
pub(crate) async fn store(place: &Place) -> Result<Arc<dyn Store>, ExitCode> {
    Ok(stores(place).await?.engine)
}

/// Opens the database `place` names (migrating it) with both its ports: the engine's tables
/// and the server's own (API keys, sign-ins, A2A push).
pub(crate) async fn stores(place: &Place) -> Result<duet_store::Stores, ExitCode> {
    let url = database(place).map_err(|e| {
        eprintln!("duet: {e:#}");
        ExitCode::from(2)
    })?;
    duet_store::open(&url).await.map_err(|e| {
        eprintln!("duet: cannot open the database {url}: {e}");
        ExitCode::from(1)
    })
}

/// Loads the project and composes the runtime; `Err` carries the exit code after reporting.
pub(crate) async fn runtime(place: &Place) -> Result<Runtime, ExitCode> {
    Ok(compose(place).await?.0)
}

/// Loads the project and composes the runtime, with the server's tables of the same database.
pub(crate) async fn compose(
    place: &Place,
) -> Result<(Runtime, Arc<dyn duet_server_store::ServerStore>), ExitCode> {
    let loaded = match duet_js::load(&place.project, &duet_js::node_path_from_env()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("duet: {e}");
            return Err(ExitCode::from(2));
        }
    };
    if !loaded.is_ok() {
        for issue in loaded
            .issues
            .iter()
            .filter(|i| i.severity == duet_spec::Severity::Error)
        {
            eprintln!("{issue}");
        }
        eprintln!("duet: the project has errors; `duet validate` lists them");
        return Err(ExitCode::from(2));
    }
    let duet_store::Stores {
        engine: store,
        server: tables,
    } = stores(place).await?;
    let root =
        duet_spec::fs::project_root(&place.project).unwrap_or_else(|_| place.project.clone());
    // What an embedder's `duet::compose` registers, so the two run a project alike: the
    // providers (built-in and `agents/providers/`), the built-in handlers and one per remote A2A
    // agent, the built-in hooks, the http client and the MCP servers of `agents/mcp/`.
    let builder = duet::compose(Arc::new(loaded.project), &root, store);
    // Message contents in the `chat` spans only when asked, with the GenAI conventions' switch.
    let capture = std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let builder = builder.capture_content(capture);
    // Exporting traces: they cross the store (a child run elsewhere, a run after a park).
    let mut builder = if crate::otel::exporting() {
        builder.trace_carrier(Arc::new(crate::otel::Carrier))
    } else {
        builder
    };
    // How long a run's lease lasts without renewal (default 30 s): how soon another process may
    // continue a thread whose runner died.
    if let Some(ms) = env_ms("DUET_LEASE_MS")? {
        builder = builder.lease_ms(ms);
    }
    // How long a claim on a due timer lasts (default 5 min): how soon another process fires a
    // timer whose process died holding it.
    if let Some(ms) = env_ms("DUET_TIMER_CLAIM_MS")? {
        builder = builder.timer_claim_ms(ms);
    }
    // The thread filesystem: chunks in a directory instead of the database (every command of a
    // deployment must say the same, or `duet files` reads where `duet serve` did not write),
    // and its limits.
    if let Ok(dir) = std::env::var("DUET_FILES_DIR")
        && !dir.trim().is_empty()
    {
        match duet_store::DirBlobs::open(dir.trim()) {
            Ok(blobs) => builder = builder.blobs(Arc::new(blobs)),
            Err(e) => {
                eprintln!("duet: DUET_FILES_DIR: {e}");
                return Err(ExitCode::from(1));
            }
        }
    }
    let mut limits = duet_runtime::files::FileLimits::default();
    if let Some(n) = env_count("DUET_MAX_FILE_BYTES")? {
        limits.max_file_bytes = n;
    }
    if let Some(n) = env_count("DUET_MAX_THREAD_BYTES")? {
        limits.max_thread_bytes = n;
    }
    if let Some(n) = env_count("DUET_MAX_THREAD_FILES")? {
        limits.max_entries = n;
    }
    builder = builder.file_limits(limits);
    Ok((builder.build(), tables))
}

/// A whole number above zero from env variable `name`, if set.
fn env_count(name: &str) -> Result<Option<u64>, ExitCode> {
    let Ok(value) = std::env::var(name) else {
        return Ok(None);
    };
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => {
            eprintln!("duet: {name} must be a whole number above zero, not `{value}`");
            Err(ExitCode::from(2))
        }
    }
}

/// The names this build registers for `builtin:` (tools, handlers — a remote A2A agent's among
/// them — and hooks) when it runs `project`.
pub(crate) fn builtins(project: &duet_spec::Project) -> duet_spec::Builtins {
    duet_spec::Builtins {
        tools: Default::default(),
        handlers: duet_handlers::handlers()
            .names()
            .map(str::to_owned)
            .chain(project.remotes.values().map(|r| r.def.builtin()))
            .collect(),
        hooks: duet_handlers::hooks().names().map(str::to_owned).collect(),
        effects: duet_handlers::effects()
            .names()
            .map(str::to_owned)
            .collect(),
    }
}

/// A duration in ms from the environment variable `name`: `None` when it is unset; a value that
/// is not a whole number of milliseconds above zero is refused in words (exit code 2), not
/// ignored.
fn env_ms(name: &str) -> Result<Option<i64>, ExitCode> {
    let Ok(value) = std::env::var(name) else {
        return Ok(None);
    };
    match value.trim().parse::<i64>() {
        Ok(ms) if ms > 0 => Ok(Some(ms)),
        _ => {
            eprintln!(
                "duet: {name} must be a whole number of milliseconds above zero, not `{value}`"
            );
            Err(ExitCode::from(2))
        }
    }
}
