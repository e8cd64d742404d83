//! The one-time links a webhook carries (issue #31), followed as a person would, on SQLite and
//! Postgres, on a server whose clock the test moves: the links are taken from the delivered
//! body of the `ops` role's channel. Approve once (the thread runs the call; the page says who
//! decided), twice (409, used), the other link of an answered question (409, says who), `GET`
//! (shows, never decides), a changed byte (404), after someone answered through the API (409,
//! naming them), a reject without a reason (422, the form asks) then with one (the model is
//! told it), a revoked link (410) and an expired one (410).

use std::sync::Arc;

use duet_runtime::ManualClock;
use serde_json::{Value, json};

use crate::harness::{Server, seg, until};
use crate::hook::Hook;
use crate::notify_support::{links, project, role_key, start_desk};
use crate::support;

const HOUR: i64 = 3_600_000;

/// A link followed: (status, page).
async fn follow(server: &Server, path: &str, reason: Option<&str>) -> (u16, String) {
    let form: Vec<(&str, &str)> = reason.map(|r| vec![("reason", r)]).unwrap_or_default();
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", server.base))
        .form(&form)
        .send()
        .await
        .expect("POST the link");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("page"))
}

/// A link's page: (status, page).
async fn show(server: &Server, path: &str) -> (u16, String) {
    let resp = reqwest::get(format!("{}{path}", server.base))
        .await
        .expect("GET the link");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("page"))
}

/// What a parked call's notification carried.
struct Parked {
    approval: String,
    approve: String,
    reject: String,
    body: Value,
}

/// Alice's desk thread `key` waits on its refund: the ops channel's notification of it.
async fn parked(server: &Server, hook: &mut Hook, alice: &str, key: &str) -> Parked {
    start_desk(server, alice, key).await;
    let hit = hook.next().await;
    assert_eq!(hit.body["thread"]["key"], key, "{}", hit.body);
    assert_eq!(hit.event(), "question.parked");
    let (approve, reject, _) = links(&hit.body);
    Parked {
        approval: hit.body["question"]["approval"]
            .as_str()
            .expect("approval")
            .to_owned(),
        approve: approve.expect("an approve link"),
        reject: reject.expect("a reject link"),
        body: hit.body,
    }
}

/// The status of `alice`'s thread `key`.
async fn status(server: &Server, alice: &str, key: &str) -> Value {
    let (code, t) = server.get(&format!("/threads/{key}"), alice).await;
    assert_eq!(code, 200, "{t}");
    t["status"].clone()
}

/// The tool results of thread `key`.
async fn tool_results(server: &Server, alice: &str, key: &str) -> Vec<String> {
    let (code, page) = server
        .get(&format!("/threads/{key}/messages?limit=500"), alice)
        .await;
    assert_eq!(code, 200, "{page}");
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["data"]["role"] == "tool")
        .filter_map(|m| m["data"]["content"].as_str().map(str::to_owned))
        .collect()
}

/// `token` with one character of its signature changed.
fn tampered(path: &str) -> String {
    let mut chars: Vec<char> = path.chars().collect();
    let i = chars.len() - 3;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[tokio::test]
async fn a_link_decides_once_as_its_channel_and_is_refused_after() {
    for backend in support::backends().await {
        let at = backend.name();
        let mut hook = Hook::up().await;
        let p = project(
            "notify-links",
            "{ decisions: [approve, reject], approvers: { roles: [ops] } }",
            &[(
                "ops",
                format!(
                    "events: [question.parked]\nroles: [ops]\nlinkTtl: 1h\nwebhook: {{ url: \"{}\" }}\n",
                    hook.at("/ops")
                ),
            )],
        );
        let start = {
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970");
            i64::try_from(since.as_millis()).expect("fits")
        };
        let clock = Arc::new(ManualClock::new(start));
        let server = Server::start_clocked(&backend, p.root(), clock.clone()).await;
        let alice = server.key("alice", false).await;
        let bob = role_key(&server, "bob", &["ops"]).await;

        // GET shows the call and a form, and decides nothing, however often.
        let k1 = parked(&server, &mut hook, &alice, "k1").await;
        assert_eq!(
            k1.body["links"]["expiresAt"],
            json!(k1.body["at"].as_i64().expect("at") + HOUR),
            "{at}: linkTtl 1h: {}",
            k1.body
        );
        for _ in 0..2 {
            let (code, page) = show(&server, &k1.approve).await;
            assert_eq!(code, 200, "{at}: {page}");
            assert!(page.contains("Approve this call?"), "{at}: {page}");
            assert!(page.contains("refund"), "{at}: {page}");
            assert!(page.contains("method=\"post\""), "{at}: {page}");
        }
        assert_eq!(status(&server, &alice, "k1").await, "waiting", "{at}");
        // Approve: applied as the channel, the thread runs the call and parks for alice.
        let (code, page) = follow(&server, &k1.approve, None).await;
        assert_eq!(code, 200, "{at}: {page}");
        assert!(page.contains("Approved by ops."), "{at}: {page}");
        until(&server, &alice, "k1", "awaiting_human").await;
        assert_eq!(
            tool_results(&server, &alice, "k1").await,
            ["refunded A1"],
            "{at}"
        );
        // Twice: used. Its sibling: the question is answered, by ops.
        let (code, page) = follow(&server, &k1.approve, None).await;
        assert_eq!(code, 409, "{at}: {page}");
        assert!(
            page.contains("This link was used already, by ops"),
            "{at}: {page}"
        );
        let (code, page) = follow(&server, &k1.reject, Some("too late")).await;
        assert_eq!(code, 409, "{at}: {page}");
        assert!(
            page.contains("This question was answered already, by ops."),
            "{at}: {page}"
        );
        assert_eq!(tool_results(&server, &alice, "k1").await.len(), 1, "{at}");

        // A changed byte: not a link.
        let k2 = parked(&server, &mut hook, &alice, "k2").await;
        for forged in [
            tampered(&k2.approve),
            k2.approve.replacen("/links/e", "/links/f", 1),
        ] {
            assert_ne!(forged, k2.approve);
            let (code, page) = follow(&server, &forged, None).await;
            assert_eq!(code, 404, "{at}: {forged}: {page}");
            assert!(page.contains("This link is not valid."), "{at}: {page}");
        }
        assert_eq!(status(&server, &alice, "k2").await, "waiting", "{at}");
        // Someone answered through the API first: refused, naming them.
        let (code, body) = server
            .post(
                &format!("/approvals/{}?wait=true", seg(&k2.approval)),
                &bob,
                json!({"decision": "reject", "reason": "not today"}),
            )
            .await;
        assert_eq!(code, 200, "{at}: {body}");
        let (code, page) = follow(&server, &k2.approve, None).await;
        assert_eq!(code, 409, "{at}: {page}");
        assert!(
            page.contains("This question was answered already, by bob."),
            "{at}: {page}"
        );
        assert_eq!(
            tool_results(&server, &alice, "k2").await,
            ["A person rejected this call: not today"],
            "{at}"
        );

        // A reject needs a reason: the form asks for one, then the model is told it.
        let k3 = parked(&server, &mut hook, &alice, "k3").await;
        let (code, page) = show(&server, &k3.reject).await;
        assert_eq!(code, 200, "{at}: {page}");
        assert!(page.contains("name=\"reason\""), "{at}: {page}");
        let (code, page) = follow(&server, &k3.reject, None).await;
        assert_eq!(code, 422, "{at}: {page}");
        assert!(page.contains("Say why you reject it"), "{at}: {page}");
        assert!(page.contains("name=\"reason\""), "{at}: {page}");
        assert_eq!(status(&server, &alice, "k3").await, "waiting", "{at}");
        let (code, page) = follow(&server, &k3.reject, Some("over budget")).await;
        assert_eq!(code, 200, "{at}: {page}");
        assert!(page.contains("Rejected by ops."), "{at}: {page}");
        until(&server, &alice, "k3", "awaiting_human").await;
        assert_eq!(
            tool_results(&server, &alice, "k3").await,
            ["A person rejected this call: over budget"],
            "{at}"
        );

        // Revoked (the store's revocation: no route revokes links on main yet): gone.
        let k4 = parked(&server, &mut hook, &alice, "k4").await;
        let revoked = server
            .tables
            .revoke_links(&k4.approval, start)
            .await
            .expect("revoked");
        assert_eq!(revoked, 2, "{at}: approve and reject");
        for link in [&k4.approve, &k4.reject] {
            let (code, page) = follow(&server, link, Some("x")).await;
            assert_eq!(code, 410, "{at}: {page}");
            assert!(page.contains("This link was revoked at"), "{at}: {page}");
        }
        assert_eq!(status(&server, &alice, "k4").await, "waiting", "{at}");

        // Expired: an hour on, the link is gone (and the question still waits).
        let k5 = parked(&server, &mut hook, &alice, "k5").await;
        clock.advance(HOUR);
        let (code, page) = show(&server, &k5.approve).await;
        assert_eq!(code, 410, "{at}: {page}");
        let (code, page) = follow(&server, &k5.approve, None).await;
        assert_eq!(code, 410, "{at}: {page}");
        assert!(page.contains("This link expired at"), "{at}: {page}");
        assert_eq!(status(&server, &alice, "k5").await, "waiting", "{at}");
        assert!(hook.drain().is_empty(), "{at}");
        server.stop().await;
    }
}
