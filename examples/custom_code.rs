//! Your own code in a project: a handler that takes a side's turns and a hook that edits what is
//! written, both registered in Rust under the names their definition files give. Runs offline on
//! a scratch project and SQLite file:
//!
//! ```sh
//! cargo run -p duet --example custom_code
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use duet::runtime::{CancellationToken, Delivered, EventSink, Message};
use duet::{Handler, HandlerError, Hook, HookContext, HookError, Hooks, Runtime, ThreadState};

/// A handler: called once per inbound message of its side. It answers in capitals, counts what
/// it answered in a durable value, and ends the session when told "bye".
struct Shout;

#[async_trait]
impl Handler for Shout {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let text = message.content.clone().unwrap_or_default();
        let count = state
            .get_value("shouted")
            .await?
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        state.set_value("shouted", Some(serde_json::json!(count + 1)));
        if text.trim().eq_ignore_ascii_case("bye") {
            state.stop_session(Some(format!("shouted {count} times")));
            return Ok(());
        }
        state.reply(text.to_uppercase());
        Ok(())
    }
}

/// A hook of kind `before_create_message`: every message is written with its digits masked.
struct Redact;

#[async_trait]
impl Hook for Redact {
    async fn before_create_message(
        &self,
        _ctx: &HookContext<'_>,
        mut message: Message,
    ) -> Result<Message, HookError> {
        message.content = message.content.map(|c| {
            c.chars()
                .map(|ch| if ch.is_ascii_digit() { '#' } else { ch })
                .collect()
        });
        Ok(message)
    }
}

fn write(root: &std::path::Path, path: &str, text: &str) -> anyhow::Result<()> {
    let p = root.join(path);
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(p, text)?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let root = std::env::temp_dir().join(format!("duet-custom-{}", std::process::id()));
    // The definitions name the code: the handler file `shout.yaml` (its name is the builtin by
    // default), and the hook whose `id` is `redact`.
    write(
        &root,
        "agents/handlers/shout.yaml",
        "description: Answers in capitals.\n",
    )?;
    write(
        &root,
        "agents/hooks/redact.yaml",
        "hook: before_create_message\nid: redact\n",
    )?;
    write(
        &root,
        "agents/agents/loud.yaml",
        "name: loud\nhooks: [redact]\nsideA: { handler: shout }\nsideB: { human: true }\n",
    )?;
    let loaded = duet::load(&root)?;
    anyhow::ensure!(
        loaded.is_ok(),
        "the project has errors: {:?}",
        loaded.issues
    );
    let store = duet::connect(&root.join("duet.db").display().to_string()).await?;
    let runtime = Runtime::builder(Arc::new(loaded.project), store)
        .handler("shout", Shout)
        .hooks(Hooks::new().with("redact", Redact))
        .build();
    // Nothing the project names is missing from this build.
    anyhow::ensure!(
        runtime
            .project()
            .check_builtins(&runtime.builtins())
            .is_empty()
    );

    for text in ["call me at 555 0100", "bye"] {
        let (sink, mut events) = EventSink::channel();
        let done = runtime
            .send("demo", Some("loud"), text, &sink, &CancellationToken::new())
            .await?;
        drop(sink);
        while let Some(event) = events.recv().await {
            println!("{}", serde_json::to_string(&event)?);
        }
        if let Delivered::Settled(s) = done {
            println!("=> {}", serde_json::to_string(&s.terminal_event())?);
        }
    }
    let thread = runtime.store().thread("demo").await?.expect("created");
    let shouted = runtime.store().value(thread.id, "shouted").await?;
    println!("shouted: {shouted:?}");
    anyhow::ensure!(
        shouted == Some(serde_json::json!(2)),
        "the handler's value was kept"
    );
    let messages = runtime.store().messages(thread.id).await?;
    anyhow::ensure!(
        messages
            .iter()
            .any(|m| m.content.as_deref() == Some("CALL ME AT ### ####")),
        "the hook masked the digits of what the handler wrote"
    );
    std::fs::remove_dir_all(&root).ok();
    Ok(())
}
