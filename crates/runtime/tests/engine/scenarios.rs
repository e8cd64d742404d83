//! Engine scenarios as data. Each folder of `tests/scenarios/` holds a project (`agents/`, or a
//! `project` file naming one relative to the folder), a `script` of inputs, and the `expected`
//! transcript: each input's events and settled outcome, then every thread the scenario made (the
//! main one, and any subagents) with its messages and journal records. Every scenario runs on
//! SQLite, and on Postgres when `DATABASE_URL` is set, and must produce the same transcript on
//! both.
//!
//! Script lines: `agent NAME` (first), `send TEXT` (a message from the human side, or a `user`
//! message when the agent has none), `send-to KEY TEXT` (the same, to another thread, such as a
//! subagent), `abort [KEY]` (the control plane's abort, of the main thread or KEY), `terminate
//! KEY` (a thread and its descendants, for good), `reopen` (drop
//! the runtime and the store connection and open new ones: a process restart), `decide
//! KEY:SESSION:SEQ approve | edit JSON | reject REASON | respond TEXT | remember SCOPE` (a
//! person's decision on a pending tool call, as the run reported it in `approvals`; the thread
//! runs on); and for durable time, `advance MS` (a test clock moves: a script with a clock verb
//! runs on a `ManualClock` from [`CLOCK_START`], and its ids are shown as `(uuid)`), `timers`
//! (fire the timers due, and the runs they start), `cancel-effects KEY` (cancel KEY's pending
//! effects, as `duet effects cancel` does). A thread's timers are listed after its records.
//! `DUET_BLESS=1` rewrites the `expected` files.

use crate::support;

use crate::wire;

use wire::Wire;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use duet_runtime::{
    CancellationToken, Delivered, EventSink, ManualClock, Runtime, Store, Thread, TimerQuery,
    side_str,
};

/// Where a script's test clock starts: 2026-01-01T00:00:00Z.
const CLOCK_START: i64 = 1_767_225_600_000;

fn cases() -> Vec<PathBuf> {
    let dir = support::repo().join("tests/scenarios");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

fn project_root(case: &Path) -> PathBuf {
    match std::fs::read_to_string(case.join("project")) {
        Ok(rel) => case.join(rel.trim()),
        Err(_) => case.to_path_buf(),
    }
}

async fn describe(out: &mut String, store: &dyn Store, thread: &Thread, clock: bool) {
    writeln!(
        out,
        "thread {} agent={} status={} session={} open={} stop={} result={:?} turns=a{}/b{} status_text={:?}",
        thread.key,
        thread.agent,
        thread.status.as_str(),
        thread.session,
        thread.session_open,
        thread.stop_reason.map_or("-", |r| r.as_str()),
        thread.result,
        thread.turns.a,
        thread.turns.b,
        thread.status_text,
    )
    .ok();
    for c in store.children(thread.id).await.expect("children") {
        let key = store
            .thread_by_id(c.child)
            .await
            .expect("read")
            .map(|t| t.key)
            .unwrap_or_default();
        let mut line = format!(
            "  child {key} relationship={} owner={} status={}",
            c.relationship,
            side_str(c.owner),
            c.status.as_str()
        );
        if let Some(text) = &c.status_text {
            write!(line, " status_text={text:?}").ok();
        }
        if let Some(call) = &c.awaiting {
            write!(line, " awaited_by={call}").ok();
        }
        if let Some(name) = &c.name {
            write!(line, " name={name:?}").ok();
        }
        if c.arguments.as_object().is_some_and(|a| !a.is_empty()) {
            write!(line, " arguments={}", c.arguments).ok();
        }
        if !c.env.is_empty() {
            // Names only: scoped values may be secrets.
            let names: Vec<&str> = c.env.keys().map(String::as_str).collect();
            write!(line, " env=[{}]", names.join(",")).ok();
        }
        writeln!(out, "{line}").ok();
    }
    writeln!(out, "messages").ok();
    for m in store.messages(thread.id).await.expect("messages") {
        let side = m.side.map_or("-", side_str);
        let mut line = format!("  {:>3} {side} {}", m.seq, m.role.as_str());
        if let Some(status) = m.tool_status {
            write!(
                line,
                "[{} {}]",
                status.as_str(),
                m.tool_name.as_deref().unwrap_or("?")
            )
            .ok();
        }
        if let Some(c) = &m.content {
            write!(line, " {c:?}").ok();
        }
        for call in &m.tool_calls {
            write!(line, " -> {}{}", call.name, call.arguments).ok();
        }
        if m.silent {
            line.push_str(" (silent)");
        }
        writeln!(out, "{line}").ok();
    }
    writeln!(out, "records").ok();
    for r in store.records(thread.id).await.expect("records") {
        // A park's revision is a hash of the scenario's files: shown as there, not its value,
        // so editing a definition does not rewrite every transcript.
        let mut data = r.data();
        if let Some(revision) = data.get_mut("revision") {
            *revision = serde_json::json!("(revision)");
        }
        // So is a decision's time.
        if let Some(at) = data.get_mut("at") {
            *at = serde_json::json!("(at)");
        }
        writeln!(out, "  {:>3} {} {}", r.seq, r.kind(), data).ok();
    }
    let q = TimerQuery {
        thread: Some(thread.id),
        limit: 100,
        ..TimerQuery::default()
    };
    let mut timers = store.timers(&q).await.expect("timers");
    if !timers.is_empty() {
        writeln!(out, "timers").ok();
    }
    timers.sort_by_key(|t| (t.created_at, t.due_at, t.name.clone()));
    for t in timers {
        // Due as the test clock reckons it; without one, real time.
        let due = if clock {
            format!("+{}ms", t.due_at - CLOCK_START)
        } else {
            "(real time)".to_owned()
        };
        writeln!(
            out,
            "  {} {} {} due={due} status={} attempts={}",
            t.kind.as_str(),
            t.name,
            t.args,
            t.status.as_str(),
            t.attempts,
        )
        .ok();
    }
    assert!(
        store.queue(thread.id).await.expect("queue").is_empty(),
        "{}: queue left behind",
        thread.key
    );
}

/// Plays `case` on `backend`; with `wire`, its scripted models answer over the OpenAI wire.
async fn play(case: &Path, backend: &support::Backend, wire: Option<&Wire>) -> String {
    let project = support::project(&project_root(case));
    let script = std::fs::read_to_string(case.join("script")).expect("script");
    let key = "scenario";
    let mut agent: Option<String> = None;
    let clock = script
        .lines()
        .any(|l| l.starts_with("advance") || l.starts_with("timers"))
        .then(|| Arc::new(ManualClock::new(CLOCK_START)));
    let build = |store| {
        // The send's own run ends before the work it started in the background begins: on
        // a busy machine a child could otherwise finish first and its result join that run.
        let mut builder = support::runtime(project.clone(), store).hold_background(true);
        if let Some(c) = &clock {
            builder = builder.clock(c.clone());
        }
        match wire {
            Some(w) => builder
                .providers(duet_models::providers_for(&project).with("scripted", w.clone()))
                .build(),
            None => builder.build(),
        }
    };
    let mut rt: Runtime = build(backend.open().await);
    let mut out = String::new();
    for line in script
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let (target, agent_name, text) = match verb {
            "agent" => {
                agent = Some(rest.to_owned());
                continue;
            }
            "reopen" => {
                drop(rt);
                rt = build(backend.open().await);
                writeln!(out, "reopen").ok();
                continue;
            }
            "abort" => {
                let target = if rest.is_empty() { key } else { rest };
                let scope = duet_runtime::Scope::new(target);
                let result = rt
                    .dispatch(&scope, duet_runtime::control::Command::Abort)
                    .await;
                rt.quiesce().await;
                writeln!(
                    out,
                    "abort {target}\n  => {}",
                    serde_json::to_string(&result).unwrap_or_default()
                )
                .ok();
                continue;
            }
            "terminate" => {
                let scope = duet_runtime::Scope::new(rest);
                let result = rt.terminate(&scope).await.map_err(|e| e.to_string());
                rt.quiesce().await;
                writeln!(out, "terminate {rest}\n  => {result:?}").ok();
                continue;
            }
            "decide" => {
                decide(&rt, rest, &mut out).await;
                continue;
            }
            "advance" => {
                let ms: i64 = rest.parse().expect("advance MS");
                clock.as_ref().expect("a test clock").advance(ms);
                writeln!(out, "advance {ms}").ok();
                continue;
            }
            "timers" => {
                let fired = rt.run_due_timers().await.expect("timers run");
                rt.quiesce().await;
                writeln!(out, "timers\n  => fired {fired}").ok();
                continue;
            }
            "cancel-effects" => {
                cancel_effects(&rt, rest, &mut out).await;
                continue;
            }
            "send" => (key, agent.as_deref(), rest),
            "send-to" => {
                let (target, text) = rest.split_once(' ').unwrap_or((rest, ""));
                (target, None, text)
            }
            other => panic!("{}: unknown script verb `{other}`", case.display()),
        };
        if verb == "send" {
            writeln!(out, "send {text:?}").ok();
        } else {
            writeln!(out, "send-to {target} {text:?}").ok();
        }
        let (sink, rx) = EventSink::channel();
        let delivery = duet_runtime::Delivery {
            agent: agent_name,
            ..duet_runtime::Delivery::new(target, text)
        };
        let delivered = match rt.accept(delivery).await {
            Ok(duet_runtime::Accepted::Claimed(claim)) => {
                reporting(&rt, claim, &sink).await.map(Delivered::Settled)
            }
            Ok(duet_runtime::Accepted::Queued { thread }) => Ok(Delivered::Queued { thread }),
            Ok(duet_runtime::Accepted::Duplicate(s)) => Ok(Delivered::Duplicate(s)),
            Err(e) => Err(e),
        };
        // Children started in the background finish (and report) before the transcript goes on.
        rt.quiesce().await;
        drop(sink);
        events(rx, &mut out).await;
        match delivered {
            Ok(Delivered::Settled(s)) => settled(&s, &mut out),
            other => {
                writeln!(out, "  => {other:?}").ok();
            }
        }
    }
    let store = rt.store();
    for thread in store.threads(None).await.expect("threads") {
        describe(&mut out, store.as_ref(), &thread, clock.is_some()).await;
    }
    if clock.is_some() {
        return masked(&out);
    }
    out
}

/// `cancel-effects KEY`: cancels KEY's pending effects, one by one.
async fn cancel_effects(rt: &Runtime, key: &str, out: &mut String) {
    let store = rt.store();
    let t = store.thread(key).await.expect("read").expect("thread");
    let q = TimerQuery {
        thread: Some(t.id),
        status: Some(duet_runtime::TimerStatus::Pending),
        kind: Some(duet_runtime::TimerKind::Effect),
        limit: 100,
        ..TimerQuery::default()
    };
    let mut n = 0;
    for timer in store.timers(&q).await.expect("timers") {
        let done = store.cancel_timer(timer.id, rt.now_ms()).await;
        n += usize::from(matches!(
            done,
            Ok(duet_runtime::CancelOutcome::Cancelled(_))
        ));
    }
    writeln!(out, "cancel-effects {key}\n  => cancelled {n}").ok();
}

/// `text` with each UUID (`8-4-4-4-12` hex digits) written `(uuid)`: ids differ run to run.
fn masked(text: &str) -> String {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    const LEN: usize = 36;
    let bytes = text.as_bytes();
    let is_uuid = |at: usize| {
        let Some(s) = bytes.get(at..at + LEN) else {
            return false;
        };
        let mut i = 0;
        for (g, n) in GROUPS.iter().enumerate() {
            if g > 0 {
                if s[i] != b'-' {
                    return false;
                }
                i += 1;
            }
            if !s[i..i + n].iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            i += n;
        }
        true
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut copied = 0;
    while at < bytes.len() {
        if is_uuid(at) {
            out.push_str(&text[copied..at]);
            out.push_str("(uuid)");
            at += LEN;
            copied = at;
        } else {
            at += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

thread_local! {
    /// How many sessions this thread's scenario runs reported ([`reporting`]): a store that
    /// reads with its settling write (SQLite) reports nearly every one.
    static REPORTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `claim` asking for its session, as a blocking A2A send does: the run goes as any other
/// (the transcript is the same), and a session it reports is the one a read after it gives.
async fn reporting(
    rt: &Runtime,
    claim: duet_runtime::Claim,
    sink: &EventSink,
) -> Result<duet_runtime::Settled, duet_runtime::RunError> {
    let claim = claim.reporting_session();
    let settled = rt
        .run_claimed(claim, sink, &CancellationToken::new())
        .await?;
    if let Some(entries) = &settled.session_entries {
        let after = rt
            .store()
            .session_entries(settled.thread, settled.session, settled.last.next_seq)
            .await
            .expect("read");
        assert_eq!(entries, &after, "{}: as reported", settled.last.key);
        REPORTED.set(REPORTED.get() + 1);
    }
    Ok(settled)
}

/// Writes the events a run sent, once its sink is dropped.
async fn events(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<duet_runtime::AgentEvent>,
    out: &mut String,
) {
    while let Some(e) = rx.recv().await {
        writeln!(
            out,
            "  event {}",
            serde_json::to_string(&e).unwrap_or_default()
        )
        .ok();
    }
}

fn settled(s: &duet_runtime::Settled, out: &mut String) {
    writeln!(
        out,
        "  => {}",
        serde_json::to_string(&s.terminal_event()).unwrap_or_default()
    )
    .ok();
}

/// `decide KEY:SESSION:SEQ approve | edit JSON | reject REASON | respond TEXT | remember SCOPE`:
/// a person (`tester`) decides the pending call the run reported as `SESSION:SEQ` of thread
/// KEY, and the thread runs on here if no run holds it; a refusal is written as it reads.
async fn decide(rt: &Runtime, rest: &str, out: &mut String) {
    use duet_runtime::approval::{Decision, RememberScope};
    writeln!(out, "decide {rest}").ok();
    let (id, how) = rest.split_once(' ').unwrap_or((rest, ""));
    let mut parts = id.rsplitn(3, ':');
    let (seq, key) = match (parts.next(), parts.next(), parts.next()) {
        (Some(seq), Some(_session), Some(key)) => (seq.parse::<i64>().expect("SEQ"), key),
        _ => panic!("decide: `{id}` is not KEY:SESSION:SEQ"),
    };
    let (verb, arg) = how.split_once(' ').unwrap_or((how, ""));
    let mut input = duet_runtime::DecisionInput {
        decision: Decision::Approve,
        args: None,
        reason: None,
        text: None,
        remember: None,
    };
    match verb {
        "approve" => {}
        "edit" => {
            input.decision = Decision::Edit;
            input.args = Some(serde_json::from_str(arg).expect("decide edit: JSON"));
        }
        "reject" => {
            input.decision = Decision::Reject;
            input.reason = Some(arg.to_owned());
        }
        "respond" => {
            input.decision = Decision::Respond;
            input.text = Some(arg.to_owned());
        }
        "remember" => input.remember = Some(RememberScope::parse(arg).expect("session|thread")),
        other => panic!("decide: unknown decision `{other}`"),
    }
    let accepted = rt
        .accept_decision(key, seq, input, Some("tester".into()), None)
        .await;
    match accepted {
        // The first decision is named without its time, which differs run to run.
        Err(duet_runtime::RunError::DecisionTaken { first, .. }) => {
            writeln!(
                out,
                "  => refused: already decided: {} by {}",
                first.decision.as_str(),
                first.author.as_deref().unwrap_or("-")
            )
            .ok();
        }
        Err(e) => {
            writeln!(out, "  => refused: {e}").ok();
        }
        Ok(a) => match a.landed {
            duet_runtime::DecisionLanded::Claimed(claim) => {
                let (sink, rx) = EventSink::channel();
                let ran = reporting(rt, claim, &sink).await;
                rt.quiesce().await;
                drop(sink);
                events(rx, out).await;
                match ran {
                    Ok(s) => settled(&s, out),
                    Err(e) => {
                        writeln!(out, "  => run failed: {e}").ok();
                    }
                }
            }
            other => {
                rt.quiesce().await;
                writeln!(out, "  => {other:?}").ok();
            }
        },
    }
}

#[tokio::test]
async fn every_scenario_produces_its_transcript_on_every_backend() {
    let bless = std::env::var_os("DUET_BLESS").is_some();
    let cases = cases();
    assert!(cases.len() >= 12, "scenarios went missing: {}", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for backend in support::backends().await {
            let actual = play(case, &backend, None).await;
            let expected_path = case.join("expected");
            if bless && backend.name() == "sqlite" {
                std::fs::write(&expected_path, &actual).expect("write expected");
                continue;
            }
            let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
            if actual != expected {
                failures.push(format!(
                    "== {name} on {}\n-- expected\n{expected}-- actual\n{actual}",
                    backend.name()
                ));
            }
        }
    }
    // The reports were checked as they came: they must have come, as many as when this was
    // written (66; new scenarios add to them). Fewer means some fell back to the caller's read
    // (a message the run's history lacked), which is allowed but never needed.
    let reported = REPORTED.get();
    assert!(reported >= 66, "{reported} sessions reported");
    assert!(
        failures.is_empty(),
        "{} scenario run(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A transcript with each run of consecutive `text` events joined into one: how a stream is cut
/// into deltas is the provider's business, what it says is not.
fn joined(transcript: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut text: Option<String> = None;
    let flush = |text: &mut Option<String>, out: &mut Vec<String>| {
        if let Some(t) = text.take() {
            out.push(format!(
                "  event {}",
                serde_json::json!({"type": "text", "delta": t})
            ));
        }
    };
    for line in transcript.lines() {
        let event: Option<serde_json::Value> = line
            .strip_prefix("  event ")
            .and_then(|e| serde_json::from_str(e).ok());
        match event {
            Some(e) if e["type"] == "text" => {
                text.get_or_insert_with(String::new)
                    .push_str(e["delta"].as_str().unwrap_or_default());
            }
            _ => {
                flush(&mut text, &mut out);
                out.push(line.to_owned());
            }
        }
    }
    flush(&mut text, &mut out);
    out.join("\n")
}

/// Every scenario again, on SQLite, its scripted models answering through a local server in the
/// OpenAI wire format read by the real `openai` provider: the same transcript (text deltas
/// joined).
#[tokio::test]
async fn every_scenario_plays_the_same_over_the_openai_wire() {
    let wire = Wire::start().await;
    let mut failures = Vec::new();
    for case in &cases() {
        let db = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("wire-{}.db", uuid::Uuid::now_v7().simple()));
        let backend = support::Backend::Sqlite(db);
        // Ids are masked again once joined: a delta may have cut one in two.
        let expected = masked(&joined(
            &std::fs::read_to_string(case.join("expected")).unwrap_or_default(),
        ));
        let actual = masked(&joined(&play(case, &backend, Some(&wire)).await));
        if actual != expected {
            failures.push(format!(
                "== {} over the wire\n-- expected\n{expected}-- actual\n{actual}",
                case.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) differ over the wire:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
