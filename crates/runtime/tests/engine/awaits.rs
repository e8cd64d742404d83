//! The durable await of a blocking subagent call, across a crash: a process dies while the
//! parent waits and its child is mid-step; the next runner's `recover` finishes the child, whose
//! result is written once as the parent's tool result, and the parent runs on — the same journal
//! as an uninterrupted run. On every backend.

use crate::support;

use support::Slow;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use duet_runtime::{
    CancellationToken, Delivered, EventSink, ManualClock, Message, Role, Runtime, Store,
    ThreadStatus,
};
use tokio::sync::Notify;

/// A lead whose one model call spawns a blocking worker, and whose next says it is done; the
/// worker's first step calls the `slow` tool, its second its `sessionStop` tool.
fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("awaits");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/lead.yaml",
        "name: lead\nsideA:\n  prompt: lead\n  subagents: [{ agent: worker, as: build, blocking: true }]\nsideB: { human: true }\n",
    );
    write(
        "agents/agents/worker.yaml",
        "name: worker\nexposeAsTool: true\ntoolDescription: Builds.\nsideA:\n  prompt: worker\n  sessionStop: { name: done, messageProperty: result }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/lead.yaml",
        "name: lead\ntoolDescription: d\nmodel: lead_model\nincludeChat: true\nprompt: p\n",
    );
    write(
        "agents/prompts/worker.yaml",
        "name: worker\ntoolDescription: d\nmodel: worker_model\nincludeChat: true\nprompt: p\ntools: [slow, done]\n",
    );
    write(
        "agents/tools/slow.yaml",
        "description: Takes its time.\nbuiltin: slow\n",
    );
    write(
        "agents/tools/done.yaml",
        "description: Done.\nargs: { type: object, properties: { result: { type: string } }, required: [result] }\nresult: \"Done: {{result}}\"\n",
    );
    write(
        "agents/models/lead_model.yaml",
        "name: lead_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: subagent_create, arguments: { agent: build, name: b, message: Build it., attachments: [] } }]\n  - text: It is built.\n",
    );
    write(
        "agents/models/worker_model.yaml",
        "name: worker_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: slow }]\n  - tool_calls: [{ name: done, arguments: { result: built } }]\n",
    );
    dir.project()
}

fn slow(blocks: bool) -> (Slow, Arc<Notify>) {
    let entered = Arc::new(Notify::new());
    let tool = Slow {
        first: AtomicBool::new(blocks),
        entered: entered.clone(),
    };
    (tool, entered)
}

fn runtime(
    project: &Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
    now: i64,
    tool: Slow,
) -> Runtime {
    support::runtime(project.clone(), store)
        .clock(Arc::new(ManualClock::new(now)))
        .lease_ms(60_000)
        .tool("slow", tool)
        .build()
}

/// Every thread's messages (timestamps cleared) and records, by key.
async fn journal(
    store: &dyn Store,
) -> Vec<(String, Vec<Message>, Vec<(i64, String, serde_json::Value)>)> {
    let mut out = Vec::new();
    for t in store.threads(None).await.expect("threads") {
        let mut messages = store.messages(t.id).await.expect("messages");
        for m in &mut messages {
            m.created_at = 0;
        }
        let records = store
            .records(t.id)
            .await
            .expect("records")
            .into_iter()
            .map(|r| (r.seq, r.kind().to_owned(), r.data()))
            .collect();
        out.push((t.key, messages, records));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_while_the_parent_waits_is_finished_by_the_next_runner() {
    let project = project();
    for backend in support::backends().await {
        // The reference: an uninterrupted run on a database of its own.
        let reference = {
            let other = support::backends()
                .await
                .into_iter()
                .find(|b| b.name() == backend.name())
                .expect("same kind");
            let store = other.open().await;
            let rt = runtime(&project, store.clone(), 0, slow(false).0);
            let done = rt
                .send(
                    "t",
                    Some("lead"),
                    "go",
                    &EventSink::discard(),
                    &CancellationToken::new(),
                )
                .await;
            let Ok(Delivered::Settled(s)) = done else {
                panic!("{done:?}");
            };
            assert_eq!(s.status, ThreadStatus::AwaitingHuman, "{}", backend.name());
            journal(store.as_ref()).await
        };
        let lead = &reference[0].1;
        assert!(
            lead.iter().any(|m| m.role == Role::Tool
                && m.content.as_deref() == Some("built\n\nReference: t/build-1")),
            "{}: the child's result is the call's tool result: {lead:#?}",
            backend.name()
        );

        // The victim: the process dies while the worker's first tool call runs.
        let (tool, entered) = slow(true);
        let store = backend.open().await;
        let victim = runtime(&project, store.clone(), 0, tool);
        support::kill_mid_step(victim, "t", "lead", &entered).await;
        let lead = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(
            lead.status,
            ThreadStatus::Waiting,
            "{}: the waiting step was committed before the child ran",
            backend.name()
        );
        let child = store
            .thread("t/build-1")
            .await
            .expect("read")
            .expect("child");
        assert_eq!(child.status, ThreadStatus::Running, "{}", backend.name());

        // The next runner, once the dead run's lease has expired, finishes both.
        let heir = runtime(&project, store.clone(), 60_001, slow(false).0);
        let ran = heir
            .recover(&CancellationToken::new())
            .await
            .expect("recover");
        assert!(ran >= 1, "{}", backend.name());
        heir.quiesce().await;
        assert_eq!(
            journal(store.as_ref()).await,
            reference,
            "{}: the same journal as an uninterrupted run",
            backend.name()
        );
        // Nothing waits any more, and nothing is left to recover.
        assert_eq!(
            heir.recover(&CancellationToken::new())
                .await
                .expect("recover"),
            0
        );
        let entry = store
            .child(child.id)
            .await
            .expect("entry")
            .expect("registry");
        assert_eq!(entry.awaiting, None, "{}", backend.name());
    }
}
