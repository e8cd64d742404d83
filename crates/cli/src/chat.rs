//! The terminal conversation of `duet run` and `duet send`: the thread's events printed as they
//! come (or one JSON event a line), and on a terminal the person asked for their turn whenever
//! the thread parks for them — and told when a parent woke from a child's answer.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use duet_runtime::{
    AgentEvent, CancellationToken, Delivered, EventSink, Runtime, StopReason, ThreadStatus,
};

/// How the first message of a conversation is delivered.
#[derive(Default)]
pub(crate) struct How {
    /// The park it answers.
    pub(crate) answers: Option<duet_runtime::Park>,
    /// The caller's message id.
    pub(crate) message_id: Option<String>,
    /// Whether the thread was parked when read (else a refusal means it asked nothing).
    pub(crate) parked: bool,
}

/// Delivers messages until the thread settles without asking for more (or the person stops).
pub(crate) async fn converse(
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
pub(crate) async fn ancestors(rt: &Runtime, key: &str) -> Vec<(duet_runtime::ThreadId, i64)> {
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
pub(crate) async fn woken(rt: &Runtime, before: &[(duet_runtime::ThreadId, i64)], json: bool) {
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
