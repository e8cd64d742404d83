//! The terminal conversation of `duet run` and `duet send`: the thread's events printed as they
//! come (or one JSON event a line), and on a terminal the person asked for their turn whenever
//! the thread parks for them — and told when a parent woke from a child's answer.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use duet_runtime::{
    AgentEvent, CancellationToken, Delivered, EventSink, Origin, Runtime, ThreadStatus, WhenBusy,
};

use crate::print::Printer;

/// How the first message of a conversation is delivered.
pub(crate) struct How {
    /// The park it answers.
    pub(crate) answers: Option<duet_runtime::Park>,
    /// The caller's message id.
    pub(crate) message_id: Option<String>,
    /// Whether the thread was parked when read (else a refusal means it asked nothing).
    pub(crate) parked: bool,
    /// What it does when a run holds the thread.
    pub(crate) when_busy: WhenBusy,
    /// The principal it is delivered as (canonical JSON; `--principal`).
    pub(crate) principal: Option<String>,
}

impl Default for How {
    fn default() -> Self {
        How {
            answers: None,
            message_id: None,
            parked: false,
            when_busy: WhenBusy::Queue,
            principal: None,
        }
    }
}

/// Refuses a message before anything is written: a `failed` event with `code`, exit 1.
pub(crate) fn refuse(json: bool, code: &str, details: &str) -> ExitCode {
    let mut printer = Printer::stdout(json);
    printer.event(&AgentEvent::Failed {
        details: details.to_owned(),
        retryable: false,
        code: Some(code.to_owned()),
    });
    if !json {
        eprintln!("duet: {details}");
    }
    ExitCode::from(1)
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
    let mut printer = Printer::stdout(json);
    let mut next = match first {
        Some(m) => m,
        None if interactive => match ask(&mut printer) {
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
        let mut live = printer;
        let printing = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                live.event(&event);
            }
            live
        });
        let delivery = duet_runtime::Delivery {
            agent,
            answers,
            message_id: message_id.as_deref(),
            when_busy: how.when_busy,
            origin: Origin {
                principal: how.principal.as_deref(),
                ..Origin::default()
            },
            ..duet_runtime::Delivery::new(key, &next)
        };
        let outcome = rt.deliver_message(delivery, &sink, &cancel).await;
        message_id = None;
        // Children started in the background (and the parent runs their results trigger) finish
        // before this process exits, or they would be left for recovery.
        rt.quiesce().await;
        drop(sink);
        printer = printing.await.unwrap_or_else(|_| Printer::stdout(json));
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
                printer.event(&event);
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
                printer.event(&event);
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
                    // Its next message, and a run took the thread (or wrote to it) since it was
                    // read: it may be asking something this message was not meant to answer.
                    duet_runtime::RunError::Busy(key) => (
                        Some("not_awaiting".to_owned()),
                        format!(
                            "`{key}` moved on since it was read (a run took it): nothing was sent; read it again (duet threads show), or --queue queues it behind that run"
                        ),
                    ),
                    _ => (None, e.to_string()),
                };
                let event = AgentEvent::Failed {
                    details: details.clone(),
                    retryable: false,
                    code,
                };
                printer.event(&event);
                if !json {
                    eprintln!("duet: {details}");
                }
                return ExitCode::from(1);
            }
        };
        let terminal = settled.terminal_event();
        printer.event(&terminal);
        woken(rt, &before, &mut printer).await;
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
        next = match ask(&mut printer) {
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
pub(crate) async fn woken(
    rt: &Runtime,
    before: &[(duet_runtime::ThreadId, i64)],
    printer: &mut Printer,
) {
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
        printer.event(&header);
        if !printer.json() {
            printer.line(&format!("── {} ({}) ──", t.key, t.agent));
        }
        for m in fresh {
            for event in events_of(m) {
                printer.event(&event);
            }
        }
        printer.event(&duet_runtime::Settled::of(&t).terminal_event());
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

/// Reads a message from the person at the terminal (an empty line asks again); `None` at end
/// of input.
fn ask(printer: &mut Printer) -> Option<String> {
    printer.finish();
    loop {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "you> ");
        let _ = out.flush();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {
                let line = line.trim_end_matches(['\n', '\r']);
                if !line.trim().is_empty() {
                    return Some(line.to_owned());
                }
            }
        }
    }
}
