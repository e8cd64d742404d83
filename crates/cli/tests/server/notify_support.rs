//! What the notification tests share (`notify_webhooks.rs`, `notify_links.rs`, and the
//! `deployer` of `notify_slack.rs` and `notify_email.rs`): a desk whose model
//! proposes a `refund` that waits for a decision, then parks for its person twice ("Done.",
//! "Noted."), with notification definitions pointing at the loopback receiver (`support/hook.rs`);
//! keys with roles; a received webhook's signature checked with the server's own verifier; and
//! the outbox read back.

use std::time::Duration;

use duet_server_store::{Delivery, DeliveryQuery, Subscription};
use serde_json::{Value, json};

use crate::harness::Server;
use crate::hook::Hit;
use crate::support;

/// The desk, its `refund` tool with `approval` (the YAML of its `approval:` value), and the
/// notification definitions `defs` (name, YAML) under `agents/notifications/`.
pub(crate) fn project(tag: &str, approval: &str, defs: &[(&str, String)]) -> support::Scratch {
    let p = support::Scratch::new(tag);
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: desk\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    p.write(
        "agents/models/desk.yaml",
        "name: desk\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1, amount: 250 } }]\n  - text: Done.\n  - text: Noted.\n",
    );
    p.write(
        "agents/tools/refund.yaml",
        &format!(
            "description: Refunds.\nargs: {{ type: object, properties: {{ order: {{ type: string }}, amount: {{ type: number }} }}, required: [order, amount] }}\nresult: \"refunded {{{{order}}}}\"\napproval: {approval}\n"
        ),
    );
    for (name, yaml) in defs {
        p.write(&format!("agents/notifications/{name}.yaml"), yaml);
    }
    p
}

/// `deployer` proposes `deploy` (its `approval:` value `approval`, YAML), then says `Done.`;
/// `notification` (name, YAML) is the one definition under `agents/notifications/`.
pub(crate) fn deployer(tag: &str, approval: &str, notification: (&str, &str)) -> support::Scratch {
    let p = support::Scratch::new(tag);
    p.write(
        "agents/agents/deployer.yaml",
        "name: deployer\nsideA: { prompt: deployer }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/deployer.yaml",
        "name: deployer\ntoolDescription: d\nmodel: deployer\nincludeChat: true\nprompt: p\ntools: [deploy]\n",
    );
    p.write(
        "agents/models/deployer.yaml",
        "name: deployer\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: deploy, arguments: { region: eu, build: 7 } }]\n  - text: Done.\n",
    );
    p.write(
        "agents/tools/deploy.yaml",
        &format!(
            "description: Deploys.\nargs: {{ type: object, properties: {{ region: {{ type: string }}, build: {{ type: number }} }}, required: [region, build] }}\nresult: \"deployed {{{{build}}}} to {{{{region}}}}\"\napproval: {approval}\n"
        ),
    );
    let (name, yaml) = notification;
    p.write(&format!("agents/notifications/{name}.yaml"), yaml);
    p
}

/// A key for `principal` holding `roles`: its bearer token.
pub(crate) async fn role_key(server: &Server, principal: &str, roles: &[&str]) -> String {
    let mut new = duet_server::auth::new_key(principal, false, None, 0).expect("key");
    new.key.roles = roles.iter().map(|r| (*r).to_owned()).collect();
    server
        .tables
        .create_key(&new.key, &new.hash)
        .await
        .expect("store key");
    new.token
}

/// Starts `owner`'s desk thread `key`: it waits on its refund.
pub(crate) async fn start_desk(server: &Server, owner: &str, key: &str) {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            owner,
            json!({"agent": "desk", "key": key, "text": "refund A1"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "waiting", "{body}");
}

/// Stores `principal`'s own webhook subscription to `url` (every event, every agent).
pub(crate) async fn subscribe(server: &Server, id: &str, principal: &str, url: &str) {
    let s = Subscription {
        id: id.into(),
        principal: principal.into(),
        channel: "webhook".into(),
        target: url.into(),
        events: "[]".into(),
        agents: "[]".into(),
        secret: None,
        created_at: 0,
    };
    server
        .tables
        .put_subscription(&s)
        .await
        .expect("subscribed");
}

/// Whether `hit` carries a Standard Webhooks signature made with `secret`, checked by the
/// server's public verifier at `now_s`.
pub(crate) fn verify(hit: &Hit, secret: &str, now_s: i64) -> Result<(), String> {
    use duet_server::signatures::{Signed, TOLERANCE_S};
    let signed = Signed::from_headers(&hit.headers).map_err(|e| e.to_string())?;
    duet_server::signatures::verify(secret, signed, hit.raw.as_bytes(), now_s, TOLERANCE_S)
        .map_err(|e| e.to_string())
}

/// The path (and query) of `url`: a link is followed on the test's server whatever origin the
/// server put in it.
pub(crate) fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/')
        .map_or("/".to_owned(), |i| rest[i..].to_owned())
}

/// The `links` of a webhook body: (approve, reject, open), each a path.
pub(crate) fn links(body: &Value) -> (Option<String>, Option<String>, Option<String>) {
    let l = &body["links"];
    let path = |name: &str| l[name].as_str().map(path_of);
    (path("approve"), path("reject"), path("open"))
}

/// The deliveries `query` selects (every one when it says nothing), oldest first.
pub(crate) async fn deliveries(server: &Server, mut query: DeliveryQuery) -> Vec<Delivery> {
    if query.limit == 0 {
        query.limit = 1_000;
    }
    let mut found = server.tables.deliveries(&query).await.expect("deliveries");
    found.reverse();
    found
}

/// Reads the outbox until `done` holds of the deliveries `query` selects (a minute at most):
/// the sender records an attempt the receiver never sees (a refused target), and the outbox has
/// no change feed to wait on.
pub(crate) async fn until_outbox(
    server: &Server,
    query: &DeliveryQuery,
    done: impl Fn(&[Delivery]) -> bool,
) -> Vec<Delivery> {
    let wait = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let found = deliveries(server, query.clone()).await;
            if done(&found) {
                return found;
            }
            // tidy:allow-sleep: the condition is a row the server's sender writes, which nothing
            // signals; this reads it again after a pause ("wait until", never a timed assertion).
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    wait.expect("the outbox reached the state awaited within a minute")
}
