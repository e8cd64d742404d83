//! Scale-out on Postgres: two real `duet serve` processes on one database serve any thread. A
//! thread started on one is answered on the other, and followers on both see every event; a
//! process killed with SIGKILL mid-run leaves its thread to the other, which finishes it with
//! nothing lost and nothing doubled; an abort sent to one reaches the run on the other. Needs `DATABASE_URL` (CI sets it); without it, it says so
//! and passes.

mod support;

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The example project plus `pair`: two models, side A's second answer slow.
fn project() -> support::Scratch {
    let p = support::Scratch::new("scale");
    copy(&support::repo().join("agents"), &p.root().join("agents"));
    p.write(
        "agents/agents/pair.yaml",
        "name: pair\nmaxSessionTurns: 3\nsideA: { prompt: pa }\nsideB: { prompt: pb }\n",
    );
    for side in ["a", "b"] {
        p.write(
            &format!("agents/prompts/p{side}.yaml"),
            &format!(
                "name: p{side}\ntoolDescription: d\nmodel: m{side}\nincludeChat: true\nprompt: p\n"
            ),
        );
    }
    p.write(
        "agents/models/ma.yaml",
        "name: ma\nprovider: scripted\nmodel: demo\nscript:\n  - text: a1\n  - { text: a2, delayMs: 1500 }\n  - text: a3\n",
    );
    p.write(
        "agents/models/mb.yaml",
        "name: mb\nprovider: scripted\nmodel: demo\nscript:\n  - text: b1\n  - text: b2\n  - text: b3\n",
    );
    p
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

fn duet(project: &Path, db: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args)
        .arg("--project")
        .arg(project)
        .arg("--db")
        .arg(db)
        .env("DUET_LEASE_MS", "1000")
        .env("DUET_RECOVER_EVERY_MS", "200")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// A `duet serve` process and its address.
struct Process {
    child: Child,
    base: String,
}

async fn serve(project: &Path, db: &str) -> Process {
    let mut child = duet(project, db, &["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
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
    // Keep draining its stderr so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Process { child, base }
}

async fn call(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Reads SSE events from `resp` until `done` holds for one: (event, id, data) of each.
async fn follow(
    resp: reqwest::Response,
    done: impl Fn(&str, &Value) -> bool,
) -> Vec<(String, Option<i64>, Value)> {
    use futures::StreamExt;
    let mut body = resp.bytes_stream();
    let mut buffer = String::new();
    let mut seen = Vec::new();
    let read = async {
        loop {
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = ("message".to_owned(), None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        event = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        id = v.parse().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let data: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                let stop = done(&event, &data);
                seen.push((event, id, data));
                if stop {
                    return true;
                }
            }
            match body.next().await {
                Some(Ok(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return false,
            }
        }
    };
    let ok = tokio::time::timeout(std::time::Duration::from_secs(30), read).await;
    assert!(
        matches!(ok, Ok(true)),
        "the stream ended or hung: {seen:#?}"
    );
    seen
}

#[tokio::test]
async fn two_processes_on_one_postgres_serve_any_thread() {
    let Some(db) = support::backends().await.into_iter().find_map(|b| match b {
        support::Backend::Postgres(url) => Some(url),
        _ => None,
    }) else {
        eprintln!("scale-out: no DATABASE_URL; skipped");
        return;
    };
    let project = project();
    let out = duet(
        project.root(),
        &db,
        &["keys", "create", "--principal", "ops"],
    )
    .output()
    .await
    .expect("duet keys create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let (a, b) = (
        serve(project.root(), &db).await,
        serve(project.root(), &db).await,
    );
    let http = reqwest::Client::new();
    let req = |p: &Process, method: reqwest::Method, path: &str| {
        http.request(method, format!("{}{path}", p.base))
            .bearer_auth(&token)
    };

    // Started on A, parked; followed on both; answered on B.
    let (status, thread) = call(
        req(&a, reqwest::Method::POST, "/threads?wait=true")
            .json(&json!({"agent": "question_gate", "key": "gate", "text": "Rotate the keys?"})),
    )
    .await;
    assert_eq!(status, 200, "{thread}");
    let settled = |event: &str, data: &Value| event == "status" && data["status"] == "idle";
    let on_a = req(&a, reqwest::Method::GET, "/threads/gate/events")
        .send()
        .await
        .expect("follow A");
    let on_b = req(&b, reqwest::Method::GET, "/threads/gate/events")
        .send()
        .await
        .expect("follow B");
    let followers =
        tokio::spawn(async move { (follow(on_a, settled).await, follow(on_b, settled).await) });
    let approval = thread["approval"].as_str().expect("approval").to_owned();
    let (status, body) = call(
        req(&b, reqwest::Method::POST, &format!("/approvals/{approval}"))
            .json(&json!({"text": "approved"})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let (seen_a, seen_b) = followers.await.expect("followers");
    let ids =
        |seen: &[(String, Option<i64>, Value)]| seen.iter().filter_map(|e| e.1).collect::<Vec<_>>();
    let last = call(req(&a, reqwest::Method::GET, "/threads/gate")).await.1["seq"]
        .as_i64()
        .expect("seq");
    assert_eq!(
        ids(&seen_a),
        (1..=last).collect::<Vec<_>>(),
        "A saw every entry once"
    );
    assert_eq!(ids(&seen_a), ids(&seen_b), "B saw the same");

    // An abort sent to B reaches the run on A.
    let (status, body) = call(
        req(&a, reqwest::Method::POST, "/threads")
            .json(&json!({"agent": "pair", "key": "stop-me", "text": "go"})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let on_b = req(&b, reqwest::Method::GET, "/threads/stop-me/events")
        .send()
        .await
        .expect("follow B");
    follow(on_b, |event, data| {
        event == "message" && data["data"]["content"] == "b1"
    })
    .await;
    let (status, result) = call(
        req(&b, reqwest::Method::POST, "/agents/pair/control/dispatch")
            .json(&json!({"session": "stop-me", "command": {"type": "abort"}})),
    )
    .await;
    assert_eq!((status, &result["ok"]), (200, &json!(true)), "{result}");
    let on_b = req(&b, reqwest::Method::GET, "/threads/stop-me/events")
        .send()
        .await
        .expect("follow B");
    follow(on_b, |event, data| {
        event == "status" && data["stopReason"] == "aborted"
    })
    .await;

    // A thread running on A when A is killed: B finishes it.
    let (status, body) = call(
        req(&a, reqwest::Method::POST, "/threads")
            .json(&json!({"agent": "pair", "key": "pair", "text": "go"})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let on_b = req(&b, reqwest::Method::GET, "/threads/pair/events")
        .send()
        .await
        .expect("follow B");
    // Once `b1` is committed, A is in side A's slow second step.
    follow(on_b, |event, data| {
        event == "message" && data["data"]["content"] == "b1"
    })
    .await;
    let mut a = a;
    a.child.start_kill().expect("SIGKILL");
    let _ = a.child.wait().await;
    let on_b = req(&b, reqwest::Method::GET, "/threads/pair/events")
        .send()
        .await
        .expect("follow B");
    follow(on_b, |event, data| {
        event == "status" && data["status"] == "idle"
    })
    .await;
    let (_, messages) = call(req(&b, reqwest::Method::GET, "/threads/pair/messages")).await;
    let texts: Vec<&str> = messages["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|m| m["data"]["content"].as_str())
        .collect();
    assert_eq!(
        texts,
        ["go", "a1", "b1", "a2", "b2", "a3", "b3"],
        "nothing lost, nothing doubled"
    );
    drop(b);
}
