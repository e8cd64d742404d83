//! Thread endpoints (`agents/api/`, `Runtime::call_endpoint`), with a code host written here
//! that plays each endpoint's code by its file and drives the bridge as the code would: the
//! request and `params` it is given (with `state` second), its writes committed with the
//! settle, a failure keeping nothing, the thread running on when it queued messages (and when a
//! delivery queued while it held the lease), a running or terminated thread read and not
//! written, 404 and 405. On every backend (memory, SQLite, Postgres when `DATABASE_URL` is set).

use crate::support;

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use duet_runtime::{
    Bridge, CancellationToken, CodeCall, CodeError, CodeErrorKind, CodeHost, Delivered,
    EndpointError, EndpointRequest, EventSink, Handler, HandlerError, Lease, Message, Role,
    Runtime, Store, ThreadState,
};
use serde_json::{Value, json};

/// `desk`: side A is the `clerk` handler, side B a person; endpoints under `agents/api/`.
fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("endpoints");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { handler: clerk }\nsideB: { human: true }\n",
    );
    write("agents/handlers/clerk.yaml", "description: Answers.\n");
    let endpoint = "import { defineThreadEndpoint } from '@standardagents/spec';\n\
                    export default defineThreadEndpoint(async (req, state, params) => Response.json({}));\n";
    for file in [
        "notes/[id].post.ts",
        "notes/[id].get.ts",
        "fail.post.ts",
        "bad.get.ts",
        "careful.post.ts",
        "queue.post.ts",
        "terminating.post.ts",
    ] {
        write(&format!("agents/api/{file}"), endpoint);
    }
    dir.project()
}

/// Answers each message `clerk: TEXT`.
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

/// Plays each endpoint's code by its file; remembers every call it was given.
#[derive(Default)]
struct Desk {
    /// The runtime, for a delivery made while an endpoint runs.
    rt: OnceLock<Runtime>,
    calls: Mutex<Vec<CodeCall>>,
}

fn thrown(message: String) -> CodeError {
    CodeError::new(CodeErrorKind::Thrown, message)
}

#[async_trait]
impl CodeHost for Desk {
    async fn call(&self, call: CodeCall, bridge: &mut dyn Bridge) -> Result<Value, CodeError> {
        self.calls.lock().expect("calls").push(call.clone());
        let request = call.args.first().map(|r| r["$request"].clone());
        let request = request.unwrap_or(Value::Null);
        let id = call
            .args
            .get(1)
            .and_then(|p| p["id"].as_str())
            .unwrap_or_default()
            .to_owned();
        let file = call.file.strip_prefix("agents/api/").unwrap_or(&call.file);
        match file {
            "notes/[id].post.ts" => {
                let key = format!("note:{id}");
                let value = json!({ "key": key, "value": request["body"] });
                bridge.call("setValue", value).await.map_err(thrown)?;
                let input = json!({ "input": { "content": format!("noted {id}") } });
                bridge.call("injectMessage", input).await.map_err(thrown)?;
                Ok(json!({ "$response": {
                    "status": 201,
                    "headers": [["location", format!("/notes/{id}")]],
                    "body": "made",
                }}))
            }
            "notes/[id].get.ts" => {
                let key = json!({ "key": format!("note:{id}") });
                let note = bridge.call("getValue", key).await.map_err(thrown)?;
                Ok(json!({ "id": id, "note": note }))
            }
            "fail.post.ts" => {
                let value = json!({ "key": "failed", "value": true });
                bridge.call("setValue", value).await.map_err(thrown)?;
                Err(thrown("Error: boom".into()))
            }
            "bad.get.ts" => {
                let value = json!({ "key": "bad", "value": true });
                bridge.call("setValue", value).await.map_err(thrown)?;
                Ok(json!({ "$response": { "status": 42 } }))
            }
            "careful.post.ts" => {
                let value = json!({ "key": "careful", "value": true });
                match bridge.call("setValue", value).await {
                    Ok(_) => Ok(json!({ "wrote": true })),
                    Err(e) => Ok(json!({ "caught": e })),
                }
            }
            "queue.post.ts" => {
                let input = json!({ "input": { "content": "from the endpoint" } });
                bridge.call("queueMessage", input).await.map_err(thrown)?;
                // A person writes while the endpoint holds the lease: queued for after it.
                if let Some(rt) = self.rt.get() {
                    let sent = rt
                        .send(
                            &call.thread,
                            None,
                            "meanwhile",
                            &EventSink::discard(),
                            &CancellationToken::new(),
                        )
                        .await;
                    assert!(matches!(sent, Ok(Delivered::Queued { .. })), "{sent:?}");
                }
                Ok(Value::Null)
            }
            "terminating.post.ts" => {
                let value = json!({ "key": "late", "value": true });
                bridge.call("setValue", value).await.map_err(thrown)?;
                // The thread is terminated while the endpoint holds it: its lease is gone.
                let rt = self.rt.get().expect("the runtime");
                let t = rt.store().thread(&call.thread).await.expect("read");
                let t = t.expect("thread");
                rt.store()
                    .terminate(t.id, rt.now_ms())
                    .await
                    .expect("terminate");
                Ok(Value::Null)
            }
            other => Err(CodeError::new(CodeErrorKind::Load, format!("no {other}"))),
        }
    }
}

/// A runtime on `store` with `host` (when given) and a thread `t` that `hello` started.
async fn desk(store: Arc<dyn Store>, host: Option<Arc<Desk>>) -> Runtime {
    let mut builder = support::runtime(project(), store).handler("clerk", Clerk);
    if let Some(host) = &host {
        builder = builder.code_host(host.clone());
    }
    let rt = builder.build();
    if let Some(host) = host {
        host.rt.set(rt.clone()).ok();
    }
    support::send(&rt, "t", Some("desk"), "hello").await;
    rt
}

fn request(method: &str, path: &str, body: &str) -> EndpointRequest {
    EndpointRequest {
        method: method.into(),
        path: path.into(),
        query: None,
        url: format!("http://127.0.0.1:8787/threads/t/api{path}"),
        headers: vec![("Content-Type".into(), "text/plain".into())],
        body: body.as_bytes().to_vec(),
    }
}

async fn value(store: &Arc<dyn Store>, key: &str) -> Option<Value> {
    let t = store.thread("t").await.expect("read").expect("thread");
    store.value(t.id, key).await.expect("value")
}

async fn lease_free(store: &Arc<dyn Store>) -> bool {
    let t = store.thread("t").await.expect("read").expect("thread");
    t.lease_owner.is_none()
}

#[tokio::test]
async fn an_endpoint_is_given_the_request_and_its_writes_are_committed() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = Arc::new(Desk::default());
        let rt = desk(store.clone(), Some(host.clone())).await;
        let mut post = request("post", "/notes/42", "buy milk");
        post.headers
            .push(("Idempotency-Key".into(), "retry-1".into()));
        post.query = Some("x=1".into());
        let answer = rt.call_endpoint("t", post).await.expect("answered");
        assert_eq!(answer.status, 201, "{}", backend.name());
        assert_eq!(
            answer.headers,
            vec![("location".to_owned(), "/notes/42".to_owned())]
        );
        assert_eq!(answer.body, b"made");

        // The call as the host was given it: `state` second, the request, the route's params.
        let call = host.calls.lock().expect("calls")[0].clone();
        assert_eq!(call.file, "agents/api/notes/[id].post.ts");
        assert_eq!(call.entry, ["handler"]);
        assert_eq!(call.state_at, 1);
        assert_eq!(
            call.args,
            vec![
                json!({ "$request": {
                    "method": "POST",
                    "url": "http://127.0.0.1:8787/threads/t/api/notes/42",
                    "headers": [["content-type", "text/plain"], ["idempotency-key", "retry-1"]],
                    "body": "buy milk",
                }}),
                json!({ "id": "42" }),
            ]
        );
        assert_eq!(call.state["threadId"], "t");
        assert_eq!(call.state["agentId"], "desk");
        assert_eq!(call.state["execution"], Value::Null);
        assert_eq!(call.thread, "t");
        // The client's idempotency key names the call (its `fetch`es carry keys from it).
        assert_eq!(call.call, "endpoint:retry-1");

        // What it wrote is committed, and the lease given back.
        assert_eq!(value(&store, "note:42").await, Some(json!("buy milk")));
        let texts = support::texts(&store, "t").await;
        assert_eq!(
            texts.last(),
            Some(&(Role::Assistant, false, "noted 42".to_owned()))
        );
        assert!(lease_free(&store).await);

        // A read: any JSON is a 200 of JSON; an id made up when the request has none.
        let answer = rt
            .call_endpoint("t", request("GET", "/notes/42", ""))
            .await
            .expect("answered");
        assert_eq!(answer.status, 200);
        assert_eq!(
            answer.headers,
            vec![("content-type".to_owned(), "application/json".to_owned())]
        );
        let body: Value = serde_json::from_slice(&answer.body).expect("JSON");
        assert_eq!(body, json!({ "id": "42", "note": "buy milk" }));
        let call = host.calls.lock().expect("calls")[1].clone();
        assert!(call.call.starts_with("endpoint:"), "{}", call.call);
        assert_ne!(call.call, "endpoint:retry-1");
        assert!(call.args[0]["$request"].get("body").is_none());
        assert!(lease_free(&store).await);
    }
}

#[tokio::test]
async fn a_failing_endpoint_keeps_nothing_it_wrote() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = desk(store.clone(), Some(Arc::default())).await;
        let before = support::texts(&store, "t").await;
        match rt.call_endpoint("t", request("POST", "/fail", "")).await {
            Err(EndpointError::Failed(why)) => assert_eq!(why, "Error: boom"),
            other => panic!("{}: {other:?}", backend.name()),
        }
        assert_eq!(value(&store, "failed").await, None);
        // A return value that is no response fails the call too, and keeps nothing either.
        match rt.call_endpoint("t", request("GET", "/bad", "")).await {
            Err(EndpointError::Failed(why)) => assert!(why.contains("status 42"), "{why}"),
            other => panic!("{}: {other:?}", backend.name()),
        }
        assert_eq!(value(&store, "bad").await, None);
        assert_eq!(support::texts(&store, "t").await, before);
        assert!(lease_free(&store).await);
    }
}

#[tokio::test]
async fn no_thread_or_no_route_is_not_found_and_another_method_is_not_allowed() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let host = Arc::new(Desk::default());
        let rt = desk(store.clone(), Some(host.clone())).await;
        let e = rt
            .call_endpoint("nobody", request("GET", "/notes/1", ""))
            .await;
        assert!(matches!(e, Err(EndpointError::NotFound(_))), "{e:?}");
        let e = rt.call_endpoint("t", request("GET", "/nothing", "")).await;
        assert!(matches!(e, Err(EndpointError::NotFound(_))), "{e:?}");
        match rt
            .call_endpoint("t", request("DELETE", "/notes/1", ""))
            .await
        {
            Err(EndpointError::MethodNotAllowed(allowed)) => {
                assert_eq!(allowed, ["GET", "HEAD", "POST"]);
            }
            other => panic!("{}: {other:?}", backend.name()),
        }
        // `HEAD` is answered by the `GET` endpoint (the server sends no body).
        let head = rt.call_endpoint("t", request("HEAD", "/notes/1", "")).await;
        assert_eq!(head.expect("answered").status, 200);
        assert_eq!(host.calls.lock().expect("calls").len(), 1);
    }
}

#[tokio::test]
async fn messages_an_endpoint_queues_run_the_thread_on() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = desk(store.clone(), Some(Arc::default())).await;
        let answer = rt
            .call_endpoint("t", request("POST", "/queue", ""))
            .await
            .expect("answered");
        assert_eq!(answer.body, b"null");
        // The queued message and the one a person sent while the endpoint held the lease both
        // reach the thread, which runs on in the background.
        rt.quiesce().await;
        let texts: Vec<String> = support::texts(&store, "t")
            .await
            .into_iter()
            .map(|(_, _, text)| text)
            .collect();
        for said in [
            "from the endpoint",
            "clerk: from the endpoint",
            "meanwhile",
            "clerk: meanwhile",
        ] {
            assert!(
                texts.iter().any(|t| t == said),
                "{}: {texts:?}",
                backend.name()
            );
        }
        assert!(lease_free(&store).await);
    }
}

#[tokio::test]
async fn a_running_thread_is_read_and_not_written() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = desk(store.clone(), Some(Arc::default())).await;
        let post = rt.call_endpoint("t", request("POST", "/notes/1", "one"));
        assert_eq!(post.await.expect("answered").status, 201);
        // Another run holds the thread.
        let t = store.thread("t").await.expect("read").expect("thread");
        let owner = uuid::Uuid::now_v7();
        let now = rt.now_ms();
        let lease = Lease {
            owner,
            until: now + 600_000,
            now,
        };
        assert!(store.claim(t.id, lease).await.expect("claim"));

        let read = rt.call_endpoint("t", request("GET", "/notes/1", "")).await;
        let body: Value = serde_json::from_slice(&read.expect("answered").body).expect("JSON");
        assert_eq!(body["note"], "one");
        let write = rt
            .call_endpoint("t", request("POST", "/notes/2", "two"))
            .await;
        assert!(
            matches!(write, Err(EndpointError::Busy(ref k)) if k == "t"),
            "{}: {write:?}",
            backend.name()
        );
        // Code that catches the refusal answers as it likes; it wrote nothing either way.
        let careful = rt.call_endpoint("t", request("POST", "/careful", "")).await;
        let body: Value = serde_json::from_slice(&careful.expect("answered").body).expect("JSON");
        let caught = body["caught"].as_str().unwrap_or_default();
        assert!(
            caught.starts_with("`state.setValue` writes to the thread, and thread `t` is running"),
            "{body}"
        );
        assert_eq!(value(&store, "note:2").await, None);
        assert_eq!(value(&store, "careful").await, None);
        // The other run's lease is untouched.
        let t = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(t.lease_owner, Some(owner));
        assert!(store.release(t.id, owner).await.expect("release"));
    }
}

#[tokio::test]
async fn a_terminated_thread_is_read_and_not_written() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = desk(store.clone(), Some(Arc::default())).await;
        let post = rt.call_endpoint("t", request("POST", "/notes/1", "one"));
        assert_eq!(post.await.expect("answered").status, 201);
        let t = store.thread("t").await.expect("read").expect("thread");
        store.terminate(t.id, rt.now_ms()).await.expect("terminate");

        let read = rt.call_endpoint("t", request("GET", "/notes/1", "")).await;
        let body: Value = serde_json::from_slice(&read.expect("answered").body).expect("JSON");
        assert_eq!(body["note"], "one");
        let write = rt
            .call_endpoint("t", request("POST", "/notes/2", "two"))
            .await;
        assert!(
            matches!(write, Err(EndpointError::Terminated(ref k)) if k == "t"),
            "{}: {write:?}",
            backend.name()
        );
        assert_eq!(value(&store, "note:2").await, None);
        assert!(lease_free(&store).await);
    }
}

#[tokio::test]
async fn a_thread_terminated_during_the_call_keeps_nothing_it_wrote() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = desk(store.clone(), Some(Arc::default())).await;
        let e = rt
            .call_endpoint("t", request("POST", "/terminating", ""))
            .await;
        assert!(
            matches!(e, Err(EndpointError::Terminated(ref k)) if k == "t"),
            "{}: {e:?}",
            backend.name()
        );
        assert_eq!(value(&store, "late").await, None);
        let t = store.thread("t").await.expect("read").expect("thread");
        assert_eq!(t.status, duet_runtime::ThreadStatus::Terminated);
        assert!(t.lease_owner.is_none());
    }
}

#[tokio::test]
async fn without_a_code_host_an_endpoint_fails_saying_so() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = desk(store.clone(), None).await;
        match rt.call_endpoint("t", request("GET", "/notes/1", "")).await {
            Err(EndpointError::Failed(why)) => {
                assert!(why.contains("no code host"), "{why}");
            }
            other => panic!("{}: {other:?}", backend.name()),
        }
        assert!(lease_free(&store).await);
    }
}
