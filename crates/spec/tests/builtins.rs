//! `builtin:` names are checked against what a build of duet registers.

use duet_spec::{Builtins, Code, Project, SourceFile};

fn file(path: &str, text: &str) -> SourceFile {
    SourceFile {
        path: path.to_owned(),
        bytes: text.as_bytes().to_vec(),
    }
}

#[test]
fn unregistered_builtins_are_reported_with_the_registered_ones() {
    let loaded = Project::from_files([
        file(
            "agents/tools/echo_back.yaml",
            "description: Echo.\nbuiltin: echo\n",
        ),
        file(
            "agents/tools/clock.yaml",
            "description: Time.\nbuiltin: clock\n",
        ),
        file("agents/handlers/relay_pipe.yaml", "description: Relay.\n"),
        file(
            "agents/hooks/audit.yaml",
            "hook: filter_messages\nid: audit\nbuiltin: audti\n",
        ),
    ]);
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    let builtins = Builtins {
        tools: ["echo".to_owned()].into(),
        handlers: ["relay".to_owned()].into(),
        hooks: ["audit".to_owned()].into(),
    };
    let issues = loaded.project.check_builtins(&builtins);
    let got: Vec<(Code, &str, Option<u32>, Option<&str>)> = issues
        .iter()
        .map(|i| {
            (
                i.code,
                i.file.as_deref().unwrap_or(""),
                i.line,
                i.hint.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Code::UnknownBuiltin,
                "agents/tools/clock.yaml",
                Some(2),
                Some("registered tools: echo")
            ),
            (
                Code::UnknownBuiltin,
                "agents/handlers/relay_pipe.yaml",
                Some(1),
                Some("registered handlers: relay")
            ),
            (
                Code::UnknownBuiltin,
                "agents/hooks/audit.yaml",
                Some(3),
                Some("did you mean `audit`?")
            ),
        ]
    );
}
