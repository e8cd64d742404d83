//! `duet run`, `duet send` and `duet threads` as a user (or a script) runs them: JSON events,
//! exit codes, and a parked thread resumed by a second process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Duet {
    db: PathBuf,
    project: PathBuf,
}

impl Duet {
    fn new() -> Self {
        let db = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cli-{}.db", uuid::Uuid::now_v7().simple()));
        Duet {
            db,
            project: repo(),
        }
    }

    /// Runs `duet ARGS --project REPO --db DB` with no terminal; returns (exit code, stdout lines).
    fn run(&self, args: &[&str]) -> (i32, Vec<String>, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_duet"))
            .args(args)
            .arg("--project")
            .arg(&self.project)
            .arg("--db")
            .arg(&self.db)
            .env_remove("DUET_DATABASE_URL")
            .stdin(Stdio::null())
            .output()
            .expect("duet runs");
        let stdout = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        (
            out.status.code().unwrap_or(-1),
            stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
}

#[test]
fn an_approval_parks_in_one_process_and_finishes_in_another() {
    let duet = Duet::new();
    let (code, lines, err) = duet.run(&[
        "run",
        "question_gate",
        "--session",
        "gate-1",
        "-m",
        "Rotate the keys?",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let events: Vec<serde_json::Value> = lines.iter().map(|l| json(l)).collect();
    assert_eq!(events[0]["type"], "text");
    let last = events.last().expect("events");
    assert_eq!(last["type"], "completed");
    assert_eq!(last["data"]["status"], "awaiting_human");
    assert_eq!(last["data"]["thread"], "gate-1");

    let (code, lines, err) = duet.run(&["send", "gate-1", "Yes, approved.", "--json"]);
    assert_eq!(code, 0, "{err}");
    let events: Vec<serde_json::Value> = lines.iter().map(|l| json(l)).collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "thinking",
            "tool_started",
            "tool_ended",
            "usage",
            "completed"
        ]
    );
    assert_eq!(
        events[1]["args"],
        serde_json::json!({"decision": "approved"})
    );
    assert_eq!(events[2]["isError"], false);
    let data = &events[4]["data"];
    assert_eq!(
        (
            &data["status"],
            &data["stopReason"],
            &data["result"],
            &data["session"]
        ),
        (
            &serde_json::json!("idle"),
            &serde_json::json!("session_stop"),
            &serde_json::json!("approved"),
            &serde_json::json!(1)
        )
    );

    let (code, lines, _) = duet.run(&["threads", "show", "gate-1", "--json"]);
    assert_eq!(code, 0);
    let doc = json(&lines[0]);
    for key in [
        "id",
        "session",
        "agent",
        "status",
        "stopReason",
        "result",
        "turns",
        "messages",
    ] {
        assert!(doc.get(key).is_some(), "threads show lacks `{key}`: {doc}");
    }
    assert_eq!(doc["agent"], "question_gate");
    let roles: Vec<(&str, &str)> = doc["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or(""),
                m["side"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("user", "b"),
            ("assistant", "a"),
            ("user", "b"),
            ("assistant", "a"),
            ("tool", "a")
        ]
    );
    let call = &doc["messages"][3]["toolCalls"][0];
    assert_eq!(call["name"], "record_decision");
    assert_eq!(doc["messages"][4]["toolCallId"], call["id"]);

    let (code, lines, _) = duet.run(&["threads", "--status", "idle", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json(&lines[0]).as_array().map(Vec::len), Some(1));
}

/// `threads show` lists a parent's children: key, instance name, relationship, agent, status and
/// the arguments it was started with, and which call of a `waiting` parent waits for it; the
/// child answered from another process finishes it.
#[test]
fn threads_show_lists_a_parents_children() {
    let duet = Duet::new();
    let (code, _, err) = duet.run(&[
        "run",
        "orchestrator",
        "--session",
        "o",
        "-m",
        "Please rotate the production API keys tonight.",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    // The orchestrator's blocking call waits for its child, which waits for a person's
    // decision on its proposal.
    let (code, lines, _) = duet.run(&["threads", "--status", "waiting", "--json"]);
    assert_eq!(code, 0);
    let waiting = json(&lines[0]);
    let keys: Vec<&str> = waiting
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(keys, ["o", "o/approval-1"], "{waiting}");
    let (code, lines, _) = duet.run(&["threads", "show", "o"]);
    assert_eq!(code, 0);
    assert!(
        lines.contains(
            &"  child o/approval-1 \"rotate-keys\" (approval, approval_gate): waiting (call call_4_0 waits for it)".to_owned()
        ),
        "{lines:#?}"
    );
    // A message to the waiting orchestrator waits in its queue, and shows there.
    let (code, _, err) = duet.run(&["send", "o", "Any news?", "--queue", "--json"]);
    assert_eq!(code, 0, "{err}");
    let (code, lines, _) = duet.run(&["threads", "show", "o", "--json"]);
    assert_eq!(code, 0);
    let doc = json(&lines[0]);
    assert_eq!(doc["queued"][0]["content"], "Any news?", "{doc}");
    assert_eq!(
        doc["run"],
        serde_json::Value::Null,
        "nothing runs while it waits: {doc}"
    );
    let (code, lines, _) = duet.run(&["threads", "show", "o"]);
    assert_eq!(code, 0);
    assert!(
        lines.iter().any(|l| l.contains("Any news? (queued)")),
        "{lines:#?}"
    );
    // The child's proposal, as `threads show` names it, decided from another process.
    let (code, lines, _) = duet.run(&["threads", "show", "o/approval-1"]);
    assert_eq!(code, 0);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("approval o/approval-1:1:5 waits: proceed(")),
        "{lines:#?}"
    );
    let (code, sent, err) = duet.run(&["approve", "o/approval-1:1:5", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&sent[0])["status"], "idle", "{sent:#?}");
    // The decision woke the orchestrator: its continuation follows the child's outcome.
    let (code, lines, _) = duet.run(&["threads", "show", "o", "--json"]);
    assert_eq!(code, 0);
    let doc = json(&lines[0]);
    let said: Vec<&str> = doc["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["content"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        said.last().copied(),
        Some("The approver said yes: the key rotation is approved for tonight."),
        "{doc}"
    );
    assert!(
        said.iter()
            .any(|s| s.starts_with("approved: rotate the production API keys tonight")),
        "the gate's outcome is the call's result: {doc}"
    );
    assert_eq!(
        doc["children"],
        serde_json::json!([{
            "id": "o/approval-1",
            "name": "rotate-keys",
            "relationship": "approval",
            "agent": "approval_gate",
            "status": "idle",
            "statusText": null,
            "awaitedBy": null,
            "arguments": {"action": "rotate the production API keys tonight"},
        }])
    );
    let (code, lines, _) = duet.run(&["threads", "show", "o"]);
    assert_eq!(code, 0);
    assert!(
        lines.contains(
            &"  child o/approval-1 \"rotate-keys\" (approval, approval_gate): idle".to_owned()
        ),
        "{lines:#?}"
    );
}

#[test]
fn a_failed_step_exits_1_with_a_failed_event() {
    let duet = Duet::new();
    for (i, expected) in [(0, 0), (1, 0), (2, 1)] {
        let (code, lines, err) = duet.run(&[
            "run",
            "assistant",
            "--session",
            "a",
            "-m",
            &format!("message {i}"),
            "--json",
        ]);
        assert_eq!(code, expected, "run {i}: {err}");
        if expected == 1 {
            let last = json(lines.last().expect("events"));
            assert_eq!(last["type"], "failed");
            assert_eq!(last["code"], "step_error");
            assert!(
                last["details"]
                    .as_str()
                    .unwrap_or("")
                    .contains("script exhausted")
            );
        }
    }
}

#[test]
fn bad_usage_exits_2() {
    let duet = Duet::new();
    let (code, _, err) = duet.run(&["run", "no_such_agent", "-m", "hi"]);
    assert_eq!(code, 2);
    assert!(err.contains("no agent `no_such_agent`"), "{err}");
    let (code, _, err) = duet.run(&["send", "no-such-thread", "hi"]);
    assert_eq!(code, 2);
    assert!(err.contains("no thread `no-such-thread`"), "{err}");
    let (code, _, err) = duet.run(&["run", "question_gate"]);
    assert_eq!(code, 2, "no message and no terminal");
    assert!(err.contains("-m TEXT is required"), "{err}");
    let (code, _, _) = duet.run(&["threads", "--status", "sleeping"]);
    assert_eq!(code, 2);
}

/// What a new user trips over, each refused in one line with exit 2 and nothing created.
#[test]
fn a_wrong_place_or_key_is_refused_and_creates_nothing() {
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("places-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&scratch).expect("scratch");
    let empty = scratch.join("not-a-project");
    std::fs::create_dir_all(&empty).expect("folder");
    let missing_folder = scratch.join("no/such/dir/x.db");
    let repo = repo().display().to_string();
    let cases: &[(&[&str], &str)] = &[
        (
            &["threads", "--project", &empty.display().to_string()],
            "is not a Standard Agents project",
        ),
        (
            &[
                "threads",
                "--project",
                &repo,
                "--db",
                &missing_folder.display().to_string(),
            ],
            "does not exist",
        ),
        (
            &["threads", "--project", &repo, "--db", ""],
            "--db is empty",
        ),
        (
            &[
                "threads",
                "--project",
                &repo,
                "--db",
                &format!(
                    "sqlite:{}?synchronous=sometimes",
                    scratch.join("x.db").display()
                ),
            ],
            "is not a SQLite option duet knows (synchronous=normal|full)",
        ),
        (&["send", "", "hi", "--project", &repo], "is empty"),
        (
            &[
                "run",
                "assistant",
                "--session",
                "a\u{7}b",
                "-m",
                "hi",
                "--project",
                &repo,
            ],
            "control character",
        ),
        (
            &["send", "k", "  ", "--project", &repo],
            "the message is empty",
        ),
    ];
    for (args, says) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_duet"))
            .args(*args)
            .env_remove("DUET_DATABASE_URL")
            .stdin(Stdio::null())
            .output()
            .expect("duet runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    }
    assert!(
        !empty.join(".duet").exists(),
        "no database made in a non-project"
    );
    assert!(!scratch.join("no").exists(), "no folders made for --db");
    // An unreachable Postgres is said with the driver's error, not a pool time-out.
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args([
            "threads",
            "--project",
            &repo,
            "--db",
            "postgres://root@127.0.0.1:1/none",
        ])
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("duet runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
}

/// `duet send KEY -` and `--file F` read the message (of any size) instead of an argument.
#[test]
fn send_reads_the_message_from_stdin_or_a_file() {
    let duet = Duet::new();
    let (code, _, err) = duet.run(&[
        "run",
        "question_gate",
        "--session",
        "g",
        "-m",
        "Rotate?",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    // Larger than an OS argument may be.
    let big = format!("Approved. {}", "x".repeat(300 * 1024));
    let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["send", "g", "-", "--json", "--project"])
        .arg(repo())
        .arg("--db")
        .arg(&duet.db)
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("duet runs");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(big.as_bytes()).expect("write");
    }
    let out = child.wait_with_output().expect("finishes");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, lines, _) = duet.run(&["threads", "show", "g", "--json"]);
    assert_eq!(code, 0);
    let doc = json(&lines[0]);
    let sent = doc["messages"]
        .as_array()
        .and_then(|ms| {
            ms.iter().find(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("Approved. x"))
            })
        })
        .and_then(|m| m["content"].as_str())
        .map(str::len);
    assert_eq!(sent, Some(big.len()), "the whole message arrived");
    // From a file, to another thread.
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("msg-{}.txt", uuid::Uuid::now_v7().simple()));
    std::fs::write(&file, "Yes, approved.").expect("write");
    let (code, _, err) = duet.run(&[
        "run",
        "question_gate",
        "--session",
        "h",
        "-m",
        "Rotate?",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = duet.run(&["send", "h", "--file", &file.display().to_string(), "--json"]);
    assert_eq!(code, 0, "{err}");
}

/// A desk whose model calls `refund` (which always needs approval) and then says `Done.`.
fn approvals_project() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-approvals-{}", uuid::Uuid::now_v7().simple()));
    let files = [
        (
            "agents/agents/desk.yaml",
            "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
        ),
        (
            "agents/prompts/desk.yaml",
            "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n",
        ),
        (
            "agents/tools/refund.yaml",
            "description: Refunds.\nargs: { type: object, properties: { order: { type: string }, amount: { type: number } }, required: [order, amount] }\nresult: \"refunded {{order}}\"\napproval: { when: always }\n",
        ),
        (
            "agents/models/m.yaml",
            "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1, amount: 250 } }]\n  - text: Done.\n",
        ),
    ];
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    dir
}

/// The `--db` of each SQL backend: SQLite, and Postgres when `DATABASE_URL` is set.
fn sql_dbs() -> Vec<PathBuf> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(duet_store::testing::backends())
        .iter()
        .filter_map(|b| match b {
            duet_store::testing::Backend::Sqlite(p) => Some(p.clone()),
            duet_store::testing::Backend::Postgres(url) => Some(PathBuf::from(url)),
            duet_store::testing::Backend::Memory(..) => None,
        })
        .collect()
}

#[test]
fn approve_decides_a_waiting_tool_call_once_and_threads_show_lists_it() {
    for db in sql_dbs() {
        approve_on(Duet {
            db,
            project: approvals_project(),
        });
    }
}

fn approve_on(duet: Duet) {
    let cases: [(&str, &[&str], &str, bool); 3] = [
        (
            "r1",
            &["--reject", "too much"],
            "A person rejected this call: too much",
            false,
        ),
        (
            "r2",
            &["--edit", r#"{"order":"A2","amount":5}"#],
            "refunded A2",
            true,
        ),
        (
            "r3",
            &["--respond", "Refunded by hand."],
            "Refunded by hand.",
            true,
        ),
    ];
    for (key, how, result, ok) in cases {
        let (code, lines, err) = duet.run(&["run", "desk", "--session", key, "-m", "go", "--json"]);
        assert_eq!(code, 0, "{key}: {err}");
        let last = json(lines.last().expect("events"));
        assert_eq!(last["data"]["status"], "waiting", "{key}: {last}");
        let local = last["data"]["approvals"][0]["id"]
            .as_str()
            .expect("an approval id");

        let (code, lines, err) = duet.run(&["threads", "show", key, "--json"]);
        assert_eq!(code, 0, "{err}");
        let shown = json(&lines[0]);
        let id = format!("{key}:{local}");
        assert_eq!(shown["approvals"][0]["id"], id.as_str(), "{key}: {shown}");
        assert_eq!(shown["approvals"][0]["tool"], "refund");

        // A bad edit is refused at its field, writing nothing.
        let (code, lines, _) = duet.run(&[
            "approve",
            &id,
            "--edit",
            r#"{"order":5,"amount":1}"#,
            "--json",
        ]);
        assert_eq!(code, 1, "{key}");
        let refused = json(&lines[0]);
        assert_eq!(refused["code"], "invalid_decision", "{refused}");
        assert!(
            refused["details"].as_str().unwrap_or("").contains("/order"),
            "{refused}"
        );

        let mut args = vec!["approve", id.as_str()];
        args.extend_from_slice(how);
        args.push("--json");
        let (code, lines, err) = duet.run(&args);
        assert_eq!(code, 0, "{key}: {err}");
        let decided = json(&lines[0]);
        assert_eq!(decided["status"], "awaiting_human", "{key}: {decided}");

        // A second decision is refused, naming the first.
        let (code, lines, _) = duet.run(&["approve", &id, "--json"]);
        assert_eq!(code, 1, "{key}");
        let again = json(&lines[0]);
        assert_eq!(again["code"], "already_answered", "{key}: {again}");
        assert!(
            again["details"]
                .as_str()
                .unwrap_or("")
                .contains(decided["decided"]["decision"].as_str().unwrap_or("?"))
        );

        let (_, lines, _) = duet.run(&["threads", "show", key, "--json"]);
        let shown = json(&lines[0]);
        assert_eq!(shown["approvals"], serde_json::json!([]), "{key}");
        assert_eq!(
            shown["decisions"].as_array().map(Vec::len),
            Some(1),
            "{key}: {shown}"
        );
        let tool = shown["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["role"] == "tool")
            .expect("the call's result");
        assert_eq!(tool["content"], result, "{key}: {tool}");
        assert_eq!(tool["toolStatus"] == "success", ok, "{key}: {tool}");
        let (code, lines, _) = duet.run(&["threads", "show", key]);
        assert_eq!(code, 0);
        assert!(
            lines.iter().any(|l| l.contains("decided ")),
            "{key}: {lines:?}"
        );
    }
    let (code, _, err) = duet.run(&["approve", "r1:7"]);
    assert_eq!(code, 2, "{err}");
}
