//! Who may decide a tool call (issue #29): a key's roles (`duet keys create --role`, shown by
//! `duet keys list`) and a tool's `approval.approvers`. A role key sees and decides exactly the
//! calls whose approvers name its role, on another principal's threads, and nothing else of
//! them; a key the policy does not name gets 404, word for word as for an absent approval; the
//! thread's owner is not an approver of a call whose policy names others (403, nothing
//! written); every decision is recorded with its author. On every backend.

use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{Server, db_arg, options};
use crate::support;

/// `desk` proposes a refund (approvers: role `refunds`, principal `erin`) and a wipe (approval,
/// nobody named: the owner decides) in one step; `memo` proposes a wipe only.
fn project() -> support::Scratch {
    let p = support::Scratch::new("approvers");
    let agent = |name: &str| {
        format!("name: {name}\nsideA: {{ prompt: {name} }}\nsideB: {{ human: true }}\n")
    };
    let prompt = |name: &str, tools: &str| {
        format!(
            "name: {name}\ntoolDescription: d\nmodel: {name}\nincludeChat: true\nprompt: p\ntools: [{tools}]\n"
        )
    };
    let model = |name: &str, calls: &str| {
        format!(
            "name: {name}\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{calls}]\n  - text: Done.\n"
        )
    };
    p.write("agents/agents/desk.yaml", &agent("desk"));
    p.write("agents/agents/memo.yaml", &agent("memo"));
    p.write("agents/prompts/desk.yaml", &prompt("desk", "refund, wipe"));
    p.write("agents/prompts/memo.yaml", &prompt("memo", "wipe"));
    p.write(
        "agents/models/desk.yaml",
        &model(
            "desk",
            "{ name: refund, arguments: { order: A1, amount: 250 } }, { name: wipe, arguments: { what: logs } }",
        ),
    );
    p.write(
        "agents/models/memo.yaml",
        &model("memo", "{ name: wipe, arguments: { what: cache } }"),
    );
    p.write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string }, amount: { type: number } }, required: [order, amount] }\nresult: \"refunded {{order}}\"\napproval: { approvers: { roles: [refunds], principals: [erin] } }\n",
    );
    p.write(
        "agents/tools/wipe.yaml",
        "description: Wipes.\nargs: { type: object, properties: { what: { type: string } } }\nresult: \"wiped {{what}}\"\napproval: { decisions: [approve, reject] }\n",
    );
    p
}

/// `duet keys …` on the server's database.
fn keys(server: &Server, root: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_duet"))
        .arg("keys")
        .args(args)
        .arg("--project")
        .arg(root)
        .arg("--db")
        .arg(db_arg(&server.backend))
        .env_remove("DUET_DATABASE_URL")
        .output()
        .expect("duet keys")
}

/// A key made by `duet keys create --principal PRINCIPAL --role …`: its token.
fn role_key(server: &Server, root: &std::path::Path, principal: &str, roles: &[&str]) -> String {
    let mut args = vec!["create", "--principal", principal];
    for role in roles {
        args.extend(["--role", role]);
    }
    let out = keys(server, root, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("with role {}", roles.join(", "))),
        "{stderr}"
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Starts thread `key` of `agent` as `token`; it waits on its calls.
async fn start(server: &Server, token: &str, agent: &str, key: &str) {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            token,
            json!({"agent": agent, "key": key, "text": "go"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "waiting", "{body}");
}

/// `GET /approvals` as `token`: (thread, tool) of each item, and the items.
async fn listed(server: &Server, token: &str, query: &str) -> (Vec<(String, String)>, Value) {
    let (status, page) = server.get(&format!("/approvals{query}"), token).await;
    assert_eq!(status, 200, "{page}");
    let items = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            (
                i["thread"].as_str().unwrap_or_default().to_owned(),
                i["tool"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (items, page)
}

/// The API id of `tool`'s pending call on `owner`'s thread `key`: the thread's id (read from
/// the store) and the call's `SESSION:SEQ` as `threads show` lists it (`KEY:SESSION:SEQ`).
async fn pending_id(
    server: &Server,
    root: &std::path::Path,
    owner: &str,
    key: &str,
    tool: &str,
) -> String {
    let shown = show(server, root, owner, key);
    let call = shown["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["tool"] == tool)
        .unwrap_or_else(|| panic!("{tool} waits: {shown}"));
    let park = call["id"]
        .as_str()
        .and_then(|id| id.strip_prefix(&format!("{key}:")))
        .expect("KEY:SESSION:SEQ");
    let t = server
        .store
        .thread(&format!("{owner}/{key}"))
        .await
        .expect("read")
        .expect("thread");
    format!("{}:{park}", t.id)
}

/// `duet threads show KEY --json --principal OWNER` on the server's database.
fn show(server: &Server, root: &std::path::Path, owner: &str, key: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["threads", "--principal", owner, "--project"])
        .arg(root)
        .arg("--db")
        .arg(db_arg(&server.backend))
        .args(["show", key, "--json"])
        .env_remove("DUET_DATABASE_URL")
        .output()
        .expect("duet threads show");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

#[tokio::test]
async fn a_role_key_sees_and_decides_exactly_its_calls_and_nothing_else() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let carol = server.key("carol", false).await;
        let bob = role_key(&server, p.root(), "bob", &["refunds", "ops.eu"]);
        start(&server, &alice, "desk", "r1").await;
        start(&server, &alice, "memo", "m1").await;
        let refund = pending_id(&server, p.root(), "alice", "r1", "refund").await;
        let wipe = pending_id(&server, p.root(), "alice", "r1", "wipe").await;

        // Bob's queue: the refund, on alice's thread (named as stored); not her wipes.
        let (items, page) = listed(&server, &bob, "").await;
        assert_eq!(
            items,
            [("alice/r1".into(), "refund".into())],
            "{at}: {page}"
        );
        assert_eq!(page["items"][0]["id"], refund.as_str(), "{at}: {page}");
        // Alice's queue: her wipes; the refund's policy names others.
        let (items, page) = listed(&server, &alice, "").await;
        assert_eq!(
            items,
            [("r1".into(), "wipe".into()), ("m1".into(), "wipe".into())],
            "{at}: {page}"
        );
        // Carol is named by nothing: nothing listed, and every door is an absent approval's.
        let (items, page) = listed(&server, &carol, "").await;
        assert!(items.is_empty(), "{at}: {page}");
        let absent = format!("{}:1:4", uuid::Uuid::now_v7());
        for (token, id) in [
            (&carol, &refund),
            (&carol, &wipe),
            (&bob, &wipe),
            (&carol, &absent),
        ] {
            let (status, got) = server.get(&format!("/approvals/{id}"), token).await;
            assert_eq!(status, 404, "{at}: {got}");
            assert_eq!(got["detail"], format!("no approval `{id}`"), "{at}: {got}");
            let (status, posted) = server
                .post(
                    &format!("/approvals/{id}"),
                    token,
                    json!({"decision": "approve"}),
                )
                .await;
            assert_eq!(status, 404, "{at}: {posted}");
            assert_eq!(posted, got, "{at}: the same words");
        }
        // Nothing else of alice's threads: not by her key, not by the stored one.
        for path in ["/threads/r1", "/threads/alice%2Fr1", "/threads/r1/messages"] {
            let (status, body) = server.get(path, &bob).await;
            assert_eq!(status, 404, "{at}: {path}: {body}");
        }
        let (status, threads) = server.get("/threads", &bob).await;
        assert_eq!(status, 200, "{at}: {threads}");
        assert_eq!(threads["items"], json!([]), "{at}: {threads}");

        // The owner sees the refund but may not approve her own: 403, nothing written.
        let (status, seen) = server.get(&format!("/approvals/{refund}"), &alice).await;
        assert_eq!(status, 200, "{at}: {seen}");
        assert_eq!(
            seen["approvers"],
            json!({"roles": ["refunds"], "principals": ["erin"]})
        );
        let (status, refused) = server
            .post(
                &format!("/approvals/{refund}"),
                &alice,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 403, "{at}: {refused}");
        assert_eq!(refused["code"], "not_an_approver", "{at}: {refused}");
        let (_, still) = server.get(&format!("/approvals/{refund}"), &bob).await;
        assert_eq!(still["decided"], Value::Null, "{at}: {still}");

        // Bob approves: applied, recorded as his; told nothing of the thread.
        let (status, decided) = server
            .post(
                &format!("/approvals/{refund}?wait=true"),
                &bob,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {decided}");
        assert_eq!(decided["decided"]["author"], "bob", "{at}: {decided}");
        assert_eq!(decided.get("thread"), None, "{at}: {decided}");
        let (status, one) = server.get(&format!("/approvals/{refund}"), &bob).await;
        assert_eq!(status, 200, "{at}: {one}");
        assert_eq!(one["decided"]["decision"], "approve", "{at}: {one}");
        assert_eq!(one["decided"]["author"], "bob", "{at}: {one}");
        let (items, page) = listed(&server, &bob, "").await;
        assert!(items.is_empty(), "{at}: decided, no longer listed: {page}");

        // Alice rejects her wipe; the thread runs on. Both decisions, with their authors.
        let (status, decided) = server
            .post(
                &format!("/approvals/{wipe}?wait=true"),
                &alice,
                json!({"decision": "reject", "reason": "keep them"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {decided}");
        assert_eq!(
            decided["thread"]["status"], "awaiting_human",
            "{at}: {decided}"
        );
        let shown = show(&server, p.root(), "alice", "r1");
        let decisions: Vec<(&str, &str, &str)> = shown["decisions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                (
                    d["tool"].as_str().unwrap_or_default(),
                    d["decision"].as_str().unwrap_or_default(),
                    d["author"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            decisions,
            [("refund", "approve", "bob"), ("wipe", "reject", "alice")],
            "{at}: {shown}"
        );
        let (_, page) = server.get("/threads/r1/messages?limit=500", &alice).await;
        let results: Vec<&Value> = page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["data"]["role"] == "tool")
            .map(|m| &m["data"]["content"])
            .collect();
        assert!(results.contains(&&json!("refunded A1")), "{at}: {page}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_named_principal_and_an_admin_decide_and_a_role_keys_pages_skip_what_it_may_not() {
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let dave = server.key("dave", false).await;
        let erin = server.key("erin", false).await;
        let ops = server.key("ops", true).await;
        let bob = role_key(&server, p.root(), "bob", &["refunds"]);
        // Interleaved: threads with a refund, and threads with only a wipe, of two owners.
        for (token, agent, key) in [
            (&alice, "memo", "m1"),
            (&alice, "desk", "r1"),
            (&dave, "memo", "m2"),
            (&dave, "desk", "r2"),
            (&alice, "memo", "m3"),
            (&alice, "desk", "r3"),
        ] {
            start(&server, token, agent, key).await;
        }
        // One at a time, the cursor skips the threads bob may decide nothing on: every page
        // holds one of his calls (the last, after a full one, is empty).
        let (mut seen, mut sizes) = (Vec::new(), Vec::new());
        let mut query = "?limit=1".to_owned();
        loop {
            let (items, page) = listed(&server, &bob, &query).await;
            sizes.push(items.len());
            seen.extend(items);
            match page["nextCursor"].as_str() {
                Some(c) => query = format!("?limit=1&cursor={c}"),
                None => break,
            }
        }
        assert_eq!(sizes, [1, 1, 1, 0], "{at}: {seen:?}");
        let refunds = |owners: [&str; 3]| -> Vec<(String, String)> {
            owners
                .iter()
                .map(|k| ((*k).to_owned(), "refund".to_owned()))
                .collect()
        };
        assert_eq!(seen, refunds(["alice/r1", "dave/r2", "alice/r3"]), "{at}");
        // Erin is named by principal: the same calls.
        let (items, _) = listed(&server, &erin, "").await;
        assert_eq!(items, refunds(["alice/r1", "dave/r2", "alice/r3"]), "{at}");
        // The admin decides anything: every call.
        let (items, page) = listed(&server, &ops, "").await;
        assert_eq!(items.len(), 9, "{at}: {page}");

        let id = pending_id(&server, p.root(), "dave", "r2", "refund").await;
        let (status, decided) = server
            .post(
                &format!("/approvals/{id}"),
                &erin,
                json!({"decision": "reject", "reason": "duplicate"}),
            )
            .await;
        assert_eq!(status, 202, "{at}: {decided}");
        assert_eq!(decided["decided"]["author"], "erin", "{at}: {decided}");
        assert_eq!(decided.get("events"), None, "{at}: {decided}");
        let (status, late) = server
            .post(
                &format!("/approvals/{id}"),
                &bob,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 409, "{at}: {late}");
        assert_eq!(late["decision"]["author"], "erin", "{at}: {late}");
        let id = pending_id(&server, p.root(), "alice", "r3", "refund").await;
        let (status, decided) = server
            .post(
                &format!("/approvals/{id}?wait=true"),
                &ops,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {decided}");
        assert_eq!(decided["decided"]["author"], "ops", "{at}: {decided}");
        // Decided and run (it waited), r3's refund is no longer bob's to decide.
        let (items, _) = listed(&server, &bob, "").await;
        assert!(
            items.contains(&("alice/r1".into(), "refund".into())),
            "{at}: {items:?}"
        );
        assert!(
            !items.iter().any(|(t, _)| t == "alice/r3"),
            "{at}: {items:?}"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn keys_hold_roles_listed_as_text_and_json_and_a_bad_role_stores_nothing() {
    for backend in support::backends().await {
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        role_key(&server, p.root(), "bob", &["refunds", "ops.eu"]);
        let refused = keys(
            &server,
            p.root(),
            &["create", "--principal", "carol", "--role", "no way"],
        );
        assert_eq!(refused.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("role \"no way\""), "{stderr}");
        let listed = keys(&server, p.root(), &["list"]);
        let text = String::from_utf8_lossy(&listed.stdout);
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(rows.len(), 2, "bob's only: {text}");
        assert_eq!(rows[0][5], "ROLES", "{text}");
        assert_eq!(rows[1][1], "bob", "{text}");
        assert_eq!(rows[1][5], "refunds,ops.eu", "{text}");
        let json: Value =
            serde_json::from_slice(&keys(&server, p.root(), &["list", "--json"]).stdout)
                .expect("json");
        assert_eq!(json[0]["roles"], json!(["refunds", "ops.eu"]), "{json}");
        server.stop().await;
    }
}
