//! One question, one answer, on every backend: two people answering the same parked approval at
//! once — as two real `duet send` processes, and as two `invoke` calls — give exactly one applied
//! answer and one refusal (`already_answered`), never a second session; and a message id
//! delivered twice is stored once. `DUET_RACE_TRIALS` sets how many races run per backend
//! (default 30).

mod support;

use std::process::{Command, Stdio};

use duet_runtime::{Agent, AgentEvent, Prompt, Role, Scope, ThreadStatus, collect};
use futures::StreamExt;

fn trials() -> usize {
    std::env::var("DUET_RACE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

fn db_arg(backend: &support::Backend) -> String {
    match backend {
        support::Backend::Sqlite(p) => p.display().to_string(),
        support::Backend::Postgres(url) => url.clone(),
        support::Backend::Memory(..) => panic!("a process cannot open another's memory store"),
    }
}

fn duet(db: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args)
        .arg("--project")
        .arg(support::repo())
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The approval gate's thread `key` after the race: its human answers and how it ended.
async fn outcome(
    store: &dyn duet_runtime::Store,
    key: &str,
) -> (Vec<String>, ThreadStatus, i64, Option<String>) {
    let t = store.thread(key).await.expect("read").expect("thread");
    let answers = store
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter(|m| m.role == Role::User && m.seq > 2)
        .filter_map(|m| m.content)
        .collect();
    (answers, t.status, t.session, t.result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_racing_answers_from_two_processes_apply_once() {
    for backend in support::backends().await {
        let db = db_arg(&backend);
        let store = backend.open().await;
        for trial in 0..trials() {
            let key = format!("race-{trial}");
            let out = duet(
                &db,
                &[
                    "run",
                    "question_gate",
                    "--session",
                    &key,
                    "-m",
                    "Rotate?",
                    "--json",
                ],
            )
            .output()
            .expect("runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // Both read the same park (as two people reading the question), then answer at
            // once. (Without `--park`, a send that reads the thread after the other answer
            // ended the session is that thread's next message: it starts the next session.)
            let asked = String::from_utf8_lossy(&out.stdout);
            let park = asked
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|e| e["data"]["park"].as_str().map(str::to_owned))
                .next_back()
                .expect("the run parked");
            let racers: Vec<std::process::Child> = ["approved", "Yes, approved."]
                .iter()
                .map(|text| {
                    duet(&db, &["send", &key, text, "--json", "--park", &park])
                        .spawn()
                        .expect("spawns")
                })
                .collect();
            let results: Vec<std::process::Output> = racers
                .into_iter()
                .map(|c| c.wait_with_output().expect("finishes"))
                .collect();
            let codes: Vec<Option<i32>> = results.iter().map(|o| o.status.code()).collect();
            let mut sorted = codes.clone();
            sorted.sort();
            assert_eq!(
                sorted,
                [Some(0), Some(1)],
                "{} trial {trial}: one applied, one refused: {results:#?}",
                backend.name()
            );
            let refused = results
                .iter()
                .find(|o| o.status.code() == Some(1))
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            // Refused in the answer's own transaction (`already_answered`), or — when the
            // other answer was applied before this process read the thread — because nothing
            // waits for a person any more (`not_awaiting`).
            assert!(
                refused.contains(r#""code":"already_answered""#)
                    || refused.contains(r#""code":"not_awaiting""#),
                "{} trial {trial}: {refused}",
                backend.name()
            );
            let (answers, status, session, result) = outcome(store.as_ref(), &key).await;
            assert_eq!(
                answers.len(),
                1,
                "{} trial {trial}: {answers:?}",
                backend.name()
            );
            assert_eq!(
                (status, session, result.as_deref()),
                (ThreadStatus::Idle, 1, Some("approved")),
                "{} trial {trial}: the approval step ran once, in one session",
                backend.name()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_racing_invokes_of_one_park_apply_once() {
    let project = support::project(&support::repo());
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = support::runtime(project.clone(), store.clone()).build();
        let gate = rt.agent("question_gate").expect("defined");
        for trial in 0..trials().min(10) {
            let key = format!("invoke-race-{trial}");
            let asked = collect(gate.invoke(Scope::new(&key), Prompt::text("Rotate?")))
                .await
                .expect("parks");
            let park = asked
                .data
                .as_ref()
                .and_then(|d| d["park"].as_str())
                .map(str::to_owned)
                .expect("a parked run names its park");
            let answer = |text: &str| Prompt {
                answers: Some(park.clone()),
                ..Prompt::text(text)
            };
            let (a, b) = tokio::join!(
                collect(gate.invoke(Scope::new(&key), answer("approved"))),
                collect(gate.invoke(Scope::new(&key), answer("Yes, approved.")))
            );
            let refused: Vec<_> = [&a, &b]
                .into_iter()
                .filter_map(|r| r.as_ref().err())
                .collect();
            assert_eq!(
                refused.len(),
                1,
                "{} trial {trial}: {a:?} {b:?}",
                backend.name()
            );
            assert!(
                matches!(
                    refused[0].code.as_deref(),
                    Some("already_answered" | "session_busy")
                ),
                "{} trial {trial}: {:?}",
                backend.name(),
                refused[0]
            );
            let (answers, status, session, _) = outcome(store.as_ref(), &key).await;
            assert_eq!(
                (answers.len(), status, session),
                (1, ThreadStatus::Idle, 1),
                "{} trial {trial}",
                backend.name()
            );
            // A late answer to the same park, after the first was applied, is refused too.
            let late = collect(gate.invoke(Scope::new(&key), answer("approved again"))).await;
            assert_eq!(
                late.err().and_then(|e| e.code).as_deref(),
                Some("already_answered"),
                "{} trial {trial}",
                backend.name()
            );
        }
    }
}

#[tokio::test]
async fn a_message_id_delivered_twice_is_stored_once() {
    let project = support::project(&support::repo());
    for backend in support::backends().await {
        let store = backend.open().await;
        // Through the CLI: the second send with the same id writes nothing.
        let db = db_arg(&backend);
        let out = duet(
            &db,
            &[
                "run",
                "question_gate",
                "--session",
                "m",
                "-m",
                "Rotate?",
                "--json",
            ],
        )
        .output()
        .expect("runs");
        assert!(out.status.success());
        for _ in 0..2 {
            let out = duet(
                &db,
                &[
                    "send",
                    "m",
                    "approved",
                    "--message-id",
                    "answer-1",
                    "--json",
                ],
            )
            .output()
            .expect("runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (answers, _, session, result) = outcome(store.as_ref(), "m").await;
        assert_eq!(
            (answers.len(), session, result.as_deref()),
            (1, 1, Some("approved")),
            "{}",
            backend.name()
        );

        // Through invoke: the replay completes with the session as it stands, marked.
        let rt = support::runtime(project.clone(), store.clone()).build();
        let gate = rt.agent("question_gate").expect("defined");
        let asked = collect(gate.invoke(Scope::new("i"), Prompt::text("Rotate?")))
            .await
            .expect("parks");
        assert_eq!(
            asked.data.as_ref().map(|d| d["status"].clone()),
            Some("awaiting_human".into())
        );
        let keyed = || Prompt {
            message_id: Some("k-1".into()),
            ..Prompt::text("approved")
        };
        let first = collect(gate.invoke(Scope::new("i"), keyed()))
            .await
            .expect("applied");
        assert_eq!(
            first.data.as_ref().map(|d| d["duplicate"].clone()),
            Some(serde_json::Value::Null)
        );
        let mut replay = gate.invoke(Scope::new("i"), keyed());
        let mut events = Vec::new();
        while let Some(e) = replay.next().await {
            events.push(e);
        }
        match events.as_slice() {
            [AgentEvent::Completed { data: Some(d) }] => {
                assert_eq!(d["duplicate"], true, "{}", backend.name());
                assert_eq!(d["result"], "approved", "{}", backend.name());
            }
            other => panic!("{}: {other:?}", backend.name()),
        }
        let (answers, _, session, _) = outcome(store.as_ref(), "i").await;
        assert_eq!((answers.len(), session), (1, 1), "{}", backend.name());
    }
}

/// A `duet run` killed at any point while it creates a thread leaves either no thread or the
/// thread with its first message: never an empty one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_while_creating_its_thread_leaves_no_empty_thread() {
    for backend in support::backends().await {
        let db = db_arg(&backend);
        // The database exists (migrated) before the kills, so they land in the run itself.
        let out = duet(&db, &["threads"]).output().expect("runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for trial in 0..trials().min(20) {
            let key = format!("killed-{trial}");
            let mut child = duet(
                &db,
                &[
                    "run",
                    "question_gate",
                    "--session",
                    &key,
                    "-m",
                    "Rotate?",
                    "--json",
                ],
            )
            .spawn()
            .expect("spawns");
            // Kill it a little later each trial: some die before the thread, some after.
            let mut spin = 0u64;
            for i in 0..(trial as u64 * 400_000) {
                spin = spin.wrapping_add(i);
            }
            std::hint::black_box(spin);
            let _ = child.kill();
            let _ = child.wait();
        }
        let store = backend.open().await;
        for t in store.threads(None).await.expect("threads") {
            let written = store.messages(t.id).await.expect("messages").len();
            let queued = store.queue(t.id).await.expect("queue").len();
            assert!(
                written + queued > 0,
                "{}: thread {} exists without its first message",
                backend.name(),
                t.key
            );
        }
    }
}
