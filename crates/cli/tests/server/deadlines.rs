//! Deadlines over HTTP (issue #30), on a server whose clock the test moves (its own timer loop
//! fires what falls due): a question's escalation lets a role key (`duet keys create --role`)
//! that does not own the thread list, read and answer the question — not before it escalated,
//! and a key it does not name never; its answer is recorded as its own, the owner's later one
//! is refused naming it, and a reminder that moved the park does not change the id anyone
//! answers with. The same for a pending tool call's decision. On every backend.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use duet_runtime::{ManualClock, RecordBody, Store};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Server, db_arg};
use crate::support;

const MIN: i64 = 60_000;

/// `gate` asks its person (an approver side whose deadline reminds at 10 minutes, escalates to
/// `managers` at 30 and rejects at an hour); `desk` calls `refund`, whose approvers are
/// `refunds` and whose deadline escalates to `managers` at 30 minutes.
fn project() -> support::Scratch {
    let p = support::Scratch::new("deadlines-http");
    p.write(
        "agents/agents/gate.yaml",
        "name: gate\nsideA: { prompt: gate }\nsideB:\n  human: true\n  approver: true\n  deadline:\n    after: 1h\n    default: \"reject: no answer within 1 h\"\n    remind: [10m]\n    escalate: { after: 30m, roles: [managers] }\n",
    );
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    let prompt = |name: &str, tools: &str| {
        format!(
            "name: {name}\ntoolDescription: d\nmodel: {name}\nincludeChat: true\nprompt: p\ntools: [{tools}]\n"
        )
    };
    p.write("agents/prompts/gate.yaml", &prompt("gate", ""));
    p.write("agents/prompts/desk.yaml", &prompt("desk", "refund"));
    p.write(
        "agents/models/gate.yaml",
        "name: gate\nprovider: scripted\nmodel: demo\nscript:\n  - text: May I ship?\n  - text: Noted.\n",
    );
    p.write(
        "agents/models/desk.yaml",
        "name: desk\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1 } }]\n  - text: Done.\n",
    );
    p.write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string } } }\nresult: \"refunded {{order}}\"\napproval:\n  approvers: { roles: [refunds] }\n  deadline: { escalate: { after: 30m, roles: [managers] } }\n",
    );
    p
}

/// A key made by `duet keys create --principal PRINCIPAL --role ROLE`: its token.
fn role_key(server: &Server, root: &std::path::Path, principal: &str, role: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["keys", "create", "--principal", principal, "--role", role])
        .arg("--project")
        .arg(root)
        .arg("--db")
        .arg(db_arg(&server.backend))
        .env_remove("DUET_DATABASE_URL")
        .output()
        .expect("duet keys");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn wall_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("fits")
}

/// Moves `clock` by `ms` and waits until thread `stored` has `n` records of `kind` (the
/// server's timer loop writes them), woken by the store's changes.
async fn advance_until(
    clock: &ManualClock,
    store: &Arc<dyn Store>,
    stored: &str,
    ms: i64,
    kind: &str,
    n: usize,
) {
    let mut changes = store.changes();
    clock.advance(ms);
    loop {
        let t = store.thread(stored).await.expect("read").expect("thread");
        let records = store.records(t.id).await.expect("records");
        if records.iter().filter(|r| r.body.kind() == kind).count() >= n {
            return;
        }
        tokio::time::timeout(Duration::from_secs(30), changes.next())
            .await
            .unwrap_or_else(|_| panic!("no `{kind}` record on {stored}"));
    }
}

/// `GET /approvals` as `token`: the items.
async fn items(server: &Server, token: &str) -> Vec<Value> {
    let (status, page) = server.get("/approvals", token).await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn an_escalated_role_answers_a_question_once_it_escalated_and_not_before() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let clock = Arc::new(ManualClock::new(wall_now()));
        let server = Server::start_clocked(&backend, p.root(), clock.clone()).await;
        let alice = server.key("alice", false).await;
        let carol = role_key(&server, p.root(), "carol", "managers");
        let bob = role_key(&server, p.root(), "bob", "refunds");
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "gate", "key": "q1", "text": "ship it?"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        assert_eq!(body["status"], "awaiting_human", "{at}: {body}");
        let asked = items(&server, &alice).await;
        assert_eq!(asked.len(), 1, "{at}: {asked:?}");
        let id = asked[0]["id"].as_str().expect("id").to_owned();

        // Not before it escalated: nothing listed, the id absent, an answer refused as absent.
        for token in [&carol, &bob] {
            assert!(items(&server, token).await.is_empty(), "{at}");
            let (status, _) = server.get(&format!("/approvals/{id}"), token).await;
            assert_eq!(status, 404, "{at}");
            let (status, body) = server
                .post(&format!("/approvals/{id}"), token, json!({"text": "early"}))
                .await;
            assert_eq!(status, 404, "{at}: {body}");
        }

        // The reminder moves the park; the escalation names `managers`.
        advance_until(
            &clock,
            &server.store,
            "alice/q1",
            10 * MIN,
            "question_reminded",
            1,
        )
        .await;
        advance_until(
            &clock,
            &server.store,
            "alice/q1",
            20 * MIN,
            "question_escalated",
            1,
        )
        .await;
        assert!(items(&server, &bob).await.is_empty(), "{at}: not bob's");
        let listed = items(&server, &carol).await;
        assert_eq!(listed.len(), 1, "{at}: {listed:?}");
        assert_eq!(listed[0]["kind"], "question", "{at}");
        assert_eq!(listed[0]["question"], "May I ship?", "{at}");
        assert_eq!(
            listed[0]["deadline"]["escalated"]["roles"],
            json!(["managers"]),
            "{at}: {listed:?}"
        );
        let moved = listed[0]["id"].as_str().expect("id").to_owned();
        assert_ne!(moved, id, "{at}: the deadline's records moved the park");
        // The id from before the reminder names the question still.
        let (status, one) = server.get(&format!("/approvals/{id}"), &carol).await;
        assert_eq!(status, 200, "{at}: {one}");
        assert_eq!(one["id"], moved, "{at}");
        let (status, _) = server.get(&format!("/approvals/{id}"), &bob).await;
        assert_eq!(status, 404, "{at}");

        // Carol answers (with the old id): told nothing of the thread; recorded as hers.
        let (status, body) = server
            .post(
                &format!("/approvals/{id}?wait=true"),
                &carol,
                json!({"text": "ship it"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        assert_eq!(body["id"], id, "{at}: {body}");
        assert!(
            body.get("status").is_none() && body.get("events").is_none(),
            "{at}: {body}"
        );
        let t = server
            .store
            .thread("alice/q1")
            .await
            .expect("read")
            .expect("thread");
        let answered = server
            .store
            .answered(&duet_runtime::AnsweredQuery {
                thread: Some(t.id),
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("answered");
        assert_eq!(answered.len(), 1, "{at}");
        assert!(
            answered[0]
                .answer
                .author
                .as_deref()
                .is_some_and(|a| a.contains("\"carol\"")),
            "{at}: {answered:?}"
        );
        // The owner, after her: refused naming carol.
        let (status, body) = server
            .post(
                &format!("/approvals/{moved}"),
                &alice,
                json!({"text": "no"}),
            )
            .await;
        assert_eq!(status, 409, "{at}: {body}");
        assert_eq!(body["code"], "already_answered", "{at}: {body}");
        assert!(body.to_string().contains("carol"), "{at}: {body}");
        // Answered: no more timers of that question to fire (the default was cancelled).
        let records = server.store.records(t.id).await.expect("records");
        assert!(
            !records
                .iter()
                .any(|r| matches!(&r.body, RecordBody::QuestionReminded { n, .. } if *n > 1)),
            "{at}"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn an_escalated_role_decides_a_pending_call_once_it_escalated_and_not_before() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let clock = Arc::new(ManualClock::new(wall_now()));
        let server = Server::start_clocked(&backend, p.root(), clock.clone()).await;
        let alice = server.key("alice", false).await;
        let carol = role_key(&server, p.root(), "carol", "managers");
        let bob = role_key(&server, p.root(), "bob", "refunds");
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "desk", "key": "c1", "text": "go"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        assert_eq!(body["status"], "waiting", "{at}: {body}");
        let listed = items(&server, &bob).await;
        assert_eq!(listed.len(), 1, "{at}: {listed:?}");
        let id = listed[0]["id"].as_str().expect("id").to_owned();
        assert!(
            listed[0]["deadline"]["escalate"]["at"].is_i64(),
            "{at}: {listed:?}"
        );

        assert!(items(&server, &carol).await.is_empty(), "{at}");
        let (status, body) = server
            .post(
                &format!("/approvals/{id}"),
                &carol,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 404, "{at}: {body}");

        advance_until(
            &clock,
            &server.store,
            "alice/c1",
            30 * MIN,
            "question_escalated",
            1,
        )
        .await;
        let listed = items(&server, &carol).await;
        assert_eq!(listed.len(), 1, "{at}: {listed:?}");
        assert_eq!(listed[0]["id"], id, "{at}");
        let (status, body) = server
            .post(
                &format!("/approvals/{id}?wait=true"),
                &carol,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        assert_eq!(body["decided"]["author"], "carol", "{at}: {body}");
        assert!(body.get("thread").is_none(), "{at}: {body}");
        // Bob, after her: refused naming her.
        let (status, body) = server
            .post(
                &format!("/approvals/{id}"),
                &bob,
                json!({"decision": "reject", "reason": "late"}),
            )
            .await;
        assert_eq!(status, 409, "{at}: {body}");
        assert!(body.to_string().contains("carol"), "{at}: {body}");
        server.stop().await;
    }
}
