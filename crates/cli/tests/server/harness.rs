//! A `duet serve` in this test process on 127.0.0.1 (a free port), over a fresh database on each
//! backend, and a real HTTP client (reqwest) with an SSE reader.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use duet_runtime::Store;
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::support::{self, Backend};

/// A running server.
pub struct Server {
    pub base: String,
    pub store: Arc<dyn Store>,
    /// The server's own tables (API keys, sign-ins, A2A push) of the same database.
    pub tables: Arc<dyn duet_server_store::ServerStore>,
    pub backend: Backend,
    stop: CancellationToken,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    http: reqwest::Client,
}

/// Server options for tests: auth on, short heartbeats.
pub fn options() -> duet_server::Options {
    duet_server::Options {
        heartbeat: Duration::from_millis(500),
        recover_every: Duration::from_millis(200),
        shutdown_grace: Duration::from_secs(5),
        default_agent: Some("question_gate".into()),
        // The push tests' webhooks listen on loopback.
        allow_private_push: true,
        ..duet_server::Options::default()
    }
}

impl Server {
    /// A server for the repository's example project on `backend`.
    pub async fn start(backend: &Backend) -> Server {
        Server::start_with(backend, &support::repo(), options()).await
    }

    /// A server for the project at `root` on `backend`, with `options`.
    pub async fn start_with(
        backend: &Backend,
        root: &Path,
        options: duet_server::Options,
    ) -> Server {
        Server::start_on(backend, root, options, None, false, None).await
    }

    /// A server for the repository's example project on `backend`, its thread files within
    /// `limits`.
    pub async fn start_with_limits(
        backend: &Backend,
        limits: duet_runtime::files::FileLimits,
    ) -> Server {
        Server::start_on(
            backend,
            &support::repo(),
            options(),
            None,
            false,
            Some(limits),
        )
        .await
    }

    /// A server for the project at `root` on `backend` whose time is `clock` (a test moves it:
    /// the server's timer loop fires what falls due).
    pub async fn start_clocked(
        backend: &Backend,
        root: &Path,
        clock: Arc<duet_runtime::ManualClock>,
    ) -> Server {
        Server::start_on(backend, root, options(), Some(clock), false, None).await
    }

    /// A server for the project at `root` on `backend`, with `options` (and time `clock`, when
    /// given), whose public URL is its own address: the links its notifications carry reach it.
    pub async fn start_notifying(
        backend: &Backend,
        root: &Path,
        options: duet_server::Options,
        clock: Option<Arc<duet_runtime::ManualClock>>,
    ) -> Server {
        Server::start_on(backend, root, options, clock, true, None).await
    }

    /// A server for the project at `root` on `backend` whose threads' files keep `limits`.
    pub async fn start_limited(
        backend: &Backend,
        root: &Path,
        options: duet_server::Options,
        limits: duet_runtime::files::FileLimits,
    ) -> Server {
        Server::start_on(backend, root, options, None, false, Some(limits)).await
    }

    async fn start_on(
        backend: &Backend,
        root: &Path,
        mut options: duet_server::Options,
        clock: Option<Arc<duet_runtime::ManualClock>>,
        own_url: bool,
        limits: Option<duet_runtime::files::FileLimits>,
    ) -> Server {
        let duet_store::Stores {
            engine: store,
            server: tables,
        } = backend.open_both().await;
        let mut rt = support::runtime(support::project(root), store.clone());
        if let Some(clock) = clock {
            rt = rt.clock(clock);
        }
        if let Some(limits) = limits {
            rt = rt.file_limits(limits);
        }
        let rt = rt.build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        if own_url {
            options.public_url = Some(base.clone());
        }
        let state = duet_server::AppState::new(rt, tables.clone(), options);
        let stop = CancellationToken::new();
        let signal = stop.clone();
        let done = tokio::spawn(duet_server::serve(state, listener, async move {
            signal.cancelled().await;
        }));
        Server {
            base,
            store,
            tables,
            backend: backend.clone(),
            stop,
            done: Some(done),
            http: reqwest::Client::new(),
        }
    }

    /// Shuts it down gracefully and waits until it has.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(done) = self.done.take() {
            done.await.expect("server task").expect("server");
        }
    }

    /// A new API key for `principal` (admin or not): its bearer token.
    pub async fn key(&self, principal: &str, admin: bool) -> String {
        let new = duet_server::auth::new_key(principal, admin, None, 0).expect("key");
        self.tables
            .create_key(&new.key, &new.hash)
            .await
            .expect("store key");
        new.token
    }

    /// A request to `path` as `token`.
    pub fn req(&self, method: reqwest::Method, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token)
    }

    /// `GET path` as `token`: (status, JSON body).
    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        send(self.req(reqwest::Method::GET, path, token)).await
    }

    /// `POST path` with a JSON body as `token`: (status, JSON body).
    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        send(self.req(reqwest::Method::POST, path, token).json(&body)).await
    }

    /// Follows `path` (an SSE stream) as `token`, with `last_id` as `Last-Event-ID`.
    pub async fn events(&self, path: &str, token: &str, last_id: Option<i64>) -> Sse {
        let mut req = self.req(reqwest::Method::GET, path, token);
        if let Some(id) = last_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = req.send().await.expect("events request");
        assert_eq!(resp.status(), 200, "{path}");
        Sse::new(resp)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Follows `key`'s events on `server` until its status is `status` (the stream's first status
/// event reflects the thread as it is).
pub async fn until(server: &Server, token: &str, key: &str, status: &str) {
    let mut events = server
        .events(&format!("/threads/{}/events", seg(key)), token, None)
        .await;
    while let Some(e) = events.next().await {
        if e.event == "status" && e.data["status"] == status {
            return;
        }
    }
    panic!("the events of {key} ended before it was {status}");
}

/// Signs `token` in to the inbox over plain HTTP: the session cookie and the page's CSRF token.
pub async fn sign_in(server: &Server, token: &str) -> (String, String) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let resp = http
        .post(format!("{}/inbox/sign-in", server.base))
        .form(&[("key", token), ("next", "/inbox")])
        .send()
        .await
        .expect("sign in");
    assert_eq!(resp.status(), 303);
    let cookie = resp.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    let html = http
        .get(format!("{}/inbox", server.base))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("inbox")
        .text()
        .await
        .expect("html");
    let at = html.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    (cookie, html[at..at + 64].to_owned())
}

/// The `--db` a `duet` process opens to reach `backend`'s database.
pub fn db_arg(backend: &Backend) -> String {
    match backend {
        Backend::Sqlite(p) => p.display().to_string(),
        Backend::Postgres(url) => url.clone(),
        Backend::Memory(..) => panic!("a process cannot open another's memory store"),
    }
}

/// `SendMessage` params: a user message `id` saying `text`.
pub fn a2a_message(id: &str, text: &str) -> Value {
    serde_json::json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// A JSON-RPC A2A call to `/a2a/{agent}` as `token`: the whole response body (HTTP 200).
pub async fn a2a(server: &Server, agent: &str, token: &str, method: &str, params: Value) -> Value {
    let (status, body) = send(
        server
            .req(reqwest::Method::POST, &format!("/a2a/{agent}"), token)
            .header("A2A-Version", "1.0")
            .json(
                &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
            ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Sends `req`: (status, body as JSON, or the text as a JSON string).
pub async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// One Server-Sent Event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

/// An SSE stream being read.
pub struct Sse {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    /// Comment lines seen (heartbeats).
    pub comments: usize,
}

impl Sse {
    pub fn new(resp: reqwest::Response) -> Sse {
        Sse {
            body: resp.bytes_stream().boxed(),
            buffer: String::new(),
            comments: 0,
        }
    }

    /// The next event (comments counted and skipped); `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = Event {
                    id: None,
                    event: "message".into(),
                    data: Value::Null,
                };
                let mut data = String::new();
                let mut any = false;
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                        continue;
                    }
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    any = true;
                    match field {
                        "id" => event.id = Some(value.to_owned()),
                        "event" => event.event = value.to_owned(),
                        "data" => {
                            if !data.is_empty() {
                                data.push('\n');
                            }
                            data.push_str(value);
                        }
                        _ => {}
                    }
                }
                if !any {
                    continue;
                }
                event.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(event);
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }

    /// Reads until the next heartbeat comment; the events meanwhile.
    pub async fn heartbeat(&mut self) -> Vec<Event> {
        let before = self.comments;
        let mut seen = Vec::new();
        let wait = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    if self.buffer[..end].lines().all(|l| l.starts_with(':')) {
                        self.buffer.drain(..end + 2);
                        self.comments += 1;
                        return true;
                    }
                    match self.next().await {
                        Some(e) => seen.push(e),
                        None => return false,
                    }
                    continue;
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                    _ => return false,
                }
            }
        })
        .await;
        assert!(matches!(wait, Ok(true)), "no heartbeat; saw {seen:#?}");
        assert!(self.comments > before);
        seen
    }

    /// Events until one satisfies `done` (included); panics if the stream ends first or it
    /// takes longer than 20 s (a hung test, not a timing assertion).
    pub async fn until(&mut self, done: impl Fn(&Event) -> bool) -> Vec<Event> {
        let mut seen = Vec::new();
        let wait = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(e) = self.next().await {
                let stop = done(&e);
                seen.push(e);
                if stop {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(
            matches!(wait, Ok(true)),
            "the stream ended or hung; saw {seen:#?}"
        );
        seen
    }
}

/// Percent-encodes a thread key for a path segment.
pub fn seg(key: &str) -> String {
    key.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
