//! `examples/typescript/`, a project written as the Standard Agents docs show it (zod schemas, a
//! provider factory, a template prompt, imported and spread consts, a tool's `execute`, hooks, a
//! TS handler, a thread endpoint), as a user runs it: `duet validate` exits 0 with only the
//! warning the README lists, `duet run` on its scripted model has zod check the tools' arguments
//! (its messages reach the model; defaults and coercions apply) and runs `lookup_order`'s
//! `execute` in the embedded code host, and without zod installed validation stops at each
//! import with `npm install zod`. (`project_code.rs` runs it over `duet serve`.)
//!
//! zod comes from `.ci/node/node_modules` (`scripts/test-servers` installs it) through
//! `NODE_PATH`, as a user without a `node_modules` of their own would run it.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::{Scratch, repo};

fn example() -> PathBuf {
    repo().join("examples/typescript")
}

/// The folder `NODE_PATH` names: it must hold zod.
fn node_modules() -> PathBuf {
    let dir = repo().join(".ci/node/node_modules");
    assert!(
        dir.join("zod/package.json").is_file(),
        "zod is not installed in {}: run scripts/test-servers",
        dir.display()
    );
    dir
}

/// Runs `duet ARGS` with no terminal, `NODE_PATH` set to `node_path` (or unset), and none of
/// the OpenAI variables (so the warnings do not depend on the caller's environment).
fn duet(args: &[&str], node_path: Option<&Path>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args)
        .env_remove("NODE_PATH")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DUET_DATABASE_URL")
        .env_remove("ORDERS_URL")
        .stdin(Stdio::null());
    if let Some(path) = node_path {
        cmd.env("NODE_PATH", path);
    }
    let out = cmd.output().expect("duet runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One issue `duet validate` printed: `FILE:LINE:COL: SEVERITY[CODE]: …` and its hint lines.
#[derive(Debug)]
struct Printed {
    file: String,
    line: u32,
    severity: String,
    code: String,
    hints: Vec<String>,
}

fn printed(stdout: &str) -> Vec<Printed> {
    let mut issues: Vec<Printed> = Vec::new();
    for line in stdout.lines() {
        if let Some(hint) = line.strip_prefix("  = hint: ") {
            if let Some(last) = issues.last_mut() {
                last.hints.push(hint.to_owned());
            }
            continue;
        }
        let mut parts = line.splitn(4, ':');
        let (Some(file), Some(l), Some(_col), Some(rest)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Ok(l) = l.parse() else { continue };
        let Some((severity, rest)) = rest.trim_start().split_once('[') else {
            continue;
        };
        let Some((code, _)) = rest.split_once(']') else {
            continue;
        };
        issues.push(Printed {
            file: file.to_owned(),
            line: l,
            severity: severity.to_owned(),
            code: code.to_owned(),
            hints: Vec::new(),
        });
    }
    issues
}

/// What the example's README says `duet validate` warns about: (file, code). Its functions
/// run (a code host), so only the OpenAI model's unset key is left.
const EXPECTED_WARNINGS: &[(&str, &str)] = &[("agents/models/fast.ts", "provider_key_unset")];

#[test]
fn the_docs_shaped_project_validates_with_only_the_expected_warnings() {
    let dir = example().display().to_string();
    let (code, stdout, stderr) = duet(&["validate", &dir], Some(&node_modules()));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let issues = printed(&stdout);
    let got: BTreeSet<(&str, &str, &str)> = issues
        .iter()
        .map(|i| (i.file.as_str(), i.severity.as_str(), i.code.as_str()))
        .collect();
    let want: BTreeSet<(&str, &str, &str)> = EXPECTED_WARNINGS
        .iter()
        .map(|&(file, code)| (file, "warning", code))
        .collect();
    assert_eq!(got, want, "{stdout}");
    assert_eq!(issues.len(), EXPECTED_WARNINGS.len(), "{stdout}");
    assert!(
        stdout.ends_with(
            "2 agents, 1 prompts, 2 tools, 2 hooks, 1 handlers, 2 models, 0 providers: \
             0 errors, 1 warning\n"
        ),
        "{stdout}"
    );
}

/// Every file of the example's `agents/` (one folder a kind, and the files directly under it:
/// `code.yaml`): (path from the example, text).
fn agents_files() -> Vec<(String, String)> {
    let rel = |path: &Path| {
        path.strip_prefix(example())
            .expect("inside the example")
            .display()
            .to_string()
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(example().join("agents"))
        .expect("agents/")
        .flatten()
    {
        let path = entry.path();
        if path.is_file() {
            let text = std::fs::read_to_string(&path).expect("a file");
            found.push((rel(&path), text));
            continue;
        }
        for file in std::fs::read_dir(&path).expect("a folder").flatten() {
            let text = std::fs::read_to_string(file.path()).expect("a file");
            found.push((rel(&file.path()), text));
        }
    }
    found.sort();
    found
}

/// The example's files that import zod, and the line of that import (1-based).
fn zod_imports() -> Vec<(String, u32)> {
    agents_files()
        .into_iter()
        .filter_map(|(rel, text)| {
            let at = text.lines().position(|l| l.contains("from 'zod'"))?;
            Some((rel, u32::try_from(at + 1).expect("a line number")))
        })
        .collect()
}

#[test]
fn without_zod_each_import_of_it_is_an_error_that_says_how_to_install_it() {
    // A copy in a scratch folder, so that a `node_modules` installed in the example (as its
    // README suggests for a project of your own) does not hide zod's absence.
    let copy = Scratch::new("ts-example-no-zod");
    for (rel, text) in agents_files() {
        copy.write(&rel, &text);
    }
    let imports = zod_imports();
    assert_eq!(imports.len(), 4, "prompt, two tools, effect: {imports:?}");

    let dir = copy.root().display().to_string();
    let (code, stdout, stderr) = duet(&["validate", &dir], None);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let issues = printed(&stdout);
    for (file, line) in &imports {
        let issue = issues
            .iter()
            .find(|i| &i.file == file && i.code == "ts_package_missing")
            .unwrap_or_else(|| panic!("no ts_package_missing in {file}: {stdout}"));
        assert_eq!(
            (issue.line, issue.severity.as_str()),
            (*line, "error"),
            "{stdout}"
        );
        assert!(
            issue.hints.iter().any(|h| h.contains("`npm install zod`")),
            "{issue:?}"
        );
    }
    let missing = issues
        .iter()
        .filter(|i| i.code == "ts_package_missing")
        .count();
    assert_eq!(missing, imports.len(), "{stdout}");
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
}

/// Each tool call the scripted model makes, and what the tool answered: (tool, args, isError,
/// the content, or a part of it).
const CALLS: &[(&str, &str, bool, &str)] = &[
    // zod's own check of a wrong type, at the property's JSON pointer.
    (
        "lookup_order",
        r#"{"orderId":42}"#,
        true,
        "Invalid arguments for `lookup_order`: /orderId: Invalid input: expected string, \
         received number",
    ),
    // Good arguments pass zod and its `execute` runs (no `ORDERS_URL`: no fetch).
    (
        "lookup_order",
        r#"{"orderId":"A-1001"}"#,
        false,
        "Order A-1001 is packed.",
    ),
    // `.default(3)` fills the missing `days`.
    (
        "estimate_delivery",
        r#"{"orderId":"A-1001","carrier":"ups"}"#,
        false,
        "Order A-1001 ships with ups within 3 days.",
    ),
    // `z.coerce.number()` turns "05" into 5.
    (
        "estimate_delivery",
        r#"{"orderId":"A-1001","carrier":"dhl","days":"05"}"#,
        false,
        "Order A-1001 ships with dhl within 5 days.",
    ),
    // The `.refine()` message, at its property.
    (
        "estimate_delivery",
        r#"{"orderId":"A-1001","carrier":"pigeon"}"#,
        true,
        "Invalid arguments for `estimate_delivery`: /carrier: carrier must be ups, dhl or post",
    ),
];

#[test]
fn a_run_on_the_scripted_model_has_zod_check_each_tool_call() {
    let scratch = Scratch::new("ts-example-run");
    std::fs::create_dir_all(scratch.root()).expect("a scratch folder");
    let db = scratch.root().join("duet.db").display().to_string();
    let project = example().display().to_string();
    let (code, stdout, stderr) = duet(
        &[
            "run",
            "support_agent",
            "--project",
            &project,
            "--db",
            &db,
            "--session",
            "order-1",
            "-m",
            "Where is my order A-1001?",
            "--json",
        ],
        Some(&node_modules()),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let events: Vec<serde_json::Value> = stdout.lines().map(json).collect();
    let started: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .collect();
    let ended: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_ended")
        .collect();
    assert_eq!(started.len(), CALLS.len(), "{stdout}");
    assert_eq!(ended.len(), CALLS.len(), "{stdout}");
    for ((tool, args, is_error, content), (start, end)) in
        CALLS.iter().zip(started.iter().zip(&ended))
    {
        assert_eq!(start["name"], *tool, "{stdout}");
        assert_eq!(start["args"], json(args), "{stdout}");
        assert_eq!(end["id"], start["id"], "{stdout}");
        assert_eq!(end["isError"], *is_error, "{tool} {args}: {end}");
        assert_eq!(end["content"], *content, "{tool} {args}: {end}");
    }
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(text, "Your order A-1001 ships with UPS within 3 days.");
    let last = events.last().expect("events");
    assert_eq!(last["type"], "completed", "{stdout}");
    assert_eq!(last["data"]["thread"], "order-1");
    assert_eq!(last["data"]["status"], "awaiting_human", "{stdout}");
}
