//! End to end through the engine: a scripted model's step calls an `http` tool (a local
//! server), a tool of the reference MCP server (stdio), a tool of that server the prompt does
//! not select, and a tool of a server that cannot start; every result is in the journal, and
//! the thread goes on to its answer.

mod support;

use std::sync::Arc;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use duet_runtime::{CancellationToken, Delivered, EventSink, Role, Runtime, Store, ToolStatus};
use duet_spec::{Project, SourceFile};
use serde_json::{Value, json};
use support::{everything_js, repo};

const TOKEN: &str = "tok-e2e-secret-42";

async fn echo_server() -> String {
    let app = Router::new().route(
        "/notes",
        post(|headers: HeaderMap, body: String| async move {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            axum::Json(json!({
                "saved": serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
                "auth": auth,
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn project(base: &str, js: &str) -> Arc<Project> {
    let file = |path: &str, text: String| SourceFile {
        path: path.into(),
        bytes: text.into_bytes(),
    };
    let loaded = Project::from_files([
        file(
            "agents/agents/worker.yaml",
            format!(
                "name: worker\nsideA: {{ prompt: worker }}\nsideB: {{ human: true }}\nenv:\n  NOTES_URL: \"{base}\"\n  NOTES_TOKEN: {TOKEN}\n"
            ),
        ),
        file(
            "agents/prompts/worker.yaml",
            "name: worker\ntoolDescription: Works.\nprompt: Work.\nmodel: worker_model\ntools: [save_note, everything/echo, ghost]\n".into(),
        ),
        file(
            "agents/tools/save_note.yaml",
            "description: Saves a note.\nargs: { type: object, properties: { text: { type: string } }, required: [text] }\nhttp:\n  url: \"{{env.NOTES_URL}}/notes\"\n  headers: { Authorization: \"Bearer {{env.NOTES_TOKEN}}\" }\n".into(),
        ),
        file(
            "agents/mcp/everything.yaml",
            format!("name: everything\ncommand: node\nargs: [\"{js}\", stdio]\n"),
        ),
        file(
            "agents/mcp/ghost.yaml",
            "name: ghost\ncommand: /nonexistent/ghost-server\ntimeoutMs: 5000\n".into(),
        ),
        file(
            "agents/models/worker_model.yaml",
            r#"name: worker_model
provider: scripted
model: demo
script:
  - tool_calls:
      - { name: save_note, arguments: { text: "buy milk" } }
      - { name: everything__echo, arguments: { message: "hello" } }
      - { name: everything__get-sum, arguments: { a: 1, b: 2 } }
      - { name: ghost__haunt, arguments: {} }
  - text: All done.
"#
            .into(),
        ),
    ]);
    let errors: Vec<String> = loaded.issues.iter().map(ToString::to_string).collect();
    assert!(loaded.is_ok(), "{}", errors.join("\n"));
    Arc::new(loaded.project)
}

#[tokio::test]
async fn a_step_calls_http_and_mcp_tools_and_the_journal_keeps_their_results() {
    let Some(js) = everything_js() else { return };
    let base = echo_server().await;
    let project = project(&base, &js.display().to_string());
    let store: Arc<dyn Store> = Arc::new(duet_runtime::testing::MemoryStore::default());
    let builder =
        Runtime::builder(project.clone(), store.clone()).providers(duet_models::providers());
    let rt = duet_tools::register(builder, &project, &repo()).build();
    let done = rt
        .send(
            "e2e",
            Some("worker"),
            "go",
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await;
    assert!(matches!(done, Ok(Delivered::Settled(_))), "{done:?}");

    let thread = store.thread("e2e").await.expect("read").expect("thread");
    let messages = store.messages(thread.id).await.expect("messages");
    let tools: Vec<(&str, ToolStatus, &str)> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_name.as_deref().unwrap_or(""),
                m.tool_status.unwrap_or(ToolStatus::Error),
                m.content.as_deref().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(tools.len(), 4, "{tools:#?}");

    let (name, status, content) = tools[0];
    assert_eq!(
        (name, status),
        ("save_note", ToolStatus::Success),
        "{content}"
    );
    let saved: Value = serde_json::from_str(content).expect("JSON");
    assert_eq!(
        saved,
        json!({"saved": {"text": "buy milk"}, "auth": "Bearer [redacted]"})
    );

    assert_eq!(
        tools[1],
        ("everything__echo", ToolStatus::Success, "Echo: hello")
    );

    // Offered: only `everything/echo`, so its sibling is unknown to this step.
    let (name, status, content) = tools[2];
    assert_eq!((name, status), ("everything__get-sum", ToolStatus::Error));
    assert!(
        content.starts_with(
            "Unknown tool `everything__get-sum`. Available tools: save_note, everything__echo"
        ),
        "{content}"
    );

    // A server that cannot start: the call is an error result, the step goes on.
    let (name, status, content) = tools[3];
    assert_eq!((name, status), ("ghost__haunt", ToolStatus::Error));
    assert!(
        content.contains("MCP server `ghost`: not available"),
        "{content}"
    );
    assert!(content.contains("cannot be started"), "{content}");

    let last = messages.last().expect("a last message");
    assert_eq!(last.content.as_deref(), Some("All done."));
    assert!(
        !messages
            .iter()
            .any(|m| m.content.as_deref().unwrap_or("").contains(TOKEN))
    );
}
