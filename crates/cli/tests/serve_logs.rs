//! `duet serve --log-format json`: every log line is one JSON object (level, message, fields),
//! beside the one plain line that says where the server listens; SIGTERM stops it gracefully.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn json_logs_are_one_object_a_line_and_sigterm_stops_the_server() {
    let db = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("logs-{}.db", uuid::Uuid::now_v7().simple()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-auth",
            "--log-format",
            "json",
        ])
        .arg("--project")
        .arg(support::repo())
        .arg("--db")
        .arg(&db)
        .env("RUST_LOG", "info")
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("duet serve starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut logs = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("stderr");
        if line.starts_with("duet serve: listening on ") {
            break;
        }
        logs.push(line);
    }
    let pid = child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    logs.extend(lines.map_while(Result::ok));
    let exit = child.wait().expect("exits");
    assert!(exit.success(), "a graceful stop exits 0: {exit:?}");
    let events: Vec<serde_json::Value> = logs
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let message = |e: &serde_json::Value| {
        e["fields"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        events
            .iter()
            .any(|e| e["level"] == "WARN" && message(e).contains("--no-auth")),
        "the --no-auth warning is logged: {logs:#?}"
    );
    assert!(
        events.iter().any(|e| message(e) == "listening"),
        "{logs:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| message(e).starts_with("shutting down")),
        "{logs:#?}"
    );
    assert!(events.iter().any(|e| message(e) == "stopped"), "{logs:#?}");
}
