//! The `scripted` provider: plays a model definition's `script` — one entry per model call (or
//! per `repeat` calls in a row), per thread, in call order — so examples, tests and benchmarks
//! run offline and deterministically. An entry may offer `branches`: the first whose `when`
//! matches what the model was answered (the messages after its own last answer) plays, and
//! `{{answer}}` in an answer's text or string arguments stands for the last of those messages'
//! text.

use std::sync::Arc;

use duet_runtime::{ChatMessage, Model, ModelChunk, ModelError, ModelRequest, Provider, Role};
use duet_spec::{ANSWER_PLACEHOLDER, ScriptEntry, ScriptResult, ScriptWhen};
use futures::stream::{self, BoxStream, StreamExt};

/// The `scripted` provider.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scripted;

impl Provider for Scripted {
    fn model(&self, definition: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        Ok(Arc::new(ScriptedModel {
            name: definition.name.clone(),
            script: Arc::new(definition.script.clone()),
        }))
    }
}

/// A model that answers call `n` of a thread with the entry that answers it (`script[n]` when
/// none repeats; [`ScriptEntry::at`]), or with the first of that entry's branches that matches
/// what the model was answered. The call index and the messages both come from the thread's
/// committed history, so the answer survives restarts; a model call that was never committed
/// (a crash mid-step) is answered the same way again.
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    name: String,
    script: Arc<Vec<ScriptEntry>>,
}

/// What the model was answered: the messages after its own last answer (all of them before its
/// first).
fn answered(messages: &[ChatMessage]) -> &[ChatMessage] {
    let start = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    &messages[start..]
}

/// Whether `when` holds for the messages the model was answered.
fn matches(when: &ScriptWhen, answered: &[ChatMessage]) -> bool {
    let mut results = answered.iter().filter(|m| m.role == Role::Tool).peekable();
    let result = match when.result {
        None => true,
        Some(ScriptResult::Error) => results.any(|m| m.is_error),
        Some(ScriptResult::Success) => results.peek().is_some() && results.all(|m| !m.is_error),
    };
    let contains = when.contains.as_deref().is_none_or(|needle| {
        let needle = needle.to_lowercase();
        answered
            .iter()
            .filter_map(|m| m.content.as_deref())
            .any(|text| text.to_lowercase().contains(&needle))
    });
    result && contains
}

/// `value` with `{{answer}}` in its strings replaced by `answer`.
fn fill(value: &serde_json::Value, answer: &str) -> serde_json::Value {
    match value {
        serde_json::Value::String(s) => {
            serde_json::Value::String(s.replace(ANSWER_PLACEHOLDER, answer))
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(|v| fill(v, answer)).collect())
        }
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, answer)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The answer scripted model `name` (whose script is `script`) gives `request`: the entry at its
/// call index — or the first of its branches that matches what the model was answered — with
/// `{{answer}}` filled in; `Err` says why there is none (the script is exhausted, or no branch
/// matches). Also what a test that plays a script over a provider's wire sends.
pub fn scripted_answer(
    name: &str,
    script: &[ScriptEntry],
    request: &ModelRequest,
) -> Result<ScriptEntry, String> {
    let Some((at, entry)) = ScriptEntry::at(script, request.call_index) else {
        let calls: u64 = script.iter().map(ScriptEntry::calls).sum();
        let repeated = if calls == script.len() as u64 {
            String::new()
        } else {
            format!(" answering {calls} calls")
        };
        return Err(format!(
            "script exhausted: scripted model `{name}` has {} entries{repeated} and this thread is making call {}",
            script.len(),
            request.call_index + 1
        ));
    };
    let answered = answered(&request.messages);
    let chosen = if entry.branches.is_empty() {
        entry
    } else {
        entry
            .branches
            .iter()
            .find(|b| b.when.as_ref().is_none_or(|w| matches(w, answered)))
            .map(|b| &b.answer)
            .ok_or_else(|| {
                let last = answered
                    .last()
                    .and_then(|m| m.content.as_deref())
                    .unwrap_or("");
                format!(
                    "no branch of script[{at}] of scripted model `{name}` matches what the model was answered (last: {last:?})"
                )
            })?
    };
    let answer = answered
        .last()
        .and_then(|m| m.content.as_deref())
        .unwrap_or("");
    let mut out = chosen.clone();
    out.text = out.text.map(|t| t.replace(ANSWER_PLACEHOLDER, answer));
    for call in &mut out.tool_calls {
        call.arguments = fill(&call.arguments, answer);
    }
    Ok(out)
}

impl Model for ScriptedModel {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        let entry = match scripted_answer(&self.name, &self.script, &request) {
            Ok(entry) => entry,
            Err(message) => {
                let error = ModelError::new(message, false);
                return stream::once(async move { Err(error) }).boxed();
            }
        };
        let mut chunks = Vec::new();
        if let Some(t) = &entry.thinking {
            chunks.push(Ok(ModelChunk::Thinking(t.clone())));
        }
        if let Some(t) = &entry.text {
            chunks.push(Ok(ModelChunk::Text(t.clone())));
        }
        for call in entry.tool_calls {
            chunks.push(Ok(ModelChunk::ToolCall {
                id: None,
                name: call.name,
                arguments: call.arguments,
            }));
        }
        let output = entry.text.as_ref().map_or(0, |t| t.len() / 4) as u64;
        chunks.push(Ok(ModelChunk::Usage(duet_runtime::Usage {
            output_tokens: output,
            ..Default::default()
        })));
        match entry.delay_ms {
            Some(ms) => {
                let delay = std::time::Duration::from_millis(u64::from(ms));
                stream::once(tokio::time::sleep(delay))
                    .flat_map(move |()| stream::iter(chunks.clone()))
                    .boxed()
            }
            None => stream::iter(chunks).boxed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_spec::ScriptToolCall;

    fn request(call_index: usize) -> ModelRequest {
        ModelRequest {
            thread: uuid::Uuid::nil(),
            call_index,
            system: String::new(),
            messages: vec![],
            tools: vec![],
            tool_choice: duet_spec::ToolChoice::Auto,
            parallel_tool_calls: None,
            reasoning: None,
            provider_options: Default::default(),
        }
    }

    #[tokio::test]
    async fn plays_the_entry_at_the_call_index_then_fails() {
        let model = ScriptedModel {
            name: "demo".into(),
            script: Arc::new(vec![
                ScriptEntry {
                    text: Some("one".into()),
                    ..ScriptEntry::default()
                },
                ScriptEntry {
                    text: None,
                    thinking: Some("hm".into()),
                    tool_calls: vec![ScriptToolCall {
                        name: "t".into(),
                        arguments: serde_json::json!({"a": 1}),
                    }],
                    delay_ms: Some(1),
                    branches: vec![],
                    repeat: None,
                },
            ]),
        };
        let second: Vec<_> = model.stream(request(1)).collect().await;
        assert_eq!(
            second[0].as_ref().ok(),
            Some(&ModelChunk::Thinking("hm".into()))
        );
        assert!(matches!(second[1].as_ref(), Ok(ModelChunk::ToolCall { name, .. }) if name == "t"));
        let third: Vec<_> = model.stream(request(2)).collect().await;
        let err = third[0]
            .as_ref()
            .err()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert!(
            err.contains("script exhausted") && err.contains("call 3"),
            "{err}"
        );
    }

    /// A `repeat`ed entry answers that many calls in a row, then the next entry plays, and the
    /// script ends after the sum of its calls.
    #[tokio::test]
    async fn a_repeated_entry_answers_that_many_calls_in_a_row() {
        let text = |t: &str, repeat: Option<u32>| ScriptEntry {
            text: Some(t.into()),
            repeat,
            ..ScriptEntry::default()
        };
        let model = ScriptedModel {
            name: "demo".into(),
            script: Arc::new(vec![
                text("a", Some(3)),
                text("b", None),
                text("c", Some(2)),
            ]),
        };
        let mut played = Vec::new();
        for call in 0..6 {
            let chunks: Vec<_> = model.stream(request(call)).collect().await;
            played.push(match chunks.first() {
                Some(Ok(ModelChunk::Text(t))) => t.clone(),
                other => panic!("call {call}: {other:?}"),
            });
        }
        assert_eq!(played, ["a", "a", "a", "b", "c", "c"]);
        let past: Vec<_> = model.stream(request(6)).collect().await;
        let err = past[0]
            .as_ref()
            .err()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert!(
            err.contains("has 3 entries answering 6 calls") && err.contains("call 7"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod branch_tests {
    use super::*;

    const MODEL: &str = r#"
name: gate
provider: scripted
model: demo
script:
  - branches:
      - when: { result: error }
        text: "no: {{answer}}"
      - when: { result: success, contains: APPROVED }
        tool_calls: [{ name: done, arguments: { said: "{{answer}}", n: [1, "{{answer}}"] } }]
      - when: { contains: maybe }
        text: hm
      - text: "?"
  - branches:
      - when: { result: success }
        text: ok
"#;

    fn model() -> ScriptedModel {
        let loaded = duet_spec::Project::from_files([duet_spec::SourceFile {
            path: "agents/models/gate.yaml".into(),
            bytes: MODEL.into(),
        }]);
        assert!(loaded.issues.is_empty(), "{:?}", loaded.issues);
        let def = &loaded.project.models["gate"].def;
        ScriptedModel {
            name: def.name.clone(),
            script: Arc::new(def.script.clone()),
        }
    }

    fn message(role: Role, content: &str, is_error: bool) -> ChatMessage {
        ChatMessage {
            role,
            content: Some(content.into()),
            tool_calls: vec![],
            tool_call_id: None,
            name: None,
            is_error,
            thinking: None,
            provider_data: None,
            images: vec![],
            documents: vec![],
            attachments: vec![],
        }
    }

    async fn play(
        call_index: usize,
        messages: Vec<ChatMessage>,
    ) -> Vec<Result<ModelChunk, String>> {
        let request = ModelRequest {
            thread: uuid::Uuid::nil(),
            call_index,
            system: String::new(),
            messages,
            tools: vec![],
            tool_choice: duet_spec::ToolChoice::Auto,
            parallel_tool_calls: None,
            reasoning: None,
            provider_options: Default::default(),
        };
        model()
            .stream(request)
            .map(|c| c.map_err(|e| e.message))
            .filter(|c| std::future::ready(!matches!(c, Ok(ModelChunk::Usage(_)))))
            .collect()
            .await
    }

    fn text(t: &str) -> Result<ModelChunk, String> {
        Ok(ModelChunk::Text(t.into()))
    }

    #[tokio::test]
    async fn the_first_branch_that_matches_what_the_model_was_answered_plays() {
        use Role::{Assistant, Tool, User};
        let earlier_error = message(Tool, "failed before", true);
        type Case = (
            &'static str,
            Vec<ChatMessage>,
            Vec<Result<ModelChunk, String>>,
        );
        let cases: Vec<Case> = vec![
            (
                "a failed tool result: the error branch, {{answer}} its text",
                vec![
                    message(User, "go", false),
                    message(Assistant, "", false),
                    message(Tool, "A person rejected this call: risky", true),
                ],
                vec![text("no: A person rejected this call: risky")],
            ),
            (
                "one failure among several results is an error",
                vec![message(Tool, "approved", false), message(Tool, "x", true)],
                vec![text("no: x")],
            ),
            (
                "success and contains (case-insensitive); {{answer}} fills nested arguments",
                vec![message(Tool, "Approved: rotate", false)],
                vec![Ok(ModelChunk::ToolCall {
                    id: None,
                    name: "done".into(),
                    arguments: serde_json::json!({"said": "Approved: rotate", "n": [1, "Approved: rotate"]}),
                })],
            ),
            (
                "only what came after the model's own last answer counts",
                vec![
                    earlier_error,
                    message(Assistant, "", false),
                    message(User, "Maybe later", false),
                ],
                vec![text("hm")],
            ),
            (
                "nothing matches: the fallback",
                vec![message(User, "yes", false)],
                vec![text("?")],
            ),
        ];
        for (why, messages, expected) in cases {
            assert_eq!(play(0, messages).await, expected, "{why}");
        }
        let none = play(1, vec![message(User, "hello", false)]).await;
        assert!(
            matches!(&none[..], [Err(e)] if e.contains("no branch of script[1]") && e.contains("hello")),
            "{none:?}"
        );
    }
}
