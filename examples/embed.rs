//! Embedding duet in a backend service: load a project, open a store, compose the runtime and
//! `invoke` an agent — streaming its events, then buffered with `collect` — and wrap an agent in
//! middleware. Runs offline against the repository's own `agents/` on a scratch SQLite file:
//!
//! ```sh
//! cargo run -p duet --example embed
//! ```
//!
//! The README shows the part between the `README` markers verbatim (a test compares them).

// README: begin
use std::path::Path;
use std::sync::Arc;

use duet::{Agent, AgentEvent, Prompt, Scope, collect};
use futures::StreamExt;

/// Runs the approval gate of the project in `root` (the folder holding `agents/`) on the
/// database `db`: a SQLite file, or `postgres://…`.
async fn approve(root: &Path, db: &str) -> anyhow::Result<()> {
    let loaded = duet::load(root)?; // every issue at once
    anyhow::ensure!(
        loaded.is_ok(),
        "the project has errors: run `duet validate`"
    );
    let store = duet::connect(db).await?; // created and migrated on first use
    // What `duet serve` registers: providers, duet's handlers and hooks, http tools, MCP.
    let runtime = duet::compose(Arc::new(loaded.project), root, store).build();
    let gate = runtime.agent("question_gate").expect("defined in agents/");

    // Streaming: each event once its step has committed. The session parks for the approver.
    let mut events = gate.invoke(Scope::new("ticket-42"), Prompt::text("Rotate the keys?"));
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::Text { delta } => println!("gate: {delta}"),
            AgentEvent::Completed { data } => println!("parked: {}", data.unwrap_or_default()),
            other => println!("{}", serde_json::to_string(&other)?),
        }
    }

    // Buffered: the approver's answer, minutes or weeks later, from any process.
    let done = collect(gate.invoke(Scope::new("ticket-42"), Prompt::text("Approved."))).await?;
    let result = done.data.as_ref().and_then(|d| d["result"].as_str());
    println!("result: {}", result.unwrap_or("-"));
    Ok(())
}
// README: end

/// Middleware wraps any agent: here a budget (`budget_exceeded` past five tool calls), then
/// tracing; every other event passes unchanged.
async fn with_middleware(root: &Path, db: &str) -> anyhow::Result<()> {
    use duet::runtime::middleware::{Budget, BudgetLayer, Layer, TraceLayer};

    let loaded = duet::load(root)?;
    let store = duet::connect(db).await?;
    let runtime = duet::compose(Arc::new(loaded.project), root, store).build();
    let gate: Arc<dyn Agent> = Arc::new(runtime.agent("question_gate").expect("defined"));
    let budget = Budget {
        max_tool_calls: Some(5),
        ..Budget::default()
    };
    let gate = TraceLayer.layer(BudgetLayer(budget).layer(gate));
    let parked = collect(gate.invoke(Scope::new("ticket-43"), Prompt::text("Rotate?"))).await?;
    let status = parked.data.as_ref().and_then(|d| d["status"].as_str());
    anyhow::ensure!(
        status == Some("awaiting_human"),
        "parked: {:?}",
        parked.data
    );
    let done = collect(gate.invoke(Scope::new("ticket-43"), Prompt::text("Approved."))).await?;
    let result = done.data.as_ref().and_then(|d| d["result"].as_str());
    anyhow::ensure!(result == Some("approved"), "decided: {:?}", done.data);
    println!("through middleware: {}", result.unwrap_or("-"));
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The repository is the project; the database a scratch file.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let db = std::env::temp_dir().join(format!("duet-embed-{}.db", std::process::id()));
    let db = db.display().to_string();
    approve(&root, &db).await?;
    with_middleware(&root, &db).await?;
    for suffix in ["", "-wal", "-shm"] {
        std::fs::remove_file(format!("{db}{suffix}")).ok();
    }
    Ok(())
}
