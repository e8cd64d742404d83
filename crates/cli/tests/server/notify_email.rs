//! Email, end to end, on every backend, against a real SMTP server on loopback
//! (`support/smtp.rs`: aiosmtpd, STARTTLS required, AUTH) that `Options::env` points the
//! server at: a project whose `agents/notifications/ops-mail.yaml` speaks for role `ops`, and a
//! tool whose approval names `ops`. The gate parks → one email with a text and an HTML part
//! carrying the same links; the approve link's page asks to confirm and decides nothing, its
//! POST applies the decision (as `ops-mail`), once (`409` after); the reject link asks for a
//! reason (`422` without) and is refused once the question was answered; the answer is
//! mailed too. A reminder (the tool's deadline, on a clock the test moves) sends the email
//! again, with links that work.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use duet_runtime::ManualClock;
use serde_json::{Value, json};

use crate::harness::{self, Server};
use crate::smtp::{PASSWORD, Received, SmtpServer, USER};
use crate::support;

/// How long a step may take before the test is hung (not a timing assertion).
const WITHIN: Duration = Duration::from_secs(30);
const MIN: i64 = 60_000;

/// `deployer` proposes `deploy` (approvers: role `ops`; reminded after 10 minutes), then says
/// `Done.`; `ops-mail` is role `ops`'s mailbox.
fn project() -> support::Scratch {
    crate::notify_support::deployer(
        "notify-email",
        "{ approvers: { roles: [ops] }, deadline: { remind: [10m] } }",
        (
            "ops-mail",
            "roles: [ops]\nemail: { to: [ops@example.com] }\n",
        ),
    )
}

/// The test server's options, mailing through `smtp`.
fn options(smtp: &SmtpServer) -> duet_server::Options {
    let env = BTreeMap::from([
        ("DUET_SMTP_URL".to_owned(), smtp.url(USER, PASSWORD)),
        (
            "DUET_SMTP_FROM".to_owned(),
            "duet <duet@example.com>".to_owned(),
        ),
        (
            "DUET_SMTP_CA_FILE".to_owned(),
            smtp.ca_file().display().to_string(),
        ),
    ]);
    duet_server::Options {
        env: duet_server::Env::from_map(env),
        ..harness::options()
    }
}

/// Starts alice's thread `key`; it parks on `deploy`. Its approval id.
async fn park(server: &Server, alice: &str, admin: &str, key: &str) -> String {
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
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["thread"] == format!("alice/{key}") || i["thread"] == key)
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("{at}: {key} waits: {list}"))
        .to_owned()
}

/// The links of an email: `(approve, reject, open)` from its text part, checked to be the
/// HTML part's links too, in the same order.
fn links(m: &Received) -> (String, String, String) {
    let text = m
        .part("text/plain")
        .expect("a text part")
        .replace("\r\n", "\n");
    let html = m.part("text/html").expect("an HTML part");
    let line = |label: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("a `{label}` line in\n{text}"))
            .trim()
            .to_owned()
    };
    let found = (line("Approve: "), line("Reject: "), line("Open in inbox: "));
    let hrefs: Vec<String> = html
        .split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|h| h.replace("&amp;", "&"))
        .collect();
    assert_eq!(
        hrefs,
        [found.0.clone(), found.1.clone(), found.2.clone()],
        "{html}"
    );
    found
}

/// Checks the envelope and both parts of notification email `m`; its subject.
fn check_email(m: &Received) -> String {
    assert_eq!(m.parsed["tls"], true);
    assert_eq!(m.parsed["authenticated"], true);
    assert_eq!(m.parsed["mailFrom"], "duet@example.com");
    assert_eq!(m.parsed["rcptTos"], json!(["ops@example.com"]));
    assert_eq!(m.header("To"), Some("ops@example.com"));
    assert_eq!(m.parsed["contentType"], "multipart/alternative");
    assert_eq!(m.part_types(), ["text/plain", "text/html"]);
    m.header("Subject").expect("a subject").to_owned()
}

/// `GET url`: (status, page).
async fn get(http: &reqwest::Client, url: &str) -> (u16, String) {
    let resp = http.get(url).send().await.expect("the link answers");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("a page"))
}

/// `POST url` with form `fields`: (status, page).
async fn post(http: &reqwest::Client, url: &str, fields: &[(&str, &str)]) -> (u16, String) {
    let resp = http
        .post(url)
        .form(fields)
        .send()
        .await
        .expect("the link answers");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("a page"))
}

/// What `GET /approvals/{id}` says as `token`.
async fn approval(server: &Server, token: &str, id: &str) -> Value {
    let (status, body) = server.get(&format!("/approvals/{id}"), token).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn an_emails_links_answer_once_and_the_answer_is_mailed() {
    let Some(smtp) = SmtpServer::start().await else {
        return;
    };
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_notifying(&backend, p.root(), options(&smtp), None).await;
        let alice = server.key("alice", false).await;
        let admin = server.key("root", true).await;
        let http = reqwest::Client::new();

        let id = park(&server, &alice, &admin, "m1").await;
        let parked = smtp.next_message(WITHIN).await;
        assert_eq!(
            check_email(&parked),
            "[duet] Approval needed: deploy (deployer)",
            "{at}"
        );
        let text = parked
            .part("text/plain")
            .expect("text")
            .replace("\r\n", "\n");
        assert!(text.contains("Tool: deploy"), "{at}: {text}");
        assert!(text.contains("\"region\": \"eu\""), "{at}: {text}");
        let (approve, reject, open) = links(&parked);
        let links_root = format!("{}/links/", server.base);
        assert!(approve.starts_with(&links_root), "{at}: {approve}");
        assert!(reject.starts_with(&links_root), "{at}: {reject}");
        assert_eq!(
            open,
            format!("{}/inbox/items/{}", server.base, harness::seg(&id)),
            "{at}"
        );

        // The approve link's page asks to confirm, and decides nothing.
        let (status, page) = get(&http, &approve).await;
        assert_eq!(status, 200, "{at}: {page}");
        assert!(page.contains("Approve this call?"), "{at}: {page}");
        assert!(page.contains("deploy"), "{at}: {page}");
        // The reject link asks why: without a reason, 422 and nothing decided.
        let (status, page) = get(&http, &reject).await;
        assert_eq!(status, 200, "{at}: {page}");
        assert!(page.contains("name=\"reason\""), "{at}: {page}");
        let (status, page) = post(&http, &reject, &[]).await;
        assert_eq!(status, 422, "{at}: {page}");
        assert!(page.contains("Say why you reject it"), "{at}: {page}");
        let (status, page) = post(&http, &reject, &[("reason", "   ")]).await;
        assert_eq!(status, 422, "{at}: {page}");
        let still = approval(&server, &admin, &id).await;
        assert!(still.get("decided").is_none(), "{at}: {still}");

        // POST approves, as the role's mailbox; the thread runs the call.
        let (status, page) = post(&http, &approve, &[]).await;
        assert_eq!(status, 200, "{at}: {page}");
        assert!(page.contains("Approved by ops-mail."), "{at}: {page}");
        harness::until(&server, &alice, "m1", "awaiting_human").await;
        let decided = approval(&server, &admin, &id).await;
        assert_eq!(decided["decided"]["decision"], "approve", "{at}: {decided}");
        assert_eq!(decided["decided"]["author"], "ops-mail", "{at}: {decided}");

        // Once: the same link again is 409 (GET and POST), and so is the reject link now.
        let (status, page) = post(&http, &approve, &[]).await;
        assert_eq!(status, 409, "{at}: {page}");
        assert!(
            page.contains("This link was used already, by ops-mail"),
            "{at}: {page}"
        );
        let (status, _) = get(&http, &approve).await;
        assert_eq!(status, 409, "{at}");
        let (status, page) = post(&http, &reject, &[("reason", "too late")]).await;
        assert_eq!(status, 409, "{at}: {page}");
        assert!(
            page.contains("This question was answered already, by ops-mail."),
            "{at}: {page}"
        );
        let t = server
            .store
            .thread("alice/m1")
            .await
            .expect("read")
            .expect("thread");
        let decisions = server
            .store
            .records(t.id)
            .await
            .expect("records")
            .iter()
            .filter(|r| matches!(r.body, duet_runtime::RecordBody::ApprovalDecided(_)))
            .count();
        assert_eq!(decisions, 1, "{at}");

        // The answer is mailed to the role too, with no links to answer with.
        let answered = smtp.next_message(WITHIN).await;
        assert_eq!(
            check_email(&answered),
            "[duet] Answered: deploy (deployer) — approve by ops-mail",
            "{at}"
        );
        let text = answered.part("text/plain").expect("text");
        assert!(
            !text.contains(&links_root),
            "{at}: an answer carries no links: {text}"
        );
        server.stop().await;
    }
}

fn wall_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("fits")
}

#[tokio::test]
async fn a_reminder_sends_the_email_again_with_links_that_work() {
    let Some(smtp) = SmtpServer::start().await else {
        return;
    };
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let clock = Arc::new(ManualClock::new(wall_now()));
        let server =
            Server::start_notifying(&backend, p.root(), options(&smtp), Some(clock.clone())).await;
        let alice = server.key("alice", false).await;
        let admin = server.key("root", true).await;
        let http = reqwest::Client::new();

        let id = park(&server, &alice, &admin, "m2").await;
        let parked = smtp.next_message(WITHIN).await;
        assert_eq!(
            check_email(&parked),
            "[duet] Approval needed: deploy (deployer)",
            "{at}"
        );
        let (first_approve, _, _) = links(&parked);

        // Ten minutes on, the deadline reminds: the email again, with links of its own.
        clock.advance(10 * MIN);
        let reminded = smtp.next_message(WITHIN).await;
        assert_eq!(
            check_email(&reminded),
            "[duet] Reminder: approval needed: deploy (deployer)",
            "{at}"
        );
        let text = reminded
            .part("text/plain")
            .expect("text")
            .replace("\r\n", "\n");
        assert!(text.contains("Tool: deploy"), "{at}: {text}");
        let (approve, reject, _) = links(&reminded);
        assert_ne!(approve, first_approve, "{at}: a reminder's own links");
        let (status, _) = get(&http, &reject).await;
        assert_eq!(status, 200, "{at}");

        // Its approve link decides.
        let (status, page) = post(&http, &approve, &[]).await;
        assert_eq!(status, 200, "{at}: {page}");
        harness::until(&server, &alice, "m2", "awaiting_human").await;
        let decided = approval(&server, &admin, &id).await;
        assert_eq!(decided["decided"]["decision"], "approve", "{at}: {decided}");
        assert_eq!(decided["decided"]["author"], "ops-mail", "{at}: {decided}");
        // The first email's link is now refused: the question was answered.
        let (status, page) = post(&http, &first_approve, &[]).await;
        assert_eq!(status, 409, "{at}: {page}");
        let answered = smtp.next_message(WITHIN).await;
        assert!(
            check_email(&answered).starts_with("[duet] Answered: deploy"),
            "{at}"
        );
        server.stop().await;
    }
}
