//! duet's HTTP API — REST and SSE for threads, messages and approvals, the Agent Handler protocol,
//! A2A, `/openapi.json` — and the approval inbox, mounted in your own axum app beside your own
//! routes. A backend service's key creates a thread, which parks for a person; an approver
//! answers with a key of their own. Runs offline against the repository's `agents/` on a
//! scratch SQLite file:
//!
//! ```sh
//! cargo run -p duet --example router
//! ```

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};

/// What `duet keys create --principal NAME [--admin]` does: a new key, stored by its hash; the
/// token is what its holder sends (`Authorization: Bearer …`).
async fn create_key(stores: &duet::Stores, principal: &str, admin: bool) -> anyhow::Result<String> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let new = duet::server::auth::new_key(principal, admin, None, i64::try_from(now.as_millis())?)
        .map_err(anyhow::Error::msg)?;
    stores.server.create_key(&new.key, &new.hash).await?;
    Ok(new.token)
}

/// What the approval workflow looks like from outside, over HTTP at `base`: the backend service
/// starts a thread, which parks for a person; the approver lists what waits and answers it; a
/// second answer is refused, naming the approver; the inbox is served.
async fn client(base: String, backend: String, approver: String) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let hello = http
        .get(format!("{base}/hello"))
        .send()
        .await?
        .text()
        .await?;
    anyhow::ensure!(hello == "your own route", "GET /hello: {hello}");

    // The backend service starts a thread: a model proposes, the thread parks for a person.
    let thread: Value = http
        .post(format!("{base}/threads?wait=true"))
        .bearer_auth(&backend)
        .json(&json!({"agent": "question_gate", "key": "ticket-42",
                      "text": "Rotate the production keys tonight?"}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    println!("backend: {thread}");
    anyhow::ensure!(thread["status"] == "awaiting_human", "{thread}");

    // The approver lists what waits for a person (or opens {base}/inbox) and answers it.
    let waiting: Value = http
        .get(format!("{base}/approvals"))
        .bearer_auth(&approver)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    println!("approver sees: {waiting}");
    let approval = thread["approval"].as_str().unwrap_or_default();
    anyhow::ensure!(
        waiting.to_string().contains(approval),
        "the approver sees the backend's question"
    );
    let done: Value = http
        .post(format!("{base}/approvals/{approval}?wait=true"))
        .bearer_auth(&approver)
        .json(&json!({"text": "Yes, approved."}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    println!("approver answered: {done}");
    anyhow::ensure!(done["result"] == "approved", "{done}");
    // One question, one answer: a second one is refused, naming who answered first.
    let late = http
        .post(format!("{base}/approvals/{approval}"))
        .bearer_auth(&backend)
        .json(&json!({"text": "No."}))
        .send()
        .await?;
    anyhow::ensure!(late.status() == 409, "a second answer: {}", late.status());
    let late: Value = late.json().await?;
    println!("a second answer: {late}");
    anyhow::ensure!(late["answer"]["author"] == "alice", "{late}");

    // The inbox's sign-in page is served by the same router.
    let inbox = http.get(format!("{base}/inbox")).send().await?;
    anyhow::ensure!(
        inbox.status().is_success(),
        "GET /inbox: {}",
        inbox.status()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let db = std::env::temp_dir().join(format!("duet-router-{}.db", std::process::id()));
    let db = db.display().to_string();
    let loaded = duet::load(&root)?;
    anyhow::ensure!(
        loaded.is_ok(),
        "the project has errors: run `duet validate`"
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    println!("serving on {base}");

    // The keys: the backend service's, and an approver's. A question is answered by the thread's
    // owner or an admin key, so this approver's key is an admin key: it sees every principal's
    // questions; its answers are recorded as its principal's. (A tool call's `approvers` give
    // it to keys with a role instead: `duet keys create --principal alice --role refunds`.)
    {
        let stores = duet::open(&db).await?;
        let backend = create_key(&stores, "backend", false).await?;
        let approver = create_key(&stores, "alice", true).await?;
        // The client runs until it is done, then stops the server.
        let (done, finished) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            done.send(client(base, backend, approver).await).ok();
        });
        let (stop, stopped_rx) = tokio::sync::oneshot::channel::<()>();
        let outcome = tokio::spawn(async move {
            let outcome = finished.await;
            stop.send(()).ok();
            outcome
        });
        let stopped = async {
            stopped_rx.await.ok();
        };

        // README: begin
        let stores = duet::open(&db).await?; // the engine's tables and the server's own
        let runtime = duet::compose(Arc::new(loaded.project), &root, stores.engine).build();
        let state = duet::AppState::new(runtime, stores.server, duet::Options::default());
        // Recovery and the A2A push sender, which `duet serve` runs beside its routes.
        let background = duet::Background::start(&state);
        let app = Router::new()
            .route("/hello", get(|| async { "your own route" }))
            .merge(duet::router(state)); // at the root: /threads, /approvals, /inbox, /a2a, …
        // On the signal the event streams end, then connections close, then runs stop.
        let shutdown = background.stop_after(stopped);
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await?;
        background.shutdown().await;
        // README: end

        let client_done = outcome.await?;
        client_done.map_err(|_| anyhow::anyhow!("the client vanished"))??;
    }
    for suffix in ["", "-wal", "-shm"] {
        std::fs::remove_file(format!("{db}{suffix}")).ok();
    }
    Ok(())
}
