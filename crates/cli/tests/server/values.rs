//! One table of values every door refuses (`values.json`): each case is a value in one slot — a
//! message's text, a key, a message id, an image — and the code it must get. Every door puts
//! the value where its requests carry that slot and expects its own shape of the same refusal:
//! a problem naming the field (REST, `invoke`, the control plane, the inbox's answer form), a
//! rejected command (`/control/dispatch`), `-32602` naming the field (A2A, both bindings). On
//! both stores, alike, never a 5xx; and nothing of any of them is stored.

use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::harness::{Server, seg};
use crate::support;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    /// `text`, `key`, `messageId` or `image`.
    slot: String,
    value: Value,
    /// The problem code REST answers with.
    code: String,
    /// The image member the fault names: `mimeType` or `data`.
    #[serde(default)]
    member: Option<String>,
    /// The A2A error code, when it is not `-32602` (InvalidParams).
    #[serde(default)]
    a2a_code: Option<i64>,
    /// Why A2A takes the value (a raw part of any type is a file there): the A2A doors skip it.
    #[serde(default)]
    a2a_takes: Option<String>,
}

/// `KEY600` and `KEY2800` stand for strings of that many bytes.
fn expand(v: &Value) -> Value {
    match v.as_str() {
        Some("KEY600") => json!("k".repeat(600)),
        Some("KEY2800") => json!("m".repeat(2_800)),
        _ => v.clone(),
    }
}

#[derive(Clone, Copy, Debug)]
enum Door {
    Create,
    Message,
    Answer,
    Invoke,
    ControlInvoke,
    Dispatch,
    ControlState,
    A2aRpc,
    A2aRest,
    A2aList,
    Inbox,
}

const DOORS: [Door; 11] = [
    Door::Create,
    Door::Message,
    Door::Answer,
    Door::Invoke,
    Door::ControlInvoke,
    Door::Dispatch,
    Door::ControlState,
    Door::A2aRpc,
    Door::A2aRest,
    Door::A2aList,
    Door::Inbox,
];

/// What a door must answer.
#[derive(Debug)]
enum Expect {
    /// A problem: status, code, the field it names.
    Problem(u16, String, String),
    /// `/control/dispatch`'s `{ok: false, error: {code: invalid_command}}`, naming the field.
    Rejected(String),
    /// An A2A error: code, the field it names (none for a refused content type).
    A2a(i64, Option<String>),
}

const NO_APPROVAL: &str = "/approvals/0190b5a2-0000-7000-8000-000000000000:1:3";

/// Who asks, and how to reach the inbox's form as them.
struct Who {
    token: String,
    cookie: String,
    csrf: String,
}

fn status_of(code: &str) -> u16 {
    if matches!(code, "invalid_image" | "empty_text") {
        422
    } else {
        400
    }
}

/// The request `door` makes of `case`, and what it must answer; `None` where the door has no
/// such slot (or cannot carry the value: a NUL in a header).
fn request(
    server: &Server,
    who: &Who,
    door: Door,
    case: &Case,
) -> Option<(reqwest::RequestBuilder, Expect)> {
    let v = expand(&case.value);
    let slot = case.slot.as_str();
    let text = if slot == "text" {
        v.clone()
    } else {
        json!("hi")
    };
    let images = if slot == "image" {
        json!([v])
    } else {
        json!([])
    };
    let member = case.member.as_deref().unwrap_or_default();
    let problem =
        |field: &str| Expect::Problem(status_of(&case.code), case.code.clone(), field.into());
    let rest_field = match slot {
        "image" => format!("images[0].{member}"),
        other => other.to_owned(),
    };
    // The `Idempotency-Key` header, where the value can be one.
    let header = (slot == "messageId")
        .then(|| reqwest::header::HeaderValue::from_str(v.as_str().unwrap_or_default()).ok())
        .flatten();
    let with_header = |req: reqwest::RequestBuilder| match &header {
        Some(h) => req.header("idempotency-key", h.clone()),
        None => req,
    };
    let header_problem = || {
        Expect::Problem(
            400,
            "invalid_idempotency_key".into(),
            "Idempotency-Key".into(),
        )
    };
    let rest = |method: Method, path: &str, body: Value| {
        with_header(server.req(method, path, &who.token).json(&body))
    };
    let a2a_message = || {
        let mut parts = vec![json!({"text": text})];
        if slot == "image" {
            parts.push(json!({"raw": v["data"], "mediaType": v["mimeType"]}));
        }
        let mut m = json!({"messageId": "m-1", "role": "ROLE_USER", "parts": parts});
        match slot {
            "key" => m["contextId"] = v.clone(),
            "messageId" => m["messageId"] = v.clone(),
            _ => {}
        }
        json!({"message": m})
    };
    let a2a_expect = || {
        let field = match slot {
            "text" => "message.parts[0].text".to_owned(),
            "key" => "message.contextId".to_owned(),
            "messageId" => "message.messageId".to_owned(),
            _ if member == "data" => "message.parts[1].raw".to_owned(),
            _ => "message.parts[1].mediaType".to_owned(),
        };
        match case.a2a_code {
            Some(code) => Expect::A2a(code, None),
            None => Expect::A2a(-32602, Some(field)),
        }
    };
    let rpc = |method: &str, params: Value| {
        server
            .req(Method::POST, "/a2a/question_gate", &who.token)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    };
    Some(match (door, slot) {
        (Door::Create | Door::Message | Door::Answer, "messageId") => {
            header.as_ref()?;
            let (path, body) = match door {
                Door::Create => ("/threads", json!({"agent": "question_gate", "text": "hi"})),
                Door::Message => ("/threads/nobody/messages", json!({"text": "hi"})),
                _ => (NO_APPROVAL, json!({"text": "hi"})),
            };
            (rest(Method::POST, path, body), header_problem())
        }
        (Door::Create, _) => {
            let mut body = json!({"agent": "question_gate", "text": text, "images": images});
            if slot == "key" {
                body["key"] = v.clone();
            }
            (rest(Method::POST, "/threads", body), problem(&rest_field))
        }
        (Door::Message, _) => {
            let key = if slot == "key" {
                seg(v.as_str().unwrap_or_default())
            } else {
                "nobody".into()
            };
            let body = json!({"text": text, "images": images});
            let path = format!("/threads/{key}/messages");
            (rest(Method::POST, &path, body), problem(&rest_field))
        }
        (Door::Answer, "key") => return None,
        (Door::Answer, _) => (
            rest(
                Method::POST,
                NO_APPROVAL,
                json!({"text": text, "images": images}),
            ),
            problem(&rest_field),
        ),
        (Door::Invoke | Door::ControlInvoke, _) => {
            let mut body = json!({"session": "s", "text": text, "images": images});
            let field = match slot {
                "key" => {
                    body["session"] = v.clone();
                    "session".to_owned()
                }
                "messageId" => {
                    body["messageId"] = v.clone();
                    "messageId".to_owned()
                }
                _ => rest_field,
            };
            let path = match door {
                Door::Invoke => "/invoke",
                _ => "/control/invoke",
            };
            let req = server.req(Method::POST, path, &who.token).json(&body);
            (req, problem(&field))
        }
        (Door::Dispatch, "messageId") => return None,
        (Door::Dispatch, _) => {
            let session = if slot == "key" { v.clone() } else { json!("s") };
            let body = json!({"session": session, "command": {"type": "steer",
                "prompt": {"text": text, "images": images}}});
            let req = server
                .req(Method::POST, "/control/dispatch", &who.token)
                .json(&body);
            let expect = match slot {
                "key" => problem("session"),
                "image" => Expect::Rejected(format!("command.prompt.images[0].{member}")),
                _ => Expect::Rejected("command.prompt.text".into()),
            };
            (req, expect)
        }
        (Door::ControlState, "key") => {
            let q = seg(v.as_str().unwrap_or_default());
            let req = server.req(
                Method::GET,
                &format!("/control/state?session={q}"),
                &who.token,
            );
            (req, problem("session"))
        }
        (Door::ControlState, _) => return None,
        (Door::A2aRpc | Door::A2aRest, _) if case.a2a_takes.is_some() => return None,
        (Door::A2aRpc, _) => (rpc("SendMessage", a2a_message()), a2a_expect()),
        (Door::A2aRest, _) => {
            let req = server
                .req(
                    Method::POST,
                    "/a2a/question_gate/rest/message:send",
                    &who.token,
                )
                .header("A2A-Version", "1.0")
                .json(&a2a_message());
            (req, a2a_expect())
        }
        (Door::A2aList, "key") => (
            rpc("ListTasks", json!({"contextId": v})),
            Expect::A2a(-32602, Some("contextId".into())),
        ),
        (Door::A2aList, _) => return None,
        (Door::Inbox, "key" | "image") => return None,
        (Door::Inbox, _) => {
            let mut form = vec![
                ("kind".to_owned(), "reply".to_owned()),
                ("csrf".to_owned(), who.csrf.clone()),
                ("text".to_owned(), "hi".to_owned()),
            ];
            let field = if slot == "messageId" {
                form.push(("message_id".into(), v.as_str().unwrap_or_default().into()));
                "message_id"
            } else {
                form[2].1 = v.as_str().unwrap_or_default().into();
                "text"
            };
            let req = reqwest::Client::new()
                .post(format!(
                    "{}/inbox/items/0190b5a2-0000-7000-8000-000000000000:1:3",
                    server.base
                ))
                .header("cookie", &who.cookie)
                .header("accept", "application/json")
                .form(&form);
            let code = if slot == "messageId" {
                "invalid_message_id"
            } else {
                case.code.as_str()
            };
            (
                req,
                Expect::Problem(status_of(code), code.into(), field.into()),
            )
        }
    })
}

/// The field violations an A2A error names (JSON-RPC `data`, REST `details`).
fn violations(details: &Value) -> Vec<String> {
    details
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|d| d["fieldViolations"].as_array().into_iter().flatten())
        .filter_map(|f| f["field"].as_str().map(str::to_owned))
        .collect()
}

fn reason(code: i64) -> &'static str {
    match code {
        -32602 => "INVALID_PARAMS",
        -32005 => "CONTENT_TYPE_NOT_SUPPORTED",
        _ => "?",
    }
}

/// Checks one answer; `Err` says what was wrong.
fn check(door: Door, expect: &Expect, status: u16, ct: &str, body: &Value) -> Result<(), String> {
    let ok = match expect {
        Expect::Problem(want, code, field) => {
            status == *want
                && ct == "application/problem+json"
                && body["code"] == code.as_str()
                && body["field"] == field.as_str()
        }
        Expect::Rejected(field) => {
            status == 200
                && body["ok"] == false
                && body["error"]["code"] == "invalid_command"
                && body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&format!("`{field}`")))
        }
        Expect::A2a(code, field) => {
            let (got, details) = match door {
                Door::A2aRest => {
                    let info =
                        body["error"]["details"][0]["reason"].as_str() == Some(reason(*code));
                    (
                        (status == 400 && info).then_some(*code),
                        &body["error"]["details"],
                    )
                }
                _ => (
                    (status == 200)
                        .then(|| body["error"]["code"].as_i64())
                        .flatten(),
                    &body["error"]["data"],
                ),
            };
            got == Some(*code)
                && field
                    .as_ref()
                    .is_none_or(|f| violations(details).contains(f))
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("expected {expect:?}, got {status} {body}"))
    }
}

/// Signs `token` in to the inbox: the cookie and the page's CSRF token.
async fn inbox(server: &Server, token: String) -> Who {
    let (cookie, csrf) = crate::harness::sign_in(server, &token).await;
    Who {
        token,
        cookie,
        csrf,
    }
}

#[tokio::test]
async fn every_door_refuses_the_same_values_alike_on_both_stores() {
    let cases: Vec<Case> = serde_json::from_str(include_str!("values.json")).expect("values.json");
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let who = inbox(&server, server.key("mallory", false).await).await;
        let mut failures = Vec::new();
        let mut asked = 0;
        for case in &cases {
            for door in DOORS {
                let Some((req, expect)) = request(&server, &who, door, case) else {
                    continue;
                };
                asked += 1;
                let resp = req.send().await.expect("request");
                let status = resp.status().as_u16();
                let ct = resp
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let (_, body) = send_body(resp).await;
                if let Err(why) = check(door, &expect, status, &ct, &body) {
                    failures.push(format!(
                        "{} via {door:?} ({}): {why}",
                        case.name,
                        backend.name()
                    ));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {asked} refusals were not as they should be:\n{}",
            failures.len(),
            failures.join("\n")
        );
        let threads = server
            .store
            .list_threads(&duet_runtime::ThreadQuery::default())
            .await
            .expect("list");
        assert!(threads.is_empty(), "a refused value stored {threads:?}");
        server.stop().await;
    }
}

/// A response's body as JSON (or its text as a JSON string).
async fn send_body(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}
