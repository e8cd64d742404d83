//! `duet threads [--status S | --stale] [--json]` and `duet threads show KEY [--json]`.

use std::io::Write;
use std::process::ExitCode;

use duet_runtime::deadline::{self, Subject};
use duet_runtime::{Message, RecordBody, Thread, ThreadStatus, side_str};
use serde_json::json;

use crate::Place;

/// STATUS is where a thread stands; STOP is why its last run stopped, as the spec names it: a
/// parked thread shows `stop_on_response` or `stop_tool` when a model's turn ended and a
/// person's is next, `awaiting_human` when a person's turn came otherwise (after a handler's
/// turn, or a human acting side). `turns` counts the current session's turns per side, and
/// keeps an ended session's until the next one starts.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    show: Option<Show>,
    /// Only threads with this status: running, awaiting_human, waiting, idle, terminated.
    #[arg(long)]
    status: Option<String>,
    /// Only the threads the project's definitions no longer fit (their agent, human side or
    /// acting prompt is gone): a resume would fail them. Reads the project.
    #[arg(long, conflicts_with = "status")]
    stale: bool,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(flatten)]
    acting: crate::acting::Acting,
    #[command(flatten)]
    place: Place,
}

#[derive(clap::Subcommand)]
enum Show {
    /// Show one thread and its messages.
    Show {
        /// The thread's key.
        key: String,
    },
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let status = match args.status.as_deref().map(|s| (s, ThreadStatus::parse(s))) {
        None => None,
        Some((_, Some(s))) => Some(s),
        Some((s, None)) => {
            eprintln!(
                "duet: unknown status `{s}`; statuses: running, awaiting_human, waiting, idle, terminated"
            );
            return ExitCode::from(2);
        }
    };
    if args.stale && args.show.is_none() {
        return crate::stale::list(&args.place, args.json).await;
    }
    let who = match args.acting.who() {
        Ok(w) => w,
        Err(code) => return code,
    };
    let (store, tables) = match crate::compose::stores(&args.place).await {
        Ok(s) => (s.engine, s.server),
        Err(code) => return code,
    };
    let mut out = std::io::stdout().lock();
    match args.show {
        None => {
            // Acting as a principal: its threads alone, by the keys it names them.
            let threads = match store.threads(status).await {
                Ok(t) if who.principal().is_some() => {
                    t.into_iter().filter(|t| who.owns(t)).collect::<Vec<_>>()
                }
                Ok(t) => t,
                Err(e) => {
                    eprintln!("duet: {e}");
                    return ExitCode::from(1);
                }
            };
            if args.json {
                let list: Vec<_> = threads.iter().map(|t| summary(t, &who)).collect();
                let _ = writeln!(out, "{}", serde_json::Value::Array(list));
            } else {
                let _ = writeln!(out, "KEY\tAGENT\tSTATUS\tSESSION\tSTOP");
                for t in &threads {
                    let _ = writeln!(
                        out,
                        "{}\t{}\t{}\tsession {}\t{}",
                        who.visible(&t.key),
                        t.agent,
                        t.status.as_str(),
                        t.session,
                        t.stop_reason.map_or("-", |r| r.as_str())
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Some(Show::Show { key }) => {
            let thread = match store.thread(&who.stored(&key)).await {
                Ok(Some(t)) if who.principal().is_none() || who.owns(&t) => t,
                Ok(Some(t)) => {
                    eprintln!("duet: {}", who.not_yours(&key, &t));
                    return ExitCode::from(2);
                }
                Ok(None) => {
                    let why = who.not_found(store.as_ref(), tables.as_ref(), &key).await;
                    eprintln!("duet: {why}");
                    return ExitCode::from(2);
                }
                Err(e) => {
                    eprintln!("duet: {e}");
                    return ExitCode::from(1);
                }
            };
            let messages = match store.messages(thread.id).await {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("duet: {e}");
                    return ExitCode::from(1);
                }
            };
            let mut doc = summary(&thread, &who);
            doc["messages"] = messages.iter().map(message_json).collect();
            // Tool calls waiting for a person's decision, and the decisions recorded.
            let records = store.records(thread.id).await.unwrap_or_default();
            let (pending, decisions) =
                crate::approve::shown(&who.visible(&thread.key), &records, &messages);
            doc["approvals"] = pending;
            doc["decisions"] = decisions;
            // What the deadlines of the question it parks at and of its pending calls will do,
            // as their timers stand.
            let waiting: Vec<i64> = doc["approvals"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["seq"].as_i64())
                .collect();
            let timers = deadline_timers(store.as_ref(), &thread, &records, &waiting).await;
            let question =
                Subject::parked(&thread).and_then(|q| deadline::standing(&timers, &records, q));
            if let Some(d) = &question {
                doc["deadline"] = json!(d);
            }
            let mut calls = std::collections::HashMap::new();
            for p in doc["approvals"].as_array_mut().into_iter().flatten() {
                let seq = p["seq"].as_i64().unwrap_or_default();
                if let Some(d) = deadline::standing(&timers, &records, Subject::Approval(seq)) {
                    p["deadline"] = json!(d);
                    calls.insert(seq, d);
                }
            }
            // What the thread's model calls cost, summed over its messages.
            let usage = messages
                .iter()
                .filter_map(|m| m.usage)
                .fold(None, |sum: Option<duet_runtime::Usage>, u| {
                    Some(sum.unwrap_or_default().plus(u))
                });
            doc["usage"] = json!(usage);
            // The subagent registry: each child by its key, relationship and status.
            let mut children = Vec::new();
            for c in store.children(thread.id).await.unwrap_or_default() {
                let key = store
                    .thread_by_id(c.child)
                    .await
                    .ok()
                    .flatten()
                    .map(|t| t.key)
                    .unwrap_or_default();
                children.push(json!({"id": key, "relationship": c.relationship, "agent": c.agent, "status": c.status.as_str(), "statusText": c.status_text, "awaitedBy": c.awaiting, "name": c.name, "arguments": c.arguments}));
            }
            doc["children"] = serde_json::Value::Array(children.clone());
            // Delivered but not yet in the journal: a message queued behind a run, or for a thread
            // that waits (it is written when the thread takes it in).
            let queued = store.queue(thread.id).await.unwrap_or_default();
            doc["queued"] = queued
                .iter()
                .map(|q| {
                    json!({
                        "role": q.role.as_str(),
                        "side": side_str(q.side),
                        "content": q.content,
                        "followUp": q.follow_up,
                        "toolCallId": q.tool.as_ref().map(|r| r.call_id.clone()),
                        "createdAt": q.created_at,
                    })
                })
                .collect();
            // The run holding the thread, while one does (its lease not yet expired).
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            doc["run"] = match thread.lease_owner.filter(|_| thread.lease_expires >= now) {
                Some(run) => json!({"id": run.to_string(), "leaseExpires": thread.lease_expires}),
                None => serde_json::Value::Null,
            };
            if args.json {
                let _ = writeln!(out, "{doc}");
            } else {
                let _ = writeln!(
                    out,
                    "{} ({}) {} — session {}, stop {}, result {}",
                    who.visible(&thread.key),
                    thread.agent,
                    thread.status.as_str(),
                    thread.session,
                    thread.stop_reason.map_or("-", |r| r.as_str()),
                    thread.result.as_deref().unwrap_or("-")
                );
                if let Some(park) = thread.park() {
                    let _ = writeln!(out, "  parked at {park} (an answer names it)");
                }
                if let Some(d) = &question {
                    let _ = writeln!(out, "  deadline: {}", d.sentence(now));
                }
                for p in doc["approvals"].as_array().into_iter().flatten() {
                    let _ = writeln!(
                        out,
                        "  approval {} waits: {}({}) — decide with `duet approve {}` ({})",
                        p["id"].as_str().unwrap_or(""),
                        p["tool"].as_str().unwrap_or(""),
                        p["arguments"],
                        p["id"].as_str().unwrap_or(""),
                        p["decisions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|d| d.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    if let Some(d) = p["seq"].as_i64().and_then(|seq| calls.get(&seq)) {
                        let _ = writeln!(out, "    deadline: {}", d.sentence(now));
                    }
                }
                for d in doc["decisions"].as_array().into_iter().flatten() {
                    let detail = d["reason"]
                        .as_str()
                        .or(d["text"].as_str())
                        .map(|t| format!(": {t}"))
                        .or_else(|| d.get("args").map(|a| format!(": {a}")))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  decided {} {} ({}) by {} at {}{detail}",
                        d["decision"].as_str().unwrap_or(""),
                        d["tool"].as_str().unwrap_or(""),
                        d["call"].as_str().unwrap_or(""),
                        d["author"]
                            .as_str()
                            .map_or_else(|| "-".to_owned(), duet_server::auth::Caller::author_name),
                        d["at"]
                            .as_i64()
                            .map_or_else(|| "-".to_owned(), crate::keys::rfc3339)
                    );
                }
                if let Some(run) = doc["run"]["id"].as_str() {
                    let _ = writeln!(out, "  run {run} holds it");
                }
                if let Some(u) = usage {
                    let _ = writeln!(
                        out,
                        "  tokens: {} in ({} cached), {} out ({} reasoning)",
                        u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens
                    );
                }
                for c in &children {
                    let name = c["name"]
                        .as_str()
                        .map(|n| format!(" \"{n}\""))
                        .unwrap_or_default();
                    let text = c["statusText"]
                        .as_str()
                        .map(|t| format!(" — {t}"))
                        .unwrap_or_default();
                    // A `waiting` thread's open call, and the child it waits for.
                    let awaited = c["awaitedBy"]
                        .as_str()
                        .map(|call| format!(" (call {call} waits for it)"))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  child {}{name} ({}, {}): {}{text}{awaited}",
                        c["id"].as_str().unwrap_or(""),
                        c["relationship"].as_str().unwrap_or(""),
                        c["agent"].as_str().unwrap_or(""),
                        c["status"].as_str().unwrap_or("")
                    );
                }
                for m in &messages {
                    let who = m.side.map_or("-", side_str);
                    let text = m.content.as_deref().unwrap_or("");
                    let calls: Vec<String> = m
                        .tool_calls
                        .iter()
                        .map(|c| format!("{}({})", c.name, c.arguments))
                        .collect();
                    let _ = writeln!(
                        out,
                        "{:>4} {:<9} {} {}{}",
                        m.seq,
                        m.role.as_str(),
                        who,
                        text,
                        if calls.is_empty() {
                            String::new()
                        } else {
                            format!(" → {}", calls.join(", "))
                        }
                    );
                }
                if let Some(queued) = doc["queued"].as_array() {
                    for q in queued {
                        let _ = writeln!(
                            out,
                            "   … {:<9} {} {} (queued)",
                            q["role"].as_str().unwrap_or(""),
                            q["side"].as_str().unwrap_or(""),
                            q["content"].as_str().unwrap_or("")
                        );
                    }
                }
            }
            ExitCode::SUCCESS
        }
    }
}

/// The deadline timers of what `t` waits on — the question it parks at, its pending calls
/// (`waiting`: their approval ids) — read from the earliest ask in `records` (its last park's
/// `stopped`, the calls' `approval_requested`); none when it waits on nothing (or the read
/// fails: the rest shows).
async fn deadline_timers(
    store: &dyn duet_runtime::Store,
    t: &Thread,
    records: &[duet_runtime::Record],
    waiting: &[i64],
) -> Vec<duet_runtime::Timer> {
    let parked = records
        .iter()
        .rev()
        .find(|r| matches!(r.body, RecordBody::Stopped { .. }))
        .filter(|_| t.status == ThreadStatus::AwaitingHuman)
        .map(|r| r.created_at);
    let asked = records
        .iter()
        .filter(|r| waiting.contains(&r.seq))
        .map(|r| r.created_at)
        .min();
    let Some(since) = parked.into_iter().chain(asked).min() else {
        return Vec::new();
    };
    store
        .timers(&deadline::timer_query(t.id, since))
        .await
        .unwrap_or_default()
}

fn summary(t: &Thread, who: &crate::acting::Who) -> serde_json::Value {
    json!({
        "id": who.visible(&t.key),
        "session": t.session,
        "agent": t.agent,
        "status": t.status.as_str(),
        "statusText": t.status_text,
        "stopReason": t.stop_reason.map(|r| r.as_str()),
        "result": t.result,
        "turns": {"a": t.turns.a, "b": t.turns.b},
        "park": t.park().map(|p| p.to_string()),
    })
}

fn message_json(m: &Message) -> serde_json::Value {
    json!({
        "seq": m.seq,
        "role": m.role.as_str(),
        "side": m.side.map(side_str),
        "content": m.content,
        "toolCalls": m.tool_calls,
        "toolCallId": m.tool_call_id,
        "toolStatus": m.tool_status.map(|s| s.as_str()),
        "silent": m.silent,
        "usage": m.usage,
    })
}
