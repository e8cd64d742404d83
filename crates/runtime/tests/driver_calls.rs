//! How many calls into the SQLite driver a park and a resume make (issue #35: at most three),
//! and a ping-pong whose models never wait (far fewer than its turns).
//! Each call crosses to the driver's thread, and the tail of those crossings is a park's p99.
//!
//! sqlx logs every call it runs (one `sqlx::query` event per call, however many statements
//! its text holds); this binary's process-wide subscriber counts them. A binary of its own:
//! the subscriber is global, and another test's store would be counted with this one's. Calls
//! of `PRAGMA`s are not counted: the background checkpointer's `wal_checkpoint` runs on a
//! connection of its own, off the request's path, and a connection's opening settings run once
//! per connection (the read pool opens one when a read finds none idle).

use std::sync::Arc;

use duet_runtime::testing::{DriverCalls, Scratch};
use duet_runtime::{
    CancellationToken, Delivered, Delivery, EventSink, Runtime, Store, ThreadStatus,
};

/// The driver calls `f` made (by summary).
async fn during<T>(
    calls: &DriverCalls,
    f: impl std::future::Future<Output = T>,
) -> (T, Vec<String>) {
    calls.take();
    let out = f.await;
    (out, calls.take())
}

fn counter() -> &'static DriverCalls {
    DriverCalls::install().expect("the only subscriber of this binary")
}

/// The engine bench's gate: a model asks, a person answers, the model records the decision.
fn gate(dir: &Scratch) -> Arc<duet_spec::Project> {
    let files = [
        (
            "agents/agents/gate.yaml",
            "name: gate\nsideA:\n  prompt: gate\n  sessionStop: { name: decide, messageProperty: decision }\nsideB: { human: true, approver: true }\n",
        ),
        (
            "agents/prompts/gate.yaml",
            "name: gate\ntoolDescription: d\nmodel: gate_model\nincludeChat: true\nprompt: Ask for approval.\ntools: [decide]\n",
        ),
        (
            "agents/tools/decide.yaml",
            "description: Record the decision.\nargs: { type: object, properties: { decision: { type: string } }, required: [decision] }\nresult: \"Decision: {{decision}}\"\n",
        ),
        (
            "agents/models/gate_model.yaml",
            "name: gate_model\nprovider: scripted\nmodel: demo\nscript:\n  - text: Approve the change?\n  - tool_calls: [{ name: decide, arguments: { decision: approved } }]\n",
        ),
    ];
    for (path, text) in files {
        dir.write(path, text);
    }
    let loaded = duet_spec::load(dir.root()).expect("gate project");
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    Arc::new(loaded.project)
}

async fn deliver(rt: &Runtime, delivery: Delivery<'_>) -> ThreadStatus {
    match rt
        .deliver_message(delivery, &EventSink::discard(), &CancellationToken::new())
        .await
    {
        Ok(Delivered::Settled(s)) => s.status,
        other => panic!("{other:?}"),
    }
}

/// Parks a new gate thread `key`: the calls it took.
async fn park(rt: &Runtime, key: &str) -> Vec<String> {
    let delivery = Delivery {
        agent: Some("gate"),
        ..Delivery::new(key, "Change the firewall?")
    };
    let (status, calls) = during(counter(), deliver(rt, delivery)).await;
    assert_eq!(status, ThreadStatus::AwaitingHuman, "{key}");
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_park_and_a_resume_each_take_at_most_three_driver_calls() {
    let calls = counter();
    let dir = Scratch::new("driver-calls");
    let project = gate(&dir);
    let store: Arc<dyn Store> = Arc::new(
        duet_store::SqliteStore::open(&dir.root().join("calls.db"))
            .await
            .expect("sqlite"),
    );
    let rt = Runtime::builder(project.clone(), store.clone())
        .providers(duet_models::providers_for(&project))
        .build();

    // A first park and resume open the read pool's connection and fill the statement caches
    // (a connection opened is calls of its own, once per connection, off the steady path).
    park(&rt, "warm").await;
    deliver(&rt, Delivery::new("warm", "Approved.")).await;

    // A park: the thread created with its message (and the run's first read), then the step's
    // commit with the drain's (the scripted model answers without waiting).
    let parked = park(&rt, "a").await;
    eprintln!("a park: {parked:#?}");
    assert!(
        (1..=3).contains(&parked.len()),
        "a park took {} calls: {parked:#?}",
        parked.len()
    );

    // A resume as a message (`enqueue`, which takes the lease).
    let (status, resumed) = during(calls, deliver(&rt, Delivery::new("a", "Approved."))).await;
    assert_eq!(status, ThreadStatus::Idle);
    eprintln!("a resume: {resumed:#?}");
    assert!(
        (1..=3).contains(&resumed.len()),
        "a resume took {} calls: {resumed:#?}",
        resumed.len()
    );

    // A resume as the answer to its park (`answer`: the inbox's and `/approvals`' path).
    park(&rt, "b").await;
    let at = store
        .thread("b")
        .await
        .expect("read")
        .and_then(|t| t.park())
        .expect("parked");
    let delivery = Delivery {
        answers: Some(at),
        ..Delivery::new("b", "Approved.")
    };
    let (status, answered) = during(calls, deliver(&rt, delivery)).await;
    assert_eq!(status, ThreadStatus::Idle);
    eprintln!("an answer: {answered:#?}");
    assert!(
        (1..=3).contains(&answered.len()),
        "an answer took {} calls: {answered:#?}",
        answered.len()
    );

    // The count is of real calls: the journal holds what the folded writes wrote.
    let t = store.thread("a").await.expect("read").expect("thread");
    let texts: Vec<String> = store
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter_map(|m| m.content)
        .collect();
    assert_eq!(
        texts,
        [
            "Change the firewall?",
            "Approve the change?",
            "Approved.",
            "Decision: approved"
        ]
        .map(str::to_owned),
        "the thread's history"
    );
    assert!(store.queue(t.id).await.expect("queue").is_empty());

    // A ping-pong whose models answer without waiting: its steps' commits are held for the
    // next step's, a few at a time (at least two, however slow the machine), so its 40 turns
    // take far fewer calls than 40.
    let turns = 40;
    let rt = Runtime::builder(pingpong(&dir, turns), store.clone())
        .providers(duet_models::providers())
        .build();
    let (status, played) = during(
        calls,
        deliver(
            &rt,
            Delivery {
                agent: Some("pingpong"),
                ..Delivery::new("pp", "Start.")
            },
        ),
    )
    .await;
    assert_eq!(status, ThreadStatus::Idle);
    eprintln!("a ping-pong of {turns} turns: {} calls", played.len());
    assert!(
        played.len() < turns * 3 / 4,
        "{turns} turns took {} calls: {played:#?}",
        played.len()
    );
    let t = store.thread("pp").await.expect("read").expect("thread");
    let answers = store
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter(|m| m.model.is_some())
        .count();
    assert_eq!(answers, turns, "every turn journaled");
}

/// The engine bench's ping-pong, beside the gate in `dir`: two scripted models, `turns` turns.
fn pingpong(dir: &Scratch, turns: usize) -> Arc<duet_spec::Project> {
    duet_runtime::testing::write_pingpong(dir, turns);
    let loaded = duet_spec::load(dir.root()).expect("ping-pong project");
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    Arc::new(loaded.project)
}
