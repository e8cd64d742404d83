//! Tool calls that wait for a decision, in the inbox, in a real browser on each backend (issue
//! #29): a step's page with its two pending calls — each argument with its schema's description,
//! the edit form generated from the tool's `args` (a nested object as a fieldset, an enum as a
//! select, a boolean, a list one item per line) — an invalid edit shown at its field with what
//! was typed kept and nothing written, then the calls decided one by one, without script (plain
//! form posts); and with script, a refused edit at its field and "Approve all" without a reload.
//! After deciding, the page shows each decision, the tool's result and the model's next message,
//! and a link to the next item; the history lists each decision with its author, its reason or
//! its edited arguments.

use serde_json::{Value, json};

use crate::browser::{self, Browser};
use crate::harness::{Server, options};
use crate::support;

const SHIP: &str = r#"description: Ships an order to a customer.
args:
  type: object
  properties:
    order: { type: string, description: "The order's number." }
    speed: { type: string, enum: [standard, express, overnight], description: How fast it travels. }
    address:
      type: object
      description: Where it goes.
      properties:
        city: { type: string, description: The city. }
        zip: { type: string, pattern: "^[0-9]{5}$", description: Five digits. }
      required: [city, zip]
    gift: { type: boolean, description: Wrapped as a gift. }
    items: { type: array, items: { type: string }, description: What is in the parcel. }
    parcels: { type: integer, minimum: 1, maximum: 10, description: How many parcels. }
  required: [order, speed, address]
result: "shipped {{order}} by {{speed}} to {{address}}"
approval: { decisions: [approve, edit, reject, respond], remember: [session] }
"#;

/// A desk whose model calls `ship` twice in one step (both wait for a decision), then says
/// `Both shipments are handled.`
fn project() -> support::Scratch {
    let p = support::Scratch::new("inbox-tools");
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [ship]\n",
    );
    p.write("agents/tools/ship.yaml", SHIP);
    p.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: Shipping both now.\n    tool_calls:\n      - { name: ship, arguments: { order: A1, speed: standard, address: { city: Lyon, zip: \"69001\" }, gift: false, items: [book, pen] } }\n      - { name: ship, arguments: { order: B2, speed: express, address: { city: Oslo, zip: \"01500\" } } }\n  - text: Both shipments are handled.\n",
    );
    p
}

/// Thread `key` of the desk, waiting on its two calls: their approval ids, in call order.
async fn waiting(server: &Server, token: &str, key: &str) -> Vec<String> {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            token,
            json!({"agent": "desk", "key": key, "text": "ship my two orders"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "waiting", "{body}");
    let (status, list) = server.get("/approvals", token).await;
    assert_eq!(status, 200, "{list}");
    let ids: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["thread"] == key)
        .filter_map(|i| i["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 2, "{list}");
    ids
}

/// The tool results and texts of thread `key`.
async fn said(server: &Server, token: &str, key: &str) -> Vec<Value> {
    let (status, page) = server
        .get(&format!("/threads/{key}/messages?limit=500"), token)
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| i["data"].clone())
        .collect()
}

fn results(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

/// Sets the value of the field named `name` (a schema field: `arg:/pointer`) in call `seq`'s
/// edit form, opening it.
async fn set(page: &Browser, call: &str, name: &str, value: &str) {
    let js = format!(
        "(() => {{ const s = document.querySelector('section.call[data-id=\"{call}\"]'); \
         s.querySelector('details.edit').open = true; \
         const el = s.querySelector('[name=\"{name}\"]'); el.value = {value}; return true; }})()",
        value = serde_json::to_string(value).expect("json"),
    );
    page.eval(&js).await;
}

async fn click(page: &Browser, css: &str) {
    let css = serde_json::to_string(css).expect("json");
    page.eval(&format!("document.querySelector({css}).click() || true"))
        .await;
}

/// A screenshot (on SQLite only: the pages are the same on both).
async fn shot(page: &Browser, at: &str, name: &str) {
    if at == "sqlite" {
        page.screenshot(name).await;
    }
}

fn seq(id: &str) -> &str {
    id.rsplit(':').next().expect("seq")
}

#[tokio::test]
async fn a_steps_calls_are_edited_and_decided_in_the_browser() {
    let Some(mut driver) = browser::driver().await else {
        return;
    };
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let ids = waiting(&server, &alice, "s1").await;
        let (first, second) = (&ids[0], &ids[1]);
        // Without script: the queue lists both calls; the page shows the step.
        let page = driver.browser(1000, 2200, false).await;
        page.sign_in(&server.base, &alice).await;
        let queue = page.text("#queue").await;
        assert!(queue.contains("calls ship"), "{at}: {queue}");
        page.open(&format!("{}/inbox/items/{first}", server.base))
            .await;
        page.wait_for("section.call").await;
        let calls = page
            .eval("document.querySelectorAll('section.call[data-open=true]').length")
            .await;
        assert_eq!(
            calls,
            json!(2),
            "{at}: both calls of the step are on the page"
        );
        let call = format!("section.call[data-id=\"{first}\"]");
        let shown = page.text(&call).await;
        for words in [
            "Ships an order to a customer.",
            "How fast it travels.",
            "Where it goes.",
            "Lyon",
        ] {
            assert!(shown.contains(words), "{at}: {words}: {shown}");
        }
        // The edit form from the schema: a nested fieldset, a select, a checkbox, a list.
        let form = page
            .eval(&format!(
                "(() => {{ const s = document.querySelector('{call}'); return [
                   s.querySelector('fieldset[data-pointer=\"/address\"] legend').textContent,
                   s.querySelector('fieldset[data-pointer=\"/address\"] input[name=\"arg:/address/zip\"]').value,
                   [...s.querySelector('select[name=\"arg:/speed\"]').options].map(o => o.textContent),
                   s.querySelector('select[name=\"arg:/speed\"]').selectedOptions[0].textContent,
                   s.querySelector('input[type=checkbox][name=\"arg:/gift\"]').checked,
                   s.querySelector('textarea[name=\"arg:/items\"]').value,
                   s.querySelector('label[for=\"' + s.querySelector('[name=\"arg:/address/city\"]').id + '\"]') !== null,
                 ]; }})()",
                call = call.replace('\'', "\\'")
            ))
            .await;
        assert_eq!(
            form,
            json!([
                "address (required)",
                "69001",
                ["standard", "express", "overnight"],
                "standard",
                false,
                "book\npen",
                true
            ]),
            "{at}"
        );
        page.eval(&format!(
            "document.querySelector('{}').open = true",
            call.replace('\'', "\\'") + " details.edit"
        ))
        .await;
        shot(&page, at, "tool-call-edit").await;

        // An invalid edit: shown at its field, what was typed kept, nothing written.
        set(&page, first, "arg:/address/zip", "12").await;
        set(&page, first, "arg:/address/city", "Paris").await;
        click(&page, &format!("#edit-{}", seq(first))).await;
        page.wait_until("document.querySelector('.field-error') !== null")
            .await;
        let error = page
            .eval("(() => { const e = document.querySelector('.field-error'); return [e.closest('[data-pointer]').dataset.pointer, e.getAttribute('role'), e.textContent]; })()")
            .await;
        assert_eq!(error[0], "/address/zip", "{at}: {error}");
        assert_eq!(error[1], "alert", "{at}: {error}");
        assert!(
            error[2]
                .as_str()
                .unwrap_or_default()
                .contains("does not match"),
            "{at}: {error}"
        );
        let kept = page
            .eval("[document.querySelector('[name=\"arg:/address/zip\"]').value, document.querySelector('[name=\"arg:/address/city\"]').value, document.querySelector('[name=\"arg:/address/zip\"]').getAttribute('aria-invalid')]")
            .await;
        assert_eq!(kept, json!(["12", "Paris", "true"]), "{at}");
        shot(&page, at, "tool-call-invalid-edit").await;
        assert!(
            results(&said(&server, &alice, "s1").await).is_empty(),
            "{at}: nothing written"
        );
        let (_, still) = server.get(&format!("/approvals/{first}"), &alice).await;
        assert!(still["decided"].is_null(), "{at}: {still}");

        // Fixed and sent: the tool ran with the edited arguments; the other call still waits.
        set(&page, first, "arg:/address/zip", "75001").await;
        set(&page, first, "arg:/speed", "\"overnight\"").await;
        click(&page, &format!("#edit-{}", seq(first))).await;
        page.wait_until(&format!(
            "document.querySelector('{} .result') !== null",
            call.replace('\'', "\\'")
        ))
        .await;
        let decided = page.text(&call).await;
        assert!(
            decided.contains("Edited and approved by alice"),
            "{at}: {decided}"
        );
        assert!(
            decided.contains("shipped A1 by overnight"),
            "{at}: {decided}"
        );
        assert!(
            decided.contains("Paris"),
            "{at}: the edited arguments: {decided}"
        );
        // The other one, rejected with a reason.
        page.wait_for(&format!("#reason-{}", seq(second)))
            .await
            .send_keys("Out of stock.")
            .await
            .expect("type");
        click(&page, &format!("#reject-{}", seq(second))).await;
        page.wait_until("document.querySelector('#outcome') !== null")
            .await;
        let outcome = page.text("#outcome").await;
        assert!(
            outcome.contains("Both shipments are handled."),
            "{at}: {outcome}"
        );
        let other = page
            .text(&format!("section.call[data-id=\"{second}\"]"))
            .await;
        assert!(
            other.contains("Rejected by alice") && other.contains("Out of stock."),
            "{at}: {other}"
        );
        assert!(
            other.contains("A person rejected this call: Out of stock."),
            "{at}: the result: {other}"
        );
        page.wait_for("#next-none").await;
        page.eval("window.scrollTo(0, 0) || true").await;
        shot(&page, at, "tool-call-decided").await;
        let written = results(&said(&server, &alice, "s1").await);
        assert_eq!(written.len(), 2, "{at}: one result per call: {written:?}");
        // The history: each decision with its author, its reason or its edited arguments.
        page.open(&format!("{}/inbox/history", server.base)).await;
        let edited = page
            .text(&format!("tr.decided-item[data-id=\"{first}\"]"))
            .await;
        assert!(
            edited.contains("Edited and approved")
                && edited.contains("Paris")
                && edited.contains("alice"),
            "{at}: {edited}"
        );
        let rejected = page
            .text(&format!("tr.decided-item[data-id=\"{second}\"]"))
            .await;
        assert!(
            rejected.contains("Rejected")
                && rejected.contains("Out of stock.")
                && rejected.contains("alice"),
            "{at}: {rejected}"
        );
        shot(&page, at, "tool-call-history").await;
        page.close().await;

        // With script: a refused edit at its field and then "Approve all", without a reload;
        // the next item is linked.
        let ids = waiting(&server, &alice, "s2").await;
        let later = waiting(&server, &alice, "s3").await;
        let page = driver.browser(1000, 2200, true).await;
        page.sign_in(&server.base, &alice).await;
        page.open(&format!("{}/inbox/items/{}", server.base, ids[0]))
            .await;
        page.wait_for("#approve-all").await;
        page.eval("window.sameDocument = true").await;
        set(&page, &ids[0], "arg:/parcels", "50").await;
        click(&page, &format!("#edit-{}", seq(&ids[0]))).await;
        page.wait_until("document.querySelector('.field-error') !== null")
            .await;
        let error = page
            .eval("(() => { const e = document.querySelector('.field-error'); return [e.closest('[data-pointer]').dataset.pointer, window.sameDocument === true, document.activeElement.name]; })()")
            .await;
        assert_eq!(error, json!(["/parcels", true, "arg:/parcels"]), "{at}");
        click(&page, "#approve-all").await;
        page.wait_until("document.querySelector('#outcome') !== null")
            .await;
        assert_eq!(
            page.eval("window.sameDocument === true").await,
            json!(true),
            "{at}: no reload"
        );
        let outcome = page.text("#main").await;
        assert!(
            outcome.contains("Both shipments are handled."),
            "{at}: {outcome}"
        );
        assert_eq!(
            outcome.matches("Approved by alice").count(),
            2,
            "{at}: {outcome}"
        );
        let next = page
            .eval("document.getElementById('next').getAttribute('href')")
            .await;
        assert!(
            later
                .iter()
                .any(|id| next.as_str() == Some(&format!("/inbox/items/{id}"))),
            "{at}: the next item: {next}"
        );
        shot(&page, at, "tool-call-batch").await;
        let written = results(&said(&server, &alice, "s2").await);
        assert_eq!(
            written,
            vec![
                "shipped A1 by standard to {\"city\":\"Lyon\",\"zip\":\"69001\"}".to_owned(),
                "shipped B2 by express to {\"city\":\"Oslo\",\"zip\":\"01500\"}".to_owned()
            ],
            "{at}"
        );
        page.close().await;
        server.stop().await;
    }
}

/// Without script, over plain HTTP: a decision posted after another came first is refused
/// (409) naming who decided first and what, and writes nothing; a "Reject all" without a reason
/// is refused (422) at the top, nothing written.
#[tokio::test]
async fn a_late_decision_without_script_names_the_first_and_writes_nothing() {
    use crate::inbox::{cookie, csrf, plain};
    for backend in support::backends().await {
        let at = backend.name();
        let p = project();
        let server = Server::start_with(&backend, p.root(), options()).await;
        let alice = server.key("alice", false).await;
        let ops = server.key("ops", true).await;
        let ids = waiting(&server, &alice, "late").await;
        let item = format!("{}/inbox/items/{}", server.base, ids[0]);
        let session = cookie(&server, &ops).await;
        let html = plain()
            .get(&item)
            .header("cookie", &session)
            .send()
            .await
            .expect("get")
            .text()
            .await
            .expect("html");
        let token = csrf(&html);
        let (status, body) = server
            .post(
                &format!("/approvals/{}?wait=true", ids[0]),
                &alice,
                json!({"decision": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{at}: {body}");
        let post = |fields: Vec<(&'static str, String)>| {
            plain()
                .post(&item)
                .header("cookie", &session)
                .form(&fields)
                .send()
        };
        let resp = post(vec![
            ("kind", "reject".into()),
            ("call", ids[0].clone()),
            ("reason", "Too late.".into()),
            ("csrf", token.clone()),
        ])
        .await
        .expect("post");
        assert_eq!(resp.status(), 409, "{at}");
        let page = resp.text().await.expect("html");
        let notice = &page[page.find("id=\"notice\"").expect("notice")..];
        let notice = &notice[..notice.find("</div>").expect("end")];
        assert!(
            notice.contains("role=\"alert\"")
                && notice.contains("was NOT sent")
                && notice.contains("alice")
                && notice.contains("had decided first")
                && notice.contains("Approved"),
            "{at}: {notice}"
        );
        let resp = post(vec![
            ("kind", "reject_all".into()),
            ("reason", " ".into()),
            ("csrf", token.clone()),
        ])
        .await
        .expect("post");
        assert_eq!(resp.status(), 422, "{at}");
        assert!(
            resp.text()
                .await
                .expect("html")
                .contains("say why you reject them"),
            "{at}"
        );
        let written = results(&said(&server, &alice, "late").await);
        assert_eq!(written.len(), 1, "{at}: only the approval ran: {written:?}");
        assert!(written[0].starts_with("shipped A1"), "{at}: {written:?}");
        server.stop().await;
    }
}
