//! The facade's composition on the repository's own project: `duet::compose` registers what the
//! `duet` command does (the orchestrator's required parent hook among it), and a runtime built
//! without duet's hooks or handlers refuses the agent that needs them, naming the call that
//! registers them. On SQLite, and on Postgres too when `DATABASE_URL` is set.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use duet::{Agent, Prompt, Runtime, Scope, collect};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn project() -> Arc<duet::Project> {
    let loaded = duet::load(&root()).expect("the repository's agents/ load");
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    Arc::new(loaded.project)
}

/// The terminal `completed` event's `data` of one `invoke` of `agent` on `runtime`, or its
/// `failed` event.
async fn invoke(
    runtime: &Runtime,
    agent: &str,
    key: &str,
    text: &str,
) -> Result<serde_json::Value, duet::runtime::AgentFailure> {
    let agent = runtime.agent(agent).expect("defined in agents/");
    let done = collect(agent.invoke(Scope::new(key), Prompt::text(text))).await?;
    Ok(done.data.unwrap_or_default())
}

/// What an embedder may leave out, the agent that needs it, and what the error must name.
const MISSING: &[(&str, &str, &[&str])] = &[
    (
        "hooks",
        "orchestrator",
        &[
            "hooks fail closed",
            "approval_audit",
            "RuntimeBuilder::hooks",
            ".hooks(duet_handlers::hooks())",
            "duet::compose",
        ],
    ),
    (
        "handlers",
        "relay_agent",
        &[
            "handler `relay`",
            "RuntimeBuilder::handler(\"relay\", …)",
            ".handlers(duet_handlers::handlers())",
            "duet::compose",
        ],
    ),
];

#[tokio::test]
async fn a_runtime_missing_duets_code_names_the_call_that_registers_it() {
    for backend in duet_store::testing::backends().await {
        let name = backend.name();
        for (left_out, agent, calls) in MISSING {
            let builder = Runtime::builder(project(), backend.open().await)
                .providers(duet::models::providers());
            let builder = match *left_out {
                "hooks" => builder.handlers(duet::handlers::handlers()),
                _ => builder.hooks(duet::handlers::hooks()),
            };
            let failure = invoke(
                &builder.build(),
                agent,
                left_out,
                "Rotate the keys tonight?",
            )
            .await
            .expect_err("code the project names is missing");
            assert_eq!(failure.code.as_deref(), Some("step_error"), "{name}");
            for call in *calls {
                assert!(
                    failure.details.contains(call),
                    "{name}, without {left_out}: the error names `{call}`: {}",
                    failure.details
                );
            }
        }
    }
}

#[tokio::test]
async fn compose_registers_what_the_orchestrator_needs() {
    for backend in duet_store::testing::backends().await {
        let name = backend.name();
        let composed = duet::compose(project(), &root(), backend.open().await).build();
        // The orchestrator runs and waits for its gate, which asks a person.
        let data = invoke(
            &composed,
            "orchestrator",
            "composed",
            "Rotate the keys tonight?",
        )
        .await
        .unwrap_or_else(|failure| panic!("{name}: {failure:?}"));
        assert_eq!(data["status"], "waiting", "{name}: {data}");
        let gate = composed
            .store()
            .thread("composed/approval-1")
            .await
            .expect("readable")
            .expect("the orchestrator spawned its gate");
        assert_eq!(
            gate.status,
            duet::runtime::ThreadStatus::Waiting,
            "{name}: its proposal waits for a person's decision"
        );
    }
}
