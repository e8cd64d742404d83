//! Webhook notifications end to end (issue #31), on SQLite and Postgres, received by a loopback
//! receiver (`support/hook.rs`) and awaited on its channel:
//!
//! - a tool call waiting for a decision and a person's park each reach every subscription once,
//!   signed as Standard Webhooks says (checked with `duet_server::signatures::verify`), the body
//!   naming the event, the approval and its links (decision links only for a role's channel);
//! - a receiver answering 503 gets its deliveries again after the backoff, in order, each
//!   `webhook-id` taken once, the outbox counting the attempts;
//! - routing: a call whose approvers name `ops` reaches the `ops` channel and an `ops` key's own
//!   subscription, not another role's; its reminder reaches them again; its escalation to
//!   `leads` reaches the leads' channel and a leads key, and only them;
//! - a private target is refused (`target refused`) unless the server allows private targets.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use duet_runtime::ManualClock;
use duet_server_store::{DeliveryQuery, DeliveryStatus};
use serde_json::{Value, json};

use crate::harness::{Server, options, seg};
use crate::hook::{Hit, Hook};
use crate::notify_support::{
    deliveries, links, path_of, project, role_key, start_desk, subscribe, until_outbox, verify,
};
use crate::support;

const MIN: i64 = 60_000;
const OPS_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ALL_SECRET: &str = "a plain shared secret";

fn wall_s() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_secs()).expect("fits")
}

fn wall_ms() -> i64 {
    wall_s() * 1_000
}

/// `n` more requests of `hook`, grouped by path (each path's in the order they came).
async fn by_path(hook: &mut Hook, n: usize) -> BTreeMap<String, Vec<Hit>> {
    let mut out: BTreeMap<String, Vec<Hit>> = BTreeMap::new();
    for _ in 0..n {
        let hit = hook.next().await;
        out.entry(hit.path.clone()).or_default().push(hit);
    }
    out
}

fn events(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(Hit::event).collect()
}

/// The checks every webhook passes: its headers, and the envelope of its body.
fn well_formed(hit: &Hit, at: &str) {
    assert_eq!(hit.header("content-type"), "application/json", "{at}");
    assert!(hit.id().starts_with("duet-n"), "{at}: {}", hit.id());
    assert_eq!(hit.header("idempotency-key"), hit.id(), "{at}");
    assert_eq!(hit.body["type"], hit.body["event"], "{at}: {}", hit.body);
    assert!(hit.body["timestamp"].is_string(), "{at}: {}", hit.body);
    assert!(hit.body["at"].is_i64(), "{at}: {}", hit.body);
    assert_eq!(hit.body["thread"]["agent"], "desk", "{at}: {}", hit.body);
}

#[tokio::test]
async fn a_park_reaches_each_subscription_once_signed_with_its_approval_and_links() {
    for backend in support::backends().await {
        let at = backend.name();
        let mut hook = Hook::up().await;
        let p = project(
            "notify-once",
            "{ decisions: [approve, reject], approvers: { roles: [ops] } }",
            &[
                (
                    "ops",
                    format!(
                        "events: [question.parked, question.answered]\nroles: [ops]\nlinkTtl: 1h\nwebhook: {{ url: \"{}\", secretEnv: OPS_SECRET }}\n",
                        hook.at("/ops")
                    ),
                ),
                (
                    "all",
                    format!(
                        "events: [question.parked, question.answered]\nwebhook: {{ url: \"{}\", secretEnv: ALL_SECRET }}\n",
                        hook.at("/all")
                    ),
                ),
            ],
        );
        let env: BTreeMap<String, String> = [
            ("OPS_SECRET".to_owned(), OPS_SECRET.to_owned()),
            ("ALL_SECRET".to_owned(), ALL_SECRET.to_owned()),
        ]
        .into();
        let opts = duet_server::Options {
            env: duet_server::Env::from_map(env),
            ..options()
        };
        let server = Server::start_with(&backend, p.root(), opts).await;
        let alice = server.key("alice", false).await;
        let bob = role_key(&server, "bob", &["ops"]).await;

        // The call waits: one delivery to each subscription.
        start_desk(&server, &alice, "k1").await;
        let parked = by_path(&mut hook, 2).await;
        let ops = &parked["/ops"][0];
        let all = &parked["/all"][0];
        for (hit, secret, other) in [(ops, OPS_SECRET, ALL_SECRET), (all, ALL_SECRET, OPS_SECRET)] {
            well_formed(hit, at);
            assert_eq!(hit.status, 200, "{at}");
            assert_eq!(verify(hit, secret, wall_s()), Ok(()), "{at}: {}", hit.path);
            assert!(
                verify(hit, other, wall_s()).is_err(),
                "{at}: its own secret only"
            );
            let b = &hit.body;
            assert_eq!(b["type"], "question.parked", "{at}: {b}");
            assert_eq!(b["thread"]["key"], "k1", "{at}: {b}");
            assert_eq!(b["thread"]["owner"], "alice", "{at}: {b}");
            let q = &b["question"];
            assert_eq!(q["kind"], "tool_call", "{at}: {b}");
            assert_eq!(q["call"]["tool"], "refund", "{at}: {b}");
            assert_eq!(q["call"]["args"], json!({"order": "A1", "amount": 250}));
            assert_eq!(q["decisions"], json!(["approve", "reject"]), "{at}: {b}");
            assert_eq!(q["approvers"], json!({"roles": ["ops"]}), "{at}: {b}");
        }
        assert_ne!(ops.id(), all.id(), "{at}: an idempotency key per delivery");
        let approval = ops.body["question"]["approval"]
            .as_str()
            .expect("the approval id")
            .to_owned();
        assert_eq!(all.body["question"]["approval"], approval.as_str(), "{at}");
        // The id is what the API answers with: the ops key reads it.
        let (status, listed) = server
            .get(&format!("/approvals/{}", seg(&approval)), &bob)
            .await;
        assert_eq!(status, 200, "{at}: {listed}");
        assert_eq!(listed["kind"], "tool_call", "{at}");
        // The role's channel may decide: approve and reject links, expiring in an hour; the other
        // subscription opens the inbox only.
        let (approve, reject, open) = links(&ops.body);
        assert!(
            approve.as_deref().is_some_and(|l| l.starts_with("/links/")),
            "{at}: {}",
            ops.body
        );
        assert!(
            reject.as_deref().is_some_and(|l| l.starts_with("/links/")),
            "{at}"
        );
        assert_ne!(approve, reject, "{at}");
        let inbox = format!("/inbox/items/{}", seg(&approval));
        assert_eq!(open.as_deref(), Some(inbox.as_str()), "{at}");
        assert!(ops.body["links"]["expiresAt"].is_i64(), "{at}");
        assert_eq!(
            all.body["links"],
            json!({"open": all.body["links"]["open"]}),
            "{at}: {}",
            all.body
        );
        assert_eq!(
            path_of(all.body["links"]["open"].as_str().unwrap_or("")),
            inbox
        );

        // Bob (role ops) approves; the thread runs on and parks for alice ("Done."), who
        // answers; it parks again ("Noted."). Each event reaches whoever hears of it, once.
        let (status, decided) = server
            .post(
                &format!("/approvals/{}?wait=true", seg(&approval)),
                &bob,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {decided}");
        let answered = by_path(&mut hook, 3).await;
        assert_eq!(events(&answered["/ops"]), ["question.answered"], "{at}");
        assert_eq!(
            events(&answered["/all"]),
            ["question.answered", "question.parked"],
            "{at}"
        );
        for hit in answered.values().flatten() {
            well_formed(hit, at);
        }
        let by_bob = &answered["/ops"][0].body;
        assert_eq!(by_bob["answer"]["by"], "bob", "{at}: {by_bob}");
        assert_eq!(by_bob["answer"]["decision"], "approve", "{at}: {by_bob}");
        assert_eq!(by_bob["question"]["approval"], approval.as_str(), "{at}");
        assert!(by_bob["links"].get("approve").is_none(), "{at}: {by_bob}");
        assert_eq!(answered["/all"][0].body["answer"], by_bob["answer"], "{at}");
        let done = &answered["/all"][1];
        assert_eq!(verify(done, ALL_SECRET, wall_s()), Ok(()), "{at}");
        assert_eq!(done.body["question"]["kind"], "question", "{at}");
        assert_eq!(done.body["question"]["text"], "Done.", "{at}");
        assert_eq!(
            done.body["question"]["approvers"],
            json!({}),
            "{at}: nobody named"
        );
        let park = done.body["question"]["approval"]
            .as_str()
            .expect("the park's id")
            .to_owned();
        let (status, body) = server
            .post(
                &format!("/approvals/{}?wait=true", seg(&park)),
                &alice,
                json!({"text": "thanks"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        let later = hook.until(|h| h.body["question"]["text"] == "Noted.").await;
        assert_eq!(
            later
                .iter()
                .map(|h| (h.path.as_str(), h.event()))
                .collect::<Vec<_>>(),
            [("/all", "question.answered"), ("/all", "question.parked")],
            "{at}: nothing else arrived"
        );
        assert_eq!(later[0].body["answer"]["by"], "alice", "{at}");
        assert_eq!(later[0].body["answer"]["text"], "thanks", "{at}");

        // Every delivery once: seven, each a webhook-id of its own, each delivered at once.
        let ids: BTreeSet<String> = parked
            .values()
            .chain(answered.values())
            .flatten()
            .chain(&later)
            .map(|h| h.id().to_owned())
            .collect();
        assert_eq!(ids.len(), 7, "{at}: {ids:?}");
        // The receiver has them all; the sender records the last one's answer right after.
        let stored = until_outbox(&server, &DeliveryQuery::default(), |found| {
            found.iter().all(|d| d.status == DeliveryStatus::Delivered)
        })
        .await;
        assert_eq!(stored.len(), 7, "{at}: {stored:#?}");
        assert!(stored.iter().all(|d| d.attempts == 0), "{at}: {stored:#?}");
        let keys: BTreeSet<String> = stored.iter().map(|d| d.idempotency_key.clone()).collect();
        assert_eq!(keys, ids, "{at}");
        assert!(hook.drain().is_empty(), "{at}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_receiver_down_for_a_while_gets_both_parks_in_order_each_once() {
    for backend in support::backends().await {
        let at = backend.name();
        let mut hook = Hook::start().await;
        let p = project(
            "notify-retry",
            "{ decisions: [approve, reject] }",
            &[(
                "hook",
                format!(
                    "events: [question.parked]\nwebhook: {{ url: \"{}\" }}\n",
                    hook.url
                ),
            )],
        );
        // The real clock: the backoffs are 1 s, then 2 s.
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;

        start_desk(&server, &alice, "r1").await;
        let first = hook.next().await;
        assert_eq!(
            (first.status, first.body["thread"]["key"].clone()),
            (503, json!("r1"))
        );
        // The second park waits behind the first: one stream, oldest first.
        start_desk(&server, &alice, "r2").await;
        let second = hook.next().await;
        assert_eq!(second.status, 503, "{at}");
        assert_eq!(
            second.id(),
            first.id(),
            "{at}: the same delivery, tried again"
        );
        hook.set_up(true);
        let rest = hook.until(|h| h.body["thread"]["key"] == "r2").await;
        let seen: Vec<(String, u16, Value)> = [&first, &second]
            .into_iter()
            .chain(&rest)
            .map(|h| (h.id().to_owned(), h.status, h.body["thread"]["key"].clone()))
            .collect();
        assert_eq!(
            seen.iter()
                .map(|(_, s, k)| (*s, k.clone()))
                .collect::<Vec<_>>(),
            [
                (503, json!("r1")),
                (503, json!("r1")),
                (200, json!("r1")),
                (200, json!("r2"))
            ],
            "{at}: in order, each taken once: {seen:?}"
        );
        assert_eq!(
            seen[2].0,
            first.id(),
            "{at}: one webhook-id for every attempt"
        );
        assert_ne!(seen[3].0, first.id(), "{at}");

        let stored = until_outbox(&server, &DeliveryQuery::default(), |found| {
            found.iter().all(|d| d.status == DeliveryStatus::Delivered)
        })
        .await;
        assert_eq!(stored.len(), 2, "{at}: {stored:#?}");
        let (d1, d2) = (&stored[0], &stored[1]);
        assert_eq!(d1.idempotency_key, first.id(), "{at}");
        assert_eq!(d2.idempotency_key, seen[3].0, "{at}");
        assert_eq!(d1.stream, d2.stream, "{at}");
        assert_eq!(
            (d1.status, d1.attempts),
            (DeliveryStatus::Delivered, 2),
            "{at}: {d1:?}"
        );
        assert_eq!(d1.last_error.as_deref(), Some("HTTP 503"), "{at}: {d1:?}");
        assert_eq!(
            (d2.status, d2.attempts),
            (DeliveryStatus::Delivered, 0),
            "{at}: {d2:?}"
        );
        assert!(
            d1.finished_at.is_some_and(|f| d2.created_at <= f),
            "{at}: the second waited for the first: {d1:?} {d2:?}"
        );
        assert!(hook.drain().is_empty(), "{at}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_call_reaches_its_roles_channels_and_keys_its_reminder_again_its_escalation_the_next_role()
 {
    for backend in support::backends().await {
        let at = backend.name();
        let mut hook = Hook::up().await;
        let def = |role: &str| {
            (
                role.to_owned(),
                format!(
                    "roles: [{role}]\nwebhook: {{ url: \"{}\" }}\n",
                    hook.at(&format!("/{role}"))
                ),
            )
        };
        let defs = [def("ops"), def("security"), def("leads")];
        let defs: Vec<(&str, String)> = defs.iter().map(|(n, y)| (n.as_str(), y.clone())).collect();
        let p = project(
            "notify-routing",
            "{ decisions: [approve, reject], approvers: { roles: [ops] }, deadline: { remind: [10m], escalate: { after: 30m, roles: [leads] } } }",
            &defs,
        );
        let clock = Arc::new(ManualClock::new(wall_ms()));
        let server = Server::start_clocked(&backend, p.root(), clock.clone()).await;
        let alice = server.key("alice", false).await;
        let bob = role_key(&server, "bob", &["ops"]).await;
        role_key(&server, "carol", &["security"]).await;
        role_key(&server, "dave", &["leads"]).await;
        for who in ["bob", "carol", "dave"] {
            subscribe(
                &server,
                &format!("sub-{who}"),
                who,
                &hook.at(&format!("/{who}")),
            )
            .await;
        }

        start_desk(&server, &alice, "c1").await;
        let parked = by_path(&mut hook, 2).await;
        assert_eq!(
            parked.keys().collect::<Vec<_>>(),
            ["/bob", "/ops"],
            "{at}: the ops channel and the ops key's own subscription"
        );
        for hit in parked.values().flatten() {
            assert_eq!(hit.event(), "question.parked", "{at}");
            let (approve, reject, _) = links(&hit.body);
            assert!(approve.is_some() && reject.is_some(), "{at}: {}", hit.body);
        }

        clock.advance(10 * MIN);
        let reminded = by_path(&mut hook, 2).await;
        assert_eq!(
            reminded.keys().collect::<Vec<_>>(),
            ["/bob", "/ops"],
            "{at}"
        );
        for hit in reminded.values().flatten() {
            assert_eq!(hit.event(), "question.reminded", "{at}");
            assert_eq!(hit.body["reminder"], 1, "{at}: {}", hit.body);
            assert!(links(&hit.body).0.is_some(), "{at}: it asks again");
        }

        clock.advance(20 * MIN);
        let escalated = by_path(&mut hook, 2).await;
        assert_eq!(
            escalated.keys().collect::<Vec<_>>(),
            ["/dave", "/leads"],
            "{at}: the role it adds, only"
        );
        for hit in escalated.values().flatten() {
            assert_eq!(hit.event(), "question.escalated", "{at}");
            assert_eq!(
                hit.body["escalatedTo"],
                json!({"roles": ["leads"]}),
                "{at}: {}",
                hit.body
            );
            assert!(links(&hit.body).0.is_some(), "{at}: leads may decide now");
        }
        let approval = escalated["/leads"][0].body["question"]["approval"]
            .as_str()
            .expect("approval")
            .to_owned();
        assert_eq!(
            parked["/ops"][0].body["question"]["approval"],
            approval.as_str()
        );

        // The decision reaches everyone who may decide now, and no one else.
        let (status, body) = server
            .post(
                &format!("/approvals/{}?wait=true", seg(&approval)),
                &bob,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        let answered = by_path(&mut hook, 4).await;
        assert_eq!(
            answered.keys().collect::<Vec<_>>(),
            ["/bob", "/dave", "/leads", "/ops"],
            "{at}"
        );
        for hit in answered.values().flatten() {
            assert_eq!(hit.event(), "question.answered", "{at}");
            assert_eq!(hit.body["answer"]["by"], "bob", "{at}");
        }
        let stored = deliveries(&server, DeliveryQuery::default()).await;
        let subs: BTreeSet<&str> = stored
            .iter()
            .filter_map(|d| d.subscription.as_deref())
            .collect();
        assert_eq!(
            subs.into_iter().collect::<Vec<_>>(),
            ["leads", "ops", "sub-bob", "sub-dave"],
            "{at}: security and carol heard of nothing"
        );
        assert_eq!(stored.len(), 10, "{at}: {stored:#?}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_private_target_is_refused_unless_the_server_allows_it() {
    for backend in support::backends().await {
        let at = backend.name();
        let mut hook = Hook::up().await;
        let p = project(
            "notify-private",
            "{ decisions: [approve, reject] }",
            &[(
                "hook",
                format!(
                    "events: [question.parked]\nwebhook: {{ url: \"{}\" }}\n",
                    hook.url
                ),
            )],
        );
        let strict = duet_server::Options {
            allow_private_push: false,
            ..options()
        };
        let server = Server::start_with(&backend, p.root(), strict).await;
        let alice = server.key("alice", false).await;
        start_desk(&server, &alice, "p1").await;
        let refused = until_outbox(&server, &DeliveryQuery::default(), |d| {
            d.first().is_some_and(|d| d.attempts >= 1)
        })
        .await;
        let d = &refused[0];
        assert_eq!(
            d.status,
            DeliveryStatus::Pending,
            "{at}: tried again later: {d:?}"
        );
        assert!(
            d.last_error
                .as_deref()
                .is_some_and(|e| e.starts_with("target refused") && e.contains("127.0.0.1")),
            "{at}: {d:?}"
        );
        server.stop().await;
        assert!(
            hook.drain().is_empty(),
            "{at}: nothing reached the receiver"
        );

        // The same delivery, on a server that allows private targets: sent.
        let server = Server::start_with(&backend, p.root(), options()).await;
        let hit = hook.next().await;
        assert_eq!(hit.id(), d.idempotency_key, "{at}");
        assert_eq!(hit.body["thread"]["key"], "p1", "{at}");
        let sent = until_outbox(&server, &DeliveryQuery::default(), |d| {
            d.first()
                .is_some_and(|d| d.status == DeliveryStatus::Delivered)
        })
        .await;
        assert!(
            sent[0].attempts >= 1,
            "{at}: the refusals counted: {sent:?}"
        );
        server.stop().await;
    }
}
