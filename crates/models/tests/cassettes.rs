//! The providers against recorded wire traffic: every folder of `tests/cassettes/` is replayed
//! by a fake server on 127.0.0.1, its calls made through the real `openai` / `anthropic`
//! providers, and the chunks they give compared with the folder's `expected.json`. A request
//! that differs from the recorded one fails with a diff by JSON path. Adding a case is adding a
//! folder (see `support/cassette.rs` for the format).
//!
//! `DUET_BLESS=1 cargo test -p duet-models --test cassettes` rewrites the `expected.json`
//! files; review the diff before committing it.

mod support;

use std::path::Path;
use std::time::Duration;

use duet_runtime::ModelChunk;
use futures::StreamExt;
use serde_json::{Value, json};
use support::cassette::{self, Cassette, KEY};
use support::server::{Exchange, FakeServer, Piece};

/// How long one cassette call may take before the test calls it stuck.
const STUCK: Duration = Duration::from_secs(20);

#[tokio::test]
async fn every_cassette_replays_to_its_expected_chunks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cassettes");
    let bless = std::env::var_os("DUET_BLESS").is_some();
    let dirs = cassette::all(&root);
    assert!(
        dirs.len() >= 15,
        "the cassettes went missing: {}",
        dirs.len()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let c = Cassette::load(dir);
        let server = FakeServer::start(c.exchanges.clone()).await;
        let model = c.model(&format!("http://{}", server.addr));
        let mut outputs: Vec<Vec<Value>> = Vec::new();
        for call in c.calls() {
            let request = cassette::request(&call, &outputs);
            let items = tokio::time::timeout(STUCK, model.stream(request).collect::<Vec<_>>())
                .await
                .unwrap_or_else(|_| panic!("{}: a call did not end", c.name));
            outputs.push(items.iter().map(cassette::chunk_json).collect());
        }
        let mut problems = server.problems();
        let actual = Value::Array(outputs.iter().cloned().map(Value::Array).collect());
        let text = serde_json::to_string_pretty(&actual).unwrap_or_default() + "\n";
        if text.contains(KEY) {
            problems.push("the API key appears in the output".into());
        }
        let expected_path = c.dir.join("expected.json");
        if bless {
            std::fs::write(&expected_path, &text).expect("write expected.json");
        } else {
            let expected: Value = std::fs::read_to_string(&expected_path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Value::Null);
            if expected != actual {
                let mut diffs = Vec::new();
                support::server::diff("$", &expected, &actual, &mut diffs);
                problems.push(format!(
                    "the chunks differ from expected.json:\n    {}\n  actual:\n{text}",
                    diffs.join("\n    ")
                ));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("== {}\n{}", c.name, problems.join("\n")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} cassette(s) failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// A stream that stops after its first text, then never ends.
fn endless_exchange() -> Exchange {
    let chunk = |delta: Value| {
        let data = json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        Piece::Bytes(format!("data: {data}\n\n").into_bytes())
    };
    Exchange {
        name: "endless".into(),
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: [("authorization".to_owned(), format!("Bearer {KEY}"))].into(),
        body: json!({
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "Count forever."}],
            "stream": true,
            "stream_options": {"include_usage": true},
        }),
        status: 200,
        response_headers: vec![("content-type".into(), "text/event-stream".into())],
        pieces: vec![
            chunk(json!({"role": "assistant", "content": ""})),
            chunk(json!({"content": "1, 2,"})),
            Piece::Hold,
        ],
        delay: Duration::ZERO,
    }
}

#[tokio::test]
async fn dropping_the_stream_closes_the_request_at_once() {
    let server = FakeServer::start(vec![endless_exchange()]).await;
    let released = server.on_release();
    let c = Cassette {
        name: "endless".into(),
        dir: Default::default(),
        spec: json!({"provider": {"type": "openai"}, "model": {"model": "gpt-4o"}}),
        exchanges: vec![],
    };
    let model = c.model(&format!("http://{}", server.addr));
    let request = cassette::request(
        &json!({"request": {"messages": [{"role": "user", "content": "Count forever."}]}}),
        &[],
    );
    let mut stream = model.stream(request);
    let first = tokio::time::timeout(STUCK, stream.next())
        .await
        .expect("a chunk");
    assert!(
        matches!(&first, Some(Ok(ModelChunk::Text(t))) if t == "1, 2,"),
        "{first:?}"
    );
    drop(stream);
    tokio::time::timeout(Duration::from_secs(5), released)
        .await
        .expect("the server saw the connection close")
        .expect("released");
    assert!(server.problems().is_empty(), "{:?}", server.problems());
}

#[tokio::test]
async fn a_missing_key_fails_before_any_request() {
    let server = FakeServer::start(vec![]).await;
    let def = duet_spec::ProviderDef {
        name: "hosted".into(),
        provider_type: duet_spec::ProviderType::Anthropic,
        base_url: Some(format!("http://{}", server.addr)),
        api_key_env: Some("DUET_TEST_UNSET_KEY".into()),
        timeout_ms: None,
        headers: Default::default(),
        max_attempts: None,
    };
    let config = duet_models::ProviderConfig::from_def(&def, &|_| None);
    let model = duet_runtime::Provider::model(
        &duet_models::Anthropic::new(config),
        &model_def("claude-sonnet-4-5"),
    )
    .expect("a model");
    let request = cassette::request(
        &json!({"request": {"messages": [{"role": "user", "content": "hi"}]}}),
        &[],
    );
    let items: Vec<_> = model.stream(request).collect().await;
    assert_eq!(items.len(), 1, "{items:?}");
    let error = items[0].as_ref().expect_err("an error");
    assert!(!error.retryable);
    assert!(
        error.message.contains("DUET_TEST_UNSET_KEY"),
        "{}",
        error.message
    );
    assert_eq!(server.served(), 0);
}

fn model_def(model: &str) -> duet_spec::ModelDef {
    duet_spec::ModelDef {
        name: "m".into(),
        provider: "hosted".into(),
        inline_provider: None,
        model: model.into(),
        fallbacks: vec![],
        included_providers: vec![],
        input_price: None,
        output_price: None,
        cached_price: None,
        capabilities: Default::default(),
        provider_options: Default::default(),
        provider_tools: vec![],
        script: vec![],
    }
}

/// A connection the provider refuses names the URL it tried; the key is redacted from the
/// error whole — and a "key" too short to be one is left alone, not every letter it matches.
#[tokio::test]
async fn a_refused_connection_names_the_url_and_redacts_only_a_real_key() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let cases = [
        // A one-letter key: the `k` of the path stays (it replaced every `k` before).
        ("k", "/kk/v1", "/kk/v1/chat/completions", None),
        // A real key in the URL: redacted whole.
        (
            "sk-live-0123456789",
            "/sk-live-0123456789/v1",
            "/[redacted]/v1/chat/completions",
            Some("sk-live-0123456789"),
        ),
    ];
    for (key, path, shown, hidden) in cases {
        let mut config = duet_models::ProviderConfig::new(
            "local",
            duet_spec::ProviderType::Openai,
            &format!("http://127.0.0.1:{port}{path}"),
            Some(duet_models::ApiKey::new(key)),
        );
        config.retry.max_attempts = 1;
        let model =
            duet_runtime::Provider::model(&duet_models::OpenAi::new(config), &model_def("gpt-4o"))
                .expect("a model");
        let request = cassette::request(
            &json!({"request": {"messages": [{"role": "user", "content": "hi"}]}}),
            &[],
        );
        let items: Vec<_> = model.stream(request).collect().await;
        let error = items
            .last()
            .and_then(|i| i.as_ref().err())
            .unwrap_or_else(|| panic!("{key}: an error: {items:?}"));
        let url = format!("http://127.0.0.1:{port}{shown}");
        assert!(
            error.message.contains(&format!("cannot connect to {url}")),
            "{key}: {}",
            error.message
        );
        if let Some(secret) = hidden {
            assert!(!error.message.contains(secret), "{}", error.message);
        }
    }
}
