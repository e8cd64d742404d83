//! Notification definitions (`agents/notifications/`, issue #31) decode into what the server's
//! router reads: each channel, the defaults, TS as YAML; the repository's own example.

use std::path::Path;

use duet_spec::{NotificationChannel, NotificationDef, Project, SourceFile};

fn load(files: &[(&str, &str)]) -> duet_spec::Loaded {
    let agent = SourceFile {
        path: "agents/agents/deployer.yaml".into(),
        bytes: "name: deployer\nsideA: { handler: h }\nsideB: { human: true, approver: true }\n"
            .into(),
    };
    let handler = SourceFile {
        path: "agents/handlers/h.yaml".into(),
        bytes: "builtin: h\n".into(),
    };
    Project::from_files(
        [agent, handler]
            .into_iter()
            .chain(files.iter().map(|(path, text)| SourceFile {
                path: (*path).into(),
                bytes: (*text).into(),
            })),
    )
}

fn errors(loaded: &duet_spec::Loaded) -> Vec<String> {
    loaded
        .issues
        .iter()
        .filter(|i| i.code.as_str() != "unknown_builtin")
        .map(ToString::to_string)
        .collect()
}

#[test]
fn each_channel_decodes_with_its_fields() {
    let loaded = load(&[
        (
            "agents/notifications/ops-slack.yaml",
            "description: Ops hears of deploys\nevents: [question.parked, question.answered, question.parked]\nagents: [deployer]\nroles: [ops, on-call.eu]\nlinkTtl: 3d\nslack: { channel: C0OPS }\n",
        ),
        (
            "agents/notifications/hook.yaml",
            "webhook: { url: \"https://hooks.example.com/duet?x=1\", secretEnv: OPS_HOOK_SECRET }\n",
        ),
        (
            "agents/notifications/mail.yml",
            "email: { to: [ops@example.com, oncall@example.com, ops@example.com] }\nlinkTtl: 90000\n",
        ),
        (
            "agents/notifications/one.yaml",
            "email: { to: alice@example.com }\nwebhook_unused: null\n",
        ),
    ]);
    // The last file's stray field is reported; it does not make the definition incomplete.
    let issues = errors(&loaded);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert!(issues[0].contains("unknown_field"), "{issues:#?}");
    let n = &loaded.project.notifications;
    assert_eq!(
        n["ops-slack"].def,
        NotificationDef {
            name: "ops-slack".into(),
            description: Some("Ops hears of deploys".into()),
            events: vec!["question.parked".into(), "question.answered".into()],
            agents: vec!["deployer".into()],
            roles: vec!["ops".into(), "on-call.eu".into()],
            link_ttl_ms: 3 * 86_400_000,
            channel: NotificationChannel::Slack {
                channel: "C0OPS".into()
            },
        }
    );
    let hook = &n["hook"].def;
    assert_eq!(
        hook.channel,
        NotificationChannel::Webhook {
            url: "https://hooks.example.com/duet?x=1".into(),
            secret_env: Some("OPS_HOOK_SECRET".into()),
        }
    );
    // Absent lists are "every": no events, agents or roles; the default link lifetime.
    assert!(hook.events.is_empty() && hook.agents.is_empty() && hook.roles.is_empty());
    assert_eq!(hook.link_ttl_ms, NotificationDef::DEFAULT_LINK_TTL_MS);
    assert_eq!(hook.description, None);
    assert_eq!(
        n["mail"].def.channel,
        NotificationChannel::Email {
            to: vec!["ops@example.com".into(), "oncall@example.com".into()]
        }
    );
    assert_eq!(n["mail"].def.link_ttl_ms, 90_000);
    assert_eq!(
        n["one"].def.channel,
        NotificationChannel::Email {
            to: vec!["alice@example.com".into()]
        }
    );
}

#[test]
fn a_ts_definition_reads_as_its_yaml() {
    let yaml = load(&[(
        "agents/notifications/pager.yaml",
        "description: Pages on-call\nevents: [thread.failed]\nroles: [oncall]\nlinkTtl: 48h\nwebhook: { url: \"http://127.0.0.1:9/pager\" }\n",
    )]);
    let ts = load(&[(
        "agents/notifications/pager.ts",
        "import { defineNotification } from '@standardagents/spec';\n\nexport default defineNotification({\n  description: 'Pages on-call',\n  events: ['thread.failed'],\n  roles: ['oncall'],\n  linkTtl: '48h',\n  webhook: { url: 'http://127.0.0.1:9/pager' },\n});\n",
    )]);
    assert!(errors(&yaml).is_empty(), "{:#?}", errors(&yaml));
    assert!(errors(&ts).is_empty(), "{:#?}", errors(&ts));
    assert_eq!(
        yaml.project.notifications["pager"].def,
        ts.project.notifications["pager"].def
    );
}

#[test]
fn a_broken_definition_is_not_loaded_but_still_declared() {
    let loaded = load(&[
        (
            "agents/notifications/both.yaml",
            "slack: { channel: C1 }\nemail: { to: [a@b] }\n",
        ),
        (
            "agents/notifications/both.ts",
            "export default defineNotification({ slack: { channel: 'C1' } });\n",
        ),
        (
            "agents/notifications/ttl.yaml",
            "linkTtl: 91d\nslack: { channel: C1 }\n",
        ),
    ]);
    let codes: Vec<&str> = loaded.issues.iter().map(|i| i.code.as_str()).collect();
    assert!(codes.contains(&"duplicate_name"), "{codes:?}");
    assert!(codes.contains(&"link_ttl"), "{codes:?}");
    // The first `both` read (the `.ts`, by path order) is the one kept; `ttl` is incomplete.
    let names: Vec<&str> = loaded
        .project
        .notifications
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["both"]);
    assert!(!loaded.is_ok());
}

#[test]
fn the_repository_example_is_a_signed_webhook_on_approval_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let loaded = duet_spec::load(&root).expect("the repository root is a project");
    let def = &loaded.project.notifications["ops-webhook"].def;
    assert_eq!(def.agents, ["approval_gate"]);
    assert!(def.events.iter().all(|e| e.starts_with("question.")));
    assert_eq!(
        def.channel,
        NotificationChannel::Webhook {
            url: "http://127.0.0.1:9/duet".into(),
            secret_env: Some("DUET_OPS_WEBHOOK_SECRET".into()),
        }
    );
}
