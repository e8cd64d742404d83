//! `duet validate` as a user runs it: exit codes, compiler-style lines, and the JSON shape.

use std::path::{Path, PathBuf};
use std::process::Command;

fn duet(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(args)
        .output()
        .expect("duet runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn case(name: &str) -> String {
    repo()
        .join("tests/definitions")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn the_repository_root_validates_with_exit_0() {
    let root = repo().display().to_string();
    let (code, stdout, _) = duet(&["validate", &root]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.ends_with("0 errors, 0 warnings\n"), "{stdout}");
}

#[test]
fn errors_print_compiler_style_and_exit_1() {
    let (code, stdout, _) = duet(&["validate", &case("shape_yaml")]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("agents/agents/a.yaml:10:10: error[unknown_field]: unknown field `humn`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  = hint: did you mean `human`?"),
        "{stdout}"
    );
}

#[test]
fn a_root_cause_is_listed_before_its_cascade() {
    let (code, stdout, _) = duet(&["validate", &case("indentation_yaml")]);
    assert_eq!(code, 1);
    let at = |what: &str| {
        stdout
            .find(what)
            .unwrap_or_else(|| panic!("no {what}: {stdout}"))
    };
    // `sideB` indented under `sideA` (line 5) comes before the missing `sideB` (line 2) it caused.
    assert!(
        at("error[unknown_field]: unknown field `sideB`") < at("error[legacy_missing_side_b]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("`sideB` is indented under `sideA`"),
        "{stdout}"
    );
}

#[test]
fn warnings_alone_exit_0() {
    let (code, stdout, _) = duet(&["validate", &case("advice_warnings")]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("warning[unbounded_prompt_pair]"),
        "{stdout}"
    );
}

#[test]
fn json_output_has_issues_and_counts() {
    let (code, stdout, _) = duet(&[
        "validate",
        &case("seed7_bare_string_binding_yaml"),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(
        doc["counts"],
        serde_json::json!({ "errors": 2, "warnings": 0 })
    );
    let first = &doc["issues"][0];
    assert_eq!(first["code"], "session_binding_not_object");
    assert_eq!(first["severity"], "error");
    assert_eq!(first["file"], "agents/agents/a.yaml");
    assert_eq!(first["path"], "sideA.sessionStop");
    assert_eq!(
        (first["line"].as_u64(), first["column"].as_u64()),
        (Some(4), Some(16))
    );
    assert_eq!(first["hint"], "write `sessionStop: { name: done }`");
    let keys: Vec<&str> = first
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        [
            "code", "severity", "message", "path", "file", "line", "column", "hint"
        ]
    );
}

#[test]
fn an_unreadable_directory_exits_2() {
    let (code, _, stderr) = duet(&["validate", "/definitely/not/here"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("cannot read /definitely/not/here"),
        "{stderr}"
    );
    let empty = tempdir();
    let (code, _, stderr) = duet(&["validate", &empty.display().to_string()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("is not a Standard Agents project"),
        "{stderr}"
    );
}

#[test]
fn bad_usage_exits_2() {
    let (code, _, stderr) = duet(&["validate", "--format", "xml"]);
    assert_eq!(code, 2, "{stderr}");
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("duet-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn builtins_this_build_lacks_are_warnings_and_errors_with_strict() {
    let unknown = |args: &[&str]| {
        let (code, stdout, _) = duet(args);
        let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
        let found: Vec<(String, String)> = doc["issues"]
            .as_array()
            .expect("issues")
            .iter()
            .filter(|i| i["code"] == "unknown_builtin")
            .map(|i| {
                let field = |k: &str| i[k].as_str().unwrap_or_default().to_owned();
                (field("file"), field("severity"))
            })
            .collect();
        (code, found)
    };
    let dir = case("tools");
    let (code, found) = unknown(&["validate", &dir, "--format", "json"]);
    assert_eq!(code, 1, "the case has errors of its own");
    assert_eq!(
        found,
        [("agents/tools/uses.yaml".to_owned(), "warning".to_owned())]
    );
    let (_, found) = unknown(&["validate", &dir, "--format", "json", "--strict"]);
    assert_eq!(
        found,
        [("agents/tools/uses.yaml".to_owned(), "error".to_owned())]
    );
}

/// A project with an agent whose handler is implemented elsewhere: valid (a warning), refused
/// as an error with `--strict`, and refused before it runs — while its other agents run.
#[test]
fn a_missing_builtin_refuses_only_the_agents_that_need_it() {
    let dir = tempdir().join("elsewhere");
    let _ = std::fs::remove_dir_all(&dir);
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("folders");
        std::fs::write(path, text).expect("write");
    };
    write(
        "agents/agents/local.yaml",
        "name: local\nsideA: { prompt: chat }\nsideB: { human: true }\n",
    );
    write(
        "agents/agents/remote.yaml",
        "name: remote\nsideA: { handler: far_away }\nsideB: { human: true }\n",
    );
    write(
        "agents/agents/gated.yaml",
        "name: gated\nsideA: { prompt: handing_off }\nsideB: { human: true }\n",
    );
    write(
        "agents/agents/guarded.yaml",
        "name: guarded\nexposeAsTool: true\ntoolDescription: d\nsideA: { prompt: chat }\nsideB: { human: true }\nparentHooks:\n  - { hook: guard, reason: Needed. }\n",
    );
    write(
        "agents/handlers/far_away.yaml",
        "description: Runs elsewhere.\n",
    );
    write(
        "agents/hooks/guard.yaml",
        "hook: filter_messages\nid: guard\n",
    );
    write(
        "agents/prompts/chat.yaml",
        "name: chat\ntoolDescription: d\nmodel: m\nprompt: p\n",
    );
    write(
        "agents/prompts/handing_off.yaml",
        "name: handing_off\ntoolDescription: d\nmodel: m\nprompt: p\ntools: [guarded]\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: hi\n",
    );
    let project = dir.display().to_string();
    let (code, stdout, _) = duet(&["validate", &project]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("agents/handlers/far_away.yaml:1:1: warning[unknown_builtin]"),
        "{stdout}"
    );
    assert!(stdout.contains("0 errors, 2 warnings"), "{stdout}");
    let (code, stdout, _) = duet(&["validate", &project, "--strict"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("error[unknown_builtin]"), "{stdout}");

    let db = dir.join("duet.db").display().to_string();
    let run = |agent: &str| {
        duet(&[
            "run",
            agent,
            "-m",
            "hello",
            "--json",
            "--project",
            &project,
            "--db",
            &db,
        ])
    };
    // The agent that needs the missing handler is refused before anything runs.
    let (code, _, stderr) = run("remote");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("error[unknown_builtin]"), "{stderr}");
    assert!(stderr.contains("`remote` needs code"), "{stderr}");
    // So is one whose prompt hands off to an agent requiring a hook this build lacks.
    let (code, _, stderr) = run("gated");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("agents/hooks/guard.yaml"), "{stderr}");
    // An agent that needs none of it runs.
    let (code, stdout, stderr) = duet(&[
        "run",
        "local",
        "--session",
        "s-1",
        "-m",
        "hello",
        "--json",
        "--project",
        &project,
        "--db",
        &db,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"completed\""), "{stdout}");
    // `duet send` checks the thread's agent as it is now defined.
    write(
        "agents/agents/local.yaml",
        "name: local\nsideA: { prompt: chat }\nsideB: { human: true }\nhooks: [guard]\n",
    );
    let send = |key: &str| {
        duet(&[
            "send",
            key,
            "more",
            "--json",
            "--project",
            &project,
            "--db",
            &db,
        ])
    };
    let (code, _, stderr) = send("s-1");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("`local` needs code"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `duet ARGS`, killing it after `limit`: a hang fails the test instead of hanging it.
fn duet_within(args: &[&str], limit: std::time::Duration) -> (i32, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("duet runs");
    let pid = child.id();
    // The process's end is the event waited for; the limit only catches a hang.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match finished.recv_timeout(limit) {
        Ok(Ok(out)) => (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ),
        Ok(Err(e)) => panic!("duet {args:?}: {e}"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("duet {args:?} did not finish within {limit:?}");
        }
    }
}

#[cfg(unix)]
#[test]
fn a_named_pipe_or_a_linked_folder_is_a_warning_not_a_hang() {
    let dir = tempdir().join("not-files");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("agents/agents")).expect("folders");
    std::fs::create_dir_all(dir.join("agents/tools")).expect("folders");
    std::fs::write(
        dir.join("agents/tools/ok.yaml"),
        "description: d\nresult: ok\n",
    )
    .expect("write");
    let made = Command::new("mkfifo")
        .arg(dir.join("agents/agents/pipe.yaml"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::os::unix::fs::symlink(dir.join("agents"), dir.join("agents/tools/loop.yaml"))
        .expect("link");
    let (code, stdout) = duet_within(
        &["validate", &dir.display().to_string()],
        std::time::Duration::from_secs(30),
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("agents/agents/pipe.yaml: warning[not_a_file]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("agents/tools/loop.yaml: warning[not_a_file]"),
        "{stdout}"
    );
    assert!(stdout.contains("1 tools"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A model whose provider's key variable is unset here: a warning naming the variable (never a
/// value), exit 0; set, no warning.
#[test]
fn an_unset_provider_key_is_a_warning() {
    let dir = tempdir().join("provider-keys");
    for (path, text) in [
        (
            "agents/providers/router.yaml",
            "name: router\ntype: openai\nbaseUrl: https://openrouter.ai/api/v1\napiKeyEnv: DUET_TEST_ROUTER_KEY\n",
        ),
        (
            "agents/models/routed.yaml",
            "name: routed\nprovider: router\nmodel: x/y\n",
        ),
    ] {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    let run = |key: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
        cmd.args(["validate", &dir.display().to_string()]);
        match key {
            Some(k) => cmd.env("DUET_TEST_ROUTER_KEY", k),
            None => cmd.env_remove("DUET_TEST_ROUTER_KEY"),
        };
        let out = cmd.output().expect("duet runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, stdout) = run(None);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("warning[provider_key_unset]") && stdout.contains("DUET_TEST_ROUTER_KEY"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 providers: 0 errors, 1 warning"),
        "{stdout}"
    );
    let (code, stdout) = run(Some("or-secret-value"));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.ends_with("0 errors, 0 warnings\n"), "{stdout}");
    assert!(!stdout.contains("or-secret-value"));
}
