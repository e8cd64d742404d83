//! Notifications when things go wrong, on both backends: a step that fails is told
//! (`thread.failed`, with its error), and a principal whose keys were all revoked neither hears
//! of new questions nor decides through a link it was sent before (403), while the link's
//! question still waits for someone who may.

use serde_json::json;

use crate::harness::{Server, options};
use crate::hook::Hook;
use duet_server_store::DeliveryQuery;

use crate::notify_support::{deliveries, links, path_of, project, role_key, start_desk, subscribe};
use crate::support;

/// A link followed with no reason: (status, page).
async fn follow(server: &Server, path: &str) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", server.base))
        .form(&Vec::<(&str, &str)>::new())
        .send()
        .await
        .expect("POST the link");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("page"))
}

#[tokio::test]
async fn a_failed_step_is_told_with_its_error() {
    for backend in support::backends().await {
        let at = backend.name();
        let mut hook = Hook::up().await;
        let p = project(
            "notify-failed",
            "{ decisions: [approve, reject] }",
            &[(
                "hook",
                format!(
                    "events: [thread.failed]\nwebhook: {{ url: \"{}\" }}\n",
                    hook.url
                ),
            )],
        );
        // A model with nothing left to say: its first step fails.
        p.write(
            "agents/agents/broken.yaml",
            "name: broken\nsideA: { prompt: broken }\nsideB: { human: true }\n",
        );
        p.write(
            "agents/prompts/broken.yaml",
            "name: broken\ntoolDescription: d\nmodel: broken\nprompt: p\n",
        );
        p.write(
            "agents/models/broken.yaml",
            "name: broken\nprovider: scripted\nmodel: demo\nscript: []\n",
        );
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "broken", "key": "b1", "text": "hello"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        let hit = hook.next().await;
        assert_eq!(hit.event(), "thread.failed", "{at}: {}", hit.body);
        assert_eq!(hit.body["thread"]["key"], "b1", "{at}");
        assert_eq!(hit.body["session"]["stopReason"], "step_error", "{at}");
        assert!(
            hit.body["session"]["result"]
                .as_str()
                .is_some_and(|r| !r.is_empty()),
            "{at}: the error is told: {}",
            hit.body
        );
        server.stop().await;
        assert!(hook.drain().is_empty(), "{at}: once");
    }
}

#[tokio::test]
async fn an_offboarded_approver_hears_nothing_more_and_its_links_no_longer_decide() {
    for backend in support::backends().await {
        let at = backend.name();
        let mut hook = Hook::up().await;
        let p = project(
            "notify-offboarded",
            "{ decisions: [approve, reject], approvers: { roles: [ops] } }",
            &[],
        );
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let bob = role_key(&server, "bob", &["ops"]).await;
        // Bob hears of what his role may decide; alice, of her own threads.
        subscribe(&server, "bob-hook", "bob", &format!("{}/bob", hook.url)).await;
        subscribe(
            &server,
            "alice-hook",
            "alice",
            &format!("{}/alice", hook.url),
        )
        .await;

        start_desk(&server, &alice, "o1").await;
        let hits = hook
            .until(|h| h.path.ends_with("/bob") && h.body["thread"]["key"] == "o1")
            .await;
        let hit = hits.last().expect("bob's");
        assert_eq!(hit.event(), "question.parked", "{at}: {}", hit.body);
        let (approve, _, _) = links(&hit.body);
        let approve = path_of(&approve.expect("bob may decide: an approve link"));

        // Bob leaves: his only key is revoked.
        let id = bob
            .strip_prefix("duet_")
            .and_then(|rest| rest.split('_').next())
            .expect("a key id");
        assert!(
            server.tables.revoke_key(id, 1).await.expect("revoke"),
            "{at}"
        );
        let (status, page) = follow(&server, &approve).await;
        assert_eq!(status, 403, "{at}: {page}");
        assert!(page.contains("may no longer decide"), "{at}: {page}");
        let (_, t) = server.get("/threads/o1", &alice).await;
        assert_eq!(t["status"], "waiting", "{at}: nothing decided: {t}");

        // A new question his role may decide reaches alice (her thread), not him: its
        // deliveries were all written when its notice was routed.
        start_desk(&server, &alice, "o2").await;
        hook.until(|h| h.path.ends_with("/alice") && h.body["thread"]["key"] == "o2")
            .await;
        let o2: Vec<Option<String>> = deliveries(&server, DeliveryQuery::default())
            .await
            .into_iter()
            .filter(|d| d.body.contains("\"o2\""))
            .map(|d| d.recipient)
            .collect();
        assert_eq!(o2, [Some("alice".to_owned())], "{at}");
        server.stop().await;
    }
}
