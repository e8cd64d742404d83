//! The Agent Handler conformance harness (seed `000` §6), run against the runtime's agents on
//! every backend and against each middleware: a completing, a failing and a hanging agent, and a
//! pair of runtimes on one store for portable conformance (MUST 6). Then busy sessions,
//! principal isolation, and what each middleware adds.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::middleware::{AuthLayer, Budget, BudgetLayer, Layer, TraceLayer};
use duet_runtime::{
    Agent, AgentEvent, Principal, Prompt, Runtime, Scope, Store, Tool, ToolContext, ToolResult,
    codes, collect,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::Notify;

/// Signals when the hanging tool starts, and when its work is dropped (the run aborted).
#[derive(Clone, Default)]
struct Probe {
    entered: Arc<Notify>,
    dropped: Arc<Notify>,
}

struct Hang(Probe);

struct OnDrop(Arc<Notify>);
impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

#[async_trait]
impl Tool for Hang {
    async fn call(&self, _: ToolContext, _: serde_json::Value) -> ToolResult {
        let _cleanup = OnDrop(self.0.dropped.clone());
        self.0.entered.notify_one();
        std::future::pending::<ToolResult>().await
    }
}

fn fixture() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("conformance");
    let write = |path: &str, text: &str| dir.write(path, text);
    for (name, script) in [
        ("completes", "  - text: done\n"),
        ("fails", "  - text: only once\n"),
        ("hangs", "  - tool_calls: [{ name: hang }]\n"),
        ("twice", "  - text: first\n  - text: second\n"),
        (
            "tools",
            "  - tool_calls: [{ name: note }, { name: note }]\n  - text: noted\n",
        ),
    ] {
        write(
            &format!("agents/agents/{name}.yaml"),
            &format!("name: {name}\nsideA: {{ prompt: {name} }}\nsideB: {{ human: true }}\n"),
        );
        write(
            &format!("agents/prompts/{name}.yaml"),
            &format!(
                "name: {name}\ntoolDescription: d\nmodel: {name}_model\nincludeChat: true\nprompt: p\ntools: [hang, note]\n"
            ),
        );
        write(
            &format!("agents/models/{name}_model.yaml"),
            &format!("name: {name}_model\nprovider: scripted\nmodel: demo\nscript:\n{script}"),
        );
    }
    write(
        "agents/tools/hang.yaml",
        "description: Never returns.\nbuiltin: hang\n",
    );
    write(
        "agents/tools/note.yaml",
        "description: Notes.\nresult: noted\n",
    );
    dir.project()
}

fn runtime(project: &Arc<duet_spec::Project>, store: Arc<dyn Store>, probe: &Probe) -> Runtime {
    support::runtime(project.clone(), store)
        .tool("hang", Hang(probe.clone()))
        .build()
}

fn session() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn alice() -> Principal {
    Principal {
        kind: "user".into(),
        issuer: "https://id.example".into(),
        subject: "alice".into(),
    }
}

/// Makes the scope a subject's invocations use.
type ScopeFor = fn(String) -> Scope;

/// What the harness runs against.
struct Subject {
    name: String,
    completing: Arc<dyn Agent>,
    failing: Arc<dyn Agent>,
    hanging: Arc<dyn Agent>,
    probe: Probe,
    scope: ScopeFor,
}

async fn drain(stream: BoxStream<'static, AgentEvent>) -> Vec<AgentEvent> {
    stream.collect().await
}

fn json_round_trip(name: &str, events: &[AgentEvent]) {
    for e in events {
        let wire = serde_json::to_value(e).expect("serialises");
        let back: AgentEvent = serde_json::from_value(wire).expect("deserialises");
        assert_eq!(&back, e, "{name}: JSON round trip");
    }
}

async fn conformance(s: &Subject) {
    let name = &s.name;
    // MUST 1: exactly one terminal, last.
    let events = drain(
        s.completing
            .invoke((s.scope)(session()), Prompt::text("go")),
    )
    .await;
    let terminals = events.iter().filter(|e| e.is_terminal()).count();
    assert_eq!(terminals, 1, "{name}: {events:?}");
    assert!(
        matches!(events.last(), Some(AgentEvent::Completed { .. })),
        "{name}: {events:?}"
    );
    json_round_trip(name, &events);

    // MUSTs 1 and 2: a failing engine gives one `failed`, and iteration never errors.
    let key = session();
    drain(
        s.failing
            .invoke((s.scope)(key.clone()), Prompt::text("once")),
    )
    .await;
    let events = drain(s.failing.invoke((s.scope)(key), Prompt::text("twice"))).await;
    assert_eq!(
        events.iter().filter(|e| e.is_terminal()).count(),
        1,
        "{name}: {events:?}"
    );
    match events.last() {
        Some(AgentEvent::Failed { details, .. }) => assert!(!details.is_empty()),
        other => panic!("{name}: expected failed, got {other:?}"),
    }
    json_round_trip(name, &events);

    // MUST 3: a consumer that stops gets no terminal, and the work in flight is aborted.
    let mut stream = s.hanging.invoke((s.scope)(session()), Prompt::text("hang"));
    let first = tokio::select! {
        e = stream.next() => e,
        () = s.probe.entered.notified() => None,
    };
    assert!(
        first.is_none(),
        "{name}: nothing commits before the hanging tool: {first:?}"
    );
    drop(stream);
    tokio::time::timeout(Duration::from_secs(10), s.probe.dropped.notified())
        .await
        .unwrap_or_else(|_| {
            panic!("{name}: the hanging work was not aborted after the stream was dropped")
        });
}

fn scope_plain(key: String) -> Scope {
    Scope::new(key)
}

fn scope_alice(key: String) -> Scope {
    Scope::new(key).with_principal(alice())
}

async fn subjects() -> Vec<Subject> {
    let project = fixture();
    let mut out = Vec::new();
    for backend in support::backends().await {
        let probe = Probe::default();
        let rt = runtime(&project, backend.open().await, &probe);
        let agent = |n: &str| -> Arc<dyn Agent> { Arc::new(rt.agent(n).expect("defined")) };
        let (completing, failing, hanging) = (agent("completes"), agent("fails"), agent("hangs"));
        out.push(Subject {
            name: format!("runtime on {}", backend.name()),
            completing: completing.clone(),
            failing: failing.clone(),
            hanging: hanging.clone(),
            probe: probe.clone(),
            scope: scope_plain,
        });
        let layers: Vec<(&str, Box<dyn Layer>, ScopeFor)> = vec![
            (
                "budget",
                Box::new(BudgetLayer(Budget {
                    max_tool_calls: Some(10),
                    max_text_chars: Some(10_000),
                    max_tokens: Some(1_000_000),
                    max_wall_time: Some(Duration::from_secs(60)),
                })),
                scope_plain,
            ),
            ("trace", Box::new(TraceLayer), scope_plain),
            (
                "auth",
                Box::new(AuthLayer::issuers(["https://id.example"])),
                scope_alice,
            ),
        ];
        for (layer_name, layer, scope) in layers {
            out.push(Subject {
                name: format!("{layer_name} over the runtime on {}", backend.name()),
                completing: layer.layer(completing.clone()),
                failing: layer.layer(failing.clone()),
                hanging: layer.layer(hanging.clone()),
                probe: probe.clone(),
                scope,
            });
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_agent_and_middleware_meets_the_musts() {
    for subject in subjects().await {
        conformance(&subject).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_runtime_on_the_same_store_serves_the_next_turn() {
    let project = fixture();
    for backend in support::backends().await {
        let probe = Probe::default();
        let a = runtime(&project, backend.open().await, &probe)
            .agent("twice")
            .expect("agent");
        let b = runtime(&project, backend.open().await, &probe)
            .agent("twice")
            .expect("agent");
        let key = "-1001234567890".to_owned() + backend.name();
        let first = collect(a.invoke(Scope::new(&key), Prompt::text("one")))
            .await
            .expect("first");
        assert_eq!(first.text, "first");
        // Nothing is shared in memory: b finds a's turn in the store and plays the next entry.
        let second = collect(b.invoke(Scope::new(&key), Prompt::text("two")))
            .await
            .expect("second");
        assert_eq!(second.text, "second", "{}", backend.name());
        assert_eq!(
            second.data.as_ref().and_then(|d| d["status"].as_str()),
            Some("awaiting_human")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_is_refused_and_nothing_is_written() {
    let project = fixture();
    for backend in support::backends().await {
        let probe = Probe::default();
        let rt = runtime(&project, backend.open().await, &probe);
        let hangs = rt.agent("hangs").expect("agent");
        let key = session();
        let mut running = hangs.invoke(Scope::new(&key), Prompt::text("hang"));
        tokio::select! {
            _ = running.next() => panic!("the hanging run yielded"),
            () = probe.entered.notified() => {}
        }
        let refused = collect(hangs.invoke(Scope::new(&key), Prompt::text("me too"))).await;
        let err = refused.expect_err("busy");
        assert_eq!(
            (err.code.as_deref(), err.retryable),
            (Some(codes::SESSION_BUSY), true),
            "{}",
            backend.name()
        );
        let thread = rt
            .store()
            .thread(&key)
            .await
            .expect("read")
            .expect("thread");
        let texts: Vec<String> = rt
            .store()
            .messages(thread.id)
            .await
            .expect("m")
            .into_iter()
            .filter_map(|m| m.content)
            .collect();
        assert_eq!(
            texts,
            ["hang"],
            "{}: the refused prompt was not written",
            backend.name()
        );
        drop(running);
        probe.dropped.notified().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_thread_is_theirs_alone() {
    let project = fixture();
    for backend in support::backends().await {
        let rt = runtime(&project, backend.open().await, &Probe::default());
        let agent = rt.agent("twice").expect("agent");
        let key = session();
        collect(agent.invoke(scope_alice(key.clone()), Prompt::text("mine")))
            .await
            .expect("alice starts it");
        let bob = Principal {
            subject: "bob".into(),
            ..alice()
        };
        for scope in [Scope::new(&key).with_principal(bob), Scope::new(&key)] {
            let err = collect(agent.invoke(scope, Prompt::text("let me in")))
                .await
                .expect_err("refused");
            assert_eq!(
                err.code.as_deref(),
                Some(codes::FORBIDDEN),
                "{}",
                backend.name()
            );
        }
        let again = collect(agent.invoke(scope_alice(key.clone()), Prompt::text("me again"))).await;
        assert_eq!(
            again.map(|c| c.text).ok().as_deref(),
            Some("second"),
            "{}: the owner goes on",
            backend.name()
        );
    }
}

/// An agent that emits an event type this build does not know, then completes.
struct Future;

impl Agent for Future {
    fn invoke(&self, _: Scope, _: Prompt) -> BoxStream<'static, AgentEvent> {
        futures::stream::iter([
            AgentEvent::Other(
                serde_json::json!({"type": "citation", "url": "https://example.org"}),
            ),
            AgentEvent::Text { delta: "ok".into() },
            AgentEvent::Completed { data: None },
        ])
        .boxed()
    }
}

#[tokio::test]
async fn middleware_relays_unknown_events_unchanged() {
    let inner: Arc<dyn Agent> = Arc::new(Future);
    let expected = drain(inner.invoke(Scope::new("s"), Prompt::text("x"))).await;
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(BudgetLayer(Budget::default())),
        Box::new(TraceLayer),
        Box::new(AuthLayer::issuers(["https://id.example"])),
    ];
    for layer in layers {
        let got = drain(
            layer
                .layer(inner.clone())
                .invoke(scope_alice("s".into()), Prompt::text("x")),
        )
        .await;
        assert_eq!(got, expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn middleware_stops_what_it_must() {
    let project = fixture();
    let probe = Probe::default();
    let backend = support::backends().await.remove(0);
    let rt = runtime(&project, backend.open().await, &probe);
    let tools: Arc<dyn Agent> = Arc::new(rt.agent("tools").expect("agent"));
    let hangs: Arc<dyn Agent> = Arc::new(rt.agent("hangs").expect("agent"));

    let one_tool = BudgetLayer(Budget {
        max_tool_calls: Some(1),
        ..Budget::default()
    })
    .layer(tools);
    let events = drain(one_tool.invoke(Scope::new(session()), Prompt::text("go"))).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::ToolStarted { .. }))
            .count(),
        1,
        "the second start, which exceeds, is replaced by the failure"
    );
    match events.last() {
        Some(AgentEvent::Failed { code, .. }) => {
            assert_eq!(code.as_deref(), Some(codes::BUDGET_EXCEEDED))
        }
        other => panic!("{other:?}"),
    }

    let quick = BudgetLayer(Budget {
        max_wall_time: Some(Duration::from_millis(200)),
        ..Budget::default()
    })
    .layer(hangs);
    let err = collect(quick.invoke(Scope::new(session()), Prompt::text("hang")))
        .await
        .expect_err("over time");
    assert_eq!(err.code.as_deref(), Some(codes::BUDGET_EXCEEDED));
    tokio::time::timeout(Duration::from_secs(10), probe.dropped.notified())
        .await
        .expect("the run was aborted");

    let auth = AuthLayer::issuers(["https://id.example"]).layer(Arc::new(Future));
    let outsider = Principal {
        issuer: "https://elsewhere".into(),
        ..alice()
    };
    for scope in [Scope::new("s"), Scope::new("s").with_principal(outsider)] {
        let err = collect(auth.invoke(scope, Prompt::text("x")))
            .await
            .expect_err("refused");
        assert_eq!(
            (err.code.as_deref(), err.retryable),
            (Some(codes::UNAUTHORIZED), false)
        );
    }
}

#[test]
fn invoke_streams_are_send_and_static() {
    fn assert_send_static<T: Send + 'static>(_: &T) {}
    let stream = Future.invoke(Scope::new("s"), Prompt::text("x"));
    assert_send_static(&stream);
    // A service opens its store and delivers messages from spawned tasks.
    fn assert_send<T: Send>(_: &T) {}
    let connect = duet_store::connect("unused.db");
    assert_send(&connect);
}

#[test]
fn polled_outside_tokio_a_stream_fails_instead_of_panicking() {
    let project = fixture();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let backend = rt.block_on(support::backends()).remove(0);
    let store = rt.block_on(backend.open());
    let agent = runtime(&project, store, &Probe::default())
        .agent("completes")
        .expect("agent");
    let events: Vec<AgentEvent> =
        futures::executor::block_on(agent.invoke(Scope::new("s"), Prompt::text("go")).collect());
    assert!(
        matches!(events.as_slice(), [AgentEvent::Failed { code: Some(c), .. }] if c == codes::INTERNAL),
        "{events:?}"
    );
}
