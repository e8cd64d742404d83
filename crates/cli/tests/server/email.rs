//! The email channel against a real SMTP server on loopback (`support/smtp.rs`: aiosmtpd,
//! STARTTLS required, AUTH): a rendered notification arrives as `multipart/alternative` with
//! its text and HTML parts exactly as rendered, its subject, its links, the `Message-ID` of its
//! delivery key and its `X-Duet-Delivery` header; a wrong password, a certificate signed by a CA
//! not trusted, a refused and a busy recipient each come back as an error that says which, the
//! permanent ones marked `permanent:`. (Through `duet_server::notify_testing`: the channel is
//! the server crate's own.)

use serde_json::{Value, json};

use duet_server::notify_testing::{
    Event, Links, ProposedCall, Question, QuestionKind, Smtp, ThreadRef, View, render_email,
    send_email,
};
use duet_server_store::{Delivery, DeliveryStatus};

use crate::smtp::{PASSWORD, SmtpServer, USER};

/// A tool call waiting for ops, with one-time links (a `&` in one, to be escaped in HTML).
fn parked() -> View {
    View {
        event: Event::QuestionParked,
        at: 1_777_636_800_000,
        thread: ThreadRef {
            id: "0195f0aa-0000-7000-8000-000000000001".into(),
            key: "release-7".into(),
            agent: "deployer".into(),
            owner: Some("alice".into()),
        },
        question: Some(Question {
            approval: "0195f0aa-0000-7000-8000-000000000001:1:9".into(),
            kind: QuestionKind::ToolCall,
            text: "Deploy build 7 to Zürich <prod> & tell #ops?".into(),
            call: Some(ProposedCall {
                id: "call-1".into(),
                tool: "deploy".into(),
                args: json!({"region": "zürich", "build": 7, "note": "<b>now</b>"}),
            }),
            decisions: vec![duet_spec::Decision::Approve, duet_spec::Decision::Reject],
            approvers: duet_spec::Approvers {
                roles: vec!["ops".into()],
                principals: vec![],
            },
            deadline: Some("answered with \"reject\" at 2026-05-02 12:00 UTC".into()),
        }),
        answer: None,
        escalated_to: None,
        reminder: None,
        session: None,
        links: Some(Links {
            approve: Some("http://127.0.0.1:8080/links/eyJsIjoiYSJ9.c2ln?via=email&x=1".into()),
            reject: Some("http://127.0.0.1:8080/links/eyJsIjoiciJ9.c2ln".into()),
            open: Some("http://127.0.0.1:8080/inbox/approvals/release-7".into()),
            expires_at: Some(1_777_896_000_000),
        }),
    }
}

/// An email delivery of `body`, as the outbox holds one.
fn delivery(id: i64, key: &str, body: String) -> Delivery {
    Delivery {
        id,
        channel: "email".into(),
        stream: "email:notifications/ops:ops@example.com".into(),
        target: "ops@example.com".into(),
        notice: Some(12),
        thread: None,
        event: "question.parked".into(),
        subject: Some("0195f0aa-0000-7000-8000-000000000001:1:9".into()),
        subscription: Some("notifications/ops".into()),
        recipient: None,
        body,
        meta: None,
        idempotency_key: key.into(),
        attempts: 0,
        status: DeliveryStatus::Pending,
        next_at: 0,
        last_error: None,
        response: None,
        created_at: 0,
        finished_at: None,
    }
}

/// The channel to `server`, as `user`/`password`, trusting its CA or not.
fn smtp(server: &SmtpServer, user: &str, password: &str, trust: bool) -> Smtp {
    let url = server.url(user, password);
    let ca = server.ca_file().display().to_string();
    Smtp::from_vars(|name| match name {
        "DUET_SMTP_URL" => Some(url.clone()),
        "DUET_SMTP_FROM" => Some("duet <duet@example.com>".into()),
        "DUET_SMTP_CA_FILE" => trust.then(|| ca.clone()),
        _ => None,
    })
    .expect("the variables configure a channel")
    .expect("a URL: a channel")
}

/// Text with its line ends as `\n` and no trailing white space.
fn lines(s: &str) -> String {
    s.replace("\r\n", "\n").trim_end().to_owned()
}

/// Every `href` of an HTML text, unescaped.
fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|h| h.replace("&amp;", "&"))
        .collect()
}

#[tokio::test]
async fn a_notification_arrives_with_both_parts_its_subject_and_its_links() {
    let Some(server) = SmtpServer::start().await else {
        return;
    };
    let view = parked();
    let body = render_email(&view, "ops@example.com");
    let rendered: Value = serde_json::from_str(&body).expect("the body is JSON");
    let smtp = smtp(&server, USER, PASSWORD, true);

    let response = send_email(&smtp, &delivery(42, "n12-0", body))
        .await
        .expect("sent");
    let response: Value =
        serde_json::from_str(&response.expect("a response kept")).expect("JSON response");
    assert_eq!(response["messageId"], "<n12-0@duet>");
    assert!(
        response["reply"]
            .as_str()
            .is_some_and(|r| r.starts_with("250 ")),
        "{response}"
    );

    let got = server.messages();
    assert_eq!(got.len(), 1, "{got:?}");
    let m = &got[0];
    // The envelope: over TLS, authenticated, to the body's address.
    assert_eq!(m.parsed["tls"], true);
    assert_eq!(m.parsed["authenticated"], true);
    assert_eq!(m.parsed["mailFrom"], "duet@example.com");
    assert_eq!(m.parsed["rcptTos"], json!(["ops@example.com"]));
    // The headers.
    assert_eq!(m.header("Subject"), rendered["subject"].as_str());
    assert_eq!(
        m.header("Subject"),
        Some("[duet] Approval needed: deploy (deployer)")
    );
    assert_eq!(m.header("To"), Some("ops@example.com"));
    assert_eq!(m.header("From"), Some("duet <duet@example.com>"));
    assert_eq!(m.header("Message-ID"), Some("<n12-0@duet>"));
    assert_eq!(m.header("X-Duet-Delivery"), Some("42"));
    assert_eq!(m.header("Auto-Submitted"), Some("auto-generated"));
    assert_eq!(m.parsed["contentType"], "multipart/alternative");
    // Both parts, text first, each exactly as rendered.
    assert_eq!(m.part_types(), ["text/plain", "text/html"]);
    let text = m.part("text/plain").expect("text part");
    let html = m.part("text/html").expect("HTML part");
    assert_eq!(lines(text), lines(rendered["text"].as_str().expect("text")));
    assert_eq!(lines(html), lines(rendered["html"].as_str().expect("html")));
    // What is asked, and the links, in both.
    let links = view.links.as_ref().expect("links");
    let (approve, reject, open) = (
        links.approve.as_deref().expect("approve"),
        links.reject.as_deref().expect("reject"),
        links.open.as_deref().expect("open"),
    );
    for line in [
        "Deploy build 7 to Zürich <prod> & tell #ops?".to_owned(),
        "Tool: deploy".to_owned(),
        "  \"region\": \"zürich\",".to_owned(),
        "Who may answer: roles ops".to_owned(),
        format!("Approve: {approve}"),
        format!("Reject: {reject}"),
        format!("Open in inbox: {open}"),
        "Approve and Reject each work once, until 2026-05-04 12:00 UTC; the inbox has every other choice.".to_owned(),
    ] {
        assert!(
            lines(text).lines().any(|l| l == line),
            "{line:?} in\n{text}"
        );
    }
    assert_eq!(hrefs(html), [approve, reject, open]);
    assert!(
        html.contains("Deploy build 7 to Zürich &lt;prod&gt; &amp; tell #ops?"),
        "{html}"
    );
    assert!(html.contains("&lt;b&gt;now&lt;/b&gt;"), "{html}");
    assert!(
        !html.contains("<script") && !html.contains("<img"),
        "{html}"
    );
    assert!(
        m.raw.contains("\r\n\r\n"),
        "a message of headers and a body"
    );
}

#[tokio::test]
async fn a_wrong_password_is_an_authentication_failure_given_up_at_once() {
    let Some(server) = SmtpServer::start().await else {
        return;
    };
    let smtp = smtp(&server, USER, "not the password", true);
    let body = render_email(&parked(), "ops@example.com");
    let err = send_email(&smtp, &delivery(1, "n1-0", body))
        .await
        .expect_err("refused");
    assert!(err.starts_with("permanent:"), "{err}");
    assert!(
        err.contains("535") && err.contains("Authentication"),
        "{err}"
    );
    assert!(!err.contains("not the password"), "{err}");
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn a_certificate_from_a_ca_not_trusted_is_refused() {
    let Some(server) = SmtpServer::start().await else {
        return;
    };
    let smtp = smtp(&server, USER, PASSWORD, false);
    let body = render_email(&parked(), "ops@example.com");
    let err = send_email(&smtp, &delivery(1, "n1-0", body))
        .await
        .expect_err("refused");
    assert!(!err.starts_with("permanent:"), "{err}");
    assert!(
        err.contains(&format!("smtp://127.0.0.1:{}", server.port())),
        "{err}"
    );
    assert!(
        err.contains("invalid peer certificate: UnknownIssuer"),
        "{err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn a_refused_recipient_is_permanent_and_a_busy_one_transient() {
    let Some(server) = SmtpServer::start().await else {
        return;
    };
    let smtp = smtp(&server, USER, PASSWORD, true);
    let refused = render_email(&parked(), "reject@example.com");
    let err = send_email(&smtp, &delivery(1, "n1-0", refused))
        .await
        .expect_err("refused");
    assert!(
        err.starts_with("permanent:") && err.contains("550"),
        "{err}"
    );
    let busy = render_email(&parked(), "busy@example.com");
    let err = send_email(&smtp, &delivery(2, "n1-1", busy))
        .await
        .expect_err("busy");
    assert!(
        !err.starts_with("permanent:") && err.contains("451"),
        "{err}"
    );
    let bad = send_email(&smtp, &delivery(3, "n1-2", "{\"to\":1}".into()))
        .await
        .expect_err("not an email");
    assert!(bad.starts_with("permanent:"), "{bad}");
    assert!(server.messages().is_empty());
}
