//! The A2A library against its golden exchanges: each file of `tests/a2a/golden/` is one HTTP
//! request (after optional setup requests whose results it may name) and the exact response,
//! status, chosen headers and body (or SSE events), with `"$any"` where a value is generated.
//! Every error code of the seed's table, and JSON-RPC's own, is here on both bindings.
//! `DUET_BLESS=1` rewrites the expected responses from what the code answers (check the diff).
//!
//! And the official Python client (`a2a-sdk`) drives the echo example over TCP
//! (`the_python_sdk_drives_the_echo_example`); duet's client reads cards and sends, and goes
//! nowhere a card or a redirect names that is not public (every server here is on 127.0.0.1,
//! "elsewhere" is `localhost`: another origin).

#[path = "a2a/agents.rs"]
mod agents;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::Request;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use tower::ServiceExt;

const ANY: &str = "$any";

#[tokio::test]
async fn golden_exchanges() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the golden folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "only {} golden exchanges", files.len());
    let bless = std::env::var_os("DUET_BLESS").is_some();
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        let mut case: Value = serde_json::from_str(&text).expect("a JSON exchange");
        let agent = agents::by_name(case["agent"].as_str().unwrap_or("echo"));
        let mut names = BTreeMap::new();
        for step in case["setup"].as_array().cloned().unwrap_or_default() {
            let got = exchange(&agent, &step["request"], &names).await;
            for (name, pointer) in step["capture"].as_object().cloned().unwrap_or_default() {
                let at = pointer.as_str().unwrap_or("");
                let value = got["body"].pointer(at).and_then(Value::as_str);
                let value = value.unwrap_or_else(|| panic!("{}: no {at} in {got}", file.display()));
                names.insert(name, value.to_owned());
            }
        }
        let got = exchange(&agent, &case["request"], &names).await;
        if bless {
            case["response"] = generalised(got);
            let out = serde_json::to_string_pretty(&case).expect("serializes") + "\n";
            std::fs::write(file, out).expect("writable");
        } else if !matches(&case["response"], &got) {
            failures.push(format!(
                "{}\n  want {}\n  got  {}",
                file.display(),
                case["response"],
                got
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Sends one request to the agent and reads what comes back: status, the headers that matter,
/// and the body as JSON (or the SSE events).
async fn exchange(
    agent: &duet_a2a::A2aService,
    spec: &Value,
    names: &BTreeMap<String, String>,
) -> Value {
    let fill = |s: &str| {
        names
            .iter()
            .fold(s.to_owned(), |s, (k, v)| s.replace(&format!("${{{k}}}"), v))
    };
    let mut headers = spec["headers"].as_object().cloned().unwrap_or_default();
    // A loopback host unless the exchange names another (a card is built from loopback names).
    let host = headers
        .remove("host")
        .and_then(|h| h.as_str().map(str::to_owned))
        .unwrap_or_else(|| "127.0.0.1:9999".into());
    let mut req = Request::builder()
        .method(spec["method"].as_str().unwrap_or("POST"))
        .uri(fill(spec["path"].as_str().unwrap_or("/")))
        .header("host", host);
    if !headers.contains_key("A2A-Version") && spec["noVersion"] != true {
        headers.insert("A2A-Version".into(), json!("1.0"));
    }
    for (k, v) in &headers {
        req = req.header(k.as_str(), v.as_str().unwrap_or(""));
    }
    let body = match (&spec["raw"], &spec["body"]) {
        (Value::String(raw), _) => fill(raw),
        (_, Value::Null) => String::new(),
        (_, body) => fill(&body.to_string()),
    };
    let request = req.body(Body::from(body)).expect("a request");
    let response = agent.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let mut kept = serde_json::Map::new();
    for name in ["content-type", "cache-control", "allow", "vary"] {
        if let Some(v) = response.headers().get(name) {
            kept.insert(name.into(), json!(v.to_str().unwrap_or("")));
        }
    }
    let sse = kept["content-type"]
        .as_str()
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("a body");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut out = json!({"status": status, "headers": kept});
    if sse {
        out["events"] = Value::Array(events(&text));
    } else if !text.is_empty() {
        out["body"] = serde_json::from_str(&text).unwrap_or(Value::String(text));
    }
    out
}

/// The events of an SSE body: `{"event"?, "data"}` each, comments skipped.
fn events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = serde_json::Map::new();
            for line in block.lines() {
                if let Some(data) = line.strip_prefix("data:") {
                    let data = data.trim_start();
                    event.insert(
                        "data".into(),
                        serde_json::from_str(data).unwrap_or(json!(data)),
                    );
                } else if let Some(name) = line.strip_prefix("event:") {
                    event.insert("event".into(), json!(name.trim()));
                }
            }
            (!event.is_empty()).then_some(Value::Object(event))
        })
        .collect()
}

/// Equal, where the expected side's `"$any"` matches any value.
fn matches(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::String(s), _) if s == ANY => true,
        (Value::Object(w), Value::Object(g)) => {
            w.len() == g.len()
                && w.iter()
                    .all(|(k, v)| g.get(k).is_some_and(|gv| matches(v, gv)))
        }
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(a, b)| matches(a, b))
        }
        _ => want == got,
    }
}

/// What blessing writes: generated ids (UUIDs) and timestamps become `"$any"`.
fn generalised(v: Value) -> Value {
    match v {
        Value::String(s) if generated(&s) => json!(ANY),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, generalised(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(generalised).collect()),
        other => other,
    }
}

fn generated(s: &str) -> bool {
    let uuid =
        s.len() >= 36 && s.as_bytes().get(8) == Some(&b'-') && s.as_bytes().get(13) == Some(&b'-');
    let time = s.len() >= 20 && s.ends_with('Z') && s.as_bytes().get(10) == Some(&b'T');
    uuid || time
}

#[tokio::test]
async fn the_python_sdk_drives_the_echo_example() {
    let has_sdk = std::process::Command::new("python3")
        .args(["-c", "import a2a.client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_sdk {
        assert!(
            std::env::var_os("DUET_REQUIRE_A2A").is_none(),
            "DUET_REQUIRE_A2A is set but python3 cannot import a2a-sdk (scripts/test-servers installs it)"
        );
        eprintln!("skipped: a2a-sdk is not installed (scripts/test-servers installs it)");
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    let server =
        tokio::spawn(
            async move { axum::serve(listener, agents::by_name("echo").into_router()).await },
        );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/a2a_echo_client.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .arg(format!("http://{addr}"))
        .output()
        .await
        .expect("python3 runs");
    server.abort();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_client_reads_the_card_and_sends_with_its_token() {
    use duet_a2a::{A2aClient, ClientError, Message, Role, SendMessageResponse, TaskState};
    // The echo agent behind a check of `Authorization: Bearer t`.
    let guarded = agents::by_name("echo")
        .into_router()
        .layer(axum::middleware::from_fn(
            |req: axum::extract::Request, next: axum::middleware::Next| async move {
                let ok = req
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    == Some("Bearer t");
                if ok {
                    next.run(req).await
                } else {
                    axum::http::StatusCode::UNAUTHORIZED.into_response()
                }
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    let server = tokio::spawn(async move { axum::serve(listener, guarded).await });
    let wait = std::time::Duration::from_secs(10);

    let client = A2aClient::connect(&base, Some("t".into()), wait)
        .await
        .expect("the card");
    assert_eq!(client.card().name, "echo");
    let mut hold = Message::agent_text("c-1", "hold on");
    hold.role = Role::User;
    let SendMessageResponse::Task(task) = client.send_message(hold, false).await.expect("sent")
    else {
        panic!("a task");
    };
    assert_eq!(task.status.state, TaskState::InputRequired);
    assert_eq!(client.get_task(&task.id).await.expect("read").id, task.id);
    let missing = client.get_task("nope").await.expect_err("unknown");
    assert!(
        matches!(missing, ClientError::Refused { code: -32001, .. }),
        "{missing}"
    );
    let refused = A2aClient::connect(&base, None, wait)
        .await
        .expect_err("no token");
    assert!(matches!(refused, ClientError::Transport(_)), "{refused}");
    server.abort();
}

/// A server that records the paths it is asked for.
async fn recorder() -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(uri.path().to_owned());
            axum::http::StatusCode::NOT_FOUND
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, rx)
}

async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[tokio::test]
async fn the_client_goes_nowhere_private_that_a_card_or_a_redirect_names() {
    use duet_a2a::A2aClient;
    let wait = std::time::Duration::from_secs(10);
    let (elsewhere, mut asked) = recorder().await;
    // The echo agent's card, its JSON-RPC URL moved to another origin (a private one).
    let echo = serve(agents::by_name("echo").into_router()).await;
    let mut card: Value = reqwest::get(format!("{echo}/.well-known/agent-card.json"))
        .await
        .expect("the card")
        .json()
        .await
        .expect("JSON");
    for interface in card["supportedInterfaces"]
        .as_array_mut()
        .expect("interfaces")
    {
        interface["url"] = json!(format!("http://localhost:{}/rpc", elsewhere.port()));
    }
    let cards = serve(axum::Router::new().route(
        "/.well-known/agent-card.json",
        axum::routing::get(move || {
            let card = card.clone();
            async move { axum::Json(card) }
        }),
    ))
    .await;
    let refused = A2aClient::connect(&cards, None, wait)
        .await
        .expect_err("a private endpoint on another origin");
    assert!(
        refused.to_string().contains("not a public address"),
        "{refused}"
    );
    // The card's own URL redirects to another origin: not followed.
    let to = format!("http://localhost:{}/card.json", elsewhere.port());
    let moved = serve(axum::Router::new().fallback(move || {
        let to = to.clone();
        async move {
            (
                axum::http::StatusCode::TEMPORARY_REDIRECT,
                [(axum::http::header::LOCATION, to)],
            )
        }
    }))
    .await;
    let refused = A2aClient::connect(&moved, Some("t".into()), wait)
        .await
        .expect_err("a redirect elsewhere");
    assert!(refused.to_string().contains("307"), "{refused}");
    assert!(asked.try_recv().is_err(), "nothing went elsewhere");
}
