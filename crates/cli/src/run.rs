//! `duet run` and `duet send`: deliver a message, run the thread until it settles, print its
//! events. On a terminal you are the human side and are asked whenever the thread parks;
//! otherwise (or with `--json`) one Agent Handler event is printed per line.
//!
//! Exit codes: 0 parked or ended, 1 the run failed, 2 bad usage or a project that does not load.

use crate::out::outln;
use std::io::IsTerminal;
use std::process::ExitCode;

use duet_runtime::{CancellationToken, Runtime};

use duet_runtime::{Addressed, WhenBusy};

use crate::Place;
use crate::acting::Acting;
use crate::chat::{How, converse, refuse};
use crate::compose::{compose, runtime};

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
    acting: Acting,
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
    /// Queue behind whatever runs (follow-up chat). Without it, a send to a parked thread
    /// answers that park and is refused (exit 1, `already_answered`) if someone answered first;
    /// a send to a thread that is running or waits for a subagent is refused (exit 1,
    /// `not_awaiting`); a send to an idle thread (its session ended) starts the next session.
    #[arg(long)]
    queue: bool,
    /// The question this answers, `SESSION:SEQ` (an approval's `park`, as the API shows it):
    /// refused (exit 1, `already_answered`) unless the thread is still parked there. Without it,
    /// the question the thread is parked at when read.
    #[arg(long, value_name = "SESSION:SEQ", conflicts_with = "queue")]
    park: Option<duet_runtime::Park>,
    /// A message id of your choosing: sending the same id to the thread again writes nothing.
    #[arg(long, value_name = "ID")]
    message_id: Option<String>,
    /// Print one JSON event per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    acting: Acting,
    #[command(flatten)]
    place: Place,
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

pub(crate) async fn run(args: RunArgs) -> ExitCode {
    // What cannot be run is refused before anything is opened or printed.
    match args.message.as_deref() {
        Some(m) if m.trim().is_empty() => {
            eprintln!(
                "duet: the message (-m) is empty: say something, or leave -m out on a terminal to be asked"
            );
            return ExitCode::from(2);
        }
        Some(_) => {}
        None if !args.json && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() => {
        }
        None => {
            eprintln!("duet: -m TEXT is required when not on a terminal (or with --json)");
            return ExitCode::from(2);
        }
    }
    let who = match args.acting.who() {
        Ok(w) => w,
        Err(code) => return code,
    };
    let rt = match runtime(&args.place).await {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    if !rt.project().agents.contains_key(&args.agent) {
        let hint = rt.project().agent_hint(&args.agent);
        eprintln!("duet: no agent `{}`; {hint}", args.agent);
        return ExitCode::from(2);
    }
    if let Err(code) = refuse_missing_code(&rt, std::slice::from_ref(&args.agent)) {
        return code;
    }
    let named = args
        .session
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    if let Err(code) = check_key(&named) {
        return code;
    }
    let key = who.stored(&named);
    match rt.store().thread(&key).await {
        Ok(Some(t)) if !who.owns(&t) => {
            eprintln!("duet: {}", who.not_yours(&named, &t));
            return ExitCode::from(2);
        }
        Ok(_) => {}
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(1);
        }
    }
    if args.session.is_none() {
        eprintln!("session: {named}");
    }
    // Threads a dead runner left behind are continued first (this process is "the next
    // runner"); `send` does so before it reads the thread.
    if let Err(e) = rt.recover(&CancellationToken::new()).await {
        eprintln!("duet: recovery failed: {e}");
    }
    let how = How {
        principal: who.principal().map(str::to_owned),
        ..How::default()
    };
    converse(&rt, &key, Some(&args.agent), args.message, args.json, how).await
}

/// `duet recover`: continues every thread whose runner died (or whose queued messages have no
/// runner), fires the timers due now (those a dead process held among them, once their claim ran
/// out), then exits. It waits for nothing to come due: `duet serve` does that.
pub(crate) async fn recover(place: Place) -> ExitCode {
    let rt = match runtime(&place).await {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let n = match rt.recover(&CancellationToken::new()).await {
        Ok(n) => n,
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(1);
        }
    };
    outln!("continued {n} thread{}", if n == 1 { "" } else { "s" });
    let mut fired = 0;
    loop {
        match rt.run_due_timers().await {
            Ok(0) => break,
            Ok(k) => fired += k,
            Err(e) => {
                eprintln!("duet: {e}");
                return ExitCode::from(1);
            }
        }
    }
    // What the timers started (a thread running on after an effect queued a message).
    rt.quiesce().await;
    outln!("fired {fired} timer{}", if fired == 1 { "" } else { "s" });
    ExitCode::SUCCESS
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
    let who = match args.acting.who() {
        Ok(w) => w,
        Err(code) => return code,
    };
    let text = match message_text(&args) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let (rt, tables) = match compose(&args.place).await {
        Ok(composed) => composed,
        Err(code) => return code,
    };
    // Threads a dead runner left behind are continued first, so the thread is read as it
    // stands (this process is "the next runner").
    if let Err(e) = rt.recover(&CancellationToken::new()).await {
        eprintln!("duet: recovery failed: {e}");
    }
    let key = who.stored(&args.key);
    let thread = match rt.store().thread(&key).await {
        Ok(Some(t)) if who.owns(&t) => t,
        Ok(Some(t)) => {
            eprintln!("duet: {}", who.not_yours(&args.key, &t));
            return ExitCode::from(2);
        }
        Ok(None) => {
            eprintln!(
                "duet: {}",
                who.not_found(rt.store().as_ref(), tables.as_ref(), &args.key)
                    .await
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(1);
        }
    };
    // What the message is, by the thread as read (the runtime's rule): the answer to the
    // question it asks (a second answer is refused), or its next message when nothing runs
    // (refused if a run takes it first); a thread at work is not interrupted unless --queue.
    let parked = thread.park().is_some();
    let (answers, when_busy) = match (args.queue, args.park, Addressed::of(&thread)) {
        (true, _, _) => (None, WhenBusy::Queue),
        (false, Some(park), _) => (Some(park), WhenBusy::Queue),
        (false, None, Addressed::Answers(park)) => (Some(park), WhenBusy::Queue),
        (false, None, Addressed::Next) => (None, WhenBusy::RejectIfMoved(thread.next_seq)),
        (false, None, Addressed::Busy(status)) => {
            let doing = if status == duet_runtime::ThreadStatus::Waiting {
                "waits for a subagent or a person's decision on a tool call (`duet threads show` lists its approvals; `duet approve` decides one)"
            } else {
                "is running"
            };
            return refuse(
                args.json,
                "not_awaiting",
                &format!(
                    "`{}` {doing} and asks nothing: nothing was sent; --queue queues it behind that work",
                    args.key
                ),
            );
        }
    };
    // The thread's agent runs, and so do its ancestors when a child's result reaches them.
    let mut agents = Vec::new();
    let mut next = Some(thread);
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
        answers,
        message_id: args.message_id.clone(),
        parked,
        when_busy,
        principal: who.principal().map(str::to_owned),
    };
    converse(&rt, &key, None, Some(text), args.json, how).await
}
