//! The runtime's spans (`duet_runtime::telemetry`) for a composed approval — an orchestrator
//! whose model composes the approval gate, which parks for a person and is answered after a
//! restart: the span tree, the GenAI attributes, and no message content in any attribute. On
//! every backend. (A recording `tracing` layer stands in for an exporter.)
//!
//! One test runs the checks in turn, each with its own thread-local subscriber: two at once
//! race in `tracing`'s callsite-interest cache (seen: a span missed).

#[path = "support/spans.rs"]
mod spans;
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use duet_runtime::telemetry::{TARGET, attr};

/// One span as recorded: its name, parent and attributes.
#[derive(Clone, Debug)]
struct Recorded {
    id: u64,
    parent: Option<u64>,
    name: String,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Recorded>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != TARGET {
            return;
        }
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        // The nearest enclosing span of ours.
        let parent = ctx.span(id).and_then(|s| {
            s.scope()
                .skip(1)
                .find(|p| p.metadata().target() == TARGET)
                .map(|p| p.id().into_u64())
        });
        if let Ok(mut all) = self.0.lock() {
            all.push(Recorded {
                id: id.into_u64(),
                parent,
                name: attrs.metadata().name().to_owned(),
                fields,
            });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Ok(mut all) = self.0.lock()
            && let Some(span) = all.iter_mut().rev().find(|s| s.id == id.into_u64())
        {
            values.record(&mut Fields(&mut span.fields));
        }
    }
}

impl Recorder {
    fn spans(&self) -> Vec<Recorded> {
        self.0.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

/// Asks the orchestrator to rotate the keys: it composes the gate, whose proposal waits for a
/// person's decision.
async fn orchestrate(rt: &duet_runtime::Runtime) {
    support::send(
        rt,
        "ops-1",
        Some("orchestrator"),
        "Rotate the production keys tonight, please.",
    )
    .await;
    rt.quiesce().await;
}

fn find<'a>(spans: &'a [Recorded], name: &str, key: &str, value: &str) -> Vec<&'a Recorded> {
    spans
        .iter()
        .filter(|s| s.name == name && s.fields.get(key).map(String::as_str) == Some(value))
        .collect()
}

/// Whether `inner` is (transitively) inside `outer`.
fn inside(spans: &[Recorded], inner: &Recorded, outer: &Recorded) -> bool {
    let mut at = inner.parent;
    while let Some(p) = at {
        if p == outer.id {
            return true;
        }
        at = spans
            .iter()
            .rev()
            .find(|s| s.id == p)
            .and_then(|s| s.parent);
    }
    false
}

async fn a_composed_approval_is_a_tree_of_genai_spans_and_no_span_outlives_its_park() {
    let project = support::project(&support::repo());
    for backend in support::backends().await {
        let recorder = Recorder::default();
        spans::install(Box::new(recorder.clone()));
        let store = backend.open().await;
        let rt = support::runtime(project.clone(), store.clone()).build();
        orchestrate(&rt).await;
        let spans = recorder.spans();
        let name = backend.name();

        let orchestrator = find(&spans, "invoke_agent", attr::AGENT_NAME, "orchestrator");
        assert_eq!(orchestrator.len(), 1, "{name}: one step so far: {spans:#?}");
        let o = orchestrator[0];
        assert_eq!(o.fields[attr::OPERATION_NAME], "invoke_agent");
        assert_eq!(o.fields[attr::OTEL_NAME], "invoke_agent orchestrator");
        assert_eq!(o.fields[attr::CONVERSATION_ID], "ops-1");
        assert_eq!(o.fields[attr::SIDE], "a");
        let chat = find(&spans, "chat", attr::MODEL_DEFINITION, "orchestrator_demo");
        assert_eq!(chat.len(), 1, "{name}");
        assert_eq!(
            chat[0].parent,
            Some(o.id),
            "{name}: the model call is the step's"
        );
        assert_eq!(chat[0].fields[attr::PROVIDER_NAME], "scripted");
        assert_eq!(chat[0].fields[attr::REQUEST_MODEL], "demo");
        assert_eq!(chat[0].fields[attr::RESPONSE_FINISH_REASONS], "tool_calls");
        let spawn = find(&spans, "execute_tool", attr::TOOL_NAME, "subagent_create");
        assert_eq!(spawn.len(), 1, "{name}");
        assert_eq!(
            spawn[0].parent,
            Some(o.id),
            "{name}: the tool call is the step's"
        );
        assert_eq!(
            spawn[0].fields[attr::OTEL_NAME],
            "execute_tool subagent_create"
        );
        assert!(!spawn[0].fields[attr::TOOL_CALL_ID].is_empty());

        // The child's first step (it proposes, and waits) runs inside the parent's tool call.
        let gate = find(&spans, "invoke_agent", attr::AGENT_NAME, "approval_gate");
        assert_eq!(gate.len(), 1, "{name}: {spans:#?}");
        assert!(
            inside(&spans, gate[0], spawn[0]),
            "{name}: the child's span is under the parent's tool span"
        );
        assert_eq!(gate[0].fields[attr::CONVERSATION_ID], "ops-1/approval-1");
        let asks = find(&spans, "chat", attr::MODEL_DEFINITION, "approval_gate_demo");
        assert_eq!(asks.len(), 1, "{name}");
        assert_eq!(asks[0].parent, Some(gate[0].id));
        assert_eq!(asks[0].fields[attr::RESPONSE_FINISH_REASONS], "tool_calls");
        assert!(
            asks[0].fields[attr::USAGE_OUTPUT_TOKENS]
                .parse::<u64>()
                .is_ok_and(|n| n > 0),
            "{name}: {:?}",
            asks[0].fields
        );
        assert!(
            asks[0].fields.contains_key(attr::TIME_TO_FIRST_TOKEN_MS),
            "{name}"
        );
        let commits: Vec<_> = spans.iter().filter(|s| s.name == "commit").collect();
        assert!(
            !commits.is_empty()
                && commits
                    .iter()
                    .all(|c| c.fields.get(attr::OUTCOME).map(String::as_str) == Some("committed")),
            "{name}: {commits:#?}"
        );
        assert!(
            commits.iter().any(|c| c.parent == Some(gate[0].id)),
            "{name}: a step's commit is inside it"
        );

        // No attribute holds a message's content.
        for s in &spans {
            for v in s.fields.values() {
                assert!(
                    !v.contains("Rotate the production") && !v.contains("must log in again"),
                    "{name}: content in {s:?}"
                );
            }
        }

        // Decided after a restart: the resuming step is a span of its own, not one left open
        // across the wait.
        drop(rt);
        let before = recorder.spans().len();
        let rt = support::runtime(project.clone(), store.clone()).build();
        support::approve(&rt, "ops-1/approval-1").await;
        rt.quiesce().await;
        let spans = recorder.spans();
        let later = &spans[before..];
        let resumed = find(later, "invoke_agent", attr::AGENT_NAME, "approval_gate");
        assert_eq!(resumed.len(), 1, "{name}: {later:#?}");
        assert_eq!(
            resumed[0].parent, None,
            "{name}: a new trace, after the park"
        );
        let record = find(later, "execute_tool", attr::TOOL_NAME, "record_outcome");
        assert_eq!(record.len(), 1, "{name}");
        assert_eq!(record[0].parent, Some(resumed[0].id));
        let next = find(later, "invoke_agent", attr::AGENT_NAME, "orchestrator");
        assert_eq!(
            next.len(),
            1,
            "{name}: the orchestrator's next step: {later:#?}"
        );
    }
}

/// The same composed approval through `tracing-opentelemetry` into OpenTelemetry's in-memory
/// exporter: what an OTLP collector would receive — span names with the agent, model and tool,
/// the GenAI attributes, and one trace from the orchestrator's step down to the gate's question.
async fn the_spans_reach_an_opentelemetry_exporter_as_one_trace_with_genai_attributes() {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    let project = support::project(&support::repo());
    for backend in support::backends().await {
        let exporter = spans::Watched::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        spans::install(Box::new(
            tracing_opentelemetry::layer().with_tracer(provider.tracer("test")),
        ));
        let rt = support::runtime(project.clone(), backend.open().await).build();
        orchestrate(&rt).await;
        // A span is exported when it closes, and the step's closes when the task that ran it has
        // finished, which may be a moment after the thread settled.
        let spans = exporter
            .until(|spans| spans.iter().any(|s| s.name == "invoke_agent orchestrator"))
            .await;
        let name = backend.name();
        let by_name = |n: &str| {
            spans.iter().find(|s| s.name == n).unwrap_or_else(|| {
                panic!(
                    "{name}: no span `{n}` in {:?}",
                    spans.iter().map(|s| s.name.clone()).collect::<Vec<_>>()
                )
            })
        };
        let attribute = |s: &opentelemetry_sdk::trace::SpanData, key: &str| {
            s.attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.to_string())
                .unwrap_or_default()
        };
        let orchestrator = by_name("invoke_agent orchestrator");
        let chat = by_name("chat demo");
        let spawn = by_name("execute_tool subagent_create");
        let gate = by_name("invoke_agent approval_gate");
        assert_eq!(
            attribute(orchestrator, attr::OPERATION_NAME),
            "invoke_agent"
        );
        assert_eq!(attribute(orchestrator, attr::AGENT_NAME), "orchestrator");
        assert_eq!(attribute(orchestrator, attr::CONVERSATION_ID), "ops-1");
        assert_eq!(attribute(chat, attr::PROVIDER_NAME), "scripted");
        assert_eq!(attribute(chat, attr::REQUEST_MODEL), "demo");
        assert_eq!(attribute(spawn, attr::TOOL_NAME), "subagent_create");
        assert_eq!(
            spawn.parent_span_id,
            orchestrator.span_context.span_id(),
            "{name}"
        );
        // One trace: the gate's step is a descendant of the orchestrator's tool call.
        let trace = orchestrator.span_context.trace_id();
        assert!(
            [chat, spawn, gate]
                .iter()
                .all(|s| s.span_context.trace_id() == trace),
            "{name}: one trace"
        );
        let mut up = gate.parent_span_id;
        let mut found = false;
        while let Some(parent) = spans.iter().find(|s| s.span_context.span_id() == up) {
            if parent.span_context.span_id() == spawn.span_context.span_id() {
                found = true;
                break;
            }
            up = parent.parent_span_id;
        }
        assert!(
            found,
            "{name}: the gate's step is under the orchestrator's tool call"
        );
    }
}

/// With content capture on (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` in
/// `duet serve`), a `chat` span carries what was sent and what came back, in the conventions'
/// shape; off (the default), no span holds any (the first test).
async fn message_contents_are_attributes_only_when_captured() {
    let project = support::project(&support::repo());
    let backend = support::backends().await.remove(0);
    let recorder = Recorder::default();
    spans::install(Box::new(recorder.clone()));
    let rt = support::runtime(project, backend.open().await)
        .capture_content(true)
        .build();
    orchestrate(&rt).await;
    let spans = recorder.spans();
    let chat = find(&spans, "chat", attr::MODEL_DEFINITION, "orchestrator_demo");
    let chat = chat.first().expect("the orchestrator's model call");
    let input: serde_json::Value =
        serde_json::from_str(&chat.fields[attr::INPUT_MESSAGES]).expect("JSON");
    assert_eq!(input[0]["role"], "user", "{input}");
    assert_eq!(
        input[0]["parts"][0]["content"], "Rotate the production keys tonight, please.",
        "{input}"
    );
    let output: serde_json::Value =
        serde_json::from_str(&chat.fields[attr::OUTPUT_MESSAGES]).expect("JSON");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call", "{output}");
    assert_eq!(output[0]["parts"][0]["name"], "subagent_create", "{output}");
    assert!(!chat.fields[attr::SYSTEM_INSTRUCTIONS].is_empty());
}

#[tokio::test]
async fn the_runtimes_spans() {
    a_composed_approval_is_a_tree_of_genai_spans_and_no_span_outlives_its_park().await;
    the_spans_reach_an_opentelemetry_exporter_as_one_trace_with_genai_attributes().await;
    message_contents_are_attributes_only_when_captured().await;
}
