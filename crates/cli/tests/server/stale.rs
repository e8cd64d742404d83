//! Definitions that change under parked threads: a park records the project's revision; a
//! server started on changed definitions resumes a thread whose agent and sides are still
//! there, and fails (as a step error naming what is gone) one whose agent was removed — that
//! thread only, the server goes on; `duet threads --stale` lists such threads beforehand.

use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{Server, options};
use crate::support;

/// `gate` asks and a person answers; `other` stays whatever happens to `gate`.
fn project(tag: &str, prompt: &str) -> support::Scratch {
    let p = support::Scratch::new(tag);
    for (name, model) in [("gate", "gate_demo"), ("other", "other_demo")] {
        p.write(
            &format!("agents/agents/{name}.yaml"),
            &format!("name: {name}\nsideA:\n  prompt: {name}\nsideB: {{ human: true }}\n"),
        );
        p.write(
            &format!("agents/prompts/{name}.yaml"),
            &format!("name: {name}\ntoolDescription: asks\nmodel: {model}\nprompt: {prompt}\nincludeChat: true\n"),
        );
        p.write(
            &format!("agents/models/{model}.yaml"),
            &format!("name: {model}\nprovider: scripted\nmodel: demo\nscript:\n  - text: \"Rotate the keys?\"\n  - text: \"Rotated.\"\n"),
        );
    }
    p
}

async fn park(server: &Server, key: &str) {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            "none",
            json!({"agent": "gate", "key": key, "text": "Please."}),
        )
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("awaiting_human")),
        "{body}"
    );
}

/// Answers `key`'s question and waits for the run it starts to settle: the thread as it then is.
async fn answer(server: &Server, key: &str) -> Value {
    let t = server
        .store
        .thread(key)
        .await
        .expect("read")
        .expect("thread");
    let park = t.park().expect("parked");
    let (status, body) = server
        .post(
            &format!("/approvals/{}:{park}?wait=true", t.id),
            "none",
            json!({"text": "approved"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

fn stale(root: &std::path::Path, backend: &support::Backend) -> Value {
    let db = crate::harness::db_arg(backend);
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["threads", "--stale", "--json", "--project"])
        .arg(root)
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .output()
        .expect("duet threads");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

#[tokio::test]
async fn a_changed_project_resumes_what_still_fits_and_fails_only_what_does_not() {
    let no_auth = || duet_server::Options {
        auth: false,
        ..options()
    };
    for backend in support::backends().await {
        let before = project("stale-before", "Ask first.");
        let parked_under = before.project().revision.clone();
        let server = Server::start_with(&backend, before.root(), no_auth()).await;
        park(&server, "kept").await;
        park(&server, "orphan").await;
        server.stop().await;

        // Reworded, and `gate` removed: what the threads need is or is not there.
        let reworded = project("stale-reworded", "Ask, then act.");
        let removed = project("stale-removed", "Ask first.");
        for file in [
            "agents/gate.yaml",
            "prompts/gate.yaml",
            "models/gate_demo.yaml",
        ] {
            std::fs::remove_file(removed.root().join("agents").join(file)).expect("remove");
        }
        assert_ne!(reworded.project().revision, parked_under);

        let listed = stale(reworded.root(), &backend);
        assert_eq!(
            listed["threads"],
            json!([]),
            "a reworded prompt fits: {listed}"
        );
        let listed = stale(removed.root(), &backend);
        let keys: Vec<&Value> = listed["threads"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| &t["key"])
            .collect();
        assert_eq!(keys, [&json!("kept"), &json!("orphan")], "{listed}");
        assert_eq!(listed["threads"][0]["parkedUnder"], json!(parked_under));
        let why = listed["threads"][0]["missing"].as_str().unwrap_or_default();
        assert!(
            why.contains("agent `gate` is no longer defined"),
            "{listed}"
        );

        let server = Server::start_with(&backend, reworded.root(), no_auth()).await;
        let kept = answer(&server, "kept").await;
        assert_eq!(
            (kept["status"].as_str(), kept["stopReason"].as_str()),
            (Some("awaiting_human"), Some("stop_on_response")),
            "a compatible change resumes: {kept}"
        );
        server.stop().await;

        // Under definitions without its agent, the orphan's answer is refused (nothing is
        // written; it stays parked for definitions that fit it again), and a run that resumes
        // it — here, recovery of a run that died — fails that thread with a step error.
        let server = Server::start_with(&backend, removed.root(), no_auth()).await;
        let t = server
            .store
            .thread("orphan")
            .await
            .expect("read")
            .expect("thread");
        let (status, body) = server
            .post(
                &format!("/approvals/{}:{}", t.id, t.park().expect("parked")),
                "none",
                json!({"text": "approved"}),
            )
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("stale_definition")),
            "{body}"
        );
        let why = body["detail"].as_str().unwrap_or_default();
        assert!(why.contains("agent `gate` is no longer defined"), "{body}");
        // That thread only: the server still runs the agents it has.
        let (status, body) = server
            .post(
                "/threads?wait=true",
                "none",
                json!({"agent": "other", "key": "fresh", "text": "Hi."}),
            )
            .await;
        assert_eq!(
            (status, body["status"].as_str()),
            (200, Some("awaiting_human")),
            "{body}"
        );
        let after = server
            .store
            .thread("orphan")
            .await
            .expect("read")
            .expect("thread");
        assert_eq!(
            after.park(),
            t.park(),
            "the orphan still waits, nothing written"
        );
        server.stop().await;
    }
}
