//! The Slack channel's unit tests: the messages against Block Kit's documented shapes and a
//! golden copy, Slack's published signature vector, a documented click payload, and the Web
//! API calls against a loopback stand-in.

use axum::http::{HeaderMap, StatusCode};
use duet_spec::Decision;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::inbound::parse_click;
use super::{SlackAuthError, render_ephemeral, render_post, render_update, send, verify_signature};
use crate::notify::{Event, Links, fixtures};

fn parse(body: &str) -> Value {
    serde_json::from_str(body).expect("JSON")
}

/// What Block Kit's reference says of the blocks used here: the block types, a header's
/// `plain_text` of at most 150 characters, a section's text of at most 3000, a context's 1 to
/// 10 elements, an actions block's buttons (`plain_text` of at most 75, an `action_id` of at
/// most 255 unique in the message, a `value` of at most 2000, a `url` of at most 3000, a
/// `style` of `primary` or `danger`), at most 50 blocks.
fn check_block_kit(message: &Value) {
    let blocks = message["blocks"].as_array().expect("blocks");
    assert!(!blocks.is_empty() && blocks.len() <= 50);
    assert!(
        message["text"].as_str().is_some_and(|t| !t.is_empty()),
        "a fallback text"
    );
    let chars = |v: &Value| v.as_str().map_or(usize::MAX, |s| s.chars().count());
    let mut action_ids = std::collections::BTreeSet::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("header") => {
                assert_eq!(b["text"]["type"], "plain_text");
                assert!(chars(&b["text"]["text"]) <= 150);
            }
            Some("section") => {
                assert!(matches!(
                    b["text"]["type"].as_str(),
                    Some("mrkdwn" | "plain_text")
                ));
                assert!(chars(&b["text"]["text"]) <= 3000);
            }
            Some("context") => {
                let elements = b["elements"].as_array().expect("elements");
                assert!((1..=10).contains(&elements.len()));
                for e in elements {
                    assert!(matches!(e["type"].as_str(), Some("mrkdwn" | "plain_text")));
                    assert!(chars(&e["text"]) <= 3000);
                }
            }
            Some("actions") => {
                let elements = b["elements"].as_array().expect("elements");
                assert!((1..=25).contains(&elements.len()));
                for e in elements {
                    assert_eq!(e["type"], "button");
                    assert_eq!(e["text"]["type"], "plain_text");
                    assert!(chars(&e["text"]["text"]) <= 75);
                    let id = e["action_id"].as_str().expect("an action_id");
                    assert!(id.len() <= 255 && action_ids.insert(id.to_owned()), "{id}");
                    if let Some(v) = e.get("value") {
                        assert!(chars(v) <= 2000);
                    }
                    if let Some(u) = e.get("url") {
                        assert!(chars(u) <= 3000);
                    }
                    if let Some(s) = e.get("style") {
                        assert!(matches!(s.as_str(), Some("primary" | "danger")));
                    }
                }
            }
            other => panic!("a block type this message does not use: {other:?}"),
        }
    }
}

#[test]
fn a_parked_tool_call_is_posted_as_documented_block_kit() {
    let message = parse(&render_post(&fixtures::parked(), "C0OPS"));
    check_block_kit(&message);
    let golden = json!({
        "channel": "C0OPS",
        "text": "deployer wants to run deploy (thread deploy-42)",
        "blocks": [
            { "type": "header",
              "text": { "type": "plain_text", "text": "deployer wants to run deploy", "emoji": true } },
            { "type": "section",
              "text": { "type": "mrkdwn",
                        "text": "*Agent:* `deployer` · *Thread:* `deploy-42`\ndeployer wants to run `deploy` on &lt;prod&gt; &amp; friends" } },
            { "type": "section",
              "text": { "type": "mrkdwn",
                        "text": "*Proposed call:* `deploy`\n```\n{\n  \"service\": \"api\",\n  \"version\": \"1.4.2\"\n}\n```" } },
            { "type": "context",
              "elements": [
                { "type": "mrkdwn", "text": "*Who may answer:* role `ops`" },
                { "type": "mrkdwn", "text": "*Deadline:* answered with \"reject\" at 2023-11-14 22:13 UTC" },
                { "type": "mrkdwn",
                  "text": "The buttons work until <!date^1700259200^{date_short_pretty} {time}|2023-11-17 22:13 UTC>" }
              ] },
            { "type": "actions", "block_id": "duet_answer",
              "elements": [
                { "type": "button", "action_id": "approve",
                  "text": { "type": "plain_text", "text": "Approve", "emoji": true },
                  "style": "primary", "value": "eyJsIjoiYXBwcm92ZSJ9.c2ln" },
                { "type": "button", "action_id": "reject",
                  "text": { "type": "plain_text", "text": "Reject", "emoji": true },
                  "style": "danger", "value": "eyJsIjoicmVqZWN0In0.c2ln" },
                { "type": "button", "action_id": "open",
                  "text": { "type": "plain_text", "text": "Open in inbox", "emoji": true },
                  "url": "https://duet.example.com/inbox/items/0190a0b0-0000-7000-8000-000000000001:1:7" }
              ] }
        ]
    });
    assert_eq!(message, golden);
}

#[test]
fn only_the_buttons_the_links_allow_are_shown() {
    let mut view = fixtures::parked();
    view.links = Some(Links {
        open: Some("https://duet.example.com/inbox/items/x".to_owned()),
        ..Links::default()
    });
    let message = parse(&render_post(&view, "C0OPS"));
    check_block_kit(&message);
    let blocks = message["blocks"].as_array().expect("blocks");
    let actions = blocks.last().expect("blocks");
    assert_eq!(actions["type"], "actions");
    assert_eq!(actions["elements"].as_array().map(Vec::len), Some(1));
    assert_eq!(actions["elements"][0]["action_id"], "open");
    assert!(
        !message.to_string().contains("buttons work until"),
        "no expiry without one-time buttons"
    );

    view.links = None;
    let message = parse(&render_post(&view, "C0OPS"));
    check_block_kit(&message);
    assert!(
        message["blocks"]
            .as_array()
            .expect("blocks")
            .iter()
            .all(|b| b["type"] != "actions")
    );

    // A token too long for a button's value leaves that button out.
    let mut view = fixtures::parked();
    if let Some(l) = view.links.as_mut() {
        l.approve = Some(fixtures::link(&"t".repeat(2001)));
    }
    let message = parse(&render_post(&view, "C0OPS"));
    check_block_kit(&message);
    let text = message.to_string();
    assert!(!text.contains("\"approve\"") && text.contains("\"reject\""));
}

#[test]
fn long_arguments_and_questions_are_cut_to_slacks_limits() {
    let mut view = fixtures::parked();
    if let Some(q) = view.question.as_mut() {
        q.text = "<&>".repeat(2000);
        if let Some(call) = q.call.as_mut() {
            call.args = json!({ "script": "x".repeat(5000) });
        }
    }
    let message = parse(&render_post(&view, "C0OPS"));
    check_block_kit(&message);
    let call = message["blocks"][2]["text"]["text"]
        .as_str()
        .expect("the call");
    assert!(call.starts_with("*Proposed call:* `deploy`\n```\n{"));
    assert!(call.ends_with("…\n```"), "{}", &call[call.len() - 20..]);
    let asked = message["blocks"][1]["text"]["text"]
        .as_str()
        .expect("the question");
    assert!(asked.ends_with('…'));
    // Cut between escapes, never inside one.
    let body = asked.trim_end_matches('…');
    assert!(body.ends_with(';'), "{}", &body[body.len() - 12..]);
}

#[test]
fn the_update_says_who_decided_what_without_buttons() {
    for (view, says) in [
        (
            fixtures::answered("slack:U123ABC", Decision::Approve, None),
            ":white_check_mark: Approved by <@U123ABC>",
        ),
        (
            fixtures::answered(
                "slack:U123ABC",
                Decision::Reject,
                Some("rejected in Slack by @bob"),
            ),
            ":x: Rejected by <@U123ABC>: rejected in Slack by @bob",
        ),
        (
            fixtures::answered("alice", Decision::Respond, Some("use <staging>")),
            ":speech_balloon: Answered by alice: use &lt;staging&gt;",
        ),
        (
            {
                let mut v = fixtures::answered("deadline", Decision::Reject, None);
                v.event = Event::QuestionExpired;
                v
            },
            ":hourglass: Expired: nobody answered in time; the deadline answered with reject",
        ),
    ] {
        let message = parse(&render_update(&view, "C0OPS", "1700000000.000100"));
        check_block_kit(&message);
        assert_eq!(message["channel"], "C0OPS");
        assert_eq!(message["ts"], "1700000000.000100");
        let blocks = message["blocks"].as_array().expect("blocks");
        assert!(blocks.iter().all(|b| b["type"] != "actions"), "no buttons");
        assert_eq!(blocks[0]["text"]["text"], "deployer wants to run deploy");
        assert_eq!(
            blocks.last().map(|b| &b["text"]["text"]),
            Some(&json!(says))
        );
        let fallback = message["text"].as_str().expect("text");
        assert!(
            fallback.ends_with(says.split_once(' ').map_or(says, |(_, s)| s)),
            "{fallback}"
        );
    }
}

#[test]
fn a_refusal_is_told_to_the_one_who_clicked() {
    let message = parse(&render_ephemeral(
        "C0OPS",
        "U123ABC",
        "already answered by <@x>",
    ));
    assert_eq!(
        message,
        json!({ "channel": "C0OPS", "user": "U123ABC", "text": "already answered by &lt;@x&gt;" })
    );
}

/// Slack's published example ("Verifying requests from Slack"): its signing secret, timestamp,
/// slash-command body and signature.
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TS: &str = "1531420618";
const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
const NOW: i64 = 1_531_420_618;

#[test]
fn verifies_slacks_published_example() {
    assert_eq!(
        verify_signature(SECRET, TS, BODY.as_bytes(), SIGNATURE, NOW),
        Ok(())
    );
    assert_eq!(
        verify_signature(
            SECRET,
            TS,
            BODY.as_bytes(),
            &SIGNATURE.to_uppercase().replace("V0=", "v0="),
            NOW + 300
        ),
        Ok(()),
        "hex in either case, 5 minutes late"
    );
}

#[test]
fn a_bad_signature_or_stale_request_is_refused() {
    let body = BODY.as_bytes();
    let mut flipped = SIGNATURE.to_owned();
    flipped.replace_range(65.., "00");
    for (secret, ts, body, sig, now, why) in [
        (
            SECRET,
            TS,
            body,
            flipped.as_str(),
            NOW,
            SlackAuthError::BadSignature,
        ),
        (
            "another secret",
            TS,
            body,
            SIGNATURE,
            NOW,
            SlackAuthError::BadSignature,
        ),
        (
            SECRET,
            TS,
            &body[1..],
            SIGNATURE,
            NOW,
            SlackAuthError::BadSignature,
        ),
        (
            SECRET,
            "1531420619",
            body,
            SIGNATURE,
            NOW,
            SlackAuthError::BadSignature,
        ),
        (
            SECRET,
            TS,
            body,
            SIGNATURE,
            NOW + 301,
            SlackAuthError::Stale,
        ),
        (
            SECRET,
            TS,
            body,
            SIGNATURE,
            NOW - 301,
            SlackAuthError::Stale,
        ),
        (
            SECRET,
            "soon",
            body,
            SIGNATURE,
            NOW,
            SlackAuthError::Malformed("X-Slack-Request-Timestamp"),
        ),
        (
            SECRET,
            TS,
            body,
            "v1=abcd",
            NOW,
            SlackAuthError::Malformed("X-Slack-Signature"),
        ),
        (
            SECRET,
            TS,
            body,
            "v0=xyz",
            NOW,
            SlackAuthError::Malformed("X-Slack-Signature"),
        ),
        (
            SECRET,
            "",
            body,
            SIGNATURE,
            NOW,
            SlackAuthError::Missing("X-Slack-Request-Timestamp"),
        ),
        (
            SECRET,
            TS,
            body,
            "",
            NOW,
            SlackAuthError::Missing("X-Slack-Signature"),
        ),
    ] {
        assert_eq!(
            verify_signature(secret, ts, body, sig, now),
            Err(why.clone()),
            "{why}"
        );
    }
}

/// Slack's example `block_actions` payload (its interaction payload reference), trimmed, with
/// this app's button.
fn documented_click(action_id: &str, value: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "team": { "id": "T9TK3CUKW", "domain": "example" },
        "user": { "id": "UA8RXUSPL", "username": "jtorrance", "team_id": "T9TK3CUKW" },
        "api_app_id": "AABA1ABCD",
        "token": "9s8d9as89d8as9d8as989",
        "container": {
            "type": "message", "message_ts": "1548261231.000200", "channel_id": "CBR2V3XEX",
            "is_ephemeral": false
        },
        "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
        "channel": { "id": "CBR2V3XEX", "name": "review-updates" },
        "message": {
            "bot_id": "BAH5CA16Z", "type": "message", "text": "This content can't be displayed.",
            "user": "UAJ2RU415", "ts": "1548261231.000200"
        },
        "response_url": "https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209",
        "actions": [{
            "action_id": action_id, "block_id": "=qXel",
            "text": { "type": "plain_text", "text": "View", "emoji": true },
            "value": value, "type": "button", "action_ts": "1548426417.840180"
        }]
    });
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
}

#[test]
fn reads_a_click_from_slacks_documented_payload() {
    let click =
        parse_click(documented_click("approve", "eyJsIjoiYSJ9.c2ln").as_bytes()).expect("a click");
    assert_eq!(click.user_id, "UA8RXUSPL");
    assert_eq!(click.username.as_deref(), Some("jtorrance"));
    assert_eq!(click.action_id, "approve");
    assert_eq!(click.value.as_deref(), Some("eyJsIjoiYSJ9.c2ln"));
    assert_eq!(click.channel.as_deref(), Some("CBR2V3XEX"));
    assert_eq!(click.message_ts.as_deref(), Some("1548261231.000200"));

    // Without `channel` and `message` (an ephemeral message's click): the container says.
    let mut p: Value = serde_json::from_str(
        &form_urlencoded::parse(documented_click("reject", "t").as_bytes())
            .next()
            .expect("payload")
            .1,
    )
    .expect("JSON");
    p.as_object_mut()
        .map(|o| (o.remove("channel"), o.remove("message")));
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &p.to_string())
        .finish();
    let click = parse_click(body.as_bytes()).expect("a click");
    assert_eq!(click.channel.as_deref(), Some("CBR2V3XEX"));
    assert_eq!(click.message_ts.as_deref(), Some("1548261231.000200"));
}

#[test]
fn a_payload_that_is_no_click_says_why() {
    let form = |payload: &str| {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", payload)
            .finish()
    };
    for (body, why) in [
        ("token=x".to_owned(), "no `payload`"),
        (form("{not json"), "not an interaction"),
        (
            form(r#"{"type":"view_submission","user":{"id":"U1"}}"#),
            "`view_submission`",
        ),
        (
            form(r#"{"type":"block_actions","actions":[]}"#),
            "no `user`",
        ),
        (
            form(r#"{"type":"block_actions","user":{"id":"U1"},"actions":[]}"#),
            "no `actions`",
        ),
    ] {
        let err = parse_click(body.as_bytes()).expect_err("not a click");
        assert!(err.contains(why), "{err}");
    }
}

/// A loopback stand-in for the Web API answering each method with `answer`: its base URL, and
/// each request's path, headers and body.
async fn web_api(
    status: StatusCode,
    answer: Value,
) -> (String, mpsc::UnboundedReceiver<(String, HeaderMap, String)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/api/{method}",
        axum::routing::post(
            move |axum::extract::Path(method): axum::extract::Path<String>,
                  headers: HeaderMap,
                  body: String| {
                let (tx, answer) = (tx.clone(), answer.clone());
                async move {
                    let _ = tx.send((method, headers, body));
                    let mut r = axum::response::IntoResponse::into_response(axum::Json(answer));
                    *r.status_mut() = status;
                    r.headers_mut()
                        .insert("retry-after", axum::http::HeaderValue::from_static("30"));
                    r
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}/api", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, rx)
}

#[tokio::test]
async fn posts_with_the_bot_token_and_keeps_the_message_address() {
    let (base, mut got) = web_api(
        StatusCode::OK,
        json!({ "ok": true, "channel": "C0OPS", "ts": "1700000000.000100", "message": {} }),
    )
    .await;
    let http = crate::notify::http::client().expect("a client");
    let body = render_post(&fixtures::parked(), "C0OPS");
    let d = fixtures::delivery("slack", "C0OPS", &body, None);
    let kept = send(&http, &base, Some("xoxb-test"), &d)
        .await
        .expect("delivered");
    assert_eq!(
        kept.as_deref().map(parse),
        Some(json!({ "channel": "C0OPS", "ts": "1700000000.000100" }))
    );
    let (method, headers, sent) = got.recv().await.expect("one call");
    assert_eq!(method, "chat.postMessage");
    assert_eq!(headers["authorization"], "Bearer xoxb-test");
    assert_eq!(headers["content-type"], "application/json; charset=utf-8");
    assert_eq!(sent, body);

    let update = render_update(
        &fixtures::answered("slack:U1", Decision::Approve, None),
        "C0OPS",
        "1700000000.000100",
    );
    let meta = super::meta("chat.update");
    let d = fixtures::delivery("slack", "C0OPS", &update, Some(&meta));
    assert!(send(&http, &base, Some("xoxb-test"), &d).await.is_ok());
    assert_eq!(
        got.recv().await.map(|r| r.0).as_deref(),
        Some("chat.update")
    );

    let meta = super::meta("chat.postEphemeral");
    let body = render_ephemeral("C0OPS", "U1", "already answered");
    let d = fixtures::delivery("slack", "C0OPS", &body, Some(&meta));
    assert_eq!(send(&http, &base, Some("xoxb-test"), &d).await, Ok(None));
    assert_eq!(
        got.recv().await.map(|r| r.0).as_deref(),
        Some("chat.postEphemeral")
    );
}

#[tokio::test]
async fn what_slack_refuses_is_a_failed_attempt_that_says_why() {
    let http = crate::notify::http::client().expect("a client");
    let d = fixtures::delivery("slack", "C0OPS", "{}", None);
    for (status, answer, why) in [
        (
            StatusCode::OK,
            json!({ "ok": false, "error": "invalid_blocks" }),
            "permanent: slack chat.postMessage: invalid_blocks",
        ),
        (
            StatusCode::OK,
            json!({ "ok": false, "error": "internal_error" }),
            "slack chat.postMessage: internal_error",
        ),
        (
            StatusCode::TOO_MANY_REQUESTS,
            json!({ "ok": false, "error": "ratelimited" }),
            "HTTP 429: rate limited (Retry-After: 30 s)",
        ),
        (StatusCode::SERVICE_UNAVAILABLE, json!({}), "HTTP 503"),
    ] {
        let (base, mut got) = web_api(status, answer).await;
        assert_eq!(
            send(&http, &base, Some("xoxb-test"), &d).await,
            Err(why.to_owned())
        );
        assert!(got.recv().await.is_some());
    }
    let (base, _got) = web_api(StatusCode::OK, json!({ "ok": true })).await;
    let no_token = send(&http, &base, None, &d).await.expect_err("no token");
    assert!(no_token.contains("SLACK_BOT_TOKEN"), "{no_token}");
    let bad = fixtures::delivery("slack", "C0OPS", "{}", Some(r#"{"method":"users.list"}"#));
    let why = send(&http, &base, Some("xoxb-test"), &bad)
        .await
        .expect_err("not a method here");
    assert!(
        why.starts_with("permanent: ") && why.contains("users.list"),
        "{why}"
    );
}

#[test]
fn an_update_routed_before_its_post_was_sent_takes_the_posts_ts() {
    use duet_server_store::DeliveryStatus;
    let update = render_update(
        &fixtures::answered("slack:U1", Decision::Approve, None),
        "C0OPS",
        "",
    );
    let meta = json!({ "method": "chat.update", "post": 7 }).to_string();
    let d = fixtures::delivery("slack", "C0OPS", &update, Some(&meta));
    assert_eq!(super::awaits_post(&d), Some(7));
    let plain = fixtures::delivery("slack", "C0OPS", &update, Some(&super::meta("chat.update")));
    assert_eq!(super::awaits_post(&plain), None);

    let mut post = fixtures::delivery("slack", "C0OPS", "{}", None);
    post.status = DeliveryStatus::Delivered;
    post.response = Some(json!({ "channel": "C0OPS", "ts": "1700000000.000100" }).to_string());
    let sent = super::with_posted_ts(&d, 7, Some(&post)).expect("resolved");
    let body = parse(&sent.body);
    assert_eq!(body["ts"], "1700000000.000100");
    assert_eq!(body["blocks"], parse(&update)["blocks"]);

    // Not posted yet: tried again; never posted, or gone: given up on.
    post.status = DeliveryStatus::Pending;
    let err = super::with_posted_ts(&d, 7, Some(&post)).expect_err("not yet");
    assert!(!err.starts_with("permanent:"), "{err}");
    post.status = DeliveryStatus::Failed;
    let err = super::with_posted_ts(&d, 7, Some(&post)).expect_err("never");
    assert!(err.starts_with("permanent:"), "{err}");
    let err = super::with_posted_ts(&d, 7, None).expect_err("gone");
    assert!(err.starts_with("permanent:"), "{err}");
}
