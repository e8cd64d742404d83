//! The repository root is itself a Standard Agents project: every file under `agents/` must
//! load with no issue at all, warnings included.

use std::path::Path;

#[test]
fn the_example_project_validates_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let loaded = duet_spec::load(&root).expect("the repository root is a project");
    let issues: Vec<String> = loaded.issues.iter().map(ToString::to_string).collect();
    assert!(issues.is_empty(), "{}", issues.join("\n"));
    let p = &loaded.project;
    for name in [
        "assistant",
        "asset_subagent",
        "relay_agent",
        "approval_gate",
        "question_gate",
        "orchestrator",
        "instant_answer",
        "file_answer",
    ] {
        assert!(
            p.agents.contains_key(name),
            "example agent `{name}` is missing"
        );
    }
    // Both syntaxes appear.
    let syntaxes: std::collections::BTreeSet<_> = p
        .agents
        .values()
        .map(|a| format!("{:?}", a.source.syntax))
        .collect();
    assert_eq!(syntaxes.len(), 2, "{syntaxes:?}");
    // The orchestrator composes approval_gate, which requires a parent hook.
    let orchestrator = &p.agents["orchestrator"].def;
    assert!(
        orchestrator
            .sides
            .a
            .subagents()
            .iter()
            .any(|r| r.agent == "approval_gate")
    );
    assert!(!p.agents["approval_gate"].def.parent_hooks.is_empty());
}

#[test]
fn the_agents_folder_itself_is_accepted() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../agents");
    let loaded = duet_spec::load(&dir).expect("agents/ resolves to its project");
    assert!(loaded.is_ok());
    assert_eq!(loaded.project.agents.len(), 8);
}

#[test]
fn codes_doc_matches_the_code_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/validation-codes.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        doc == duet_spec::codes_markdown(),
        "docs/validation-codes.md is stale: run `cargo run -p duet-cli -- validate --codes > docs/validation-codes.md`"
    );
}
