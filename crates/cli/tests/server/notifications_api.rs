//! Seeing notifications over the API, on each backend (issue #31): a principal's webhook
//! subscription hears of its question, signed with the secret it was shown once; a delivery the
//! receiver refused for good (`410 Gone`) is listed `failed` with its error to the principal it
//! concerns and to an admin — not to another principal —, on the question's inbox page and in
//! `/metrics`; an admin retries it and it is delivered, with the same idempotency key. A tool
//! call's one-time links are revoked by who may decide it (nobody else), and a revoked link is
//! refused. Subscriptions are checked (a private target refused unless allowed, unknown events
//! and agents, targets that are not one), listed per principal, and deleted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use axum::http::HeaderMap;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::harness::{Server, options, send};
use crate::support;

/// One request the webhook got, and the status it answered.
struct Hit {
    headers: HeaderMap,
    raw: String,
    body: Value,
    status: u16,
}

/// A webhook on loopback answering the status it is set to, reporting every request.
struct Hook {
    url: String,
    status: Arc<AtomicU16>,
    hits: mpsc::UnboundedReceiver<Hit>,
}

impl Hook {
    async fn start(status: u16) -> Hook {
        let (tx, hits) = mpsc::unbounded_channel();
        let status = Arc::new(AtomicU16::new(status));
        let answer = status.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, raw: String| {
                let (tx, answer) = (tx.clone(), answer.clone());
                async move {
                    let status = answer.load(Ordering::SeqCst);
                    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
                    let _ = tx.send(Hit {
                        headers,
                        raw,
                        body,
                        status,
                    });
                    axum::http::StatusCode::from_u16(status).expect("a status")
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Hook { url, status, hits }
    }

    /// The next request it gets (a minute at most).
    async fn next(&mut self) -> Hit {
        tokio::time::timeout(Duration::from_secs(60), self.hits.recv())
            .await
            .expect("a notification within a minute")
            .expect("the webhook runs")
    }
}

/// A desk whose model calls `refund` (each call waits for its owner's decision), and a gate
/// whose model asks a question (a park).
fn project() -> support::Scratch {
    let p = support::Scratch::new("notifications-api");
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    p.write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string } }, required: [order] }\nresult: \"refunded {{order}}\"\napproval: { decisions: [approve, reject] }\n",
    );
    p.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1 } }]\n  - text: Done.\n",
    );
    p.write(
        "agents/agents/gate.yaml",
        "name: gate\nsideA: { prompt: ask }\nsideB: { human: true, approver: true }\n",
    );
    p.write(
        "agents/prompts/ask.yaml",
        "name: ask\ntoolDescription: d\nmodel: q\nincludeChat: true\nprompt: p\n",
    );
    p.write(
        "agents/models/q.yaml",
        "name: q\nprovider: scripted\nmodel: demo\nscript:\n  - text: Refund order A1?\n",
    );
    p
}

async fn delete(server: &Server, path: &str, token: &str) -> (u16, Value) {
    send(server.req(reqwest::Method::DELETE, path, token)).await
}

/// `GET path` as `token` until `done` holds of the body (a minute at most): the body.
async fn until(server: &Server, path: &str, token: &str, done: impl Fn(&Value) -> bool) -> Value {
    let wait = async {
        loop {
            let (status, body) = server.get(path, token).await;
            assert_eq!(status, 200, "{path}: {body}");
            if done(&body) {
                return body;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("{path} did not come to pass within a minute"))
}

/// `GET path` of the inbox as `token` signed in: the HTML.
async fn inbox_page(server: &Server, token: &str, path: &str) -> String {
    let cookie = crate::inbox::cookie(server, token).await;
    let resp = crate::inbox::plain()
        .get(format!("{}{path}", server.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("page");
    assert_eq!(resp.status(), 200, "{path}");
    resp.text().await.expect("html")
}

/// Subscribes `token`'s principal: (status, body).
async fn subscribe(server: &Server, token: &str, body: Value) -> (u16, Value) {
    server
        .post("/notifications/subscriptions", token, body)
        .await
}

fn items(page: &Value) -> Vec<Value> {
    page["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_failed_delivery_is_shown_to_whom_it_concerns_and_an_admin_retries_it() {
    for backend in support::backends().await {
        let project = project();
        let mut hook = Hook::start(410).await;
        let server = Server::start_with(&backend, project.root(), options()).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let ops = server.key("ops", true).await;
        let (status, sub) = subscribe(
            &server,
            &alice,
            json!({"channel": "webhook", "target": hook.url, "events": ["question.parked"]}),
        )
        .await;
        assert_eq!(status, 201, "{sub}");
        let secret = sub["secret"].as_str().expect("the secret, once").to_owned();

        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "gate", "key": "q-1", "text": "Refund order A1"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let approval = body["approval"].as_str().expect("parked").to_owned();

        // Sent once, signed with the subscription's secret; the receiver wants no more.
        let hit = hook.next().await;
        assert_eq!(hit.status, 410);
        assert_eq!(hit.body["type"], "question.parked", "{}", hit.body);
        let signed = duet_server::signatures::Signed::from_headers(&hit.headers).expect("signed");
        let at: i64 = signed.timestamp.parse().expect("a timestamp");
        let verified = duet_server::signatures::verify(
            &secret,
            signed,
            hit.raw.as_bytes(),
            at,
            duet_server::signatures::TOLERANCE_S,
        );
        assert_eq!(verified, Ok(()));
        let key = hit.headers["webhook-id"].clone();

        // Given up on at once (a 410 is for good): alice sees it, with its error.
        let failed = until(&server, "/notifications?status=failed", &alice, |p| {
            !items(p).is_empty()
        })
        .await;
        let d = items(&failed).remove(0);
        let id = d["id"].as_i64().expect("an id");
        assert_eq!(d["channel"], "webhook", "{d}");
        assert_eq!(d["event"], "question.parked", "{d}");
        // Its origin alone: a path may hold a secret.
        let origin = hook.url.trim_end_matches("/hook");
        assert_eq!(d["target"], format!("{origin}/…"), "{d}");
        assert_eq!(d["subject"], approval.as_str(), "{d}");
        assert_eq!(d["thread"], "q-1", "{d}");
        assert_eq!(d["recipient"], "alice", "{d}");
        assert_eq!(d["attempts"], 1, "{d}");
        assert!(
            d["lastError"].as_str().is_some_and(|e| e.contains("410")),
            "{d}"
        );
        assert!(d["finishedAt"].is_i64() && d["nextAt"].is_null(), "{d}");
        for hidden in ["body", "meta", "secret", "idempotencyKey", "response"] {
            assert!(d.get(hidden).is_none(), "{hidden} shown: {d}");
        }
        let (status, one) = server.get(&format!("/notifications/{id}"), &alice).await;
        assert_eq!((status, &one), (200, &d));

        // Not bob's to see; an admin's, with the thread as an admin names it.
        let (_, theirs) = server.get("/notifications", &bob).await;
        assert!(items(&theirs).is_empty(), "{theirs}");
        for (method, path) in [
            (reqwest::Method::GET, format!("/notifications/{id}")),
            (reqwest::Method::POST, format!("/notifications/{id}/retry")),
        ] {
            let (status, body) = send(server.req(method, &path, &bob)).await;
            assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
        }
        let (_, all) = server
            .get("/notifications?thread=alice%2Fq-1&channel=webhook", &ops)
            .await;
        assert_eq!(items(&all).len(), 1, "{all}");
        assert_eq!(items(&all)[0]["thread"], "alice/q-1");

        // The question's page says so; so do the metrics, read from the outbox.
        let html = inbox_page(&server, &alice, &format!("/inbox/items/{approval}")).await;
        let section = &html[html.find("id=\"notified\"").expect("a Notified section")..];
        assert!(section.contains("data-status=\"failed\""), "{section}");
        assert!(
            section.contains(&format!("{origin}/…")) && section.contains("410"),
            "{section}"
        );
        let resp = server
            .req(reqwest::Method::GET, "/metrics", &ops)
            .send()
            .await
            .expect("scrape");
        let text = resp.text().await.expect("text");
        assert!(
            text.contains("duet_notifications{channel=\"webhook\",status=\"failed\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("duet_notifications{channel=\"email\",status=\"pending\"} 0"),
            "{text}"
        );

        // Retrying sends again: an admin's to do.
        let (status, body) = server
            .post(&format!("/notifications/{id}/retry"), &alice, json!({}))
            .await;
        assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
        hook.status.store(200, Ordering::SeqCst);
        let (status, back) = server
            .post(&format!("/notifications/{id}/retry"), &ops, json!({}))
            .await;
        assert_eq!(status, 200, "{back}");
        assert_eq!(back["attempts"], 0, "{back}");
        assert_ne!(back["status"], "failed", "{back}");
        let again = hook.next().await;
        assert_eq!(again.status, 200);
        assert_eq!(again.headers["webhook-id"], key, "the same idempotency key");
        let path = format!("/notifications/{id}");
        until(&server, &path, &alice, |d| d["status"] == "delivered").await;
        let (status, body) = server
            .post(&format!("/notifications/{id}/retry"), &ops, json!({}))
            .await;
        assert_eq!((status, body["code"].as_str()), (409, Some("not_failed")));

        // Filters, and a page at a time.
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "gate", "key": "q-2", "text": "Refund order B2"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(hook.next().await.status, 200);
        let (_, first) = server.get("/notifications?limit=1", &alice).await;
        assert_eq!(items(&first).len(), 1, "{first}");
        assert_eq!(items(&first)[0]["thread"], "q-2", "newest first: {first}");
        let cursor = first["nextCursor"].as_str().expect("a next page");
        let (_, second) = server
            .get(&format!("/notifications?limit=1&before={cursor}"), &alice)
            .await;
        assert_eq!(items(&second)[0]["id"], id, "{second}");
        let (_, about) = server
            .get(&format!("/notifications?approval={approval}"), &alice)
            .await;
        assert_eq!(items(&about).len(), 1, "{about}");
        for bad in [
            "status=sent",
            "channel=fax",
            "limit=0",
            "before=x",
            "colour=1",
        ] {
            let (status, body) = server.get(&format!("/notifications?{bad}"), &alice).await;
            assert_eq!(
                (status, body["code"].as_str()),
                (400, Some("invalid_query"))
            );
        }
        let (status, _) = server.get("/notifications?thread=nope", &alice).await;
        assert_eq!(status, 404);
        server.stop().await;
    }
}

#[tokio::test]
async fn an_approvals_links_are_revoked_by_who_may_decide_it() {
    for backend in support::backends().await {
        let project = project();
        let mut hook = Hook::start(200).await;
        let server = Server::start_with(&backend, project.root(), options()).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let (status, sub) = subscribe(
            &server,
            &alice,
            json!({"channel": "webhook", "target": hook.url}),
        )
        .await;
        assert_eq!(status, 201, "{sub}");
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "desk", "key": "r-1", "text": "refund A1"}),
            )
            .await;
        assert_eq!((status, body["status"].as_str()), (200, Some("waiting")));
        let hit = hook.next().await;
        assert_eq!(hit.body["type"], "question.parked", "{}", hit.body);
        let approval = hit.body["question"]["approval"]
            .as_str()
            .expect("the approval")
            .to_owned();
        let approve = hit.body["links"]["approve"]
            .as_str()
            .expect("a link to approve")
            .to_owned();
        let token = approve
            .rsplit("/links/")
            .next()
            .expect("a token")
            .to_owned();

        let links = format!("/approvals/{approval}/links");
        let (status, _) = delete(&server, &links, &bob).await;
        assert_eq!(status, 404, "not bob's to decide");
        let (status, body) = delete(&server, &links, &alice).await;
        assert_eq!((status, &body), (200, &json!({"revoked": 2})));
        let (_, body) = delete(&server, &links, &alice).await;
        assert_eq!(body, json!({"revoked": 0}));
        let resp = crate::inbox::plain()
            .post(format!("{}/links/{token}", server.base))
            .form(&[("confirm", "1")])
            .send()
            .await
            .expect("follow");
        assert_eq!(resp.status(), 410, "a revoked link is refused");

        // The tool call's page shows the notification, delivered.
        let path = format!("/notifications?approval={approval}");
        until(&server, &path, &alice, |p| {
            items(p).first().is_some_and(|d| d["status"] == "delivered")
        })
        .await;
        let html = inbox_page(&server, &alice, &format!("/inbox/items/{approval}")).await;
        let section = &html[html.find("id=\"notified\"").expect("a Notified section")..];
        assert!(section.contains("data-status=\"delivered\""), "{section}");
        server.stop().await;
    }
}

#[tokio::test]
async fn subscriptions_are_checked_listed_per_principal_and_deleted() {
    for backend in support::backends().await {
        let project = project();
        let mut strict = options();
        strict.allow_private_push = false;
        let server = Server::start_with(&backend, project.root(), strict).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let ops = server.key("ops", true).await;

        let (status, body) = subscribe(
            &server,
            &alice,
            json!({"channel": "webhook", "target": "http://127.0.0.1:9/hook"}),
        )
        .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("private_target"))
        );
        let (status, hook) = subscribe(
            &server,
            &alice,
            json!({"channel": "webhook", "target": "https://u:p@93.184.216.34/hook?token=t",
                "events": ["question.parked", "question.parked"], "agents": ["desk"]}),
        )
        .await;
        assert_eq!(status, 201, "{hook}");
        assert_eq!(
            hook["target"], "https://93.184.216.34/…",
            "no secrets shown"
        );
        assert_eq!(hook["events"], json!(["question.parked"]));
        assert_eq!(hook["agents"], json!(["desk"]));
        assert_eq!(hook["principal"], "alice");
        let secret = hook["secret"].as_str().expect("a secret");
        // 32 bytes in padded standard base64: 43 characters and one `=`.
        let key = secret.strip_prefix("whsec_").expect("whsec_");
        assert_eq!(key.len(), 44, "{secret}");
        assert!(key.ends_with('=') && !key.ends_with("=="), "{secret}");
        assert!(
            key[..43]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/'),
            "{secret}"
        );
        let (status, mail) = subscribe(
            &server,
            &alice,
            json!({"channel": "email", "target": "alice@example.com"}),
        )
        .await;
        assert_eq!(status, 201, "{mail}");
        assert!(mail.get("secret").is_none(), "{mail}");
        let (status, slack) = subscribe(
            &server,
            &bob,
            json!({"channel": "slack", "target": "C0OPS"}),
        )
        .await;
        assert_eq!(status, 201, "{slack}");

        for (body, code) in [
            (json!({"channel": "fax", "target": "x"}), "invalid_channel"),
            (
                json!({"channel": "email", "target": "not an address"}),
                "invalid_target",
            ),
            (
                json!({"channel": "slack", "target": "two words"}),
                "invalid_target",
            ),
            (
                json!({"channel": "webhook", "target": "ftp://example.com/x"}),
                "invalid_target",
            ),
            (
                json!({"channel": "email", "target": "a@b.c", "events": ["question.maybe"]}),
                "unknown_event",
            ),
            (
                json!({"channel": "email", "target": "a@b.c", "agents": ["nobody"]}),
                "unknown_agent",
            ),
        ] {
            let (status, got) = subscribe(&server, &alice, body.clone()).await;
            assert_eq!(
                (status, got["code"].as_str()),
                (422, Some(code)),
                "{body}: {got}"
            );
        }

        // Each principal lists its own, without secrets; an admin lists everyone's.
        let (_, mine) = server.get("/notifications/subscriptions", &alice).await;
        let ids: Vec<&Value> = mine["items"].as_array().expect("items").iter().collect();
        assert_eq!(ids.len(), 2, "{mine}");
        assert!(ids.iter().all(|s| s.get("secret").is_none()), "{mine}");
        let (_, bobs) = server.get("/notifications/subscriptions", &bob).await;
        assert_eq!(bobs["items"].as_array().map(Vec::len), Some(1), "{bobs}");
        let (status, _) = server
            .get("/notifications/subscriptions?all=true", &bob)
            .await;
        assert_eq!(status, 403);
        let (_, all) = server
            .get("/notifications/subscriptions?all=true", &ops)
            .await;
        assert_eq!(all["items"].as_array().map(Vec::len), Some(3), "{all}");

        // Deleted by its principal or an admin; to anyone else it is not there.
        let path = |s: &Value| {
            format!(
                "/notifications/subscriptions/{}",
                s["id"].as_str().expect("id")
            )
        };
        assert_eq!(delete(&server, &path(&hook), &bob).await.0, 404);
        assert_eq!(delete(&server, &path(&hook), &alice).await.0, 204);
        assert_eq!(delete(&server, &path(&hook), &alice).await.0, 404);
        assert_eq!(delete(&server, &path(&mail), &ops).await.0, 204);
        let (_, mine) = server.get("/notifications/subscriptions", &alice).await;
        assert_eq!(mine["items"], json!([]));
        server.stop().await;

        // Without auth there is no principal to subscribe.
        let mut open = options();
        open.auth = false;
        let server = Server::start_with(&backend, project.root(), open).await;
        let (status, body) =
            subscribe(&server, "", json!({"channel": "email", "target": "a@b.c"})).await;
        assert_eq!((status, body["code"].as_str()), (422, Some("no_principal")));
        server.stop().await;
    }
}
