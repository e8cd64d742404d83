//! The engine's transitions as data: each file of `tests/transitions/` is a small project, a
//! thread's state and history, one transition (a drain, a step's completion, a park, a stop,
//! a session's end, a handoff) and what it must produce — the thread's new state and the
//! journal entries and queue ids to commit. A `step` case is a model step's plan
//! (`duet_runtime::plan`): the model's answer and what its calls came to, in; the messages,
//! records and settle the step commits, out. `transition.rs` is pure: no database and no clock.
//! Each commit is then applied to the in-memory store (`MemoryStore`, the port's reference
//! semantics): the case also says whether the commit settled and what the journal holds after
//! it. `DUET_BLESS=1` rewrites each case's `expect` from what the code produces (check the diff).

use std::path::{Path, PathBuf};

use duet_runtime::transition;
use duet_runtime::transition::CallOutcome;
use duet_runtime::{
    Commit, Message, Queued, Role, SideId, StopReason, Thread, ThreadStatus, ToolReply, ToolStatus,
};
use duet_spec::{Project, Side, SourceFile};
use serde_json::{Value, json};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transitions");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/transitions")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    out.sort();
    out
}

fn project(files: &Value) -> Project {
    let files = files
        .as_object()
        .expect("`project` is an object of path → text")
        .iter()
        .map(|(path, text)| SourceFile {
            path: path.clone(),
            bytes: text.as_str().expect("file text").as_bytes().to_vec(),
        });
    let loaded = Project::from_files(files);
    let errors: Vec<String> = loaded
        .issues
        .iter()
        .filter(|i| i.severity == duet_spec::Severity::Error)
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    loaded.project
}

fn side(v: &Value) -> SideId {
    match v.as_str() {
        Some("a") => SideId::A,
        Some("b") => SideId::B,
        other => panic!("a side is `a` or `b`, not {other:?}"),
    }
}

fn status(v: &Value) -> ThreadStatus {
    ThreadStatus::parse(v.as_str().unwrap_or_default()).expect("a thread status")
}

/// The case's thread: a new idle one, with the fields `v` names.
fn thread(v: &Value) -> Thread {
    let mut t = Thread::new(uuid::Uuid::nil(), "k".into(), "x".into(), None, 0);
    let int = |k: &str| v.get(k).and_then(Value::as_i64);
    if let Some(a) = v.get("agent").and_then(Value::as_str) {
        a.clone_into(&mut t.agent);
    }
    if let Some(s) = v.get("status") {
        t.status = status(s);
    }
    if let Some(s) = v.get("stopReason").and_then(Value::as_str) {
        t.stop_reason = StopReason::parse(s);
    }
    if let Some(n) = int("session") {
        t.session = n;
    }
    if let Some(o) = v.get("sessionOpen").and_then(Value::as_bool) {
        t.session_open = o;
    }
    if let Some(a) = v.get("acting") {
        t.acting = Some(side(a));
    }
    if let Some(n) = int("nextSeq") {
        t.next_seq = n;
    }
    if let Some(turns) = v.get("turns") {
        t.turns.a = turns["a"].as_i64().unwrap_or(0);
        t.turns.b = turns["b"].as_i64().unwrap_or(0);
    }
    if let Some(steps) = v.get("steps") {
        t.steps.a = steps["a"].as_i64().unwrap_or(0);
        t.steps.b = steps["b"].as_i64().unwrap_or(0);
    }
    t
}

/// What of a thread the cases compare.
fn thread_json(t: &Thread) -> Value {
    json!({
        "agent": t.agent,
        "status": t.status.as_str(),
        "stopReason": t.stop_reason.map(StopReason::as_str),
        "session": t.session,
        "sessionOpen": t.session_open,
        "acting": t.acting.map(duet_runtime::side_str),
        "turns": {"a": t.turns.a, "b": t.turns.b},
        "steps": {"a": t.steps.a, "b": t.steps.b},
        "result": t.result,
        "statusText": t.status_text,
        "nextSeq": t.next_seq,
    })
}

fn message_json(m: &Message) -> Value {
    let mut v = json!({
        "seq": m.seq,
        "role": m.role.as_str(),
        "side": m.side.map(duet_runtime::side_str),
        "content": m.content,
    });
    if !m.tool_calls.is_empty() {
        v["toolCalls"] = json!(m.tool_calls);
    }
    if let Some(thinking) = &m.thinking {
        v["thinking"] = json!(thinking);
    }
    if m.silent {
        v["silent"] = json!(true);
    }
    if let Some(id) = &m.tool_call_id {
        v["toolCallId"] = json!(id);
        v["toolStatus"] = json!(m.tool_status.map(ToolStatus::as_str));
    }
    if let Some(id) = &m.message_id {
        v["messageId"] = json!(id);
    }
    v
}

fn commit_json(t: &Thread, c: &Commit) -> Value {
    json!({
        "thread": thread_json(t),
        "messages": c.messages.iter().map(message_json).collect::<Vec<_>>(),
        "records": c.records.iter().map(|r| json!([r.seq, r.kind(), r.data()])).collect::<Vec<_>>(),
        "drained": c.drained,
        "settle": c.settle,
        "values": c.values.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
    })
}

fn history(v: Option<&Value>) -> Vec<Message> {
    v.and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .map(|m| {
                    let mut msg = Message::text(
                        m["seq"].as_i64().expect("seq"),
                        1,
                        Role::parse(m["role"].as_str().expect("role")).expect("a role"),
                        m.get("side").map(side),
                        m.get("content")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        0,
                    );
                    if m.get("content").is_none() {
                        msg.content = None;
                    }
                    msg.model = m.get("model").and_then(Value::as_str).map(str::to_owned);
                    msg.tool_calls = m
                        .get("toolCalls")
                        .map(|c| serde_json::from_value(c.clone()).expect("tool calls"))
                        .unwrap_or_default();
                    msg.tool_call_id = m
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    msg.tool_status = m
                        .get("toolStatus")
                        .and_then(Value::as_str)
                        .and_then(ToolStatus::parse);
                    msg
                })
                .collect()
        })
        .unwrap_or_default()
}

fn queued(v: &Value) -> Vec<Queued> {
    v.as_array()
        .expect("a queue")
        .iter()
        .map(|q| Queued {
            attachments: Vec::new(),
            id: q["id"].as_i64().expect("id"),
            role: Role::parse(q["role"].as_str().expect("role")).expect("a role"),
            side: side(&q["side"]),
            content: q["content"].as_str().unwrap_or_default().to_owned(),
            human: q["human"].as_bool().unwrap_or(false),
            silent: q["silent"].as_bool().unwrap_or(false),
            follow_up: q["followUp"].as_bool().unwrap_or(false),
            tool: q.get("tool").map(|r| ToolReply {
                call_id: r["callId"].as_str().expect("callId").to_owned(),
                name: r["name"].as_str().unwrap_or("subagent_create").to_owned(),
                status: ToolStatus::parse(r["status"].as_str().unwrap_or("success"))
                    .expect("a tool status"),
            }),
            decision: q
                .get("decision")
                .map(|d| serde_json::from_value(d.clone()).expect("a decision")),
            images: Vec::new(),
            trace: None,
            message_id: q["messageId"].as_str().map(str::to_owned),
            created_at: 0,
        })
        .collect()
}

/// Applies `commit` of thread `t` (as the transition left it) to a fresh in-memory store holding
/// the thread, under a lease; returns the outcome and the journal read back.
async fn stored(before: &Thread, t: &Thread, commit: Commit) -> Value {
    use duet_runtime::{
        CommitOutcome, CommitStore, JournalEntry, JournalStore, Lease, LeaseStore, NewThread,
        ThreadStore,
    };
    let store = duet_runtime::testing::MemoryStore::new();
    let new = NewThread {
        id: before.id,
        agent: &before.agent,
        parent: None,
        principal: None,
        source: None,
        now: 0,
    };
    store.open_thread(&before.key, new).await.expect("open");
    let owner = uuid::Uuid::now_v7();
    let lease = Lease {
        owner,
        until: 1_000_000,
        now: 1,
    };
    assert!(store.claim(before.id, lease).await.expect("claim"));
    let mut t = t.clone();
    t.lease_owner = Some(owner);
    let outcome = store.commit(&t, owner, commit).await.expect("commit");
    let journal: Vec<Value> = store
        .journal_since(before.id, 0)
        .await
        .expect("journal")
        .iter()
        .map(|e| match e {
            JournalEntry::Message(m) => json!([m.seq, "message"]),
            JournalEntry::Record(r) => json!([r.seq, r.kind()]),
        })
        .collect();
    let read = store
        .thread(&before.key)
        .await
        .expect("read")
        .expect("thread");
    assert_eq!(
        thread_json(&read),
        thread_json(&t),
        "the store keeps the thread as committed"
    );
    json!({
        "outcome": match outcome {
            CommitOutcome::Settled => "settled",
            CommitOutcome::Committed { .. } => "committed",
        },
        "journal": journal,
    })
}

/// A model step's plan (`duet_runtime::plan`): the model's answer and what each of its calls
/// came to (`result`, what a hook `stored` instead or `dropped`, or `awaiting` a child), and a
/// handoff; returns the commit and whether the step waits.
fn step(
    project: &Project,
    agent: &duet_spec::AgentDef,
    t: &mut Thread,
    history: &[Message],
    args: &Value,
    now: i64,
) -> (Commit, bool) {
    use duet_runtime::plan::{self, CallDone, CallsDone, ModelAnswer, StepOf};
    let acting = side(&args["side"]);
    let Side::Prompt(cfg) = agent.side(acting) else {
        panic!("a step needs a prompt side");
    };
    let prompt = &project
        .prompts
        .get(&cfg.prompt)
        .expect("the side's prompt")
        .def;
    let answer = &args["answer"];
    let calls = answer["calls"].as_array().cloned().unwrap_or_default();
    let answer = ModelAnswer {
        text: answer["text"].as_str().unwrap_or_default().to_owned(),
        thinking: answer["thinking"].as_str().unwrap_or_default().to_owned(),
        calls: calls
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().map(str::to_owned),
                    c["name"].as_str().expect("a call's name").to_owned(),
                    c.get("arguments").cloned().unwrap_or_else(|| json!({})),
                )
            })
            .collect(),
        usage: None,
        provider_data: None,
    };
    let result = |v: &Value| duet_runtime::ToolResult {
        attachments: Vec::new(),
        status: ToolStatus::parse(v["status"].as_str().unwrap_or("success")).expect("a status"),
        content: v["content"].as_str().unwrap_or_default().to_owned(),
    };
    let mut done = CallsDone::default();
    for (at, c) in args["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if let Some(key) = c.get("awaiting").and_then(Value::as_str) {
            done.awaiting.push((at, key.to_owned()));
            done.calls.push(CallDone::default());
            continue;
        }
        let produced = result(&c["result"]);
        let stored = match c.get("stored") {
            _ if c["dropped"].as_bool() == Some(true) => None,
            Some(s) => Some(result(s)),
            None => Some(produced.clone()),
        };
        done.calls.push(CallDone {
            result: Some(produced),
            stored,
        });
    }
    if let Some(h) = args.get("handoff") {
        let to = h["to"].as_str().expect("handoff.to").to_owned();
        let call = h["call"].as_u64().expect("handoff.call");
        done.handoff = Some((to, usize::try_from(call).expect("an index")));
    }
    let message = plan::model_message(t, acting, cfg, &prompt.model, answer, now);
    let of = StepOf {
        agent,
        cfg,
        prompt,
        side: acting,
        history,
        now,
    };
    let planned = plan::step(t, of, message, done);
    let waits = planned.waits;
    (planned.into_commit(), waits)
}

/// Runs the case's transition and returns what it produced.
async fn produce(case: &Value) -> Value {
    let project = project(&case["project"]);
    let mut t = thread(&case["thread"]);
    let before = t.clone();
    let agent = &project
        .agents
        .get(&t.agent)
        .expect("the thread's agent")
        .def;
    let history = history(case.get("history"));
    let op = case["do"].as_object().expect("`do` names one transition");
    let (name, args) = op.iter().next().expect("one transition");
    let now = 100;
    let commit = match name.as_str() {
        "drain" => {
            let queue = transition::drainable(&t, queued(args));
            let arguments = case.get("arguments").cloned().unwrap_or_else(|| json!({}));
            transition::drain(&mut t, &queue, &arguments, now)
        }
        "completeStep" => {
            let acting = side(&args["side"]);
            let Side::Prompt(cfg) = agent.side(acting) else {
                panic!("completeStep needs a prompt side");
            };
            let calls = history
                .iter()
                .rev()
                .find(|m| m.side == Some(acting) && m.model.is_some())
                .map(|m| m.tool_calls.clone())
                .unwrap_or_default();
            let outcomes: Vec<CallOutcome<'_>> = transition::outcomes_of(&calls, &history);
            let handoff = args["handoff"].as_bool().unwrap_or(false);
            let (records, settle) = transition::complete_step(
                agent,
                cfg,
                &mut t,
                acting,
                transition::History::of(&history),
                &outcomes,
                handoff,
                now,
            );
            Commit {
                records,
                settle,
                ..Commit::default()
            }
        }
        "step" => {
            let (commit, waits) = step(&project, agent, &mut t, &history, args, now);
            let mut out = commit_json(&t, &commit);
            out["waits"] = json!(waits);
            out["store"] = stored(&before, &t, commit).await;
            return out;
        }
        "openCalls" => {
            let open: Vec<&str> = transition::open_calls(&history, side(&args["side"]))
                .into_iter()
                .map(|c| c.id.as_str())
                .collect();
            return json!({"open": open});
        }
        "handoff" => {
            let prompt = &project
                .prompts
                .get(args["prompt"].as_str().expect("prompt"))
                .expect("the prompt")
                .def;
            let to = args["to"].as_str().expect("to");
            let h = transition::handoff(&mut t, prompt, to, &args["arguments"], now);
            Commit {
                messages: h.messages,
                records: vec![h.record],
                values: h.values,
                ..Commit::default()
            }
        }
        "park" | "stop" => {
            let reason = StopReason::parse(args.as_str().expect("a stop reason")).expect("reason");
            let record = if name == "park" {
                transition::park(&mut t, reason, now)
            } else {
                transition::stop(&mut t, reason, now)
            };
            Commit {
                records: vec![record],
                settle: true,
                ..Commit::default()
            }
        }
        "endSession" => {
            let reason =
                StopReason::parse(args["reason"].as_str().expect("reason")).expect("reason");
            let result = args["result"].as_str().map(str::to_owned);
            Commit {
                records: vec![transition::end_session(&mut t, reason, result, now)],
                settle: true,
                ..Commit::default()
            }
        }
        other => panic!("unknown transition `{other}`"),
    };
    let mut out = commit_json(&t, &commit);
    out["store"] = stored(&before, &t, commit).await;
    out
}

#[tokio::test]
async fn every_transition_produces_its_commit() {
    let bless = std::env::var_os("DUET_BLESS").is_some();
    let cases = cases();
    assert!(
        cases.len() >= 8,
        "transition cases went missing: {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for path in &cases {
        let text = std::fs::read_to_string(path).expect("readable");
        let mut case: Value = serde_json::from_str(&text).expect("a JSON case");
        let got = produce(&case).await;
        if bless {
            case["expect"] = got;
            let pretty = serde_json::to_string_pretty(&case).expect("JSON");
            std::fs::write(path, format!("{pretty}\n")).expect("writable");
        } else if case["expect"] != got {
            failures.push(format!(
                "{}:\nexpected {}\n     got {}",
                path.display(),
                case["expect"],
                got
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
