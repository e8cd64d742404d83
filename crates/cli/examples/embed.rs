//! Embedding duet in a backend service: load a project, open a store, and `invoke` an agent —
//! streaming its events, then buffered with `collect`. Runs offline against the repository's
//! own `agents/` on a scratch SQLite file:
//!
//! ```sh
//! cargo run -p duet-cli --example embed
//! ```

use std::sync::Arc;

use duet_runtime::middleware::{Budget, BudgetLayer, Layer, TraceLayer};
use duet_runtime::{Agent, AgentEvent, Prompt, Runtime, Scope, collect};
use futures::StreamExt;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let loaded = duet_spec::load(&root)?;
    anyhow::ensure!(
        loaded.is_ok(),
        "the project has errors: run `duet validate`"
    );
    let db = std::env::temp_dir().join(format!("duet-embed-{}.db", std::process::id()));
    let store = duet_store::connect(&db.display().to_string()).await?;
    let runtime = Runtime::builder(Arc::new(loaded.project), store)
        .providers(duet_models::providers())
        .handlers(duet_handlers::handlers())
        .hooks(duet_handlers::hooks())
        .build();

    // Middleware wraps any agent: here a budget, then tracing.
    let gate: Arc<dyn Agent> =
        Arc::new(runtime.agent("approval_gate").expect("defined in agents/"));
    let gate = TraceLayer.layer(
        BudgetLayer(Budget {
            max_tool_calls: Some(5),
            ..Budget::default()
        })
        .layer(gate),
    );

    // Streaming: the events as each step commits. The session parks for the approver.
    let mut events = gate.invoke(
        Scope::new("ticket-42"),
        Prompt::text("Rotate the production keys?"),
    );
    while let Some(event) = events.next().await {
        match &event {
            AgentEvent::Text { delta } => println!("gate: {delta}"),
            AgentEvent::Completed { data } => {
                println!("parked: {}", data.clone().unwrap_or_default())
            }
            other => println!("{}", serde_json::to_string(other)?),
        }
    }

    // Buffered: the approver's answer; `collect` returns the text and the terminal data.
    let done =
        collect(gate.invoke(Scope::new("ticket-42"), Prompt::text("Yes, approved."))).await?;
    println!(
        "result: {}",
        done.data
            .as_ref()
            .and_then(|d| d["result"].as_str())
            .unwrap_or("-")
    );
    Ok(())
}
