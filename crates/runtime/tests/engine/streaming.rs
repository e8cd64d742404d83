//! A step's model answer as callers see it: text streams before the step commits; consecutive
//! messages' text is separated; a failing model's fallbacks are tried (announced as `retrying`);
//! usage is kept per message and reported; unparsable tool arguments are an error the model
//! sees; a prompt named in `tools` runs as a sub-prompt; a person's message is in the journal
//! before the first piece of the answer to it arrives.

use crate::support;

use std::sync::{Arc, Mutex};

use duet_runtime::{
    Agent, AgentEvent, Model, ModelChunk, ModelError, ModelRequest, Prompt, Provider, Providers,
    Role, Scope, Usage, collect,
};
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use serde_json::json;
use tokio::sync::oneshot;

/// A provider whose one model plays `chunks`, after `gate` opens when there is one; it records
/// the requests it gets.
#[derive(Clone, Default)]
struct Fake {
    chunks: Vec<Result<ModelChunk, ModelError>>,
    gate: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Model for Fake {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        self.requests.lock().expect("lock").push(request);
        let mut chunks = self.chunks.clone();
        let gate = self.gate.lock().expect("lock").take();
        // The first chunk goes out at once; the rest wait for the gate.
        let first = if chunks.is_empty() {
            None
        } else {
            Some(chunks.remove(0))
        };
        let rest = stream::once(async move {
            if let Some(gate) = gate {
                let _ = gate.await;
            }
            stream::iter(chunks)
        })
        .flatten();
        stream::iter(first).chain(rest).boxed()
    }
}

impl Provider for Fake {
    fn model(&self, _: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        Ok(Arc::new(self.clone()))
    }
}

/// A person talks to a model. The tests register their fakes under the built-in provider names
/// (`openai`, `anthropic`), which a project may name without defining them.
fn project(model: &str, extra: &[(&str, &str)]) -> support::Scratch {
    let p = support::Scratch::new("stream");
    p.write(
        "agents/agents/chat.yaml",
        "name: chat\nsideA: { prompt: chat, stopOnResponse: true }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/chat.yaml",
        &format!("name: chat\ntoolDescription: d\nmodel: {model}\nincludeChat: true\nprompt: p\ntools: [echo]\n"),
    );
    p.write(
        "agents/tools/echo.yaml",
        "description: Echo.\nargs: { type: object, properties: { say: { type: string } } }\nresult: \"{{say}}\"\n",
    );
    for (path, text) in extra {
        p.write(path, text);
    }
    p
}

fn runtime(
    p: &support::Scratch,
    providers: Providers,
    store: Arc<dyn duet_runtime::Store>,
) -> duet_runtime::Runtime {
    duet_runtime::Runtime::builder(p.project(), store)
        .providers(providers)
        .build()
}

/// A chat on `store` whose network model says "Hel", then waits until the returned sender
/// opens its gate before "lo": invoked with "hi" on key `k`, its events after the first
/// ("Hel", checked here) — the model asked and still answering.
async fn gated_hello(
    store: Arc<dyn duet_runtime::Store>,
) -> (oneshot::Sender<()>, BoxStream<'static, AgentEvent>) {
    let (open, gate) = oneshot::channel();
    (open, hello(store, Some(gate)).await)
}

/// A chat on `store` whose model says "Hel" then "lo" — after `gate` opens, when there is
/// one: invoked with "hi" on key `k`, its events after the first ("Hel", checked here).
async fn hello(
    store: Arc<dyn duet_runtime::Store>,
    gate: Option<oneshot::Receiver<()>>,
) -> BoxStream<'static, AgentEvent> {
    let p = project(
        "m",
        &[(
            "agents/models/m.yaml",
            "name: m\nprovider: openai\nmodel: x\n",
        )],
    );
    let fake = Fake {
        chunks: vec![
            Ok(ModelChunk::Text("Hel".into())),
            Ok(ModelChunk::Text("lo".into())),
        ],
        gate: Arc::new(Mutex::new(gate)),
        ..Fake::default()
    };
    let rt = runtime(&p, Providers::new().with("openai", fake), store);
    let agent = rt.agent("chat").expect("agent");
    let mut events = agent.invoke(Scope::new("k"), Prompt::text("hi")).boxed();
    // Bounded: a held drain never written would hold the first piece back for good.
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), events.next())
        .await
        .expect("the first piece within a minute")
        .expect("an event");
    assert_eq!(
        first,
        AgentEvent::Text {
            delta: "Hel".into()
        }
    );
    events
}

#[tokio::test]
async fn text_reaches_the_caller_before_its_step_commits() {
    let backend = support::backends().await.remove(0);
    let store = backend.open().await;
    // The first piece arrives while the model is still answering: nothing is committed yet.
    let (open, events) = gated_hello(store.clone()).await;
    let texts = support::texts(&store, "k").await;
    assert!(
        texts.iter().all(|(role, _, _)| *role != Role::Assistant),
        "the answer is not committed while it streams: {texts:?}"
    );
    open.send(()).expect("the model waits");
    let rest: Vec<AgentEvent> = events.collect().await;
    assert_eq!(rest[0], AgentEvent::Text { delta: "lo".into() });
    assert!(
        matches!(rest.last(), Some(AgentEvent::Completed { .. })),
        "{rest:?}"
    );
    // Committed once, whole, and not sent again.
    let texts = support::texts(&store, "k").await;
    assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Hello"));
    assert_eq!(
        rest.iter()
            .filter(|e| matches!(e, AgentEvent::Text { .. }))
            .count(),
        1
    );
}

#[tokio::test]
async fn a_run_of_several_messages_never_glues_their_words() {
    // Two models in one run: a1 then b1; `collect` joins their text with a blank line.
    let p = support::Scratch::new("glue");
    p.write(
        "agents/agents/pair.yaml",
        "name: pair\nmaxSessionTurns: 1\nsideA: { prompt: pa }\nsideB: { prompt: pb }\n",
    );
    for side in ["a", "b"] {
        p.write(
            &format!("agents/prompts/p{side}.yaml"),
            &format!("name: p{side}\ntoolDescription: d\nmodel: m{side}\nprompt: p\n"),
        );
        p.write(
            &format!("agents/models/m{side}.yaml"),
            &format!("name: m{side}\nprovider: scripted\nmodel: demo\nscript:\n  - text: \"{side} says hi\"\n"),
        );
    }
    for backend in support::backends().await {
        let rt = support::runtime(p.project(), backend.open().await).build();
        let done = collect(
            rt.agent("pair")
                .expect("agent")
                .invoke(Scope::new("g"), Prompt::text("go")),
        )
        .await
        .expect("completed");
        assert_eq!(done.text, "a says hi\n\nb says hi", "{}", backend.name());
    }
}

#[tokio::test]
async fn a_failing_model_falls_back_announced_and_usage_is_kept() {
    let p = project(
        "primary",
        &[
            (
                "agents/models/primary.yaml",
                "name: primary\nprovider: anthropic\nmodel: x\nfallbacks: [backup]\n",
            ),
            (
                "agents/models/backup.yaml",
                "name: backup\nprovider: openai\nmodel: y\n",
            ),
        ],
    );
    let broken = Fake {
        chunks: vec![Err(ModelError::new("503 from upstream", true))],
        ..Fake::default()
    };
    let usage = Usage {
        input_tokens: 12,
        output_tokens: 3,
        cached_tokens: 2,
        reasoning_tokens: 0,
    };
    let backup = Fake {
        chunks: vec![
            Ok(ModelChunk::Text("from the backup".into())),
            Ok(ModelChunk::Usage(usage)),
        ],
        ..Fake::default()
    };
    for backend in support::backends().await {
        let store = backend.open().await;
        let providers = Providers::new()
            .with("anthropic", broken.clone())
            .with("openai", backup.clone());
        let rt = runtime(&p, providers, store.clone());
        let events: Vec<AgentEvent> = rt
            .agent("chat")
            .expect("agent")
            .invoke(Scope::new("f"), Prompt::text("hi"))
            .collect()
            .await;
        let retry = events.iter().find_map(|e| match e {
            AgentEvent::Retrying {
                attempt,
                max_attempts,
                reason,
                ..
            } => Some((*attempt, *max_attempts, reason.clone())),
            _ => None,
        });
        let (attempt, max, reason) = retry.expect("a retrying event");
        assert_eq!((attempt, max), (2, 2));
        assert!(
            reason.contains("503 from upstream") && reason.contains("backup"),
            "{reason}"
        );
        assert!(
            events.contains(&AgentEvent::Text {
                delta: "from the backup".into()
            }),
            "{events:?}"
        );
        let reported = events.iter().find_map(|e| match e {
            AgentEvent::Other(v) if v["type"] == "usage" => Some(v.clone()),
            _ => None,
        });
        assert_eq!(reported.expect("a usage event")["inputTokens"], 12);
        let t = store.thread("f").await.expect("read").expect("thread");
        let stored = store.messages(t.id).await.expect("messages");
        let answer = stored
            .iter()
            .find(|m| m.role == Role::Assistant)
            .expect("answer");
        assert_eq!(answer.usage, Some(usage), "{}", backend.name());
    }
}

#[tokio::test]
async fn unparsable_tool_arguments_are_an_error_the_model_sees() {
    let p = project(
        "m",
        &[(
            "agents/models/m.yaml",
            "name: m\nprovider: openai\nmodel: x\n",
        )],
    );
    let fake = Fake {
        chunks: vec![Ok(ModelChunk::ToolCall {
            id: Some("c1".into()),
            name: "echo".into(),
            arguments: json!("{\"say\": \"hi"),
        })],
        ..Fake::default()
    };
    let backend = support::backends().await.remove(0);
    let store = backend.open().await;
    // The model is called again after the tool result, and plays the same call: the run stops
    // on its step limit, having seen the error each time.
    let rt = runtime(
        &p,
        Providers::new().with("openai", fake.clone()),
        store.clone(),
    );
    let _ = collect(
        rt.agent("chat")
            .expect("agent")
            .invoke(Scope::new("u"), Prompt::text("hi")),
    )
    .await;
    let t = store.thread("u").await.expect("read").expect("thread");
    let stored = store.messages(t.id).await.expect("messages");
    let result = stored
        .iter()
        .find(|m| m.role == Role::Tool)
        .expect("a tool result");
    assert_eq!(result.tool_status, Some(duet_runtime::ToolStatus::Error));
    assert!(
        result
            .content
            .as_deref()
            .unwrap_or_default()
            .contains("not a JSON object"),
        "{result:?}"
    );
    let second = fake
        .requests
        .lock()
        .expect("lock")
        .get(1)
        .cloned()
        .expect("a second call");
    let last = second.messages.last().expect("context");
    assert!(
        last.is_error && last.role == Role::Tool,
        "the model sees the error: {last:?}"
    );
}

#[tokio::test]
async fn a_prompt_named_in_tools_runs_as_a_sub_prompt() {
    let p = support::Scratch::new("sub");
    p.write(
        "agents/agents/lead.yaml",
        "name: lead\nsideA: { prompt: lead, stopOnResponse: true }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/lead.yaml",
        "name: lead\ntoolDescription: d\nmodel: lead_model\nincludeChat: true\nprompt: Lead.\ntools: [reviewer, strict]\n",
    );
    p.write("agents/prompts/reviewer.yaml", "name: reviewer\ntoolDescription: Reviews a plan.\nmodel: reviewer_model\nprompt: Review it.\n");
    p.write(
        "agents/prompts/strict.yaml",
        "name: strict\ntoolDescription: Needs a plan.\nmodel: reviewer_model\nprompt: \"Check {{plan}}.\"\nrequiredSchema: { type: object, properties: { plan: { type: string } }, required: [plan] }\n",
    );
    p.write(
        "agents/models/lead_model.yaml",
        "name: lead_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls:\n      - { name: reviewer, arguments: { message: \"Deploy on Friday?\" } }\n      - { name: strict, arguments: {} }\n  - text: Done.\n",
    );
    p.write(
        "agents/models/reviewer_model.yaml",
        "name: reviewer_model\nprovider: scripted\nmodel: demo\nscript:\n  - text: Not on a Friday.\n",
    );
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = support::runtime(p.project(), store.clone()).build();
        let done = collect(
            rt.agent("lead")
                .expect("agent")
                .invoke(Scope::new("s"), Prompt::text("plan")),
        )
        .await
        .expect("completed");
        assert_eq!(done.text, "Done.");
        let t = store.thread("s").await.expect("read").expect("thread");
        let results: Vec<_> = store
            .messages(t.id)
            .await
            .expect("messages")
            .into_iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| {
                (
                    m.tool_name.unwrap_or_default(),
                    m.tool_status,
                    m.content.unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(results[0].0, "reviewer");
        assert_eq!(results[0].2, "Not on a Friday.", "{}", backend.name());
        assert_eq!(
            results[1].1,
            Some(duet_runtime::ToolStatus::Error),
            "{results:?}"
        );
        assert!(
            results[1].2.contains("plan"),
            "the schema names what is missing: {results:?}"
        );
    }
}

#[tokio::test]
async fn images_are_kept_with_their_message_and_reach_the_model() {
    let p = project(
        "m",
        &[(
            "agents/models/m.yaml",
            "name: m\nprovider: openai\nmodel: x\n",
        )],
    );
    let image = duet_runtime::ImageRef {
        mime_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    for backend in support::backends().await {
        let fake = Fake {
            chunks: vec![Ok(ModelChunk::Text("A chart.".into()))],
            ..Fake::default()
        };
        let store = backend.open().await;
        let rt = runtime(
            &p,
            Providers::new().with("openai", fake.clone()),
            store.clone(),
        );
        let prompt = Prompt {
            images: vec![image.clone()],
            ..Prompt::text("What is this?")
        };
        let done = collect(
            rt.agent("chat")
                .expect("agent")
                .invoke(Scope::new("i"), prompt),
        )
        .await
        .expect("completed");
        assert_eq!(done.text, "A chart.");
        let request = fake.requests.lock().expect("lock")[0].clone();
        let asked = request.messages.last().expect("the question");
        assert_eq!(
            (asked.content.as_deref(), &asked.images),
            (Some("What is this?"), &vec![image.clone()])
        );
        // Stored with the message: a later step (or another process) still has it.
        let t = store.thread("i").await.expect("read").expect("thread");
        let stored = store.messages(t.id).await.expect("messages");
        let question = stored
            .iter()
            .find(|m| m.role == Role::User)
            .expect("question");
        assert_eq!(question.images, vec![image.clone()], "{}", backend.name());
    }
}

/// What the journal holds when a step's first piece reaches the caller, on every backend:
/// - a model that waits on the network: the person's message, and the thread runs (the drain
///   held for the step's commit is written the moment the model waits, before its first piece
///   is sent);
/// - a model that answers without waiting: the message and the answer, written in one commit,
///   and what the step streamed is sent only after it — no caller sees text whose prompt is not
///   in the journal.
#[tokio::test]
async fn the_prompt_is_in_the_journal_before_the_first_piece_arrives() {
    // Fresh databases for each case (both use the key `k`).
    for waits in [true, false] {
        for backend in support::backends().await {
            let store = backend.open().await;
            let (open, gate) = oneshot::channel();
            let events = hello(store.clone(), waits.then_some(gate)).await;
            let texts = support::texts(&store, "k").await;
            let journal: Vec<(Role, &str)> = texts
                .iter()
                .map(|(role, _, text)| (*role, text.as_str()))
                .collect();
            let thread = store.thread("k").await.expect("read").expect("thread");
            if waits {
                assert_eq!(journal, [(Role::User, "hi")], "{}", backend.name());
                assert_eq!(
                    thread.status,
                    duet_runtime::ThreadStatus::Running,
                    "{}",
                    backend.name()
                );
                open.send(()).expect("the model waits");
            } else {
                assert_eq!(
                    journal,
                    [(Role::User, "hi"), (Role::Assistant, "Hello")],
                    "{}",
                    backend.name()
                );
            }
            let rest: Vec<AgentEvent> = events.collect().await;
            assert_eq!(rest[0], AgentEvent::Text { delta: "lo".into() });
            assert!(
                matches!(rest.last(), Some(AgentEvent::Completed { .. })),
                "{}: {rest:?}",
                backend.name()
            );
        }
    }
}

/// A ping-pong of `turns` turns whose two scripted models answer without waiting.
fn pingpong(turns: usize) -> support::Scratch {
    let p = support::Scratch::new("held-steps");
    duet_runtime::testing::write_pingpong(&p, turns);
    p
}

/// Steps that wait on nothing have their commits held for the next step's, a few at a time
/// (`docs/decisions.md`, "a step's commit held for the next one's"), yet on every backend each
/// message's text reaches the caller only once the message is in the journal, and the journal
/// ends with every turn in order.
#[tokio::test]
async fn a_message_is_in_the_journal_when_its_text_arrives_though_its_commit_was_held() {
    let turns = 24;
    let p = pingpong(turns);
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = support::runtime(p.project(), store.clone()).build();
        let (sink, mut rx) = duet_runtime::EventSink::channel();
        let reader = {
            let store = store.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while let Some(event) = rx.recv().await {
                    // The scripted model says each message in one piece.
                    if let AgentEvent::Text { delta } = event {
                        let said = delta.trim().to_owned();
                        let journal = support::texts(&store, "pp").await;
                        assert!(
                            journal.iter().any(|(_, _, text)| *text == said),
                            "`{said}` arrived before its message was journaled: {journal:?}"
                        );
                        seen.push(said);
                    }
                }
                seen
            })
        };
        let done = rt
            .send(
                "pp",
                Some("pingpong"),
                "Start.",
                &sink,
                &duet_runtime::CancellationToken::new(),
            )
            .await;
        drop(sink);
        assert!(
            matches!(done, Ok(duet_runtime::Delivered::Settled(_))),
            "{}: {done:?}",
            backend.name()
        );
        let seen = reader.await.expect("the reader");
        let said: Vec<String> = (0..turns)
            .map(|i| format!("{} {}", ["ping", "pong"][i % 2], i / 2))
            .collect();
        assert_eq!(seen, said, "{}", backend.name());
        let journal: Vec<String> = support::texts(&store, "pp")
            .await
            .into_iter()
            .map(|(_, _, text)| text)
            .collect();
        assert_eq!(journal[0], "Start.", "{}", backend.name());
        assert_eq!(journal[1..], said[..], "{}", backend.name());
    }
}
