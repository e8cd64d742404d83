//! `duet run` and `duet send`: deliver a message, run the thread until it settles, print its
//! events. On a terminal you are the human side and are asked whenever the thread parks;
//! otherwise (or with `--json`) one Agent Handler event is printed per line.
//!
//! Exit codes: 0 parked or ended, 1 the run failed, 2 bad usage or a project that does not load.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use duet_runtime::{
    AgentEvent, CancellationToken, Delivered, EventSink, Runtime, StopReason, Store, ThreadStatus,
};

use crate::Place;

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The agent to run.
    agent: String,
    /// The thread's key (a new UUID if omitted; printed to stderr).
    #[arg(long)]
    session: Option<String>,
    /// The first message (the human side's, or a `user` message for an agent without one).
    #[arg(short = 'm', long = "message")]
    message: Option<String>,
    /// Print one JSON event per line instead of a conversation.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    place: Place,
}

#[derive(clap::Args)]
pub(crate) struct SendArgs {
    /// The thread's key.
    key: String,
    /// The message; `-` reads it from standard input.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    text: Option<String>,
    /// Read the message from this file.
    #[arg(long, value_name = "FILE")]
    file: Option<std::path::PathBuf>,
    /// Queue behind whatever runs (follow-up chat) instead of answering the question the thread
    /// is parked at: without it, a send to a parked thread answers that park and is refused
    /// (exit 1, `already_answered`) if someone answered first.
    #[arg(long)]
    queue: bool,
    /// A message id of your choosing: sending the same id to the thread again writes nothing.
    #[arg(long, value_name = "ID")]
    message_id: Option<String>,
    /// Print one JSON event per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    place: Place,
}

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

/// A thread key as a person typed it: not empty, no control characters, at most 512 bytes.
pub(crate) fn check_key(key: &str) -> Result<(), ExitCode> {
    let why = if key.trim().is_empty() {
        Some("is empty")
    } else if key.chars().any(char::is_control) {
        Some("contains a control character")
    } else if key.len() > 512 {
        Some("is longer than 512 bytes")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => {
            eprintln!("duet: the thread key {key:?} {why}");
            Err(ExitCode::from(2))
        }
    }
}

/// Loads the project and composes the runtime; `Err` carries the exit code after reporting.
pub(crate) async fn runtime(place: &Place) -> Result<Runtime, ExitCode> {
    Ok(compose(place).await?.0)
}

/// Loads the project and composes the runtime, with the server's tables of the same database.
pub(crate) async fn compose(
    place: &Place,
) -> Result<(Runtime, Arc<dyn duet_server_store::ServerStore>), ExitCode> {
    let loaded = match duet_spec::load(&place.project) {
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
    // The built-in providers and the project's own (`agents/providers/`), keys from the env.
    let providers = duet_models::providers_for(&loaded.project);
    let project = Arc::new(loaded.project);
    // The built-in handlers, and one for each remote A2A agent of `agents/remotes/` (its token
    // from the env).
    let handlers = duet_server::remote_agents(
        &project,
        |var| std::env::var(var).ok().filter(|v| !v.is_empty()),
        duet_handlers::handlers(),
    );
    // Message contents in the `chat` spans only when asked, with the GenAI conventions' switch.
    let capture = std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let builder = Runtime::builder(project.clone(), store)
        .providers(providers)
        .handlers(handlers)
        .hooks(duet_handlers::hooks())
        .capture_content(capture);
    // Exporting traces: they cross the store (a child run elsewhere, a run after a park).
    let builder = if crate::otel::exporting() {
        builder.trace_carrier(Arc::new(crate::otel::Carrier))
    } else {
        builder
    };
    // The http client and one tool server per MCP server of `agents/mcp/` (started on use).
    let mut builder = duet_tools::register(builder, &project, &root);
    // How long a run's lease lasts without renewal (default 30 s): how soon another process may
    // continue a thread whose runner died.
    if let Some(ms) = std::env::var("DUET_LEASE_MS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
    {
        builder = builder.lease_ms(ms);
    }
    Ok((builder.build(), tables))
}

/// Refuses, before anything runs, `agents` when what they compose names code this build of
/// duet lacks (the project's other agents may name code that lives elsewhere).
fn refuse_missing_code(rt: &Runtime, agents: &[String]) -> Result<(), ExitCode> {
    let registered = rt.builtins();
    let mut missing: Vec<duet_spec::Issue> = agents
        .iter()
        .flat_map(|a| rt.project().check_builtins_for(a, &registered))
        .collect();
    missing.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    for issue in &missing {
        eprintln!("{issue}");
    }
    eprintln!(
        "duet: `{}` needs code this build of duet does not have",
        agents.join("`, `")
    );
    Err(ExitCode::from(2))
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
    }
}

pub(crate) async fn run(args: RunArgs) -> ExitCode {
    let rt = match runtime(&args.place).await {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    if !rt.project().agents.contains_key(&args.agent) {
        let names: Vec<&str> = rt.project().agents.keys().map(String::as_str).collect();
        eprintln!(
            "duet: no agent `{}`; agents: {}",
            args.agent,
            names.join(", ")
        );
        return ExitCode::from(2);
    }
    if let Err(code) = refuse_missing_code(&rt, std::slice::from_ref(&args.agent)) {
        return code;
    }
    let key = args
        .session
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    if let Err(code) = check_key(&key) {
        return code;
    }
    if args.session.is_none() {
        eprintln!("session: {key}");
    }
    converse(
        &rt,
        &key,
        Some(&args.agent),
        args.message,
        args.json,
        How::default(),
    )
    .await
}

/// `duet recover`: continues every thread whose runner died (or whose queued messages have no
/// runner), then exits.
pub(crate) async fn recover(place: Place) -> ExitCode {
    let rt = match runtime(&place).await {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.recover(&CancellationToken::new()).await {
        Ok(n) => {
            println!("continued {n} thread{}", if n == 1 { "" } else { "s" });
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("duet: {e}");
            ExitCode::from(1)
        }
    }
}

/// The message `duet send` delivers: the argument, standard input (`-`), or a file.
fn message_text(args: &SendArgs) -> Result<String, ExitCode> {
    use std::io::Read;
    let text = match (&args.text, &args.file) {
        (_, Some(path)) => std::fs::read_to_string(path).map_err(|e| {
            eprintln!("duet: cannot read {}: {e}", path.display());
            ExitCode::from(2)
        })?,
        (Some(t), None) if t == "-" => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| {
                eprintln!("duet: cannot read standard input: {e}");
                ExitCode::from(2)
            })?;
            text
        }
        (Some(t), None) => t.clone(),
        (None, None) => String::new(),
    };
    if text.trim().is_empty() {
        eprintln!("duet: the message is empty");
        return Err(ExitCode::from(2));
    }
    Ok(text)
}

pub(crate) async fn send(args: SendArgs) -> ExitCode {
    if let Err(code) = check_key(&args.key) {
        return code;
    }
    let text = match message_text(&args) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let rt = match runtime(&args.place).await {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    // The thread's agent runs, and so do its ancestors when a child's result reaches them.
    let mut agents = Vec::new();
    let mut next = match rt.store().thread(&args.key).await {
        Ok(Some(t)) => Some(t),
        Ok(None) => {
            eprintln!("duet: no thread `{}`", args.key);
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(1);
        }
    };
    // The question this answers, as read now: a second answer to it is refused. A thread that
    // asks nothing (it runs, or its session ended) is answered only by --queue: the position read
    // is not a park, so the store refuses it (a repeated --message-id still finds its first
    // delivery).
    let parked = next.as_ref().is_some_and(|t| t.park().is_some());
    let park = next
        .as_ref()
        .filter(|_| !args.queue)
        .map(|t| duet_runtime::Park {
            session: t.session,
            seq: t.next_seq,
        });
    while let Some(t) = next.take() {
        if !agents.contains(&t.agent) {
            agents.push(t.agent.clone());
        }
        if let Some(parent) = t.parent {
            next = rt.store().thread_by_id(parent).await.ok().flatten();
        }
    }
    if let Err(code) = refuse_missing_code(&rt, &agents) {
        return code;
    }
    let how = How {
        answers: park,
        message_id: args.message_id.clone(),
        parked,
    };
    converse(&rt, &args.key, None, Some(text), args.json, how).await
}

/// How the first message of a conversation is delivered.
#[derive(Default)]
struct How {
    /// The park it answers.
    answers: Option<duet_runtime::Park>,
    /// The caller's message id.
    message_id: Option<String>,
    /// Whether the thread was parked when read (else a refusal means it asked nothing).
    parked: bool,
}

/// Delivers messages until the thread settles without asking for more (or the person stops).
async fn converse(
    rt: &Runtime,
    key: &str,
    agent: Option<&str>,
    first: Option<String>,
    json: bool,
    how: How,
) -> ExitCode {
    let interactive = !json && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let cancel = CancellationToken::new();
    // Threads a dead runner left behind are continued first (this process is "the next runner").
    if let Err(e) = rt.recover(&cancel).await {
        eprintln!("duet: recovery failed: {e}");
    }
    let mut next = match first {
        Some(m) => m,
        None if interactive => match ask() {
            Some(m) => m,
            None => return ExitCode::SUCCESS,
        },
        None => {
            eprintln!("duet: -m TEXT is required when not on a terminal");
            return ExitCode::from(2);
        }
    };
    let mut answers = how.answers;
    let mut parked = how.parked;
    let mut message_id = how.message_id;
    loop {
        // Where the thread's ancestors stand before: a child's answer may wake them.
        let before = ancestors(rt, key).await;
        let (sink, mut rx) = EventSink::channel();
        let printer = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                print_event(&event, json);
            }
        });
        let delivery = duet_runtime::Delivery {
            agent,
            answers,
            message_id: message_id.as_deref(),
            ..duet_runtime::Delivery::new(key, &next)
        };
        let outcome = rt.deliver_message(delivery, &sink, &cancel).await;
        message_id = None;
        // Children started in the background (and the parent runs their results trigger) finish
        // before this process exits, or they would be left for recovery.
        rt.quiesce().await;
        drop(sink);
        let _ = printer.await;
        let settled = match outcome {
            Ok(Delivered::Settled(s)) => s,
            Ok(Delivered::Duplicate(s)) => {
                let event = match s.terminal_event() {
                    AgentEvent::Completed {
                        data: Some(mut data),
                    } => {
                        data["duplicate"] = serde_json::json!(true);
                        AgentEvent::Completed { data: Some(data) }
                    }
                    other => other,
                };
                print_event(&event, json);
                if !json {
                    eprintln!("(this message id was delivered before; nothing was sent again)");
                }
                return ExitCode::SUCCESS;
            }
            Ok(Delivered::Queued { .. }) => {
                let event = AgentEvent::Completed {
                    data: Some(
                        serde_json::json!({"thread": key, "status": "running", "queued": true}),
                    ),
                };
                print_event(&event, json);
                if !json {
                    eprintln!("(the thread is running elsewhere; your message is queued for it)");
                }
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                let (code, details) = match &e {
                    duet_runtime::RunError::AlreadyAnswered { key, .. } if !parked => (
                        Some("not_awaiting".to_owned()),
                        format!(
                            "`{key}` is not waiting for a person: nothing was sent; --queue sends it anyway"
                        ),
                    ),
                    duet_runtime::RunError::AlreadyAnswered { .. } => (
                        Some(duet_runtime::codes::ALREADY_ANSWERED.to_owned()),
                        e.to_string(),
                    ),
                    _ => (None, e.to_string()),
                };
                let event = AgentEvent::Failed {
                    details: details.clone(),
                    retryable: false,
                    code,
                };
                print_event(&event, json);
                if !json {
                    eprintln!("duet: {details}");
                }
                return ExitCode::from(1);
            }
        };
        let terminal = settled.terminal_event();
        print_event(&terminal, json);
        woken(rt, &before, json).await;
        let failed = matches!(terminal, AgentEvent::Failed { .. });
        if failed {
            return ExitCode::from(1);
        }
        if !(interactive && settled.status == ThreadStatus::AwaitingHuman) {
            return ExitCode::SUCCESS;
        }
        // The person at the terminal answers the question the thread just asked.
        answers = settled.park;
        parked = true;
        next = match ask() {
            Some(m) => m,
            None => return ExitCode::SUCCESS,
        };
    }
}

/// The ancestors of thread `key`, nearest first, each with the seq its journal had reached.
async fn ancestors(rt: &Runtime, key: &str) -> Vec<(duet_runtime::ThreadId, i64)> {
    let store = rt.store();
    let mut out = Vec::new();
    let mut next = store
        .thread(key)
        .await
        .ok()
        .flatten()
        .and_then(|t| t.parent);
    while let Some(id) = next.take() {
        if let Ok(Some(t)) = store.thread_by_id(id).await {
            out.push((t.id, t.next_seq));
            next = t.parent;
        }
    }
    out
}

/// What the ancestors in `before` did since (a child's result woke them and they ran on): for
/// each that advanced, a `thread` line naming it, the events of its new messages, and where it
/// settled — so `duet send` to a child shows the parent's continuation too.
async fn woken(rt: &Runtime, before: &[(duet_runtime::ThreadId, i64)], json: bool) {
    let store = rt.store();
    for (id, seq) in before {
        let Ok(Some(t)) = store.thread_by_id(*id).await else {
            continue;
        };
        if t.next_seq == *seq {
            continue;
        }
        let messages = store.messages(t.id).await.unwrap_or_default();
        let fresh: Vec<&duet_runtime::Message> =
            messages.iter().filter(|m| m.seq >= *seq).collect();
        let header = AgentEvent::Other(serde_json::json!({"type": "thread", "thread": t.key}));
        print_event(&header, json);
        if !json {
            println!("── {} ({}) ──", t.key, t.agent);
        }
        for m in fresh {
            for event in events_of(m) {
                print_event(&event, json);
            }
        }
        print_event(&duet_runtime::Settled::of(&t).terminal_event(), json);
    }
}

/// The events a committed message stands for (what its run streamed when it was written).
fn events_of(m: &duet_runtime::Message) -> Vec<AgentEvent> {
    use duet_runtime::Role;
    let mut out = Vec::new();
    if m.silent {
        return out;
    }
    match m.role {
        Role::Tool => {
            if let Some(id) = &m.tool_call_id {
                out.push(AgentEvent::ToolEnded {
                    id: id.clone(),
                    is_error: m.tool_status == Some(duet_runtime::ToolStatus::Error),
                    content: serde_json::json!(m.content.clone().unwrap_or_default()),
                });
            }
        }
        Role::User | Role::Assistant => {
            if let Some(th) = &m.thinking {
                out.push(AgentEvent::Thinking { delta: th.clone() });
            }
            if let Some(c) = m.content.as_ref().filter(|c| !c.is_empty()) {
                out.push(AgentEvent::Text { delta: c.clone() });
            }
            for call in &m.tool_calls {
                out.push(AgentEvent::ToolStarted {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    args: call.arguments.clone(),
                });
            }
        }
        Role::System => {}
    }
    out
}

/// Reads a line from the person at the terminal; `None` at end of input.
fn ask() -> Option<String> {
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "you> ");
    let _ = out.flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
    }
}

fn print_event(event: &AgentEvent, json: bool) {
    let mut out = std::io::stdout().lock();
    if json {
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(out, "{line}");
        }
        return;
    }
    let _ = match event {
        AgentEvent::Text { delta } => writeln!(out, "{delta}"),
        AgentEvent::Thinking { delta } => writeln!(out, "  (thinking: {delta})"),
        AgentEvent::ToolStarted { name, args, .. } => writeln!(out, "  → {name} {args}"),
        AgentEvent::ToolEnded {
            is_error, content, ..
        } => {
            let text = content
                .as_str()
                .map_or_else(|| content.to_string(), str::to_owned);
            writeln!(out, "  {} {text}", if *is_error { "✗" } else { "←" })
        }
        AgentEvent::Retrying {
            attempt,
            max_attempts,
            reason,
            ..
        } => {
            writeln!(out, "  (retrying {attempt}/{max_attempts}: {reason})")
        }
        AgentEvent::Completed { data } => {
            let field = |k: &str| {
                data.as_ref()
                    .and_then(|d| d.get(k))
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
            };
            let status = field("status").unwrap_or_default();
            let reason = field("stopReason").unwrap_or_default();
            match (status.as_str(), field("result")) {
                ("awaiting_human", _) => writeln!(out, "[waiting for you]"),
                ("waiting", _) => writeln!(
                    out,
                    "[waiting for a subagent; it runs on when that answers]"
                ),
                (_, Some(result)) if reason != StopReason::Aborted.as_str() => {
                    writeln!(out, "[session ended: {reason}] {result}")
                }
                _ => writeln!(out, "[{status}: {reason}]"),
            }
        }
        // An event this build does not know: a conversation view has nothing to show for it.
        AgentEvent::Other(_) => Ok(()),
        AgentEvent::Failed { details, code, .. } => {
            writeln!(
                out,
                "[failed{}] {details}",
                code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default()
            )
        }
    };
}
