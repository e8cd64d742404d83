//! `duet` as a newcomer meets it (issue 28): a send to a thread whose session ended starts the
//! next one; the CLI acts as a principal, and says how when a thread is another's; a model's
//! streamed deltas print as one line; a closed pipe ends a command quietly; `run` refuses
//! before it starts; key times read as RFC 3339; `duet effects list` / `cancel` on a database
//! where a model's `effect:` tool scheduled a reminder; a duration in the environment that does
//! not read is refused.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn tmp(tag: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("usage-{tag}-{}", uuid::Uuid::now_v7().simple()))
}

/// A project folder written file by file.
struct Project(PathBuf);

impl Project {
    fn new(tag: &str, files: &[(&str, &str)]) -> Self {
        let root = tmp(tag);
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        Project(root)
    }

    fn repo() -> Self {
        Project(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
            .collect()
    }
}

/// Runs `duet ARGS --project P --db DB` with no terminal and `env` set.
fn duet(p: &Project, db: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(args)
        .arg("--project")
        .arg(&p.0)
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .env_remove("DUET_PRINCIPAL")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("duet runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A gate whose scripted model asks, records the decision (ending the session), and asks again.
fn gate() -> Project {
    Project::new(
        "gate",
        &[
            (
                "agents/agents/gate.yaml",
                "name: gate\nsideA:\n  prompt: ask\n  sessionStop: { name: record, messageProperty: decision }\nsideB: { human: true }\n",
            ),
            (
                "agents/prompts/ask.yaml",
                "name: ask\ntoolDescription: Asks.\nmodel: m\nprompt: Ask, then record the answer.\ntools: [record]\n",
            ),
            (
                "agents/tools/record.yaml",
                "description: Record the decision.\nargs:\n  type: object\n  properties:\n    decision: { type: string }\n  required: [decision]\nresult: \"recorded {{decision}}\"\n",
            ),
            (
                "agents/models/m.yaml",
                "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: Approve?\n  - tool_calls: [{ name: record, arguments: { decision: approved } }]\n  - text: Approve the next one?\n",
            ),
        ],
    )
}

fn last(run: &Run) -> serde_json::Value {
    run.json_lines().pop().expect("an event")
}

#[test]
fn a_send_to_a_thread_whose_session_ended_starts_the_next() {
    let p = gate();
    let db = tmp("idle.db");
    let asked = duet(
        &p,
        &db,
        &["run", "gate", "--session", "g", "-m", "Rotate?", "--json"],
        &[],
    );
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    let answered = duet(&p, &db, &["send", "g", "yes", "--json"], &[]);
    assert_eq!(answered.code, 0, "{}", answered.stderr);
    assert_eq!(last(&answered)["data"]["stopReason"], "session_stop");
    // The session's turns stay readable once it ended (they read 0 before).
    let shown = duet(&p, &db, &["threads", "--json"], &[]);
    let listed = &shown.json_lines()[0][0];
    assert_eq!(
        (&listed["status"], &listed["turns"]),
        (
            &serde_json::json!("idle"),
            &serde_json::json!({"a": 1, "b": 2})
        ),
        "{listed}"
    );
    // Idle: the next message starts session 2, which asks again (before: `not_awaiting`).
    let next = duet(&p, &db, &["send", "g", "Another one?", "--json"], &[]);
    assert_eq!(next.code, 0, "{}{}", next.stdout, next.stderr);
    let data = &last(&next)["data"];
    assert_eq!(
        (&data["session"], &data["status"], &data["stopReason"]),
        (
            &serde_json::json!(2),
            &serde_json::json!("awaiting_human"),
            &serde_json::json!("stop_on_response")
        ),
        "{data}"
    );
}

#[test]
fn a_send_to_a_thread_at_work_is_refused_with_the_queue_hint() {
    let p = Project::repo();
    let db = tmp("busy.db");
    // The orchestrator's blocking call waits for its child, which waits for a person.
    let asked = duet(
        &p,
        &db,
        &[
            "run",
            "orchestrator",
            "--session",
            "o",
            "-m",
            "Please rotate the production API keys tonight.",
            "--json",
        ],
        &[],
    );
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert_eq!(last(&asked)["data"]["status"], "waiting");
    let refused = duet(&p, &db, &["send", "o", "Any news?", "--json"], &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    let failed = last(&refused);
    assert_eq!(failed["code"], "not_awaiting", "{failed}");
    assert!(
        failed["details"]
            .as_str()
            .is_some_and(|d| d.contains("waits for a subagent") && d.contains("--queue")),
        "{failed}"
    );
    // Nothing was written.
    let shown = duet(&p, &db, &["threads", "show", "o", "--json"], &[]);
    assert_eq!(shown.json_lines()[0]["queued"], serde_json::json!([]));
}

#[test]
fn the_cli_acts_as_a_principal_and_both_misses_say_how() {
    let p = Project::repo();
    let db = tmp("principal.db");
    // alice has a key (as a service would), and a thread in her key space.
    let key = duet(&p, &db, &["keys", "create", "--principal", "alice"], &[]);
    assert_eq!(key.code, 0, "{}", key.stderr);
    let made = duet(
        &p,
        &db,
        &[
            "run",
            "question_gate",
            "--principal",
            "alice",
            "--session",
            "ticket-42",
            "-m",
            "Rotate?",
            "--json",
        ],
        &[],
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    // Stored as `duet serve` stores a thread alice's key creates.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let stored = rt.block_on(async {
        let store = duet_store::connect(&db.display().to_string())
            .await
            .expect("store");
        store.thread("alice/ticket-42").await.expect("read")
    });
    let owner = duet_server::auth::principal("alice").canonical();
    assert_eq!(
        stored.and_then(|t| t.principal).as_deref(),
        Some(owner.as_str())
    );

    let cases: &[(&[&str], &str)] = &[
        // Her key as she names it: no such thread for no principal — but alice has it.
        (&["send", "ticket-42", "yes"], "--principal alice ticket-42"),
        // The stored key: hers, and the flag that reaches it.
        (
            &["send", "alice/ticket-42", "yes"],
            "belongs to principal `alice`",
        ),
        (
            &["send", "alice/ticket-42", "yes"],
            "--principal alice ticket-42",
        ),
        (
            &["send", "--principal", "bob", "ticket-42", "yes"],
            "for principal `bob`",
        ),
        (
            &["send", "--principal", "no way", "ticket-42", "yes"],
            "--principal",
        ),
    ];
    for (args, said) in cases {
        let refused = duet(&p, &db, args, &[]);
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains(said),
            "{args:?}: {}",
            refused.stderr
        );
    }
    let listed = duet(
        &p,
        &db,
        &["threads", "--json"],
        &[("DUET_PRINCIPAL", "alice")],
    );
    let list = listed.json_lines().remove(0);
    let ids: Vec<&str> = list
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, ["ticket-42"]);
    let answered = duet(
        &p,
        &db,
        &["send", "ticket-42", "Yes, approved.", "--json"],
        &[("DUET_PRINCIPAL", "alice")],
    );
    assert_eq!(answered.code, 0, "{}", answered.stderr);
    assert_eq!(last(&answered)["data"]["result"], "approved");
}

/// An OpenAI-compatible server that streams its answer in pieces: reasoning, then text.
async fn streaming_server() -> String {
    use axum::response::IntoResponse;
    async fn answer() -> axum::response::Response {
        let chunk = |delta: serde_json::Value| {
            format!(
                "data: {}\n\n",
                serde_json::json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
            )
        };
        let mut body = chunk(serde_json::json!({"role": "assistant", "content": ""}));
        for r in ["Let ", "me ", "think."] {
            body.push_str(&chunk(serde_json::json!({"reasoning_content": r})));
        }
        for t in ["Hel", "lo, ", "wor", "ld!"] {
            body.push_str(&chunk(serde_json::json!({"content": t})));
        }
        body.push_str(&format!(
            "data: {}\n\ndata: [DONE]\n\n",
            serde_json::json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        ));
        ([("content-type", "text/event-stream")], body).into_response()
    }
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_deltas_print_as_one_line_and_thinking_apart() {
    let base = streaming_server().await;
    let p = Project::new(
        "stream",
        &[
            (
                "agents/agents/chat.yaml",
                "name: chat\nsideA: { prompt: talk }\nsideB: { human: true }\n",
            ),
            (
                "agents/prompts/talk.yaml",
                "name: talk\ntoolDescription: Talks.\nmodel: m\nprompt: Talk.\n",
            ),
            (
                "agents/models/m.yaml",
                "name: m\nprovider: local\nmodel: m\n",
            ),
            (
                "agents/providers/local.yaml",
                &format!("name: local\ntype: openai\nbaseUrl: {base}\n"),
            ),
        ],
    );
    let db = tmp("stream.db");
    let run = tokio::task::spawn_blocking(move || duet(&p, &db, &["run", "chat", "-m", "hi"], &[]))
        .await
        .expect("runs");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout, "<thinking>Let me think.</thinking>\nHello, world!\n[waiting for you]\n",
        "{}",
        run.stderr
    );
}

/// A pipe whose reader is gone before `duet` writes.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    writer
}

#[test]
fn a_closed_pipe_ends_every_printing_command_quietly() {
    let p = Project::repo();
    let db = tmp("pipe.db");
    let key = duet(&p, &db, &["keys", "create", "--principal", "alice"], &[]);
    assert_eq!(key.code, 0, "{}", key.stderr);
    let commands: &[&[&str]] = &[
        &["serve", "--openapi"],
        &["keys", "list"],
        &["keys", "list", "--json"],
        &["threads"],
        &["migrate"],
        &["recover"],
        &["run", "question_gate", "-m", "Rotate?"],
        &["validate", "--codes"],
    ];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
            .args(*args)
            .args(if args[0] == "validate" {
                Vec::new()
            } else {
                vec![
                    "--project".to_owned(),
                    p.0.display().to_string(),
                    "--db".to_owned(),
                    db.display().to_string(),
                ]
            })
            .env_remove("DUET_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawns");
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("reads");
        let status = child.wait().expect("exits");
        assert!(
            status.code() == Some(0) && !stderr.contains("panicked"),
            "{args:?}: {status:?} {stderr}"
        );
    }
    // A new key's token is shown once: lost to a closed pipe, that is a failure that says so.
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["keys", "create", "--principal", "bob", "--project"])
        .arg(&p.0)
        .arg("--db")
        .arg(&db)
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("duet keys revoke"), "{stderr}");
}

#[test]
fn run_refuses_what_it_cannot_run_before_it_starts() {
    let p = Project::repo();
    let db = tmp("refuse.db");
    let cases: &[(&[&str], &str)] = &[
        (&["run", "question_gate"], "-m TEXT is required"),
        (&["run", "question_gate", "--json"], "-m TEXT is required"),
        (&["run", "question_gate", "-m", ""], "is empty"),
        (&["run", "question_gate", "-m", "  \n"], "is empty"),
    ];
    for (args, said) in cases {
        let refused = duet(&p, &db, args, &[]);
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains(said),
            "{args:?}: {}",
            refused.stderr
        );
        // No session was announced (or made) for a run that never starts.
        assert!(
            !refused.stderr.contains("session:"),
            "{args:?}: {}",
            refused.stderr
        );
        assert!(!db.exists(), "{args:?}: the database was created");
    }
}

#[test]
fn a_duration_in_the_environment_that_does_not_read_is_refused_not_ignored() {
    let p = Project::repo();
    for (name, value) in [
        ("DUET_TIMER_CLAIM_MS", "5m"),
        ("DUET_TIMER_CLAIM_MS", "0"),
        ("DUET_LEASE_MS", "-1"),
    ] {
        let db = tmp("env-ms.db");
        let refused = duet(
            &p,
            &db,
            &["run", "instant_answer", "-m", "hi"],
            &[(name, value)],
        );
        assert_eq!(refused.code, 2, "{name}={value}: {}", refused.stderr);
        assert!(
            refused.stderr.contains(name) && refused.stderr.contains("milliseconds"),
            "{name}={value}: {}",
            refused.stderr
        );
    }
}

#[test]
fn key_times_read_as_rfc_3339_and_json_keeps_milliseconds() {
    let p = Project::repo();
    let db = tmp("keys.db");
    let made = duet(&p, &db, &["keys", "create", "--principal", "alice"], &[]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let listed = duet(&p, &db, &["keys", "list"], &[]);
    let row: Vec<&str> = listed
        .stdout
        .lines()
        .nth(1)
        .expect("a row")
        .split('\t')
        .collect();
    let created = chrono::DateTime::parse_from_rfc3339(row[3])
        .unwrap_or_else(|e| panic!("CREATED {:?}: {e}", row[3]));
    let json = duet(&p, &db, &["keys", "list", "--json"], &[]);
    let ms = json.json_lines()[0][0]["createdAt"]
        .as_i64()
        .expect("milliseconds");
    assert_eq!(created.timestamp(), ms / 1000);
}

#[test]
fn database_mistakes_are_said_with_their_fix() {
    let p = Project::repo();
    let case = |db: &str, code: i32, said: &[&str]| {
        (
            db.to_owned(),
            code,
            said.iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<String>>(),
        )
    };
    let mut cases = vec![
        case(
            "postgress://root@127.0.0.1:5432/test",
            2,
            &[
                "`postgress://` is not a database duet knows",
                "did you mean `postgres://`?",
            ],
        ),
        case("sqlit://x.db", 2, &["did you mean `sqlite://`?"]),
        case("mysql://root@db/x", 2, &["not a database duet knows"]),
    ];
    // A Postgres server that is there, and a database on it that is not.
    if let Some(url) = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        let (server, _) = url.rsplit_once('/').expect("a database name");
        let name = format!("duet_missing_{}", uuid::Uuid::now_v7().simple());
        let missing = format!("the Postgres database `{name}` does not exist");
        cases.push(case(
            &format!("{server}/{name}"),
            1,
            &[&missing, "createdb"],
        ));
    }
    for (db, code, said) in &cases {
        let refused = duet(&p, Path::new(db), &["migrate"], &[]);
        assert_eq!(refused.code, *code, "{db}: {}", refused.stderr);
        for s in said {
            assert!(refused.stderr.contains(s), "{db}: {}", refused.stderr);
        }
        assert!(
            !refused.stderr.contains(" at line "),
            "{db}: {}",
            refused.stderr
        );
    }
}

#[test]
fn effects_list_shows_what_a_tool_scheduled_and_cancel_stops_it() {
    let p = Project::new(
        "effects",
        &[
            (
                "agents/agents/r.yaml",
                "name: r\nsideA: { prompt: r }\nsideB: { human: true }\n",
            ),
            (
                "agents/prompts/r.yaml",
                "name: r\ntoolDescription: Reminds.\nmodel: m\nprompt: Set reminders.\ntools: [remind_me]\n",
            ),
            (
                "agents/tools/remind_me.yaml",
                "description: Reminds later.\neffect: remind\nargs:\n  type: object\n  properties:\n    content: { type: string }\n    delayMs: { type: integer }\n",
            ),
            (
                "agents/effects/remind.yaml",
                "description: Reminds.\nbuiltin: queue_message\n",
            ),
            (
                "agents/models/m.yaml",
                "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: remind_me, arguments: { content: Stand up., delayMs: 3600000 } }]\n  - text: In an hour.\n",
            ),
        ],
    );
    let db = tmp("effects.db");
    let ran = duet(
        &p,
        &db,
        &["run", "r", "--session", "s", "-m", "Remind me.", "--json"],
        &[],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let listed = duet(
        &p,
        &db,
        &["effects", "list", "--thread", "s", "--json"],
        &[],
    );
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let rows = listed.json_lines().pop().expect("a listing");
    let row = &rows[0];
    assert_eq!(
        (
            &row["kind"],
            &row["name"],
            &row["args"],
            &row["status"],
            &row["thread"]
        ),
        (
            &serde_json::json!("effect"),
            &serde_json::json!("remind"),
            &serde_json::json!({"content": "Stand up."}),
            &serde_json::json!("pending"),
            &serde_json::json!("s")
        ),
        "{rows}"
    );
    let id = row["id"].as_str().expect("an id").to_owned();
    // The table says the same, its time in RFC 3339.
    let table = duet(&p, &db, &["effects", "list"], &[]);
    assert!(
        table.stdout.lines().nth(1).is_some_and(|l| l
            .starts_with(&format!("{id}\teffect\tremind\ts\tpending\t"))
            && l.contains("T")
            && l.contains("\t0/3\t-")),
        "{}",
        table.stdout
    );
    let cancelled = duet(&p, &db, &["effects", "cancel", &id], &[]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    assert_eq!(
        cancelled.stdout.trim(),
        format!("cancelled effect remind {id}")
    );
    let again = duet(&p, &db, &["effects", "cancel", &id], &[]);
    assert_eq!(again.code, 2);
    assert!(
        again.stderr.contains("is cancelled: only a pending one"),
        "{}",
        again.stderr
    );
    let pending = duet(
        &p,
        &db,
        &["effects", "list", "--status", "pending", "--json"],
        &[],
    );
    assert_eq!(pending.json_lines(), [serde_json::json!([])]);
    let bad = duet(&p, &db, &["effects", "cancel", "nope"], &[]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("is not a timer id"), "{}", bad.stderr);
}
