//! Durability across runners: two runtimes racing for one thread never both run it, and a run
//! killed mid-step is finished by the next runner exactly as an uninterrupted run would have,
//! or failed (that thread only) when the definitions it resumes under lost its agent. All on
//! every backend.

use crate::support;

use support::Slow;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use duet_runtime::{
    CancellationToken, Delivered, EventSink, ManualClock, Message, Role, Runtime, Store,
    ThreadStatus,
};
use tokio::sync::Notify;

/// A project in a scratch folder: a prompt × human gate whose model answers `turns` times, the
/// first time through the `slow` tool.
fn project(turns: usize) -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("durability");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/gate.yaml",
        "name: gate\nsideA: { prompt: gate }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/gate.yaml",
        "name: gate\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [slow]\n",
    );
    write(
        "agents/tools/slow.yaml",
        "description: Takes its time.\nbuiltin: slow\n",
    );
    let mut script = String::from(
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: slow }]\n",
    );
    for i in 0..turns {
        script.push_str(&format!("  - text: answer {i}\n"));
    }
    write("agents/models/m.yaml", &script);
    dir.project()
}

fn runtime(
    project: &Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    slow: Slow,
) -> Runtime {
    support::runtime(project.clone(), store)
        .clock(clock)
        .lease_ms(60_000)
        .tool("slow", slow)
        .build()
}

/// A runtime whose first `slow` call never returns (`entered` says when it began).
fn stalling(
    project: &Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
) -> (Runtime, Arc<Notify>) {
    let entered = Arc::new(Notify::new());
    let slow = Slow {
        first: AtomicBool::new(true),
        entered: entered.clone(),
    };
    (runtime(project, store, clock, slow), entered)
}

fn quick() -> Slow {
    Slow {
        first: AtomicBool::new(false),
        entered: Arc::new(Notify::new()),
    }
}

/// Messages without their timestamps, for comparing runs made at different times.
fn plain(mut messages: Vec<Message>) -> Vec<Message> {
    for m in &mut messages {
        m.created_at = 0;
    }
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_runners_never_run_a_thread_twice() {
    let project = project(40);
    for backend in support::backends().await {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let a = runtime(&project, backend.open().await, clock.clone(), quick());
        let b = runtime(&project, backend.open().await, clock.clone(), quick());
        let key = "race";
        let first = a
            .send(
                key,
                Some("gate"),
                "start",
                &EventSink::discard(),
                &CancellationToken::new(),
            )
            .await;
        assert!(
            matches!(first, Ok(Delivered::Settled(_))),
            "{}: {first:?}",
            backend.name()
        );
        for round in 0..12 {
            let (x, y) = (format!("a{round}"), format!("b{round}"));
            let (cancel, sink) = (CancellationToken::new(), EventSink::discard());
            let (ra, rb) = tokio::join!(
                a.send(key, None, &x, &sink, &cancel),
                b.send(key, None, &y, &sink, &cancel)
            );
            let (ra, rb) = (ra.expect("a delivers"), rb.expect("b delivers"));
            let settled = [&ra, &rb]
                .iter()
                .filter(|r| matches!(r, Delivered::Settled(_)))
                .count();
            assert!(
                settled >= 1,
                "{}: round {round}: nobody ran ({ra:?}, {rb:?})",
                backend.name()
            );
        }
        let store = a.store();
        let thread = store.thread(key).await.expect("read").expect("thread");
        assert_eq!(
            thread.status,
            ThreadStatus::AwaitingHuman,
            "{}",
            backend.name()
        );
        assert_eq!(
            thread.lease_owner,
            None,
            "{}: the lease was released",
            backend.name()
        );
        assert!(
            store.queue(thread.id).await.expect("queue").is_empty(),
            "{}",
            backend.name()
        );
        let messages = store.messages(thread.id).await.expect("messages");
        // Every human message exactly once.
        let human: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == Role::User)
            .filter_map(|m| m.content.as_deref())
            .collect();
        for round in 0..12 {
            for who in ["a", "b"] {
                let text = format!("{who}{round}");
                assert_eq!(
                    human.iter().filter(|h| **h == text).count(),
                    1,
                    "{}: {text} in {human:?}",
                    backend.name()
                );
            }
        }
        // The model's answers in script order, none twice: a double run would repeat an entry.
        let answers: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .filter_map(|m| m.content.as_deref())
            .collect();
        let expected: Vec<String> = (0..answers.len()).map(|i| format!("answer {i}")).collect();
        assert_eq!(answers, expected, "{}", backend.name());
        // Sequence numbers are dense: nothing lost, nothing written twice.
        let mut seqs: Vec<i64> = messages.iter().map(|m| m.seq).collect();
        seqs.extend(
            store
                .records(thread.id)
                .await
                .expect("records")
                .iter()
                .map(|r| r.seq),
        );
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            (1..=seqs.len() as i64).collect::<Vec<_>>(),
            "{}",
            backend.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_step_is_finished_by_the_next_runner() {
    let project = project(1);
    for backend in support::backends().await {
        // The reference: an uninterrupted run on a database of its own.
        let reference = {
            let other = support::backends()
                .await
                .into_iter()
                .find(|b| b.name() == backend.name())
                .expect("same kind");
            let rt = runtime(
                &project,
                other.open().await,
                Arc::new(ManualClock::new(0)),
                quick(),
            );
            let done = rt
                .send(
                    "t",
                    Some("gate"),
                    "go",
                    &EventSink::discard(),
                    &CancellationToken::new(),
                )
                .await;
            assert!(matches!(done, Ok(Delivered::Settled(_))), "{done:?}");
            let t = rt.store().thread("t").await.expect("read").expect("thread");
            (
                plain(rt.store().messages(t.id).await.expect("m")),
                rt.store().records(t.id).await.expect("r"),
                t.status,
            )
        };

        // The victim: its first tool call never returns, and its task is killed there.
        let (victim, entered) = stalling(
            &project,
            backend.open().await,
            Arc::new(ManualClock::new(0)),
        );
        support::kill_mid_step(victim, "t", "gate", &entered).await;
        let store = backend.open().await;
        let stuck = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(
            stuck.status,
            ThreadStatus::Running,
            "{}: mid-step",
            backend.name()
        );
        assert!(
            stuck.lease_owner.is_some(),
            "{}: the dead runner's lease",
            backend.name()
        );
        assert_eq!(
            store.messages(stuck.id).await.expect("m").len(),
            1,
            "{}: only the inbound message committed",
            backend.name()
        );

        // Before the lease expires nobody else may take over; after, the next runner does.
        let heir = runtime(
            &project,
            store.clone(),
            Arc::new(ManualClock::new(30_000)),
            quick(),
        );
        assert_eq!(
            heir.recover(&CancellationToken::new())
                .await
                .expect("recover"),
            0,
            "{}",
            backend.name()
        );
        let heir = runtime(
            &project,
            store.clone(),
            Arc::new(ManualClock::new(60_001)),
            quick(),
        );
        assert_eq!(
            heir.recover(&CancellationToken::new())
                .await
                .expect("recover"),
            1,
            "{}",
            backend.name()
        );
        let t = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(t.status, reference.2, "{}", backend.name());
        assert_eq!(
            plain(store.messages(t.id).await.expect("m")),
            reference.0,
            "{}: same messages",
            backend.name()
        );
        let records: Vec<_> = store.records(t.id).await.expect("r");
        let kinds = |rs: &[duet_runtime::Record]| {
            rs.iter()
                .map(|r| (r.seq, r.kind().to_owned(), r.data()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kinds(&records),
            kinds(&reference.1),
            "{}: same journal",
            backend.name()
        );
    }
}

/// The same gate under a name of its own: definitions in which `gate` no longer exists.
fn renamed() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("durability-renamed");
    dir.write(
        "agents/agents/keeper.yaml",
        "name: keeper\nsideA: { prompt: gate }\nsideB: { human: true }\n",
    );
    dir.write(
        "agents/prompts/gate.yaml",
        "name: gate\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\n",
    );
    dir.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: fine\n",
    );
    dir.project()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_recovered_under_definitions_without_its_agent_fails_that_thread() {
    let project = project(1);
    for backend in support::backends().await {
        let (victim, entered) = stalling(
            &project,
            backend.open().await,
            Arc::new(ManualClock::new(0)),
        );
        support::kill_mid_step(victim, "t", "gate", &entered).await;
        let store = backend.open().await;
        let heir = runtime(
            &renamed(),
            store.clone(),
            Arc::new(ManualClock::new(60_001)),
            quick(),
        );
        assert_eq!(
            heir.recover(&CancellationToken::new())
                .await
                .expect("recover: the process goes on"),
            1,
            "{}",
            backend.name()
        );
        let t = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(
            (t.status, t.stop_reason),
            (
                ThreadStatus::Idle,
                Some(duet_runtime::StopReason::StepError)
            ),
            "{}",
            backend.name()
        );
        let result = t.result.unwrap_or_default();
        assert!(
            result.contains("agent `gate` is no longer defined"),
            "{}: {result}",
            backend.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_aborts_it_at_once_and_frees_the_thread() {
    let project = project(1);
    for backend in support::backends().await {
        let (rt, entered) = stalling(
            &project,
            backend.open().await,
            Arc::new(ManualClock::new(0)),
        );
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (rt, cancel) = (rt.clone(), cancel.clone());
            async move {
                rt.send("t", Some("gate"), "go", &EventSink::discard(), &cancel)
                    .await
            }
        });
        entered.notified().await;
        cancel.cancel();
        let settled = match task.await.expect("joins").expect("delivers") {
            Delivered::Settled(s) => s,
            other => panic!("{}: {other:?}", backend.name()),
        };
        assert_eq!(
            settled.stop_reason,
            Some(duet_runtime::StopReason::Aborted),
            "{}",
            backend.name()
        );
        assert_eq!(settled.status, ThreadStatus::Idle);
        let store = rt.store();
        let t = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(
            t.lease_owner,
            None,
            "{}: released at once, not at lease expiry",
            backend.name()
        );
        assert!(
            t.session_open,
            "{}: aborting a run does not end the session",
            backend.name()
        );
        let messages = store.messages(t.id).await.expect("messages");
        assert_eq!(
            messages.len(),
            1,
            "{}: the step in flight was not committed",
            backend.name()
        );
        // The thread runs again, from where it was.
        let again = rt
            .send(
                "t",
                None,
                "go on",
                &EventSink::discard(),
                &CancellationToken::new(),
            )
            .await;
        assert!(
            matches!(&again, Ok(Delivered::Settled(s)) if s.status == ThreadStatus::AwaitingHuman),
            "{}: {again:?}",
            backend.name()
        );
        let answers: Vec<Option<String>> = store
            .messages(t.id)
            .await
            .expect("m")
            .into_iter()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.content)
            .collect();
        assert_eq!(
            answers,
            vec![None, Some("answer 0".to_owned())],
            "{}",
            backend.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deliveries_in_one_process_exclude_each_other_too() {
    let project = project(3);
    for backend in support::backends().await {
        let (rt, entered) = stalling(
            &project,
            backend.open().await,
            Arc::new(ManualClock::new(0)),
        );
        let first = tokio::spawn({
            let rt = rt.clone();
            async move {
                rt.send(
                    "t",
                    Some("gate"),
                    "one",
                    &EventSink::discard(),
                    &CancellationToken::new(),
                )
                .await
            }
        });
        entered.notified().await;
        // Same runtime, same thread, while the first run is mid-step: queued, not run twice.
        let second = rt
            .send(
                "t",
                None,
                "two",
                &EventSink::discard(),
                &CancellationToken::new(),
            )
            .await;
        assert!(
            matches!(second, Ok(Delivered::Queued { .. })),
            "{}: {second:?}",
            backend.name()
        );
        first.abort();
        let _ = first.await;
    }
}
