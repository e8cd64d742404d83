//! One question, one answer, whichever doors the answers come through: REST (`POST
//! /approvals/{id}`), the inbox's form, A2A `SendMessage{taskId}`, the library's `invoke`, the
//! control plane's invoke and `duet send`. For every pair of doors (each door against itself
//! too), two answers to one park race, and two answers come one after the other while the
//! first one's step still runs: one is applied, the other refused, and the thread holds one
//! answer with nothing queued. `DUET_RACE_TRIALS` (default 30) / 10 races per pair, at least 1.

use std::process::Stdio;

use duet_runtime::{Agent, AgentEvent, Park, Prompt, Role, Scope};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness::{self, Server};
use crate::support;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Door {
    Rest,
    Inbox,
    A2a,
    Invoke,
    Control,
    Cli,
}

const DOORS: [Door; 6] = [
    Door::Rest,
    Door::Inbox,
    Door::A2a,
    Door::Invoke,
    Door::Control,
    Door::Cli,
];

/// What an answer's client knew when it chose to answer: the question as it then stood.
struct Seen {
    key: String,
    park: Park,
    approval: String,
    task: String,
}

/// Told once, when a door shows its answer was taken.
struct Taken(Option<tokio::sync::oneshot::Sender<()>>);

impl Taken {
    fn none() -> Taken {
        Taken(None)
    }

    fn now(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// How a door took an answer.
#[derive(Debug)]
enum Outcome {
    Applied,
    /// Refused, with what the door said.
    Refused(String),
}

/// `gate` asks (side A) and a person answers (side B); after an answer it calls a tool (its
/// `tool_started` tells a streaming door the answer was taken) and then takes 1.5 s, so a
/// second answer can arrive while it runs.
fn project() -> support::Scratch {
    let p = support::Scratch::new("doors");
    p.write(
        "agents/agents/gate.yaml",
        "name: gate\nexposeAsTool: true\ntoolDescription: asks before it acts\nsideA:\n  prompt: ask\n  stopOnResponse: true\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/ask.yaml",
        "name: ask\ntoolDescription: asks\nmodel: ask_demo\nprompt: Ask first.\nincludeChat: true\ntools: [rotate]\n",
    );
    p.write(
        "agents/tools/rotate.yaml",
        "description: Rotate the keys.\nargs: { type: object }\nresult: rotating\n",
    );
    p.write(
        "agents/models/ask_demo.yaml",
        "name: ask_demo\nprovider: scripted\nmodel: demo\nscript:\n  - text: \"Rotate the keys?\"\n  - tool_calls: [{ name: rotate, arguments: {} }]\n  - { text: \"Rotating.\", delayMs: 1500 }\n  - text: \"Rotated twice.\"\n  - text: \"Thrice.\"\n",
    );
    p
}

fn trials() -> usize {
    std::env::var("DUET_RACE_TRIALS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(3, |n| (n / 10).max(1))
}

struct Bench {
    server: Server,
    runtime: duet_runtime::Runtime,
    root: std::path::PathBuf,
}

impl Bench {
    /// A new thread `key`, parked on its question: what a client saw of it.
    async fn ask(&self, key: &str) -> Seen {
        let mut m = harness::a2a_message(&format!("{key}-ask"), "Rotate?");
        m["message"]["contextId"] = json!(key);
        let sent = harness::a2a(&self.server, "gate", "none", "SendMessage", m).await;
        let task = &sent["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{sent}"
        );
        let t = self
            .server
            .store
            .thread(key)
            .await
            .expect("read")
            .expect("thread");
        let park = t.park().expect("parked");
        // An approval's id is its thread's and its park's (the listing pages at 50).
        let approval = format!("{}:{park}", t.id);
        let (status, item) = self
            .server
            .get(&format!("/approvals/{approval}"), "none")
            .await;
        assert_eq!((status, &item["thread"]), (200, &json!(key)), "{item}");
        Seen {
            key: key.to_owned(),
            park,
            approval,
            task: task["id"].as_str().expect("task id").to_owned(),
        }
    }

    /// `text` through `door`, as the answer to what `seen` shows; `taken` is told as soon as
    /// the door shows the answer was taken (its reply, or a streaming door's first event).
    async fn answer(&self, door: Door, seen: &Seen, text: &str, mut taken: Taken) -> Outcome {
        let s = &self.server;
        let outcome = match door {
            Door::Rest => {
                let (status, body) = s
                    .post(
                        &format!("/approvals/{}", seen.approval),
                        "none",
                        json!({ "text": text }),
                    )
                    .await;
                http_outcome(status, body)
            }
            Door::Inbox => {
                let (status, body) = harness::send(
                    reqwest::Client::new()
                        .post(format!("{}/inbox/items/{}", s.base, seen.approval))
                        .header("accept", "application/json")
                        .form(&[("kind", "reply"), ("text", text)]),
                )
                .await;
                http_outcome(status, body)
            }
            Door::A2a => {
                let mut m = harness::a2a_message(&uuid::Uuid::now_v7().to_string(), text);
                m["message"]["taskId"] = json!(seen.task);
                m["configuration"] = json!({ "returnImmediately": true });
                let sent = harness::a2a(s, "gate", "none", "SendMessage", m).await;
                match &sent["error"] {
                    Value::Null => Outcome::Applied,
                    e => Outcome::Refused(e.to_string()),
                }
            }
            Door::Invoke => {
                let gate = self.runtime.agent("gate").expect("defined");
                let prompt = Prompt {
                    answers: Some(seen.park.to_string()),
                    ..Prompt::text(text)
                };
                let mut events = gate.invoke(Scope::new(&seen.key), prompt);
                let mut outcome = None;
                while let Some(event) = events.next().await {
                    taken.now();
                    match event {
                        AgentEvent::Completed { .. } => outcome = Some(Outcome::Applied),
                        AgentEvent::Failed { code, details, .. } => {
                            outcome = Some(Outcome::Refused(format!("{code:?}: {details}")));
                        }
                        _ => {}
                    }
                }
                outcome.expect("the invoke ended without a terminal event")
            }
            Door::Control => {
                let resp = s
                    .req(reqwest::Method::POST, "/agents/gate/control/invoke", "none")
                    .json(&json!({"session": seen.key, "text": text, "answers": seen.park.to_string()}))
                    .send()
                    .await
                    .expect("invoke");
                assert_eq!(resp.status(), 200);
                let mut events = harness::Sse::new(resp);
                let mut outcome = None;
                while let Some(e) = events.next().await {
                    taken.now();
                    match e.data["type"].as_str() {
                        Some("completed") => outcome = Some(Outcome::Applied),
                        Some("failed") => outcome = Some(Outcome::Refused(e.data.to_string())),
                        _ => {}
                    }
                }
                outcome.expect("the control plane's invoke ended without a terminal event")
            }
            Door::Cli => self.cli(seen, text, &mut taken).await,
        };
        taken.now();
        outcome
    }

    /// `duet send --park` as a process; its first line of output means the answer was taken.
    async fn cli(&self, seen: &Seen, text: &str, taken: &mut Taken) -> Outcome {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_duet"))
            .args(["send", &seen.key, text, "--json", "--park"])
            .arg(seen.park.to_string())
            .arg("--project")
            .arg(&self.root)
            .arg("--db")
            .arg(harness::db_arg(&self.server.backend))
            .env_remove("DUET_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("duet send");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut said = String::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            taken.now();
            said.push_str(&line);
            said.push('\n');
        }
        let out = child.wait_with_output().await.expect("duet send");
        said.push_str(&String::from_utf8_lossy(&out.stderr));
        match out.status.code() {
            Some(0) => Outcome::Applied,
            Some(1) => Outcome::Refused(said),
            other => panic!("duet send exited {other:?}: {said}"),
        }
    }

    /// Waits until `seen`'s thread has moved past its park and parked again (the run the
    /// applied answer started has ended), then checks it holds exactly one answer to that park
    /// and nothing waits in its queue.
    async fn one_answer(&self, seen: &Seen, what: &str) {
        let mut events = self
            .server
            .events(&format!("/threads/{}/events", seen.key), "none", None)
            .await;
        let store = &self.server.store;
        loop {
            let t = store
                .thread(&seen.key)
                .await
                .expect("read")
                .expect("thread");
            if t.park().is_some_and(|p| p != seen.park) {
                let answers: Vec<String> = store
                    .messages(t.id)
                    .await
                    .expect("messages")
                    .into_iter()
                    .filter(|m| m.role == Role::User && m.seq >= seen.park.seq)
                    .filter_map(|m| m.content)
                    .collect();
                let queued = store.queue(t.id).await.expect("queue");
                assert!(
                    answers.len() == 1 && queued.is_empty(),
                    "{what}: one answer, nothing queued: {answers:?}, {queued:?}"
                );
                return;
            }
            events
                .next()
                .await
                .unwrap_or_else(|| panic!("{what}: the events ended before the thread parked"));
        }
    }
}

fn http_outcome(status: u16, body: Value) -> Outcome {
    match status {
        202 => Outcome::Applied,
        409 => Outcome::Refused(body.to_string()),
        _ => panic!("an answer got {status}: {body}"),
    }
}

/// Each refusal says that another answer came first, or that nothing waits for one now.
fn refused_as_answered(what: &str, said: &str) {
    assert!(
        [
            "already_answered",
            "not_awaiting",
            "another answer",
            "session_busy"
        ]
        .iter()
        .any(|w| said.contains(w)),
        "{what}: {said}"
    );
}

async fn bench(backend: &support::Backend, p: &support::Scratch) -> Bench {
    let options = duet_server::Options {
        auth: false,
        ..harness::options()
    };
    let server = Server::start_with(backend, p.root(), options).await;
    let runtime = support::runtime(support::project(p.root()), server.store.clone()).build();
    Bench {
        server,
        runtime,
        root: p.root().to_path_buf(),
    }
}

/// Every unordered pair of doors, a door with itself included.
fn pairs() -> Vec<(Door, Door)> {
    let mut out = Vec::new();
    for (i, a) in DOORS.iter().enumerate() {
        for b in &DOORS[i..] {
            out.push((*a, *b));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_answers_racing_through_any_two_doors_apply_once() {
    let p = project();
    for backend in support::backends().await {
        let b = bench(&backend, &p).await;
        let races: Vec<(usize, Door, Door)> = (0..trials())
            .flat_map(|n| pairs().into_iter().map(move |(x, y)| (n, x, y)))
            .collect();
        futures::stream::iter(races)
            .for_each_concurrent(4, |(n, x, y)| {
                let (b, name) = (&b, backend.name());
                async move {
                    let what = format!("{name} race {n}: {x:?} and {y:?}");
                    let seen = b.ask(&format!("race-{n}-{x:?}-{y:?}")).await;
                    let (one, two) = tokio::join!(
                        b.answer(x, &seen, "approved", Taken::none()),
                        b.answer(y, &seen, "Yes, approved.", Taken::none())
                    );
                    match (&one, &two) {
                        (Outcome::Applied, Outcome::Refused(said))
                        | (Outcome::Refused(said), Outcome::Applied) => {
                            refused_as_answered(&what, said);
                        }
                        _ => panic!("{what}: one applied, one refused: {one:?} {two:?}"),
                    }
                    b.one_answer(&seen, &what).await;
                }
            })
            .await;
        b.server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_after_another_was_applied_is_refused_at_every_door() {
    let p = project();
    for backend in support::backends().await {
        let b = bench(&backend, &p).await;
        let ordered: Vec<(Door, Door)> = DOORS
            .iter()
            .flat_map(|x| DOORS.iter().map(move |y| (*x, *y)))
            .collect();
        futures::stream::iter(ordered)
            .for_each_concurrent(4, |(x, y)| {
                let (b, name) = (&b, backend.name());
                async move {
                    let what = format!("{name}: {x:?} then {y:?}");
                    let seen = b.ask(&format!("then-{x:?}-{y:?}")).await;
                    // The second client read the same question; it answers once the first
                    // answer was taken, while the step it started runs.
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    let (one, two) =
                        tokio::join!(b.answer(x, &seen, "REJECT", Taken(Some(tx))), async {
                            rx.await.expect("the first door answers");
                            b.answer(y, &seen, "APPROVE", Taken::none()).await
                        });
                    assert!(matches!(one, Outcome::Applied), "{what}: {one:?}");
                    match two {
                        Outcome::Refused(said) => refused_as_answered(&what, &said),
                        Outcome::Applied => panic!("{what}: the late answer was applied too"),
                    }
                    b.one_answer(&seen, &what).await;
                }
            })
            .await;
        b.server.stop().await;
    }
}
