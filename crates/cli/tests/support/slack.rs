//! A stand-in for Slack on loopback, for the server's notification tests: the Web API methods
//! duet calls (`chat.postMessage`, `chat.update`, `chat.postEphemeral`), checking the bot token
//! and the payloads the way Slack's reference documents them (refusing anything else with
//! Slack's own `{"ok": false, "error": …}`), recording every call, and able to fail on demand;
//! and Slack's side of interactivity: a button click's form body, signed as Slack signs its
//! requests.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;

/// One call the stand-in took (or refused).
#[derive(Clone, Debug)]
pub struct Call {
    /// `chat.postMessage`, `chat.update` or `chat.postEphemeral` (or whatever was asked for).
    pub method: String,
    /// The `Authorization` header, as sent.
    pub authorization: Option<String>,
    /// The body, as JSON (`Value::Null` when it was not JSON).
    pub body: Value,
    /// What the stand-in answered: `Ok(ts)` for a message it posted or updated (`""` for an
    /// ephemeral one), `Err(error)` for a refusal or a failure it was told to give.
    pub answer: Result<String, String>,
}

/// How the stand-in answers while told to fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// `503 Service Unavailable`.
    Unavailable,
    /// `429 Too Many Requests` with `Retry-After` (seconds).
    RateLimited(u32),
    /// `200` with `{"ok": false, "error": …}`.
    NotOk(&'static str),
}

struct Shared {
    token: String,
    failure: Mutex<Option<Failure>>,
    calls: Mutex<Vec<Call>>,
    /// The messages posted: channel → their `ts`.
    posted: Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// The next message's `ts` suffix.
    next: Mutex<u64>,
    tx: mpsc::UnboundedSender<Call>,
}

/// A running stand-in.
pub struct FakeSlack {
    /// Its Web API base (`DUET_SLACK_API_URL`: `{api}/chat.postMessage` …).
    pub api: String,
    shared: Arc<Shared>,
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Call>>,
}

impl FakeSlack {
    /// A stand-in on 127.0.0.1 (a free port) that takes bot token `token`.
    pub async fn start(token: &str) -> FakeSlack {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            failure: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            posted: Mutex::new(BTreeMap::new()),
            next: Mutex::new(100),
            tx,
        });
        let app = axum::Router::new()
            .route("/api/{method}", axum::routing::post(method))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let api = format!("http://{}/api", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeSlack {
            api,
            shared,
            rx: tokio::sync::Mutex::new(rx),
        }
    }

    /// Answers every call with `failure` from now on (`None`: as Slack does when all is well).
    pub fn fail(&self, failure: Option<Failure>) {
        *self.shared.failure.lock().expect("lock") = failure;
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().expect("lock").clone()
    }

    /// The next call (waits for it, at most `within`).
    pub async fn next_call(&self, within: Duration) -> Call {
        let mut rx = self.rx.lock().await;
        tokio::time::timeout(within, rx.recv())
            .await
            .expect("a call to the Slack stand-in in time")
            .expect("the stand-in runs")
    }
}

/// One Web API call: authorised, the method known, the payload as documented; answered and
/// recorded.
async fn method(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let json_body = serde_json::from_str::<Value>(&body).unwrap_or(Value::Null);
    let failure = shared.failure.lock().expect("lock").clone();
    let (status, answer, outcome) = match failure {
        Some(Failure::Unavailable) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "ok": false }),
            Err("HTTP 503".to_owned()),
        ),
        Some(Failure::RateLimited(_)) => (
            StatusCode::TOO_MANY_REQUESTS,
            json!({ "ok": false, "error": "ratelimited" }),
            Err("ratelimited".to_owned()),
        ),
        Some(Failure::NotOk(error)) => (
            StatusCode::OK,
            json!({ "ok": false, "error": error }),
            Err(error.to_owned()),
        ),
        None => match take(&shared, &method, authorization.as_deref(), &headers, &body) {
            Ok(answer) => {
                let ts = answer["ts"]
                    .as_str()
                    .or(answer["message_ts"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                (StatusCode::OK, answer, Ok(ts))
            }
            Err(error) => (
                StatusCode::OK,
                json!({ "ok": false, "error": error }),
                Err(error.to_owned()),
            ),
        },
    };
    let call = Call {
        method,
        authorization,
        body: json_body,
        answer: outcome,
    };
    shared.calls.lock().expect("lock").push(call.clone());
    let _ = shared.tx.send(call);
    let mut response = (status, axum::Json(answer)).into_response();
    if let Some(Failure::RateLimited(s)) = shared.failure.lock().expect("lock").clone() {
        response
            .headers_mut()
            .insert("retry-after", s.to_string().parse().expect("a header"));
    }
    response
}

/// What Slack would answer a call that is not failed on purpose: its answer, or its error code.
fn take(
    shared: &Shared,
    method: &str,
    authorization: Option<&str>,
    headers: &HeaderMap,
    body: &str,
) -> Result<Value, &'static str> {
    let token = authorization
        .ok_or("not_authed")?
        .strip_prefix("Bearer ")
        .ok_or("invalid_auth")?;
    if token != shared.token {
        return Err("invalid_auth");
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != "application/json; charset=utf-8" && content_type != "application/json" {
        return Err("invalid_form_data");
    }
    let Value::Object(args) = serde_json::from_str::<Value>(body).map_err(|_| "invalid_json")?
    else {
        return Err("json_not_object");
    };
    let allowed: &[&str] = match method {
        "chat.postMessage" => &["channel", "text", "blocks"],
        "chat.update" => &["channel", "ts", "text", "blocks"],
        "chat.postEphemeral" => &["channel", "user", "text", "blocks"],
        _ => return Err("unknown_method"),
    };
    if args.keys().any(|k| !allowed.contains(&k.as_str())) {
        return Err("invalid_arguments");
    }
    let channel = args
        .get("channel")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or("channel_not_found")?
        .to_owned();
    let text = args.get("text").and_then(Value::as_str);
    if text.is_some_and(|t| t.chars().count() > 40_000) {
        return Err("msg_too_long");
    }
    match args.get("blocks") {
        None if text.is_none_or(str::is_empty) => return Err("no_text"),
        None => {}
        Some(blocks) => check_blocks(blocks)?,
    }
    let mut posted = shared.posted.lock().expect("lock");
    match method {
        "chat.postMessage" => {
            let ts = {
                let mut next = shared.next.lock().expect("lock");
                let ts = format!("1700000000.{:06}", *next);
                *next += 1;
                ts
            };
            posted
                .entry(channel.clone())
                .or_default()
                .insert(ts.clone());
            Ok(json!({ "ok": true, "channel": channel, "ts": ts, "message": { "text": text } }))
        }
        "chat.update" => {
            let ts = args.get("ts").and_then(Value::as_str).unwrap_or_default();
            if !posted.get(&channel).is_some_and(|m| m.contains(ts)) {
                return Err("message_not_found");
            }
            Ok(json!({ "ok": true, "channel": channel, "ts": ts, "text": text }))
        }
        _ => {
            let user = args.get("user").and_then(Value::as_str).unwrap_or_default();
            if user.is_empty() {
                return Err("user_not_in_channel");
            }
            Ok(json!({ "ok": true, "message_ts": "1700000000.999999" }))
        }
    }
}

/// The blocks as Block Kit's reference has them (the block types duet uses, and their limits),
/// or `invalid_blocks`.
fn check_blocks(blocks: &Value) -> Result<(), &'static str> {
    let blocks = blocks.as_array().ok_or("invalid_blocks_format")?;
    let ok = |c: bool| if c { Ok(()) } else { Err("invalid_blocks") };
    ok(!blocks.is_empty() && blocks.len() <= 50)?;
    let text = |t: &Value, types: &[&str], max: usize| {
        let kind = t["type"].as_str().unwrap_or_default();
        let s = t["text"].as_str();
        ok(types.contains(&kind) && s.is_some_and(|s| !s.is_empty() && s.chars().count() <= max))
    };
    let mut action_ids = BTreeSet::new();
    for b in blocks {
        if let Some(id) = b.get("block_id") {
            ok(id.as_str().is_some_and(|id| id.len() <= 255))?;
        }
        match b["type"].as_str() {
            Some("header") => text(&b["text"], &["plain_text"], 150)?,
            Some("section") => text(&b["text"], &["plain_text", "mrkdwn"], 3000)?,
            Some("context") => {
                let elements = b["elements"].as_array().ok_or("invalid_blocks")?;
                ok((1..=10).contains(&elements.len()))?;
                for e in elements {
                    text(e, &["plain_text", "mrkdwn"], 3000)?;
                }
            }
            Some("actions") => {
                let elements = b["elements"].as_array().ok_or("invalid_blocks")?;
                ok((1..=25).contains(&elements.len()))?;
                for e in elements {
                    ok(e["type"] == "button")?;
                    text(&e["text"], &["plain_text"], 75)?;
                    let id = e["action_id"].as_str().unwrap_or_default();
                    ok(!id.is_empty() && id.len() <= 255 && action_ids.insert(id.to_owned()))?;
                    if let Some(v) = e.get("value") {
                        ok(v.as_str().is_some_and(|v| v.chars().count() <= 2000))?;
                    }
                    if let Some(u) = e.get("url") {
                        ok(u.as_str().is_some_and(|u| u.chars().count() <= 3000))?;
                    }
                    if let Some(s) = e.get("style") {
                        ok(matches!(s.as_str(), Some("primary" | "danger")))?;
                    }
                }
            }
            _ => return Err("invalid_blocks"),
        }
    }
    Ok(())
}

/// The form body Slack posts to the interactivity endpoint when `user` (`id`, `username`)
/// clicks button `action_id` carrying `value` on message `ts` in `channel`: a `block_actions`
/// payload shaped as Slack's reference example.
pub fn click_body(
    user: (&str, &str),
    action_id: &str,
    value: &str,
    channel: &str,
    ts: &str,
) -> String {
    let payload = json!({
        "type": "block_actions",
        "team": { "id": "T9TK3CUKW", "domain": "example" },
        "user": { "id": user.0, "username": user.1, "name": user.1, "team_id": "T9TK3CUKW" },
        "api_app_id": "AABA1ABCD",
        "token": "9s8d9as89d8as9d8as989",
        "container": {
            "type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false
        },
        "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
        "channel": { "id": channel, "name": "ops" },
        "message": { "type": "message", "ts": ts, "text": "" },
        "response_url": "https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209",
        "actions": [{
            "action_id": action_id, "block_id": "duet_answer",
            "text": { "type": "plain_text", "text": action_id, "emoji": true },
            "value": value, "type": "button", "action_ts": "1548426417.840180"
        }]
    });
    let mut form = String::from("payload=");
    form.extend(form_urlencoded::byte_serialize(
        payload.to_string().as_bytes(),
    ));
    form
}

/// The `X-Slack-Request-Timestamp` and `X-Slack-Signature` Slack sends with `body` at
/// `timestamp_s`, signed with `signing_secret`: `v0=` + hex(HMAC-SHA256(secret,
/// `v0:{timestamp}:{body}`)).
pub fn sign(signing_secret: &str, timestamp_s: i64, body: &str) -> (String, String) {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes()).expect("any key length");
    mac.update(format!("v0:{timestamp_s}:{body}").as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    (timestamp_s.to_string(), format!("v0={hex}"))
}

/// POSTs `body` to `{server}/slack/interactions` as Slack does, signed with `signing_secret` at
/// `timestamp_s`.
pub async fn interact(
    http: &reqwest::Client,
    server: &str,
    signing_secret: &str,
    timestamp_s: i64,
    body: &str,
) -> reqwest::Response {
    let (ts, signature) = sign(signing_secret, timestamp_s, body);
    http.post(format!("{server}/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", ts)
        .header("x-slack-signature", signature)
        .body(body.to_owned())
        .send()
        .await
        .expect("the interactivity endpoint answers")
}
