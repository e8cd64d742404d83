//! A fake provider server on 127.0.0.1: it answers requests with recorded exchanges, in order,
//! checking each request against the one recorded (method, path, the recorded headers, the JSON
//! body) and streaming the recorded response bytes in the pieces the recording gives, or
//! breaking the connection where it says.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

/// One piece of a response body.
#[derive(Clone, Debug)]
pub enum Piece {
    /// Bytes sent as one write.
    Bytes(Vec<u8>),
    /// The connection is broken here (the body never completes).
    Drop,
    /// The body stops here and never ends; the server notes when the client goes away.
    Hold,
}

/// One request expected and the response to it.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// Where it comes from (for messages).
    pub name: String,
    pub method: String,
    pub path: String,
    /// Headers the request must carry (names lowercase), with their values.
    pub headers: BTreeMap<String, String>,
    pub body: Value,
    pub status: u16,
    pub response_headers: Vec<(String, String)>,
    pub pieces: Vec<Piece>,
    /// How long the server waits before answering (for timeouts).
    pub delay: Duration,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Exchange>,
    problems: Vec<String>,
    served: usize,
    /// Set when a held body was dropped (the client closed the connection).
    released: Option<tokio::sync::oneshot::Sender<()>>,
}

/// A running fake server.
pub struct FakeServer {
    pub addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// A server that will answer with `exchanges`, in order.
    pub async fn start(exchanges: Vec<Exchange>) -> FakeServer {
        let state = Arc::new(Mutex::new(State {
            queue: exchanges.into(),
            ..State::default()
        }));
        let shared = Arc::clone(&state);
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = Arc::clone(&shared);
                async move { answer(&state, method, uri, headers, body).await }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeServer { addr, state, task }
    }

    /// A receiver told when a held body is dropped.
    pub fn on_release(&self) -> tokio::sync::oneshot::Receiver<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.state.lock().expect("state").released = Some(tx);
        rx
    }

    /// Every mismatch seen, and the exchanges never requested.
    pub fn problems(&self) -> Vec<String> {
        let state = self.state.lock().expect("state");
        let mut out = state.problems.clone();
        for left in &state.queue {
            out.push(format!("{}: never requested", left.name));
        }
        out
    }

    /// How many exchanges were answered.
    pub fn served(&self) -> usize {
        self.state.lock().expect("state").served
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    state: &Mutex<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (exchange, release) = {
        let mut s = state.lock().expect("state");
        let Some(exchange) = s.queue.pop_front() else {
            s.problems
                .push(format!("an unexpected request: {method} {uri}"));
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "no exchange left");
        };
        let mismatch = check(&exchange, &method, &uri, &headers, &body);
        if let Some(m) = mismatch {
            s.problems.push(m);
            return plain(
                StatusCode::IM_A_TEAPOT,
                r#"{"error":{"message":"the request does not match the cassette"}}"#,
            );
        }
        s.served += 1;
        let release = s.released.take();
        (exchange, release)
    };
    if !exchange.delay.is_zero() {
        // tidy:allow-sleep — a slow server is the condition under test (timeouts).
        tokio::time::sleep(exchange.delay).await;
    }
    let mut response = Response::builder().status(exchange.status);
    for (k, v) in &exchange.response_headers {
        response = response.header(k.as_str(), v.as_str());
    }
    let pieces = exchange.pieces.clone();
    let body = async_stream::stream! {
        let _guard = Release(release);
        for piece in pieces {
            match piece {
                Piece::Bytes(b) => {
                    yield Ok::<Bytes, std::io::Error>(Bytes::from(b));
                    // tidy:allow-sleep — a gap so each piece reaches the client as its own read.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Piece::Drop => {
                    yield Err(std::io::Error::other("the cassette drops the connection here"));
                    return;
                }
                Piece::Hold => {
                    futures::future::pending::<()>().await;
                }
            }
        }
    };
    response
        .body(Body::from_stream(body.boxed()))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "bad cassette response"))
}

/// Tells the test when the body is dropped.
struct Release(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(text))
        .unwrap_or_default()
}

fn check(
    exchange: &Exchange,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<String> {
    let mut problems = Vec::new();
    if method.as_str() != exchange.method {
        problems.push(format!(
            "method: expected {}, got {method}",
            exchange.method
        ));
    }
    if uri.path() != exchange.path {
        problems.push(format!(
            "path: expected {}, got {}",
            exchange.path,
            uri.path()
        ));
    }
    for (name, value) in &exchange.headers {
        let got = headers.get(name.as_str()).and_then(|v| v.to_str().ok());
        if got != Some(value.as_str()) {
            problems.push(format!(
                "header {name}: expected {value:?}, got {:?}",
                got.unwrap_or("(absent)")
            ));
        }
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(actual) => {
            let mut diffs = Vec::new();
            diff("$", &exchange.body, &actual, &mut diffs);
            if !diffs.is_empty() {
                problems.push(format!(
                    "body differs:\n    {}\n  the body sent was:\n{}",
                    diffs.join("\n    "),
                    serde_json::to_string_pretty(&actual).unwrap_or_default()
                ));
            }
        }
        Err(e) => problems.push(format!("body is not JSON: {e}")),
    }
    (!problems.is_empty()).then(|| {
        format!(
            "{}: the request does not match the cassette:\n  {}",
            exchange.name,
            problems.join("\n  ")
        )
    })
}

/// Every difference between `expected` and `actual`, by JSON path.
pub fn diff(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => diff(&p, ev, av, out),
                    None => out.push(format!("{p}: missing (expected {ev})")),
                }
            }
            for (k, av) in a {
                if !e.contains_key(k) {
                    out.push(format!("{path}.{k}: unexpected {av}"));
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                diff(&format!("{path}[{i}]"), ev, av, out);
            }
            if e.len() != a.len() {
                out.push(format!(
                    "{path}: expected {} items, got {}",
                    e.len(),
                    a.len()
                ));
            }
        }
        (e, a) if e != a => out.push(format!("{path}: expected {e}, got {a}")),
        _ => {}
    }
}
