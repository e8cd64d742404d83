//! Slack, end to end: the loopback stand-in for Slack (`support/slack.rs`) itself first — it
//! takes what Slack's reference documents and refuses the rest as Slack does, and it signs a
//! click as Slack signs requests (checked against Slack's published example and the server's
//! verifier).

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_slack::{self, Failure, FakeSlack};

const TOKEN: &str = "xoxb-duet-test";

async fn call(
    http: &reqwest::Client,
    slack: &FakeSlack,
    method: &str,
    token: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let mut req = http
        .post(format!("{}/{method}", slack.api))
        .header("content-type", "application/json; charset=utf-8")
        .body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("the stand-in answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A message shaped as Slack's Block Kit reference shows: a header, a section and buttons.
fn message(channel: &str) -> Value {
    json!({
        "channel": channel,
        "text": "deployer wants to run deploy",
        "blocks": [
            { "type": "header", "text": { "type": "plain_text", "text": "deployer wants to run deploy" } },
            { "type": "section", "text": { "type": "mrkdwn", "text": "*Proposed call:* `deploy`" } },
            { "type": "actions", "block_id": "duet_answer", "elements": [
                { "type": "button", "action_id": "approve", "style": "primary", "value": "tok",
                  "text": { "type": "plain_text", "text": "Approve" } },
                { "type": "button", "action_id": "open", "url": "https://duet.example.com/inbox",
                  "text": { "type": "plain_text", "text": "Open in inbox" } }
            ] }
        ]
    })
}

#[tokio::test]
async fn the_stand_in_takes_what_slack_documents_and_refuses_the_rest() {
    let slack = FakeSlack::start(TOKEN).await;
    let http = reqwest::Client::new();
    let ok = |v: &Value| v["ok"] == true;

    let (status, first) = call(
        &http,
        &slack,
        "chat.postMessage",
        Some(TOKEN),
        &message("C0OPS"),
    )
    .await;
    assert_eq!(status, 200);
    assert!(ok(&first), "{first}");
    assert_eq!(first["channel"], "C0OPS");
    assert_eq!(first["ts"], "1700000000.000100");
    let (_, second) = call(
        &http,
        &slack,
        "chat.postMessage",
        Some(TOKEN),
        &message("C0OPS"),
    )
    .await;
    assert_eq!(second["ts"], "1700000000.000101", "a ts per message");

    let update = json!({ "channel": "C0OPS", "ts": "1700000000.000100", "text": "Approved",
        "blocks": [{ "type": "section", "text": { "type": "mrkdwn", "text": ":white_check_mark: Approved by <@U1>" } }] });
    let (_, updated) = call(&http, &slack, "chat.update", Some(TOKEN), &update).await;
    assert!(ok(&updated), "{updated}");
    let ephemeral = json!({ "channel": "C0OPS", "user": "U1", "text": "already answered" });
    let (_, told) = call(&http, &slack, "chat.postEphemeral", Some(TOKEN), &ephemeral).await;
    assert!(ok(&told), "{told}");

    let mut bad_style = message("C0OPS");
    bad_style["blocks"][2]["elements"][0]["style"] = json!("green");
    let mut long_value = message("C0OPS");
    long_value["blocks"][2]["elements"][0]["value"] = json!("v".repeat(2001));
    let mut twice = message("C0OPS");
    twice["blocks"][2]["elements"][1]["action_id"] = json!("approve");
    let mut long_header = message("C0OPS");
    long_header["blocks"][0]["text"]["text"] = json!("h".repeat(151));
    let mut mrkdwn_header = message("C0OPS");
    mrkdwn_header["blocks"][0]["text"]["type"] = json!("mrkdwn");
    let mut extra = message("C0OPS");
    extra["attachments"] = json!([]);
    for (method, token, body, error) in [
        ("chat.postMessage", None, message("C0OPS"), "not_authed"),
        (
            "chat.postMessage",
            Some("xoxb-other"),
            message("C0OPS"),
            "invalid_auth",
        ),
        ("chat.postMessage", Some(TOKEN), bad_style, "invalid_blocks"),
        (
            "chat.postMessage",
            Some(TOKEN),
            long_value,
            "invalid_blocks",
        ),
        ("chat.postMessage", Some(TOKEN), twice, "invalid_blocks"),
        (
            "chat.postMessage",
            Some(TOKEN),
            long_header,
            "invalid_blocks",
        ),
        (
            "chat.postMessage",
            Some(TOKEN),
            mrkdwn_header,
            "invalid_blocks",
        ),
        ("chat.postMessage", Some(TOKEN), extra, "invalid_arguments"),
        (
            "chat.postMessage",
            Some(TOKEN),
            json!({ "channel": "C0OPS" }),
            "no_text",
        ),
        (
            "chat.postMessage",
            Some(TOKEN),
            json!({ "text": "x" }),
            "channel_not_found",
        ),
        (
            "chat.postMessage",
            Some(TOKEN),
            json!([1]),
            "json_not_object",
        ),
        (
            "chat.update",
            Some(TOKEN),
            json!({ "channel": "C0OPS", "ts": "1.2", "text": "x" }),
            "message_not_found",
        ),
        (
            "chat.postEphemeral",
            Some(TOKEN),
            json!({ "channel": "C0OPS", "text": "x" }),
            "user_not_in_channel",
        ),
        ("users.list", Some(TOKEN), json!({}), "unknown_method"),
    ] {
        let (status, answer) = call(&http, &slack, method, token, &body).await;
        assert_eq!(
            (status, &answer["ok"], &answer["error"]),
            (200, &json!(false), &json!(error)),
            "{body}"
        );
    }

    slack.fail(Some(Failure::Unavailable));
    assert_eq!(
        call(
            &http,
            &slack,
            "chat.postMessage",
            Some(TOKEN),
            &message("C0OPS")
        )
        .await
        .0,
        503
    );
    slack.fail(Some(Failure::NotOk("channel_not_found")));
    let (_, answer) = call(
        &http,
        &slack,
        "chat.postMessage",
        Some(TOKEN),
        &message("C0OPS"),
    )
    .await;
    assert_eq!(answer["error"], "channel_not_found");
    slack.fail(Some(Failure::RateLimited(7)));
    let resp = http
        .post(format!("{}/chat.postMessage", slack.api))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(message("C0OPS").to_string())
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    slack.fail(None);

    let calls = slack.calls();
    assert_eq!(calls.len(), 4 + 14 + 3);
    assert_eq!(calls[0].method, "chat.postMessage");
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some("Bearer xoxb-duet-test")
    );
    assert_eq!(calls[0].answer.as_deref(), Ok("1700000000.000100"));
    assert_eq!(calls[0].body["channel"], "C0OPS");
    let first = slack.next_call(Duration::from_secs(5)).await;
    assert_eq!(first.body, calls[0].body);
}

#[test]
fn a_click_is_signed_as_slack_signs_requests() {
    // Slack's published example ("Verifying requests from Slack").
    let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    let (ts, signature) = fake_slack::sign("8f742231b10e8888abcd99yyyzzz85a5", 1_531_420_618, body);
    assert_eq!(ts, "1531420618");
    assert_eq!(
        signature,
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    );

    let click = fake_slack::click_body(
        ("U1", "bob"),
        "approve",
        "tok.sig",
        "C0OPS",
        "1700000000.000100",
    );
    assert!(click.starts_with("payload=%7B"));
    let (ts, signature) = fake_slack::sign("shh", 1_700_000_000, &click);
    assert_eq!(
        duet_server::signatures::verify_slack(
            "shh",
            &ts,
            click.as_bytes(),
            &signature,
            1_700_000_100
        ),
        Ok(())
    );
}
