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
        "name: gate\nexposeAsTool: true\ntoolDescription: Asks before shipping.\nsideA: { prompt: gate }\nsideB:\n  human: true\n  approver: true\n  deadline:\n    after: 1h\n    default: \"reject: no answer within 1 h\"\n    remind: [10m]\n    escalate: { after: 30m, roles: [managers] }\n",
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

/// A server on a clock the test moves, keys for alice (the owner), carol (role `managers`) and
/// bob (role `refunds`), and alice's thread `key` of `agent` started with `text`, settled as
/// `status`.
struct Asked {
    p: support::Scratch,
    clock: Arc<ManualClock>,
    server: Server,
    alice: String,
    carol: String,
    bob: String,
}

async fn asked(
    backend: &support::Backend,
    agent: &str,
    key: &str,
    text: &str,
    status: &str,
) -> Asked {
    let at = backend.name();
    let p = project();
    let clock = Arc::new(ManualClock::new(wall_now()));
    let server = Server::start_clocked(backend, p.root(), clock.clone()).await;
    let alice = server.key("alice", false).await;
    let carol = role_key(&server, p.root(), "carol", "managers");
    let bob = role_key(&server, p.root(), "bob", "refunds");
    let (code, body) = server
        .post(
            "/threads?wait=true",
            &alice,
            json!({"agent": agent, "key": key, "text": text}),
        )
        .await;
    assert_eq!(code, 200, "{at}: {body}");
    assert_eq!(body["status"], status, "{at}: {body}");
    Asked {
        p,
        clock,
        server,
        alice,
        carol,
        bob,
    }
}

#[tokio::test]
async fn an_escalated_role_answers_a_question_once_it_escalated_and_not_before() {
    for backend in support::backends().await {
        let at = backend.name();
        let Asked {
            p: _project,
            clock,
            server,
            alice,
            carol,
            bob,
        } = asked(&backend, "gate", "q1", "ship it?", "awaiting_human").await;
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
        let Asked {
            p: _project,
            clock,
            server,
            alice: _,
            carol,
            bob,
        } = asked(&backend, "desk", "c1", "go", "waiting").await;
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

/// `duet threads show KEY` (`--json` when `json`) as `owner` on the server's database.
fn show(server: &Server, root: &std::path::Path, owner: &str, key: &str, json: bool) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(["threads", "--principal", owner, "--project"])
        .arg(root)
        .arg("--db")
        .arg(db_arg(&server.backend))
        .args(["show", key])
        .env_remove("DUET_DATABASE_URL");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("duet threads show");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `GET path` of the inbox with `cookie`: (status, HTML).
async fn page(server: &Server, cookie: &str, path: &str) -> (u16, String) {
    let resp = crate::inbox::plain()
        .get(format!("{}{path}", server.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("get");
    (resp.status().as_u16(), resp.text().await.expect("html"))
}

#[tokio::test]
async fn a_questions_deadline_is_shown_everywhere_and_a_moved_park_is_still_answered() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let clock = Arc::new(ManualClock::new(wall_now()));
        let server = Server::start_clocked(&backend, p.root(), clock.clone()).await;
        let alice = server.key("alice", false).await;

        // A2A: the input-required task's status message says the deadline.
        let sent = crate::harness::a2a(
            &server,
            "gate",
            &alice,
            "SendMessage",
            crate::harness::a2a_message("d-1", "ship it?"),
        )
        .await;
        let task = &sent["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{at}: {sent}"
        );
        let parts = task["status"]["message"]["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(parts[0]["text"], "May I ship?", "{at}: {sent}");
        let said = parts[1]["text"].as_str().unwrap_or_default();
        assert!(
            said.starts_with(
                "Deadline: expires in 1 h, then the answer is \"reject: no answer within 1 h\""
            ) && said.contains("escalates to role managers in 30 min"),
            "{at}: {said}"
        );
        assert_eq!(parts[2]["data"]["kind"], "duet.deadline", "{at}: {sent}");
        let due = parts[2]["data"]["deadline"]["at"].as_i64().expect("at");

        // GET /approvals, from the timer table.
        let listed = items(&server, &alice).await;
        assert_eq!(listed.len(), 1, "{at}: {listed:?}");
        let id = listed[0]["id"].as_str().expect("id").to_owned();
        let d = &listed[0]["deadline"];
        assert_eq!(d["at"], due, "{at}: {d}");
        assert_eq!(d["action"], "default", "{at}: {d}");
        assert_eq!(d["status"], "pending", "{at}: {d}");
        assert_eq!(d["reminders"][0]["status"], "pending", "{at}: {d}");
        assert_eq!(d["escalate"]["roles"], json!(["managers"]), "{at}: {d}");

        // duet threads show, as JSON and as text.
        let key = task["contextId"].as_str().expect("context").to_owned();
        let shown: Value =
            serde_json::from_str(&show(&server, p.root(), "alice", &key, true)).expect("json");
        assert_eq!(shown["deadline"]["at"], due, "{at}: {shown}");
        let text = show(&server, p.root(), "alice", &key, false);
        assert!(
            text.contains("deadline: expires in 1 h, then the answer is \"reject: no answer within 1 h\"; 0 of 1 reminder sent"),
            "{at}: {text}"
        );

        // The inbox: beside the question in the list, and on its page.
        let cookie = crate::inbox::cookie(&server, &alice).await;
        let (status, list) = page(&server, &cookie, "/inbox").await;
        assert_eq!(status, 200, "{at}");
        assert!(
            list.contains("class=\"deadline\"") && list.contains("expires in 1 h"),
            "{at}: {list}"
        );
        let (_, before) = page(&server, &cookie, &format!("/inbox/items/{id}")).await;
        let token = crate::inbox::csrf(&before);

        // The reminder moves the park: the page with the old id still waits, says so, and
        // its form answers.
        let stored = format!("alice/{key}");
        advance_until(
            &clock,
            &server.store,
            &stored,
            10 * MIN,
            "question_reminded",
            1,
        )
        .await;
        let d = &items(&server, &alice).await[0]["deadline"];
        assert_eq!(d["reminders"][0]["status"], "completed", "{at}: {d}");
        let (status, moved) = page(&server, &cookie, &format!("/inbox/items/{id}")).await;
        assert_eq!(status, 200, "{at}");
        assert!(
            moved.contains("id=\"answer\"") && moved.contains("1 of 1 reminder sent"),
            "{at}: {moved}"
        );
        // Subscribed before answering, so the run that takes the answer is heard; the park it
        // leaves read before it can.
        let mut feed = server.store.changes();
        let waiting_at = server
            .store
            .thread(&stored)
            .await
            .expect("read")
            .and_then(|t| t.park());
        let resp = crate::inbox::plain()
            .post(format!("{}/inbox/items/{id}", server.base))
            .header("cookie", &cookie)
            .form(&[
                ("kind", "reply"),
                ("text", "yes, ship"),
                ("csrf", token.as_str()),
                ("message_id", "d-answer-1"),
            ])
            .send()
            .await
            .expect("post");
        assert_eq!(resp.status(), 303, "{at}");
        let t = server
            .store
            .thread(&stored)
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
        assert_eq!(answered.len(), 1, "{at}: {answered:?}");
        assert_eq!(answered[0].answer.content, "yes, ship", "{at}");
        // Accepted is not yet taken: wait for the run that drains the answer to leave the park.
        let drained = async {
            loop {
                let now = server.store.thread(&stored).await.expect("read");
                if now.is_some_and(|t| t.park() != waiting_at) {
                    return;
                }
                feed.next().await.expect("the feed goes on");
            }
        };
        tokio::time::timeout(Duration::from_secs(30), drained)
            .await
            .expect("the answer is drained");
        // The old id's page names the answer.
        let (_, after) = page(&server, &cookie, &format!("/inbox/items/{id}")).await;
        assert!(after.contains("Answered by"), "{at}: {after}");
        server.stop().await;
    }
}
