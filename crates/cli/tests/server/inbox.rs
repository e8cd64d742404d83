//! The approval inbox (`/inbox`) in a real browser (headless chromium over WebDriver), on each
//! backend: an orchestrator's gate proposal in the queue, decided (over the API, for now) and
//! leaving it; a question arriving and leaving while the page is open; two pages answering one
//! question (the first wins, the other is told); a rejection with its reason; a principal who
//! cannot see another's questions; hostile Markdown rendered inert. And, over plain HTTP, the
//! session cookie and the CSRF checks.

use serde_json::json;

use crate::browser;
use crate::harness::{self, Server, send};
use crate::support;

/// Starts an orchestrator that composes the approval gate, as `token`: the approval id of the
/// gate's proposal (a tool call waiting for a decision), once it waits.
async fn orchestrate(server: &Server, token: &str, key: &str) -> String {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            token,
            json!({"agent": "orchestrator", "key": key, "text": "Rotate the production keys tonight, please."}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // The gate may be run by this server's recovery rather than inside the orchestrator's run
    // (whichever claims it first): wait for its proposal either way.
    harness::until(server, token, &format!("{key}/approval-1"), "waiting").await;
    approval_of(server, token, key).await
}

/// A new `question_gate` thread `key` asked `text`, parked (`?wait=true`): its approval's id.
pub(crate) async fn parked_gate(server: &Server, token: &str, key: &str, text: &str) -> String {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            token,
            json!({"agent": "question_gate", "key": key, "text": text}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    approval_of(server, token, key).await
}

/// The approval waiting under top-level thread `key` (the question of it or of a child).
pub(crate) async fn approval_of(server: &Server, token: &str, key: &str) -> String {
    let (status, list) = server.get("/approvals", token).await;
    assert_eq!(status, 200, "{list}");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| {
            i["thread"] == key
                || i["parents"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p["key"] == key))
        })
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("no approval under {key}: {list}"))
        .to_owned()
}

/// The orchestrator's messages, as the API lists them.
async fn texts(server: &Server, token: &str, key: &str) -> Vec<String> {
    let (_, page) = server
        .get(
            &format!("/threads/{}/messages?limit=500", harness::seg(key)),
            token,
        )
        .await;
    page["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|m| m["data"]["content"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_orchestrators_gate_proposal_is_decided_and_the_queue_shows_what_follows() {
    let Some(mut driver) = browser::driver().await else {
        return;
    };
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let page = driver.browser(1000, 1400, true).await;
        page.sign_in(&server.base, &alice).await;
        assert_eq!(page.text("#count").await, "Nothing waits for you.");

        // The gate's proposal waits, listed with its chain. (The page's view of a pending tool
        // call, and its decision buttons, are another slice's: this decides over the API.)
        let approval = orchestrate(&server, &alice, "ops-1").await;
        let (_, list) = server.get("/approvals", &alice).await;
        let item = list["items"]
            .as_array()
            .and_then(|i| i.iter().find(|i| i["id"] == approval.as_str()))
            .unwrap_or_else(|| panic!("{list}"));
        assert_eq!(item["kind"], "tool_call", "{item}");
        assert_eq!(item["tool"], "proceed", "{item}");
        assert_eq!(item["parents"][0]["agent"], "orchestrator", "{item}");

        // Decided: the orchestrator runs on from the gate's outcome.
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}?wait=true"),
                &alice,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        harness::until(&server, &alice, "ops-1", "awaiting_human").await;
        assert!(
            texts(&server, &alice, "ops-1")
                .await
                .iter()
                .any(|t| t.contains("The approver said yes")),
            "the orchestrator's continuation"
        );

        // Decided, it left the queue; the orchestrator now asks its requester what next, a
        // chat the queue shows only when asked to (`all`).
        page.open(&format!("{}/inbox", server.base)).await;
        let queue = page.text("#queue").await;
        assert!(
            !queue.contains("approval_gate") && !queue.contains("The approver said yes"),
            "{queue}"
        );
        page.open(&format!("{}/inbox?all=true", server.base)).await;
        let queue = page.text("#queue").await;
        assert!(
            !queue.contains("approval_gate") && queue.contains("The approver said yes"),
            "{queue}"
        );
        page.close().await;
        server.stop().await;
    }
}

#[tokio::test]
async fn two_pages_answer_one_question_the_first_wins_and_the_others_are_told() {
    let Some(mut driver) = browser::driver().await else {
        return;
    };
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let admin = server.key("ops", true).await;
        let approval = parked_gate(
            &server,
            &alice,
            "ops-2",
            "Rotate the production keys tonight, please.",
        )
        .await;
        let item = format!("{}/inbox/items/{approval}", server.base);

        let first = driver.browser(1000, 800, true).await;
        let watcher = driver.browser(1000, 800, true).await;
        let queue = driver.browser(1000, 800, true).await;
        // A person whose browser runs no script: plain form posts.
        let late = driver.browser(1000, 800, false).await;
        for (page, token) in [
            (&first, &alice),
            (&watcher, &alice),
            (&queue, &alice),
            (&late, &admin),
        ] {
            page.sign_in(&server.base, token).await;
        }
        queue
            .wait_for(&format!("li.item[data-id=\"{approval}\"]"))
            .await;
        for page in [&first, &watcher, &late] {
            page.open(&item).await;
            page.wait_for("#approve").await;
        }
        late.wait_for("#reason")
            .await
            .send_keys("Not tonight.")
            .await
            .expect("type");

        first
            .wait_for("#approve")
            .await
            .click()
            .await
            .expect("approve");
        first
            .wait_until("document.getElementById('live').dataset.settled === 'true'")
            .await;

        // The page left open is told, and offers no answer any more; the queue dropped it.
        watcher.wait_until("document.querySelector('#notice .answered') !== null && document.getElementById('answer') === null").await;
        let told = watcher.text("#notice").await;
        assert!(
            told.contains("Answered by alice") && told.contains("approve"),
            "{told}"
        );
        queue
            .wait_until(&format!(
                "document.querySelector('li.item[data-id=\"{approval}\"]') === null"
            ))
            .await;

        // The late answer is refused: nothing sent, and the page says so plainly, who answered,
        // what, when — and keeps the reason typed.
        late.wait_for("#reject")
            .await
            .click()
            .await
            .expect("reject");
        let refused = late.text("#notice .refused").await;
        assert!(
            refused.contains("Your answer was NOT sent")
                && refused.contains("alice")
                && refused.contains("approve"),
            "{refused}"
        );
        let kept = late
            .wait_for("#reason")
            .await
            .prop("value")
            .await
            .expect("value");
        assert_eq!(kept.as_deref(), Some("Not tonight."));
        let gate = texts(&server, &admin, "alice/ops-2").await;
        assert!(
            !gate.iter().any(|t| t.contains("Not tonight")),
            "the refused answer wrote nothing: {gate:?}"
        );
        let answers = server
            .store
            .answered(&duet_runtime::AnsweredQuery {
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("history");
        let answers: Vec<&str> = answers.iter().map(|a| a.answer.content.as_str()).collect();
        assert_eq!(answers, ["approve"], "one question, one answer");
        for page in [first, watcher, queue, late] {
            page.close().await;
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn a_rejection_carries_its_reason_and_another_principal_sees_none_of_it() {
    let Some(mut driver) = browser::driver().await else {
        return;
    };
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let approval = parked_gate(&server, &alice, "gate-1", "Rotate the keys?").await;

        // Bob sees nothing of alice's, not even by its address.
        let bobs = driver.browser(360, 740, true).await;
        bobs.sign_in(&server.base, &bob).await;
        assert_eq!(bobs.text("#count").await, "Nothing waits for you.");
        bobs.open(&format!("{}/inbox/items/{approval}", server.base))
            .await;
        let h1 = bobs.text("h1").await;
        assert_eq!(h1, "Not Found", "another principal's question is not found");

        // Alice rejects it, with a reason, on a phone-sized page.
        let page = driver.browser(360, 740, true).await;
        page.sign_in(&server.base, &alice).await;
        page.open(&format!("{}/inbox/items/{approval}", server.base))
            .await;
        let width = page.eval("document.documentElement.scrollWidth").await;
        assert!(
            width.as_i64().is_some_and(|w| w <= 360),
            "readable at 360 px: no sideways scroll ({width})"
        );
        page.keys("r").await;
        page.wait_until("document.activeElement && document.activeElement.id === 'reason'")
            .await;
        page.keys("Too risky during the freeze.").await;
        page.wait_for("#reject")
            .await
            .click()
            .await
            .expect("reject");
        page.wait_until("document.getElementById('live').dataset.settled === 'true'")
            .await;
        let messages = texts(&server, &alice, "gate-1").await;
        assert!(
            messages
                .iter()
                .any(|t| t == "reject: Too risky during the freeze."),
            "{messages:?}"
        );
        page.open(&format!("{}/inbox/history", server.base)).await;
        let history = page.text(&format!("tr[data-id=\"{approval}\"]")).await;
        assert!(
            history.contains("reject: Too risky during the freeze."),
            "{history}"
        );
        bobs.open(&format!("{}/inbox/history", server.base)).await;
        assert_eq!(bobs.text("p.count").await, "Nothing was answered yet.");
        for p in [page, bobs] {
            p.close().await;
        }
        server.stop().await;
    }
}

/// Markdown meant to run script, in every way the renderer must refuse.
const HOSTILE: &str = "**Approve?** <script>window.pwned = 'script'</script>\n\n\
    [click me](javascript:window.pwned='link') and [data](data:text/html,<script>x</script>)\n\n\
    <img src=x onerror=\"window.pwned='img'\"> ![alt text](javascript:window.pwned='image')\n\n\
    <a href=\"javascript:window.pwned='html'\">raw link</a> [fine](https://example.com/ok)";

/// A project whose one agent asks [`HOSTILE`] and waits for a person.
fn hostile_project() -> std::path::PathBuf {
    let root = std::env::temp_dir().join(format!("duet-hostile-{}", uuid::Uuid::now_v7()));
    let write = |path: &str, text: String| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "agents/agents/hostile_gate.yaml",
        "name: hostile_gate\nsideA: { prompt: hostile_presenter }\nsideB: { human: true, approver: true }\n".into(),
    );
    write(
        "agents/prompts/hostile_presenter.yaml",
        "name: hostile_presenter\ntoolDescription: Presents a request.\nmodel: hostile_demo\nprompt: Present the request.\n".into(),
    );
    write(
        "agents/models/hostile_demo.yaml",
        format!(
            "name: hostile_demo\nprovider: scripted\nmodel: demo\nscript:\n  - text: {}\n",
            serde_json::to_string(HOSTILE).expect("json")
        ),
    );
    root
}

#[tokio::test]
async fn hostile_markdown_in_a_question_renders_inert() {
    let Some(mut driver) = browser::driver().await else {
        return;
    };
    let root = hostile_project();
    for backend in support::backends().await {
        let options = duet_server::Options {
            default_agent: None,
            ..harness::options()
        };
        let server = Server::start_with(&backend, &root, options).await;
        let alice = server.key("alice", false).await;
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "hostile_gate", "key": "h-1", "text": "hi"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let approval = approval_of(&server, &alice, "h-1").await;
        let page = driver.browser(1000, 800, true).await;
        page.sign_in(&server.base, &alice).await;
        page.open(&format!("{}/inbox/items/{approval}", server.base))
            .await;
        let question = page.wait_for("section.question .md").await;
        let shown = question.text().await.expect("text");
        assert!(
            shown.contains("<script>window.pwned = 'script'</script>"),
            "raw HTML is shown as text: {shown}"
        );
        assert!(
            shown.contains("click me") && shown.contains("alt text"),
            "{shown}"
        );
        let inert = page
            .eval(
                "[window.pwned === undefined,
                  document.querySelectorAll('.md script, .md img, .md iframe, .md [onerror]').length,
                  [...document.querySelectorAll('.md a')].map(a => a.getAttribute('href'))]",
            )
            .await;
        assert_eq!(
            inert,
            json!([true, 0, ["https://example.com/ok"]]),
            "only the https link is a link"
        );
        // Clicking where the links were runs nothing either.
        page.client
            .execute(
                "for (const e of document.querySelectorAll('.md *')) e.click(); return true;",
                vec![],
            )
            .await
            .expect("click");
        assert_eq!(page.eval("window.pwned === undefined").await, json!(true));
        page.close().await;
        server.stop().await;
    }
    let _ = std::fs::remove_dir_all(root);
}

// ---- Plain HTTP: the session cookie, sign-out, revocation, CSRF ------------------------------

/// Signs in over HTTP with `token`: the session cookie's value.
pub(crate) async fn cookie(server: &Server, token: &str) -> String {
    let resp = plain()
        .post(format!("{}/inbox/sign-in", server.base))
        .form(&[("key", token), ("next", "/inbox")])
        .send()
        .await
        .expect("sign in");
    assert_eq!(resp.status(), 303);
    let set = resp.headers()["set-cookie"]
        .to_str()
        .expect("text")
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/inbox"] {
        assert!(set.contains(attribute), "{set}");
    }
    set.split(';').next().expect("pair").to_owned()
}

pub(crate) fn plain() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// The page's CSRF token (from its sign-out form).
pub(crate) fn csrf(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    html[at..at + 64].to_owned()
}

#[tokio::test]
async fn the_session_cookie_stands_for_its_key_and_forms_are_csrf_checked() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let http = plain();
        let get = |path: &str, cookie: Option<&str>| {
            let mut req = http.get(format!("{}{path}", server.base));
            if let Some(c) = cookie {
                req = req.header("cookie", c);
            }
            req.send()
        };
        // Signed out: the page sends you to sign in; the API's bearer keys are not cookies.
        let resp = get("/inbox", None).await.expect("get");
        assert_eq!(resp.status(), 303);
        assert_eq!(resp.headers()["location"], "/inbox/sign-in?next=%2Finbox");
        let (status, _) = send(
            http.post(format!("{}/inbox/sign-in", server.base))
                .form(&[("key", "duet_nope")]),
        )
        .await;
        assert_eq!(status, 401, "an unknown key signs nobody in");

        let session = cookie(&server, &alice).await;
        let resp = get("/inbox", Some(&session)).await.expect("get");
        assert_eq!(resp.status(), 200);
        let csp = resp.headers()["content-security-policy"]
            .to_str()
            .expect("csp")
            .to_owned();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        let html = resp.text().await.expect("html");
        let token = csrf(&html);
        assert!(html.contains("Signed in as <strong>alice</strong>"));

        let approval = parked_gate(&server, &alice, "c-1", "Rotate?").await;
        let answer = |form: Vec<(&'static str, String)>, origin: Option<String>| {
            let mut req = http
                .post(format!("{}/inbox/items/{approval}", server.base))
                .header("cookie", &session)
                .header("accept", "application/json")
                .form(&form);
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            send(req)
        };
        // Another site's form, and a form without this session's token, are refused: nothing sent.
        let (status, _) = answer(
            vec![("kind", "approve".into()), ("csrf", token.clone())],
            Some("https://evil.example".into()),
        )
        .await;
        assert_eq!(status, 403);
        let (status, _) = answer(
            vec![("kind", "approve".into()), ("csrf", "0".repeat(64))],
            None,
        )
        .await;
        assert_eq!(status, 403);
        let (status, body) = answer(
            vec![("kind", "reject".into()), ("csrf", token.clone())],
            None,
        )
        .await;
        assert_eq!(
            (status, body["code"].clone()),
            (422, json!("invalid_answer")),
            "a rejection needs a reason"
        );
        assert_eq!(
            approval_of(&server, &alice, "c-1").await,
            approval,
            "still waiting"
        );
        let (status, body) = answer(
            vec![
                ("kind", "approve".into()),
                ("csrf", token.clone()),
                ("message_id", "m-1".into()),
            ],
            Some(server.base.clone()),
        )
        .await;
        assert_eq!(status, 202, "{body}");
        // A second answer is a 409 that names the first.
        let (status, body) = answer(
            vec![
                ("kind", "reply".into()),
                ("text", "hm".into()),
                ("csrf", token.clone()),
            ],
            None,
        )
        .await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["answer"]["content"], "approve");
        assert_eq!(body["answer"]["author"], "alice");

        // Signing out ends the session everywhere; so does revoking the key.
        let (status, _) = send(
            http.post(format!("{}/inbox/sign-out", server.base))
                .header("cookie", &session)
                .form(&[("csrf", token.as_str())]),
        )
        .await;
        assert_eq!(status, 303);
        assert_eq!(
            get("/inbox", Some(&session)).await.expect("get").status(),
            303,
            "signed out"
        );
        let again = cookie(&server, &alice).await;
        assert_eq!(
            get("/inbox", Some(&again)).await.expect("get").status(),
            200
        );
        let keys = server.tables.keys().await.expect("keys");
        let id = &keys
            .iter()
            .find(|k| k.principal == "alice")
            .expect("alice's key")
            .id;
        server.tables.revoke_key(id, 1).await.expect("revoke");
        assert_eq!(
            get("/inbox", Some(&again)).await.expect("get").status(),
            303,
            "a revoked key's session ends"
        );
        server.stop().await;
    }
}

/// The queue page's items, as `(agent, thread)` in the page's order.
fn items(html: &str) -> Vec<(String, String)> {
    html.split("<li class=\"item\"")
        .skip(1)
        .map(|li| {
            let agent = li
                .split("data-agent=\"")
                .nth(1)
                .and_then(|a| a.split('"').next())
                .unwrap_or_default();
            let thread = li
                .split("<span class=\"thread\">")
                .nth(1)
                .and_then(|t| t.split('<').next())
                .unwrap_or_default();
            (agent.to_owned(), thread.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn the_queue_filters_by_agent_and_age_orders_by_wait_and_counts_per_agent() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "question_gate", "key": "gate-1", "text": "Rotate?"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        // The orchestrator, its gate answered, asks its requester what next.
        let approval = orchestrate(&server, &alice, "ops-1").await;
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}?wait=true"),
                &alice,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        harness::until(&server, &alice, "ops-1", "awaiting_human").await;

        let session = cookie(&server, &alice).await;
        let page = |query: &'static str| {
            let req = plain()
                .get(format!("{}/inbox{query}", server.base))
                .header("cookie", session.clone());
            async move { req.send().await.expect("get").text().await.expect("html") }
        };
        // By default the approvals only: the orchestrator waiting for its requester is a chat.
        let approvals = page("").await;
        assert_eq!(
            items(&approvals),
            [("question_gate".into(), "gate-1".into())],
            "approvals only"
        );
        assert!(!approvals.contains("orchestrator <span"), "{approvals}");
        let all = page("?all=true").await;
        assert_eq!(
            items(&all),
            [
                ("question_gate".into(), "gate-1".into()),
                ("orchestrator".into(), "ops-1".into())
            ],
            "oldest first"
        );
        assert!(
            all.contains("question_gate <span class=\"n\">1</span>")
                && all.contains("orchestrator <span class=\"n\">1</span>"),
            "{all}"
        );
        assert_eq!(
            items(&page("?all=true&order=newest").await),
            [
                ("orchestrator".into(), "ops-1".into()),
                ("question_gate".into(), "gate-1".into())
            ]
        );
        assert_eq!(
            items(&page("?all=true&agent=orchestrator").await),
            [("orchestrator".into(), "ops-1".into())]
        );
        let old = page("?all=true&age=1h").await;
        assert_eq!(items(&old), [], "nothing has waited an hour");
        assert!(old.contains("2 in all; the filters hide the rest"), "{old}");
        server.stop().await;
    }
}

#[tokio::test]
async fn without_auth_the_inbox_needs_no_sign_in_but_still_refuses_other_sites() {
    for backend in support::backends().await {
        let options = duet_server::Options {
            auth: false,
            ..harness::options()
        };
        let server = Server::start_with(&backend, &support::repo(), options).await;
        let (status, body) = server
            .post(
                "/threads?wait=true",
                "none",
                json!({"agent": "question_gate", "key": "gate-1", "text": "Rotate?"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let approval = approval_of(&server, "none", "gate-1").await;
        let resp = plain()
            .get(format!("{}/inbox", server.base))
            .send()
            .await
            .expect("get");
        assert_eq!(resp.status(), 200);
        assert!(!resp.text().await.expect("html").contains("Sign out"));
        let post = |origin: &'static str| {
            plain()
                .post(format!("{}/inbox/items/{approval}", server.base))
                .header("origin", origin)
                .header("accept", "application/json")
                .form(&[("kind", "approve")])
                .send()
        };
        assert_eq!(
            post("https://evil.example").await.expect("post").status(),
            403
        );
        assert_eq!(
            approval_of(&server, "none", "gate-1").await,
            approval,
            "nothing was sent"
        );
        server.stop().await;
    }
}
