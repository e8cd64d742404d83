//! `duet backup` as an operator runs it: a copy taken while `duet serve` is writing, restored
//! (the copy as the database file) and served again, loses nothing acknowledged before the
//! backup began, and a thread parked for a person before it is answered from the copy. The
//! command refuses to replace a file unless asked, a database that is not there, and a
//! Postgres URL (naming the Postgres procedure instead).

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

fn scratch() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("backup-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

fn duet(db: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args)
        .arg("--project")
        .arg(support::repo())
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// A `duet serve --no-auth` process on `db`, and its address.
async fn serve(db: &Path) -> (Child, String) {
    let mut child = duet(db, &["serve", "--no-auth", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("duet serve starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let base = loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr")
            .expect("serve printed its address");
        if let Some(addr) = line.strip_prefix("duet serve: listening on ") {
            break addr.trim().to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, base)
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let resp = http.post(url).json(&body).send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// `duet backup` with `args`: its exit code, stdout and stderr.
async fn backup(db: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["backup"];
    all.extend_from_slice(args);
    let out = duet(db, &all).output().await.expect("duet backup runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Creates approval-gate threads `{lane}-0`, `{lane}-1`, … one after another until `stop`
/// (each runs on in the server: a model step, then a park), publishing how many the server
/// acknowledged (stored: `202`).
async fn write(
    http: reqwest::Client,
    base: String,
    lane: &'static str,
    acked: tokio::sync::watch::Sender<usize>,
    stop: Arc<AtomicBool>,
) {
    for i in 0..5_000 {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let (status, body) = post(
            &http,
            format!("{base}/threads"),
            json!({"agent": "question_gate", "key": format!("{lane}-{i}"), "text": "Rotate?"}),
        )
        .await;
        assert_eq!(status, 202, "{lane}-{i}: {body}");
        acked.send_replace(i + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_serving_restores_with_nothing_acknowledged_missing() {
    let dir = scratch();
    let live = dir.join("live.db");
    let (mut server, base) = serve(&live).await;
    let http = reqwest::Client::new();

    // A question waiting for a person.
    let (status, parked) = post(
        &http,
        format!("{base}/threads?wait=true"),
        json!({"agent": "question_gate", "key": "parked", "text": "Rotate the keys tonight?"}),
    )
    .await;
    assert_eq!(
        (status, parked["status"].as_str()),
        (200, Some("awaiting_human")),
        "{parked}"
    );
    let approval = parked["approval"]
        .as_str()
        .expect("an approval id")
        .to_owned();

    // Two writers keep the server writing while the backup runs.
    let stop = Arc::new(AtomicBool::new(false));
    let lanes = ["a", "b"].map(|lane| {
        let (tx, rx) = tokio::sync::watch::channel(0);
        let task = tokio::spawn(write(http.clone(), base.clone(), lane, tx, stop.clone()));
        (lane, rx, task)
    });
    for (_, rx, _) in &lanes {
        rx.clone().wait_for(|n| *n >= 20).await.expect("writing");
    }
    let before: Vec<usize> = lanes.iter().map(|(_, rx, _)| *rx.borrow()).collect();
    let copy = dir.join("copy.db");
    let copy_arg = copy.display().to_string();
    let (code, stdout, stderr) = backup(&live, &[&copy_arg]).await;
    let after: Vec<usize> = lanes.iter().map(|(_, rx, _)| *rx.borrow()).collect();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!("backed up {} to {copy_arg}: ", live.display()))
            && stdout.contains(" bytes, ")
            && stdout.trim_end().ends_with("(integrity ok)"),
        "{stdout}"
    );
    assert!(
        before.iter().zip(&after).any(|(b, a)| a > b),
        "the server acknowledged nothing while the backup ran: {before:?} {after:?}"
    );
    stop.store(true, Ordering::SeqCst);
    for (_, _, task) in lanes {
        task.await.expect("a writer ends");
    }
    server.kill().await.expect("the live server stops");

    // Restored: the copy as the database file of a new server.
    let restored = dir.join("restored").join("duet.db");
    std::fs::create_dir_all(restored.parent().expect("folder")).expect("mkdir");
    std::fs::copy(&copy, &restored).expect("restore");
    let (_server, base) = serve(&restored).await;
    for (lane, acknowledged) in ["a", "b"].iter().zip(&before) {
        for i in 0..*acknowledged {
            let resp = http
                .get(format!("{base}/threads/{lane}-{i}"))
                .send()
                .await
                .expect("request");
            assert_eq!(
                resp.status().as_u16(),
                200,
                "{lane}-{i}, acknowledged before the backup"
            );
        }
    }
    let (status, answered) = post(
        &http,
        format!("{base}/approvals/{approval}?wait=true"),
        json!({"text": "Yes, approved."}),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(
        (answered["status"].as_str(), answered["result"].as_str()),
        (Some("idle"), Some("approved")),
        "{answered}"
    );
}

#[tokio::test]
async fn backup_refuses_what_it_cannot_do_and_says_why() {
    let dir = scratch();
    let live = dir.join("live.db");
    // A database with one thread in it.
    let out = duet(
        &live,
        &[
            "run",
            "question_gate",
            "--session",
            "k",
            "-m",
            "Rotate?",
            "--json",
        ],
    )
    .output()
    .await
    .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let copy = dir.join("copy.db");
    let copy_arg = copy.display().to_string();
    let (code, stdout, stderr) = backup(&live, &[&copy_arg]).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains(" bytes, 1 thread, in "), "{stdout}");
    let first = std::fs::read(&copy).expect("written");

    // A file there already is kept as it was, unless --force.
    let (code, stdout, stderr) = backup(&live, &[&copy_arg]).await;
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("exists; nothing was written (--force replaces it)"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&copy).expect("kept"), first);
    let (code, stdout, stderr) = backup(&live, &[&copy_arg, "--force"]).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");

    // No database there: said, and none created.
    let ghost = dir.join("ghost.db");
    let (code, _, stderr) = backup(&ghost, &[&dir.join("never.db").display().to_string()]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("there is no SQLite database at"),
        "{stderr}"
    );
    assert!(!ghost.exists() && !dir.join("never.db").exists());

    // Postgres: the procedure named instead (no server needed to say so).
    let out = duet(
        Path::new("postgres://nobody@127.0.0.1:1/none"),
        &["backup", &dir.join("pg.db").display().to_string()],
    )
    .output()
    .await
    .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("pg_dump")
            && stderr.contains("pg_basebackup")
            && stderr.contains("docs/operations.md"),
        "{stderr}"
    );
    assert!(!dir.join("pg.db").exists());
}
