//! MCP servers from the registries, started by the test: the reference
//! `@modelcontextprotocol/server-everything` over stdio (its tools listed, a call, calls that
//! fail, the process killed between calls and started again), and a server written with the
//! official Python SDK over streamable HTTP (list, call, structured content, an error, a
//! missing credential, the server gone); and a redirect to another origin, which is not
//! followed (its headers would go along).

mod support;

use std::collections::BTreeMap;

use duet_runtime::ToolServer;
use duet_spec::{McpServerDef, McpTransport};
use duet_tools::McpServer;
use serde_json::json;
use support::{PyServer, ctx, everything_def, everything_js, repo};

#[tokio::test]
async fn everything_over_stdio_lists_calls_fails_and_survives_a_kill() {
    let Some(js) = everything_js() else { return };
    let server = McpServer::new(everything_def(&js), &repo());
    let tools = server.tools().await.expect("it starts and lists its tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(names.contains(&"get-sum"), "{names:?}");
    // An older generation: `server/discover` is refused, the `initialize` handshake follows.
    assert_eq!(
        server.protocol_version().await.as_deref(),
        Some("2025-11-25"),
        "server-everything 2026.8.31, as .ci/run pins it"
    );
    let echo = tools.iter().find(|t| t.name == "echo").expect("echo");
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");

    let r = server.call(ctx(), "echo", json!({"message": "hi"})).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.content, "Echo: hi");
    let r = server.call(ctx(), "get-sum", json!({"a": 2, "b": 3})).await;
    assert!(r.content.contains('5'), "{r:?}");

    // Checked against the tool's inputSchema before anything is sent.
    let r = server.call(ctx(), "get-sum", json!({"a": "two"})).await;
    assert!(!r.is_ok());
    assert!(
        r.content.contains("invalid arguments for `get-sum`"),
        "{}",
        r.content
    );
    assert!(
        r.content.contains("\"b\" is a required property"),
        "{}",
        r.content
    );
    let r = server.call(ctx(), "nope", json!({})).await;
    assert!(!r.is_ok());
    assert!(
        r.content.contains("no tool `nope`; it has: "),
        "{}",
        r.content
    );
    let r = server
        .call(ctx(), "echo", json!(["not", "an", "object"]))
        .await;
    assert!(!r.is_ok(), "{r:?}");

    // The process dies between two calls: the next call starts it again and works.
    let pid = server.process_id().await.expect("a running process");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let r = server
        .call(ctx(), "echo", json!({"message": "again"}))
        .await;
    assert_eq!(r.content, "Echo: again", "{r:?}");
    let new_pid = server.process_id().await.expect("running again");
    assert_ne!(new_pid, pid);
    server.shutdown().await;
}

#[tokio::test]
async fn a_stdio_server_that_cannot_start_is_an_error_result() {
    let def = McpServerDef {
        name: "ghost".into(),
        description: None,
        transport: McpTransport::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
            env: BTreeMap::new(),
        },
        timeout_ms: 5_000,
    };
    let server = McpServer::new(def, &repo());
    let listed = server.tools().await;
    assert!(
        listed
            .as_ref()
            .is_err_and(|e| e.contains("cannot be started")),
        "{listed:?}"
    );
    let r = server.call(ctx(), "anything", json!({})).await;
    assert!(!r.is_ok());
    assert!(
        r.content.starts_with("MCP server `ghost`: not available: "),
        "{}",
        r.content
    );
}

fn python_def(url: &str, token: &str) -> McpServerDef {
    McpServerDef {
        name: "py".into(),
        description: None,
        transport: McpTransport::Http {
            url: url.to_owned(),
            headers: BTreeMap::from([("Authorization".to_owned(), format!("Bearer {token}"))]),
        },
        timeout_ms: 20_000,
    }
}

#[tokio::test]
async fn a_python_server_over_streamable_http_lists_calls_and_fails() {
    let Some(py) = PyServer::start().await else {
        return;
    };
    let server = McpServer::new(python_def(&py.url, "test-token"), &repo());
    let tools = server
        .tools()
        .await
        .expect("it connects and lists its tools");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["add", "fail", "greet"]);
    // The newest generation: `server/discover`, no `initialize`.
    assert_eq!(
        server.protocol_version().await.as_deref(),
        Some("2026-07-28"),
        "mcp 2.3.0, as .ci/run pins it"
    );

    let r = server.call(ctx(), "greet", json!({"name": "Ada"})).await;
    assert_eq!(r.content, "Hello, Ada!", "{r:?}");
    assert!(r.is_ok());
    // Structured content is the result, as JSON.
    let r = server.call(ctx(), "add", json!({"a": 2, "b": 40})).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&r.content).ok(),
        Some(json!({"sum": 42}))
    );
    // The tool raises: `isError`, an error result with its words.
    let r = server
        .call(ctx(), "fail", json!({"reason": "testing"}))
        .await;
    assert!(!r.is_ok(), "{r:?}");
    assert!(
        r.content.contains("failed on purpose: testing"),
        "{}",
        r.content
    );
    let r = server.call(ctx(), "add", json!({"a": 1})).await;
    assert!(!r.is_ok());

    // Without the server's credential nothing connects, and the token is not in the error.
    let refused = McpServer::new(python_def(&py.url, "wrong-token-value"), &repo());
    let listed = refused.tools().await;
    assert!(listed.as_ref().is_err(), "{listed:?}");

    // The server goes away: calls are error results, never a panic.
    py.kill().await;
    let r = server.call(ctx(), "greet", json!({"name": "Ada"})).await;
    assert!(!r.is_ok(), "{r:?}");
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed() {
    use axum::http::{HeaderMap, StatusCode, header::LOCATION};
    // Another origin on 127.0.0.1 that records what it is sent.
    let (tx, mut landed) = tokio::sync::mpsc::unbounded_channel::<HeaderMap>();
    let other = axum::Router::new().fallback(move |headers: HeaderMap| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(headers);
            "landed"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let to = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, other).await });
    let moved = axum::Router::new().fallback(move || {
        let to = to.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [(LOCATION, to)]) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, moved).await });

    let mut def = python_def(&url, "secret-token");
    def.timeout_ms = 5_000;
    let server = McpServer::new(def, &repo());
    assert!(server.tools().await.is_err());
    assert!(
        landed.try_recv().is_err(),
        "the other origin was sent nothing (not the Authorization header)"
    );
}
