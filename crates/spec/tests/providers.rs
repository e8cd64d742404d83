//! Provider definitions resolved against the built-in ones, and the `provider_key_unset`
//! warning, which needs an environment (handed in: loading never reads one).

use duet_spec::{Project, ProviderType, SourceFile};

fn file(path: &str, text: &str) -> SourceFile {
    SourceFile {
        path: path.into(),
        bytes: text.into(),
    }
}

fn project() -> duet_spec::Loaded {
    Project::from_files([
        file(
            "agents/providers/router.yaml",
            "name: router\ntype: openai\nbaseUrl: https://openrouter.ai/api/v1\napiKeyEnv: OPENROUTER_API_KEY\n",
        ),
        file(
            "agents/providers/ollama.yaml",
            "name: ollama\ntype: openai\nbaseUrl: http://localhost:11434/v1\n",
        ),
        file(
            "agents/providers/anthropic.yaml",
            "name: anthropic\ntype: anthropic\napiKeyEnv: TEAM_ANTHROPIC_KEY\ntimeoutMs: 60000\n",
        ),
        file(
            "agents/models/a.yaml",
            "name: a\nprovider: openai\nmodel: gpt-4o\n",
        ),
        file(
            "agents/models/b.yaml",
            "name: b\nprovider: router\nmodel: x/y\n",
        ),
        file(
            "agents/models/c.yaml",
            "name: c\nprovider: ollama\nmodel: qwen3\n",
        ),
        file(
            "agents/models/d.yaml",
            "name: d\nprovider: anthropic\nmodel: claude\n",
        ),
        file(
            "agents/models/e.yaml",
            "name: e\nprovider: scripted\nmodel: s\nscript: [{ text: hi }]\n",
        ),
    ])
}

#[test]
fn a_defined_provider_resolves_and_replaces_a_builtin_of_its_name() {
    let loaded = project();
    assert!(loaded.issues.is_empty(), "{:?}", loaded.issues);
    let p = &loaded.project;
    let openai = p.provider("openai").expect("built in");
    assert_eq!(openai.provider_type, ProviderType::Openai);
    assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(openai.base_url, None);
    let anthropic = p.provider("anthropic").expect("defined");
    assert_eq!(anthropic.api_key_env.as_deref(), Some("TEAM_ANTHROPIC_KEY"));
    assert_eq!(anthropic.timeout_ms, Some(60_000));
    assert_eq!(p.provider("ollama").and_then(|o| o.api_key_env), None);
    assert!(p.provider("scripted").is_none());
    assert!(p.provider("nope").is_none());
}

#[test]
fn an_unset_key_variable_is_a_warning_at_each_model_that_needs_it() {
    let loaded = project();
    let set = ["TEAM_ANTHROPIC_KEY"];
    let issues = loaded.project.check_provider_keys(|var| {
        set.contains(&var)
            .then(|| "sk-a-real-length-key".to_owned())
    });
    let lines: Vec<String> = issues
        .iter()
        .map(|i| {
            format!(
                "{} {} {}:{}",
                i.code,
                i.file.as_deref().unwrap_or("-"),
                i.line.unwrap_or(0),
                i.column.unwrap_or(0)
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            "provider_key_unset agents/models/a.yaml 2:11",
            "provider_key_unset agents/models/b.yaml 2:11",
        ]
    );
    assert!(
        issues
            .iter()
            .all(|i| i.severity == duet_spec::Severity::Warning)
    );
    assert!(
        issues[0].message.contains("OPENAI_API_KEY"),
        "{}",
        issues[0]
    );
    assert!(
        issues[1].message.contains("OPENROUTER_API_KEY"),
        "{}",
        issues[1]
    );
    assert!(
        loaded
            .project
            .check_provider_keys(|_| Some("sk-a-real-length-key".to_owned()))
            .is_empty(),
        "every key set: no warning"
    );
}

#[test]
fn a_key_too_short_to_be_one_is_a_warning() {
    let loaded = project();
    for (key, warned) in [("k", true), ("1234567", true), ("12345678", false)] {
        let issues = loaded.project.check_provider_keys(|_| Some(key.to_owned()));
        // Every model whose provider reads a key is warned of, and nothing else.
        assert_eq!(
            issues.len(),
            if warned { 3 } else { 0 },
            "{key:?}: {issues:?}"
        );
        assert!(
            issues
                .iter()
                .all(|i| i.code == duet_spec::Code::ProviderKeyShort
                    && i.severity == duet_spec::Severity::Warning),
            "{issues:?}"
        );
        assert!(
            issues
                .iter()
                .all(|i| !i.message.contains(key) || key.len() == 1),
            "the key itself is not shown: {issues:?}"
        );
    }
}

#[test]
fn a_pasted_key_is_never_repeated_in_an_issue() {
    let loaded = Project::from_files([file(
        "agents/providers/p.yaml",
        "name: p\ntype: openai\napiKeyEnv: sk-proj-abc123-secret\nheaders:\n  Authorization: Bearer sk-proj-xyz-secret\n",
    )]);
    assert_eq!(loaded.issues.len(), 2, "{:?}", loaded.issues);
    for issue in &loaded.issues {
        let text = issue.to_string();
        assert!(!text.contains("secret"), "{text}");
    }
}

#[test]
fn a_provider_written_in_its_model_is_the_models_own() {
    let own = "name: own\nprovider:\n  type: openai\n  baseUrl: http://127.0.0.1:1/v1\n  apiKeyEnv: MY_KEY\nmodel: qwen3\n";
    let loaded = Project::from_files([file("agents/models/own.yaml", own)]);
    assert!(loaded.issues.is_empty(), "{:?}", loaded.issues);
    let p = &loaded.project;
    assert_eq!(
        p.models.get("own").map(|m| m.def.provider.as_str()),
        Some("model:own")
    );
    let provider = p.provider("model:own").expect("the model's own");
    assert_eq!(provider.base_url.as_deref(), Some("http://127.0.0.1:1/v1"));
    assert_eq!(provider.api_key_env.as_deref(), Some("MY_KEY"));
    // A second model of the name is one `duplicate_name`, not one more for its provider.
    let loaded = Project::from_files([
        file("agents/models/own.yaml", own),
        file("agents/models/own_again.yaml", own),
    ]);
    let codes: Vec<_> = loaded.issues.iter().map(|i| i.code).collect();
    assert_eq!(
        codes,
        [duet_spec::Code::DuplicateName],
        "{:?}",
        loaded.issues
    );
}

#[test]
fn a_models_own_provider_without_key_or_server_takes_its_types_key() {
    // `openai({ timeout: 5000 })`: the factory would read OPENAI_API_KEY, as the built-in does.
    let own = "name: own\nprovider: { type: openai, timeoutMs: 5000 }\nmodel: m\n";
    let loaded = Project::from_files([file("agents/models/own.yaml", own)]);
    let provider = loaded
        .project
        .provider("model:own")
        .expect("the model's own");
    assert_eq!(provider.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(provider.timeout_ms, Some(5000));
    // A local server named without a key keeps none.
    let local =
        "name: own\nprovider: { type: openai, baseUrl: 'http://127.0.0.1:1/v1' }\nmodel: m\n";
    let loaded = Project::from_files([file("agents/models/own.yaml", local)]);
    let provider = loaded
        .project
        .provider("model:own")
        .expect("the model's own");
    assert_eq!(provider.api_key_env, None);
    // Its problems are placed under `provider.`.
    let bad = "name: own\nprovider: { type: openai, baseUrl: 'ftp://x' }\nmodel: m\n";
    let loaded = Project::from_files([file("agents/models/own.yaml", bad)]);
    let paths: Vec<_> = loaded.issues.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["provider.baseUrl"], "{:?}", loaded.issues);
}
