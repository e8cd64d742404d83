//! Slack, end to end, on every backend: a project whose `agents/notifications/ops-slack.yaml`
//! speaks for role `ops`, and a tool whose approval names `ops`. The gate parks → the loopback
//! stand-in for Slack (`support/slack.rs`) takes exactly one `chat.postMessage` in Block Kit
//! (the proposed call, Approve and Reject buttons whose values are one-time link tokens, the
//! inbox's link); a click signed as Slack signs applies the decision as the Slack user (the
//! thread runs the call) and the message is updated in place (`chat.update`, same channel and
//! `ts`) saying who approved; a second click is answered `200` and told to its user in an
//! ephemeral message, nothing decided twice; a bad signature and a stale timestamp are `401`,
//! nothing decided; a click on Reject gives the model `rejected in Slack by @user`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_slack::{self, Call, Failure, FakeSlack};
use crate::harness::{self, Server};
use crate::support;

const BOT_TOKEN: &str = "xoxb-duet-test";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// How long a step may take before the test is hung (not a timing assertion).
const WITHIN: Duration = Duration::from_secs(30);

/// `deployer` proposes `deploy` (approvers: role `ops`), then says `Done.`; `ops-slack` is
/// role `ops`'s Slack channel.
fn project() -> support::Scratch {
    crate::notify_support::deployer(
        "notify-slack",
        "{ approvers: { roles: [ops] } }",
        ("ops-slack", "roles: [ops]\nslack: { channel: C0OPS }\n"),
    )
}

/// The test server's options, Slack reached at `slack`.
fn options(slack: &FakeSlack) -> duet_server::Options {
    duet_server::Options {
        slack: duet_server::SlackOptions {
            api_url: slack.api.clone(),
            bot_token: Some(BOT_TOKEN.into()),
            signing_secret: Some(SIGNING_SECRET.into()),
        },
        ..harness::options()
    }
}

fn now_s() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_secs()).expect("fits")
}

/// The button `action_id` of a posted message.
fn button<'a>(message: &'a Value, action_id: &str) -> &'a Value {
    message["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().into_iter().flatten())
        .find(|e| e["action_id"] == action_id)
        .unwrap_or_else(|| panic!("a `{action_id}` button in {message:#}"))
}

/// Every block's text of a message, joined.
fn texts(message: &Value) -> String {
    let mut out = Vec::new();
    for b in message["blocks"].as_array().into_iter().flatten() {
        if let Some(t) = b["text"]["text"].as_str() {
            out.push(t.to_owned());
        }
        for e in b["elements"].as_array().into_iter().flatten() {
            if let Some(t) = e["text"].as_str() {
                out.push(t.to_owned());
            }
        }
    }
    out.join("\n")
}

/// A parked deploy: its approval id and the message posted about it.
struct Parked {
    approval: String,
    post: Call,
    ts: String,
}

/// Starts alice's thread `key`; it parks on `deploy`, and Slack gets the message.
async fn park(server: &Server, alice: &str, admin: &str, slack: &FakeSlack, key: &str) -> Parked {
    let at = server.backend.name();
    let (status, body) = server
        .post(
            "/threads?wait=true",
            alice,
            json!({"agent": "deployer", "key": key, "text": "ship build 7"}),
        )
        .await;
    assert_eq!(status, 200, "{at}: {body}");
    assert_eq!(body["status"], "waiting", "{at}: {body}");
    let (status, list) = server.get("/approvals", admin).await;
    assert_eq!(status, 200, "{at}: {list}");
    let approval = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["thread"] == format!("alice/{key}") || i["thread"] == key)
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("{at}: {key} waits: {list}"))
        .to_owned();
    let post = slack.next_call(WITHIN).await;
    assert_eq!(post.method, "chat.postMessage", "{at}: {post:?}");
    let ts = post
        .answer
        .clone()
        .unwrap_or_else(|e| panic!("{at}: Slack refused the message: {e}: {:#}", post.body));
    Parked { approval, post, ts }
}

/// What `GET /approvals/{id}` says as `token`.
async fn approval(server: &Server, token: &str, id: &str) -> Value {
    let (status, body) = server.get(&format!("/approvals/{id}"), token).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The tool results thread `key` holds.
async fn results(server: &Server, alice: &str, key: &str) -> Vec<String> {
    let (status, page) = server
        .get(&format!("/threads/{key}/messages?limit=500"), alice)
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["data"]["role"] == "tool")
        .map(|m| m["data"]["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_click_in_slack_decides_once_and_the_message_says_who() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let slack = FakeSlack::start(BOT_TOKEN).await;
        let server = Server::start_notifying(&backend, p.root(), options(&slack), None).await;
        let alice = server.key("alice", false).await;
        let admin = server.key("root", true).await;
        let http = reqwest::Client::new();

        let Parked {
            approval: id,
            post,
            ts,
        } = park(&server, &alice, &admin, &slack, "d1").await;

        // The message: Block Kit as the stand-in checked it, about the proposed call.
        let m = &post.body;
        assert_eq!(post.authorization.as_deref(), Some("Bearer xoxb-duet-test"));
        assert_eq!(m["channel"], "C0OPS", "{at}");
        assert_eq!(m["blocks"][0]["type"], "header", "{at}: {m:#}");
        assert_eq!(
            m["blocks"][0]["text"]["text"], "deployer wants to run deploy",
            "{at}"
        );
        let said = texts(m);
        assert!(said.contains("*Proposed call:* `deploy`"), "{at}: {said}");
        assert!(said.contains("\"region\": \"eu\""), "{at}: {said}");
        assert!(said.contains("\"build\": 7"), "{at}: {said}");
        assert!(said.contains("role `ops`"), "{at}: {said}");
        let (approve, reject, open) =
            (button(m, "approve"), button(m, "reject"), button(m, "open"));
        assert_eq!(approve["style"], "primary", "{at}");
        assert_eq!(reject["style"], "danger", "{at}");
        let approve_token = approve["value"].as_str().expect("a value").to_owned();
        let reject_token = reject["value"].as_str().expect("a value").to_owned();
        assert_ne!(approve_token, reject_token, "{at}");
        assert_eq!(
            open["url"],
            format!("{}/inbox/items/{}", server.base, harness::seg(&id)),
            "{at}"
        );
        // Each value is a one-time link's token: its page asks to confirm, deciding nothing.
        for token in [&approve_token, &reject_token] {
            let page = http
                .get(format!("{}/links/{token}", server.base))
                .send()
                .await
                .expect("the link's page");
            assert_eq!(page.status(), 200, "{at}");
        }

        // A bad signature, and a good one 6 minutes old: refused, nothing decided.
        let click =
            fake_slack::click_body(("U0BOB", "bob"), "approve", &approve_token, "C0OPS", &ts);
        let forged =
            fake_slack::interact(&http, &server.base, "not the secret", now_s(), &click).await;
        assert_eq!(forged.status(), 401, "{at}");
        let body: Value = forged.json().await.expect("a problem");
        assert_eq!(body["code"], "bad_signature", "{at}: {body}");
        let stale = fake_slack::interact(
            &http,
            &server.base,
            SIGNING_SECRET,
            now_s() - 6 * 60,
            &click,
        )
        .await;
        assert_eq!(stale.status(), 401, "{at}");
        let body: Value = stale.json().await.expect("a problem");
        assert_eq!(body["code"], "stale_request", "{at}: {body}");
        let still = approval(&server, &admin, &id).await;
        assert!(still.get("decided").is_none(), "{at}: {still}");

        // Bob approves in Slack: applied as him; the thread runs the call.
        let clicked =
            fake_slack::interact(&http, &server.base, SIGNING_SECRET, now_s(), &click).await;
        assert_eq!(clicked.status(), 200, "{at}");
        harness::until(&server, &alice, "d1", "awaiting_human").await;
        let decided = approval(&server, &admin, &id).await;
        assert_eq!(decided["decided"]["decision"], "approve", "{at}: {decided}");
        assert_eq!(decided["decided"]["author"], "U0BOB", "{at}: {decided}");
        let t = server
            .store
            .thread("alice/d1")
            .await
            .expect("read")
            .expect("thread");
        let records = server.store.records(t.id).await.expect("records");
        let authors: Vec<Option<String>> = records
            .iter()
            .filter_map(|r| match &r.body {
                duet_runtime::RecordBody::ApprovalDecided(d) => Some(d.author.clone()),
                _ => None,
            })
            .collect();
        let bob = duet_runtime::Principal {
            kind: "user".into(),
            issuer: "slack".into(),
            subject: "U0BOB".into(),
        }
        .canonical();
        assert_eq!(authors, [Some(bob)], "{at}");
        assert_eq!(
            results(&server, &alice, "d1").await,
            ["deployed 7 to eu"],
            "{at}"
        );

        // The message is updated in place: who approved, no buttons.
        let update = slack.next_call(WITHIN).await;
        assert_eq!(update.method, "chat.update", "{at}: {update:?}");
        assert_eq!(
            update.answer.as_deref(),
            Ok(ts.as_str()),
            "{at}: {update:?}"
        );
        assert_eq!(update.body["channel"], "C0OPS", "{at}");
        assert_eq!(update.body["ts"], ts.as_str(), "{at}");
        let said = texts(&update.body);
        assert!(said.contains("Approved by <@U0BOB>"), "{at}: {said}");
        assert!(
            !update.body["blocks"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|b| b["type"] == "actions"),
            "{at}: no buttons left: {:#}",
            update.body
        );

        // A double click: 200, and bob alone is told; nothing decided again.
        let again =
            fake_slack::interact(&http, &server.base, SIGNING_SECRET, now_s(), &click).await;
        assert_eq!(again.status(), 200, "{at}");
        let told = slack.next_call(WITHIN).await;
        assert_eq!(told.method, "chat.postEphemeral", "{at}: {told:?}");
        assert_eq!(told.body["channel"], "C0OPS", "{at}");
        assert_eq!(told.body["user"], "U0BOB", "{at}");
        let text = told.body["text"].as_str().unwrap_or_default();
        assert!(
            text.starts_with("This link was used already, by U0BOB"),
            "{at}: {text}"
        );
        // So is Reject, clicked after the answer: the question was answered, by bob.
        let late = fake_slack::click_body(("U0EVE", "eve"), "reject", &reject_token, "C0OPS", &ts);
        let late = fake_slack::interact(&http, &server.base, SIGNING_SECRET, now_s(), &late).await;
        assert_eq!(late.status(), 200, "{at}");
        let told = slack.next_call(WITHIN).await;
        assert_eq!(told.method, "chat.postEphemeral", "{at}: {told:?}");
        assert_eq!(told.body["user"], "U0EVE", "{at}");
        assert_eq!(
            told.body["text"], "This question was answered already, by U0BOB.",
            "{at}"
        );
        let records = server.store.records(t.id).await.expect("records");
        let decisions = records
            .iter()
            .filter(|r| matches!(r.body, duet_runtime::RecordBody::ApprovalDecided(_)))
            .count();
        assert_eq!(decisions, 1, "{at}");
        assert_eq!(
            results(&server, &alice, "d1").await,
            ["deployed 7 to eu"],
            "{at}"
        );

        // Slack heard exactly this, each call taken.
        let calls = slack.calls();
        let methods: Vec<&str> = calls.iter().map(|c| c.method.as_str()).collect();
        assert_eq!(
            methods,
            [
                "chat.postMessage",
                "chat.update",
                "chat.postEphemeral",
                "chat.postEphemeral"
            ],
            "{at}"
        );
        assert!(calls.iter().all(|c| c.answer.is_ok()), "{at}: {calls:#?}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_reject_in_slack_tells_the_model_who_rejected_it() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let slack = FakeSlack::start(BOT_TOKEN).await;
        let server = Server::start_notifying(&backend, p.root(), options(&slack), None).await;
        let alice = server.key("alice", false).await;
        let admin = server.key("root", true).await;
        let http = reqwest::Client::new();

        let Parked {
            approval: id,
            post,
            ts,
        } = park(&server, &alice, &admin, &slack, "d2").await;
        let token = button(&post.body, "reject")["value"]
            .as_str()
            .expect("a value")
            .to_owned();
        let click = fake_slack::click_body(("U0BOB", "bob"), "reject", &token, "C0OPS", &ts);
        let clicked =
            fake_slack::interact(&http, &server.base, SIGNING_SECRET, now_s(), &click).await;
        assert_eq!(clicked.status(), 200, "{at}");
        harness::until(&server, &alice, "d2", "awaiting_human").await;

        let decided = approval(&server, &admin, &id).await;
        assert_eq!(decided["decided"]["decision"], "reject", "{at}: {decided}");
        assert_eq!(decided["decided"]["author"], "U0BOB", "{at}: {decided}");
        assert_eq!(
            decided["decided"]["reason"], "rejected in Slack by @bob",
            "{at}: {decided}"
        );
        let results = results(&server, &alice, "d2").await;
        assert_eq!(results.len(), 1, "{at}: {results:?}");
        assert!(
            results[0].contains("rejected in Slack by @bob"),
            "{at}: the model saw the reason: {results:?}"
        );

        let update = slack.next_call(WITHIN).await;
        assert_eq!(update.method, "chat.update", "{at}: {update:?}");
        assert_eq!(update.body["ts"], ts.as_str(), "{at}");
        assert!(update.answer.is_ok(), "{at}: {update:?}");
        let said = texts(&update.body);
        assert!(
            said.contains("Rejected by <@U0BOB>: rejected in Slack by @bob"),
            "{at}: {said}"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn slack_down_at_the_park_gets_the_message_then_its_update_in_order() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let slack = FakeSlack::start(BOT_TOKEN).await;
        let server = Server::start_notifying(&backend, p.root(), options(&slack), None).await;
        let alice = server.key("alice", false).await;
        let http = reqwest::Client::new();

        // Slack is down when the gate parks: the message fails, and is due again.
        slack.fail(Some(Failure::Unavailable));
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "deployer", "key": "d3", "text": "ship build 7"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        let first = slack.next_call(WITHIN).await;
        assert_eq!(first.method, "chat.postMessage", "{at}: {first:?}");
        assert_eq!(first.answer, Err("HTTP 503".to_owned()), "{at}");

        // Meanwhile the question is answered elsewhere (the same one-time link, followed).
        let token = button(&first.body, "approve")["value"]
            .as_str()
            .expect("a value")
            .to_owned();
        let resp = http
            .post(format!("{}/links/{token}", server.base))
            .form(&[("confirm", "1")])
            .send()
            .await
            .expect("the link answers");
        assert_eq!(resp.status(), 200, "{at}");
        harness::until(&server, &alice, "d3", "awaiting_human").await;
        let retried = slack.next_call(WITHIN).await;
        assert_eq!(retried.method, "chat.postMessage", "{at}: {retried:?}");
        assert!(retried.answer.is_err(), "{at}: {retried:?}");

        // Slack back: the message first, then its update (the same `ts`), once each.
        slack.fail(None);
        let posted = slack.next_call(WITHIN).await;
        assert_eq!(posted.method, "chat.postMessage", "{at}: {posted:?}");
        let ts = posted.answer.clone().expect("posted");
        assert_eq!(posted.body, first.body, "{at}: the message as routed");
        let update = slack.next_call(WITHIN).await;
        assert_eq!(update.method, "chat.update", "{at}: {update:?}");
        assert_eq!(update.body["ts"], ts.as_str(), "{at}: {:#}", update.body);
        assert_eq!(
            update.answer.as_deref(),
            Ok(ts.as_str()),
            "{at}: {update:?}"
        );
        let said = texts(&update.body);
        assert!(said.contains("Approved by ops-slack"), "{at}: {said}");
        server.stop().await;
    }
}
