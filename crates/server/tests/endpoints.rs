//! A thread's endpoints over HTTP (`/threads/{key}/api/…`) on a server in this process on
//! 127.0.0.1, on the memory stores, with a code host played by the test: authorised as the
//! thread (no key: 401; another principal's: 404), the request as the code gets it (its URL,
//! its query, no credentials), a `Response` passed through, a value as JSON, 404, 405 with
//! `Allow`, the code's failure as a 500 problem, the body limit.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use duet_runtime::testing::{MemoryStore, Scratch};
use duet_runtime::{
    Bridge, CodeCall, CodeError, CodeErrorKind, CodeHost, Handler, HandlerError, Message, Runtime,
    ThreadState,
};
use duet_server_store::testing::MemoryServerStore;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// `desk`: side A answers each message, side B is a person; endpoints under `agents/api/`.
fn project() -> Arc<duet_spec::Project> {
    let dir = Scratch::new("server-endpoints");
    dir.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { handler: clerk }\nsideB: { human: true }\n",
    );
    dir.write("agents/handlers/clerk.yaml", "description: Answers.\n");
    let endpoint = "import { defineThreadEndpoint } from '@standardagents/spec';\n\
                    export default defineThreadEndpoint(async (req, state, params) => Response.json({}));\n";
    for file in [
        "index.get.ts",
        "notes/[id].post.ts",
        "notes/[id].get.ts",
        "fail.post.ts",
    ] {
        dir.write(&format!("agents/api/{file}"), endpoint);
    }
    dir.project()
}

struct Clerk;

#[async_trait]
impl Handler for Clerk {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        state.reply(format!(
            "clerk: {}",
            message.content.as_deref().unwrap_or("")
        ));
        Ok(())
    }
}

/// Plays the endpoints' code; remembers each call.
#[derive(Default)]
struct Desk(Mutex<Vec<CodeCall>>);

#[async_trait]
impl CodeHost for Desk {
    async fn call(&self, call: CodeCall, bridge: &mut dyn Bridge) -> Result<Value, CodeError> {
        self.0.lock().unwrap().push(call.clone());
        let thrown = |m: String| CodeError::new(CodeErrorKind::Thrown, m);
        let request = call.args[0]["$request"].clone();
        let id = call.args[1]["id"].as_str().unwrap_or_default().to_owned();
        match call.file.as_str() {
            "agents/api/index.get.ts" => Ok(json!({ "thread": call.state["threadId"] })),
            "agents/api/notes/[id].post.ts" => {
                let set = json!({ "key": format!("note:{id}"), "value": request["body"] });
                bridge.call("setValue", set).await.map_err(thrown)?;
                Ok(json!({ "$response": {
                    "status": 201,
                    "headers": [
                        ["content-type", "text/plain"],
                        ["location", format!("/notes/{id}")],
                        ["connection", "close"],
                    ],
                    "body": "made",
                }}))
            }
            "agents/api/notes/[id].get.ts" => {
                let get = json!({ "key": format!("note:{id}") });
                let note = bridge.call("getValue", get).await.map_err(thrown)?;
                Ok(json!({ "id": id, "note": note }))
            }
            "agents/api/fail.post.ts" => Err(thrown("Error: boom".into())),
            other => Err(CodeError::new(CodeErrorKind::Load, format!("no {other}"))),
        }
    }
}

struct Server {
    base: String,
    host: Arc<Desk>,
    owner: String,
    stranger: String,
    http: reqwest::Client,
    stop: CancellationToken,
}

impl Server {
    /// A server with keys for `owner` and `stranger`, and thread `t` of `owner`'s, settled.
    async fn start() -> Server {
        let store: Arc<dyn duet_runtime::Store> = Arc::new(MemoryStore::new());
        let tables = Arc::new(MemoryServerStore::default());
        let host = Arc::new(Desk::default());
        let rt = Runtime::builder(project(), store)
            .handler("clerk", Clerk)
            .code_host(host.clone())
            .build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let options = duet_server::Options {
            body_limit: 1024,
            ..duet_server::Options::default()
        };
        let mut keys = Vec::new();
        for principal in ["owner", "stranger"] {
            let new = duet_server::auth::new_key(principal, false, None, 0).unwrap();
            use duet_server_store::KeyStore as _;
            tables.create_key(&new.key, &new.hash).await.unwrap();
            keys.push(new.token);
        }
        let state = duet_server::AppState::new(rt, tables, options);
        let stop = CancellationToken::new();
        let signal = stop.clone();
        tokio::spawn(duet_server::serve(state, listener, async move {
            signal.cancelled().await;
        }));
        let server = Server {
            base,
            host,
            stranger: keys.pop().unwrap(),
            owner: keys.pop().unwrap(),
            http: reqwest::Client::new(),
            stop,
        };
        let created = server
            .http
            .post(format!("{}/threads?wait=true", server.base))
            .bearer_auth(&server.owner)
            .json(&json!({ "agent": "desk", "key": "t", "text": "hello" }))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 200, "{}", created.text().await.unwrap());
        server
    }

    fn req(&self, method: &str, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth(token)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// (status, headers, body) of `req`.
async fn send(req: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

fn problem(body: &str) -> Value {
    serde_json::from_str(body).unwrap()
}

#[tokio::test]
async fn an_endpoint_is_the_threads_and_answers_as_its_code_does() {
    let s = Server::start().await;

    // Authorised as the thread: no key, or another principal's, reaches no code.
    let anonymous = s.http.get(format!("{}/threads/t/api/notes/1", s.base));
    assert_eq!(send(anonymous).await.0, 401);
    let (status, _, body) = send(s.req("GET", "/threads/t/api/notes/1", &s.stranger)).await;
    assert_eq!(status, 404, "{body}");
    assert!(s.host.0.lock().unwrap().is_empty());

    // A `Response` passes through, less the hop-by-hop headers.
    let post = s
        .req("POST", "/threads/t/api/notes/7?draft=1", &s.owner)
        .header("content-type", "text/plain")
        .body("buy milk");
    let (status, headers, body) = send(post).await;
    assert_eq!((status, body.as_str()), (201, "made"));
    assert_eq!(headers["location"], "/notes/7");
    assert_eq!(headers["content-type"], "text/plain");
    let call = s.host.0.lock().unwrap()[0].clone();
    assert_eq!(call.state_at, 1);
    assert_eq!(call.args[1], json!({ "id": "7" }));
    let request = &call.args[0]["$request"];
    assert_eq!(request["method"], "POST");
    assert_eq!(
        request["url"],
        format!("{}/threads/t/api/notes/7?draft=1", s.base)
    );
    assert_eq!(request["body"], "buy milk");
    let names: Vec<&str> = request["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h[0].as_str())
        .collect();
    assert!(names.contains(&"content-type"), "{names:?}");
    assert!(!names.contains(&"authorization"), "{names:?}");

    // Any other value is a 200 of JSON; what the POST wrote was committed.
    let (status, headers, body) = send(s.req("GET", "/threads/t/api/notes/7", &s.owner)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({ "id": "7", "note": "buy milk" })
    );
    // The root; the code's `state.threadId` is the thread's stored key, as every code call
    // of the thread sees it (the caller's `t` in its principal's key space).
    let (status, _, body) = send(s.req("GET", "/threads/t/api", &s.owner)).await;
    assert_eq!((status, body.as_str()), (200, r#"{"thread":"owner/t"}"#));
    let (status, _, body) = send(s.req("GET", "/threads/t/api/", &s.owner)).await;
    assert_eq!((status, body.as_str()), (200, r#"{"thread":"owner/t"}"#));
    // `HEAD` is the `GET` endpoint's headers.
    let (status, headers, body) = send(s.req("HEAD", "/threads/t/api/notes/7", &s.owner)).await;
    assert_eq!((status, body.as_str()), (200, ""));
    assert_eq!(headers["content-type"], "application/json");
}

#[tokio::test]
async fn refusals_and_failures_are_problems() {
    let s = Server::start().await;

    // A path served under other methods: 405 with `Allow`.
    let (status, headers, body) = send(s.req("DELETE", "/threads/t/api/notes/7", &s.owner)).await;
    assert_eq!(status, 405, "{body}");
    assert_eq!(headers["allow"], "GET, HEAD, POST");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(problem(&body)["code"], "method_not_allowed");

    // No route, no thread: 404.
    let (status, _, body) = send(s.req("GET", "/threads/t/api/nothing/here", &s.owner)).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(problem(&body)["code"], "not_found");
    let (status, _, body) = send(s.req("GET", "/threads/nobody/api/notes/1", &s.owner)).await;
    assert_eq!(status, 404, "{body}");

    // The code's failure: a 500 problem naming it.
    let (status, headers, body) = send(s.req("POST", "/threads/t/api/fail", &s.owner)).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(headers["content-type"], "application/problem+json");
    let p = problem(&body);
    assert_eq!(p["type"], "urn:duet:problem:endpoint_failed");
    assert_eq!(p["detail"], "Error: boom");

    // A body past the server's limit is refused before any code runs.
    let calls = s.host.0.lock().unwrap().len();
    let big = s
        .req("POST", "/threads/t/api/notes/8", &s.owner)
        .body(vec![b'x'; 4096]);
    let (status, _, body) = send(big).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(problem(&body)["code"], "body_too_large");
    assert_eq!(s.host.0.lock().unwrap().len(), calls);
}
