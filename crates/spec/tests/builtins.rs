//! `builtin:` names are checked against what a build of duet registers: across the project as
//! warnings, and as errors for what running one agent needs (its composition closure).

use std::collections::BTreeSet;

use duet_spec::{Builtins, Code, Project, Severity, SourceFile};

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
        file(
            "agents/effects/nudge.yaml",
            "description: Nudge.\nbuiltin: queue_mesage\n",
        ),
    ]);
    assert!(loaded.is_ok(), "{:?}", loaded.issues);
    let builtins = Builtins {
        tools: ["echo".to_owned()].into(),
        handlers: ["relay".to_owned()].into(),
        hooks: ["audit".to_owned()].into(),
        effects: ["queue_message".to_owned()].into(),
    };
    let issues = loaded.project.check_builtins(&builtins);
    assert!(issues.iter().all(|i| i.severity == Severity::Warning));
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
            (
                Code::UnknownBuiltin,
                "agents/effects/nudge.yaml",
                Some(2),
                Some("did you mean `queue_message`?")
            ),
        ]
    );
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// `parent` composes `child` by relationship and hands off to `gate`; both require a parent
/// hook. `lonely` is unrelated.
fn composed() -> Project {
    let loaded = Project::from_files([
        file(
            "agents/agents/parent.yaml",
            "name: parent\nhooks: [agent_hook]\nsideA:\n  prompt: chat\n  subagents:\n    - { agent: child }\nsideB: { human: true }\n",
        ),
        file(
            "agents/agents/child.yaml",
            "name: child\nexposeAsTool: true\ntoolDescription: d\nsideA: { handler: worker }\nsideB: { human: true }\nparentHooks:\n  - { hook: child_audit, reason: Audit. }\n",
        ),
        file(
            "agents/agents/gate.yaml",
            "name: gate\nexposeAsTool: true\ntoolDescription: d\nsideA: { prompt: gate_prompt }\nsideB: { human: true }\nparentHooks:\n  - { hook: gate_audit, reason: Audit. }\n",
        ),
        file(
            "agents/agents/hidden.yaml",
            "name: hidden\nsideA: { handler: unbuilt }\nsideB: { human: true }\n",
        ),
        file(
            "agents/agents/lonely.yaml",
            "name: lonely\nhooks: [lonely_hook]\nsideA: { handler: unbuilt }\nsideB: { human: true }\n",
        ),
        file(
            "agents/prompts/chat.yaml",
            "name: chat\ntoolDescription: d\nmodel: m\nprompt: p\nhooks: [prompt_hook]\ntools: [lookup, gate, sub]\n",
        ),
        file(
            "agents/prompts/sub.yaml",
            "name: sub\ntoolDescription: d\nmodel: m\nprompt: p\ntools: [clock]\n",
        ),
        file(
            "agents/prompts/gate_prompt.yaml",
            "name: gate_prompt\ntoolDescription: d\nmodel: m\nprompt: p\n",
        ),
        file(
            "agents/models/m.yaml",
            "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: hi\n",
        ),
        file(
            "agents/tools/lookup.yaml",
            "description: d\nbuiltin: lookup_impl\nuses: [helper]\n",
        ),
        file(
            "agents/tools/helper.yaml",
            "description: d\nbuiltin: helper_impl\n",
        ),
        file(
            "agents/tools/clock.yaml",
            "description: d\nbuiltin: clock_impl\n",
        ),
        file(
            "agents/tools/unused.yaml",
            "description: d\nbuiltin: unused_impl\n",
        ),
        file("agents/handlers/worker.yaml", "description: d\n"),
        file("agents/handlers/unbuilt.yaml", "description: d\n"),
        file(
            "agents/hooks/agent_hook.yaml",
            "hook: filter_messages\nid: agent_hook\n",
        ),
        file(
            "agents/hooks/prompt_hook.yaml",
            "hook: filter_messages\nid: prompt_hook\n",
        ),
        file(
            "agents/hooks/child_audit.yaml",
            "hook: after_create_message\nid: child_audit\n",
        ),
        file(
            "agents/hooks/gate_audit.yaml",
            "hook: after_create_message\nid: gate_audit\n",
        ),
        file(
            "agents/hooks/lonely_hook.yaml",
            "hook: filter_messages\nid: lonely_hook\n",
        ),
    ]);
    assert!(loaded.is_ok(), "{:#?}", loaded.issues);
    loaded.project
}

#[test]
fn handoff_targets_are_exposed_agents_in_the_tools_without_a_relationship() {
    let p = composed();
    let parent = &p.agents["parent"].def;
    let chat = &p.prompts["chat"].def;
    let targets: Vec<&str> = p
        .handoff_targets(parent, chat)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    // `lookup` is a tool, `sub` a prompt.
    assert_eq!(targets, ["gate"]);
}

#[test]
fn what_an_agent_needs_is_its_composition_closure() {
    let p = composed();
    let needed = p.builtins_needed("parent");
    assert_eq!(
        needed,
        Builtins {
            tools: names(&["clock_impl", "helper_impl", "lookup_impl"]),
            handlers: names(&["worker"]),
            hooks: names(&["agent_hook", "child_audit", "gate_audit", "prompt_hook"]),
            ..Builtins::default()
        }
    );
    // A child alone needs its own code, not its parents' (nor its own parent hooks).
    assert_eq!(
        p.builtins_needed("child"),
        Builtins {
            handlers: names(&["worker"]),
            ..Builtins::default()
        }
    );
    assert_eq!(p.builtins_needed("no_such_agent"), Builtins::default());
}

#[test]
fn an_agent_is_checked_for_what_it_composes_and_nothing_else() {
    let p = composed();
    // Everything `parent` needs is registered except the handoff target's required hook.
    let registered = Builtins {
        tools: names(&["clock_impl", "helper_impl", "lookup_impl"]),
        handlers: names(&["worker"]),
        hooks: names(&["agent_hook", "child_audit", "prompt_hook"]),
        ..Builtins::default()
    };
    let issues = p.check_builtins_for("parent", &registered);
    let got: Vec<(&str, Code, Severity)> = issues
        .iter()
        .map(|i| (i.file.as_deref().unwrap_or(""), i.code, i.severity))
        .collect();
    assert_eq!(
        got,
        [(
            "agents/hooks/gate_audit.yaml",
            Code::UnknownBuiltin,
            Severity::Error
        )]
    );
    // The project as a whole lacks more (`unbuilt`, `lonely_hook`, `unused_impl`), as warnings.
    let all = p.check_builtins(&registered);
    assert_eq!(all.len(), 4, "{all:#?}");
    assert!(all.iter().all(|i| i.severity == Severity::Warning));
    // `lonely` needs what is missing; `gate` alone needs nothing missing.
    assert_eq!(p.check_builtins_for("lonely", &registered).len(), 2);
    assert!(p.check_builtins_for("gate", &registered).is_empty());
}
