//! A gated tool's side effects, counted where they land (issue #29): the `refund` tool is an
//! `http` tool that POSTs to a counting server this test runs on 127.0.0.1, and real `duet`
//! processes run the desk and decide. A rejected call is never sent; an approved one is sent
//! exactly once — also when the deciding process dies right after its decision is stored and
//! before the tool runs (`DUET_CRASH_AT=after_decision`), where `duet recover` sends it once. A
//! process killed while the request is in flight is the "at least once" case: recovery sends it
//! again, with the same `Idempotency-Key`, so a server that honours the key applies it once. On
//! SQLite, and on Postgres when `DATABASE_URL` is set.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use duet_store::testing::Backend;
use serde_json::Value;

/// The requests a counting server received: each one's `Idempotency-Key`.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<String>>>);

impl Received {
    fn keys(&self) -> Vec<String> {
        self.0.lock().expect("received").clone()
    }
}

/// A one-route HTTP server on 127.0.0.1 that counts what it receives. With `hang_first`, the
/// first request is received, counted and reported on the channel, and never answered.
fn counting_server(hang_first: bool) -> (String, Received, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/refund", listener.local_addr().expect("addr"));
    let received = Received::default();
    let (tx, rx) = mpsc::channel();
    let seen = received.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let (mut key, mut length) = (String::new(), 0usize);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                let l = line.trim_end().to_owned();
                line.clear();
                if l.is_empty() {
                    break;
                }
                if let Some((name, value)) = l.split_once(':') {
                    match name.to_ascii_lowercase().as_str() {
                        "idempotency-key" => key = value.trim().to_owned(),
                        "content-length" => length = value.trim().parse().unwrap_or(0),
                        _ => {}
                    }
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let first = {
                let mut keys = seen.0.lock().expect("received");
                keys.push(key);
                keys.len() == 1
            };
            let _ = tx.send(());
            if hang_first && first {
                // Received and never answered: the sender dies waiting.
                held.push(stream);
                continue;
            }
            let answer = r#"{"refunded":true}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, received, rx)
}

fn project(dir: &Path, url: &str) {
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    write(
        "agents/tools/refund.yaml",
        &format!(
            "description: Refunds an order.\nargs: {{ type: object, properties: {{ order: {{ type: string }} }}, required: [order] }}\nhttp:\n  method: POST\n  url: \"{url}\"\napproval: {{ decisions: [approve, reject] }}\n"
        ),
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1 } }]\n  - text: Done.\n",
    );
}

fn db_arg(backend: &Backend) -> String {
    match backend {
        Backend::Sqlite(p) => p.display().to_string(),
        Backend::Postgres(url) => url.clone(),
        Backend::Memory(..) => unreachable!("a process cannot open another's memory store"),
    }
}

fn duet(project: &Path, db: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args)
        .arg("--project")
        .arg(project)
        .arg("--db")
        .arg(db);
    cmd.env("DUET_LEASE_MS", "600")
        .env_remove("DUET_DATABASE_URL")
        .env_remove("DUET_CRASH_AT")
        .stdin(Stdio::null());
    cmd
}

fn show(project: &Path, db: &str, key: &str) -> Value {
    let out = duet(project, db, &["threads", "show", key, "--json"])
        .output()
        .expect("show runs");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("threads show: {}", String::from_utf8_lossy(&out.stderr)))
}

/// Thread `key`, run to its pending call: the approval id `duet approve` takes.
fn parked(project: &Path, db: &str, key: &str) -> String {
    let out = duet(
        project,
        db,
        &["run", "desk", "--session", key, "-m", "refund A1"],
    )
    .output()
    .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = show(project, db, key);
    assert_eq!(doc["status"], "waiting", "{doc}");
    doc["approvals"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a pending call: {doc}"))
        .to_owned()
}

/// The thread's last message and its tool results' texts.
fn outcome(project: &Path, db: &str, key: &str) -> (String, Vec<String>) {
    let doc = show(project, db, key);
    let messages = doc["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let results = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect();
    (last, results)
}

/// `duet recover`, tried until it continues a thread (the dead run's lease must expire).
fn recovered(project: &Path, db: &str) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        let out = duet(project, db, &["recover"])
            .output()
            .expect("recover runs");
        if String::from_utf8_lossy(&out.stdout).contains("continued 1 thread") {
            return true;
        }
        // tidy:allow-sleep: what is awaited is a lease's expiry in another process's database
        // row, and time is the condition itself.
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[tokio::test]
async fn a_gated_http_tool_is_sent_once_when_approved_and_never_when_rejected() {
    for backend in support::backends().await {
        let at = backend.name();
        let db = db_arg(&backend);
        for (key, decision, sent) in [("rejected", Some("--reject"), 0), ("approved", None, 1)] {
            let dir = support::Scratch::new("side-effects");
            let (url, received, _) = counting_server(false);
            project(dir.root(), &url);
            let id = parked(dir.root(), &db, key);
            assert!(
                received.keys().is_empty(),
                "{at} {key}: nothing sent while pending"
            );
            let mut approve = duet(dir.root(), &db, &["approve", &id]);
            if let Some(flag) = decision {
                approve.args([flag, "over the limit"]);
            }
            let out = approve.output().expect("approve");
            assert!(
                out.status.success(),
                "{at} {key}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(received.keys().len(), sent, "{at} {key}: requests sent");
            let (last, results) = outcome(dir.root(), &db, key);
            assert_eq!(last, "Done.", "{at} {key}");
            assert_eq!(results.len(), 1, "{at} {key}: {results:?}");
        }
    }
}

#[tokio::test]
async fn a_process_that_dies_after_the_decision_is_finished_by_the_next_sending_once() {
    for backend in support::backends().await {
        let at = backend.name();
        let db = db_arg(&backend);
        let dir = support::Scratch::new("side-effects-crash");
        let (url, received, _) = counting_server(false);
        project(dir.root(), &url);
        let id = parked(dir.root(), &db, "crash");
        let out = duet(dir.root(), &db, &["approve", &id])
            .env("DUET_CRASH_AT", "after_decision")
            .output()
            .expect("approve");
        assert!(!out.status.success(), "{at}: the process died");
        assert!(
            received.keys().is_empty(),
            "{at}: it died before the tool ran"
        );
        assert_eq!(show(dir.root(), &db, "crash")["status"], "waiting", "{at}");
        assert!(
            recovered(dir.root(), &db),
            "{at}: no process continued the thread"
        );
        assert_eq!(received.keys().len(), 1, "{at}: sent exactly once");
        let (last, results) = outcome(dir.root(), &db, "crash");
        assert_eq!(last, "Done.", "{at}");
        assert_eq!(results, vec![r#"{"refunded":true}"#.to_owned()], "{at}");
    }
}

#[tokio::test]
async fn a_process_killed_in_flight_is_sent_again_with_the_same_idempotency_key() {
    for backend in support::backends().await {
        let at = backend.name();
        let db = db_arg(&backend);
        let dir = support::Scratch::new("side-effects-in-flight");
        let (url, received, arrived) = counting_server(true);
        project(dir.root(), &url);
        let id = parked(dir.root(), &db, "flight");
        let mut victim = duet(dir.root(), &db, &["approve", &id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("approve");
        arrived
            .recv_timeout(Duration::from_secs(30))
            .expect("the request arrives");
        victim.kill().expect("SIGKILL");
        let _ = victim.wait();
        assert!(
            recovered(dir.root(), &db),
            "{at}: no process continued the thread"
        );
        let keys = received.keys();
        assert_eq!(
            keys.len(),
            2,
            "{at}: at least once: sent again after the crash"
        );
        assert!(
            !keys[0].is_empty() && keys[0] == keys[1],
            "{at}: one key: {keys:?}"
        );
        let (last, results) = outcome(dir.root(), &db, "flight");
        assert_eq!(last, "Done.", "{at}");
        assert_eq!(results.len(), 1, "{at}: one result: {results:?}");
    }
}
