//! A late answer on the inbox page without script, on each backend, over plain HTTP: the page
//! says plainly that the answer was NOT sent (a warning, not the green "Answered by" box),
//! names the answer that came first, and keeps the text typed in the form; times read as
//! sentences ("just now", never "just now ago"). With script, an answer arriving while a reason
//! is typed keeps the reason.

use serde_json::json;

use crate::harness::Server;
use crate::inbox::{cookie, csrf, parked_gate, plain};
use crate::support;

/// The text inside the `<textarea>` whose id is `id`.
fn textarea(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("a #{id} on the page: {html}"));
    let open = at + html[at..].find('>').expect("the tag ends") + 1;
    let close = open + html[open..].find("</textarea>").expect("the textarea ends");
    html[open..close].to_owned()
}

/// The page's `#notice` block.
fn notice(html: &str) -> &str {
    let at = html.find("id=\"notice\"").expect("a notice");
    let end = html[at..].find("</section>").map_or(html.len(), |e| at + e);
    &html[at..end]
}

#[tokio::test]
async fn a_late_answer_without_script_is_said_not_sent_and_keeps_its_text() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let ops = server.key("ops", true).await;
        let approval = parked_gate(&server, &alice, "late-1", "Rotate?").await;
        let item = format!("{}/inbox/items/{approval}", server.base);

        // ops opens the page (no script: plain form posts) and types a reason…
        let session = cookie(&server, &ops).await;
        let page = plain()
            .get(&item)
            .header("cookie", &session)
            .send()
            .await
            .expect("get")
            .text()
            .await
            .expect("html");
        let token = csrf(&page);
        // … while alice answers first.
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"text": "approve"}),
            )
            .await;
        assert_eq!(status, 202, "{body}");

        let reason = "Not tonight: the <backups> run & finish at 2.";
        let resp = plain()
            .post(&item)
            .header("cookie", &session)
            .form(&[
                ("kind", "reject"),
                ("reason", reason),
                ("csrf", token.as_str()),
                ("message_id", "late-m-1"),
            ])
            .send()
            .await
            .expect("post");
        assert_eq!(resp.status(), 409);
        let html = resp.text().await.expect("html");
        let told = notice(&html);
        assert!(
            told.contains("Your answer was NOT sent")
                && told.contains("role=\"alert\"")
                && told.contains("refused")
                && !told.contains("role=\"status\""),
            "a warning, not a success: {told}"
        );
        assert!(
            told.contains("alice") && told.contains("approve"),
            "names the answer that won: {told}"
        );
        assert_eq!(
            textarea(&html, "reason"),
            "Not tonight: the &lt;backups&gt; run &amp; finish at 2.",
            "the reason typed is kept"
        );
        assert!(
            html.contains("Your answer (not sent)"),
            "the form says it was not sent"
        );

        // Times read as sentences, here and in the history.
        let history = plain()
            .get(format!("{}/inbox/history", server.base))
            .header("cookie", &session)
            .send()
            .await
            .expect("get")
            .text()
            .await
            .expect("html");
        for (what, page) in [("item", &html), ("history", &history)] {
            assert!(!page.contains("just now ago"), "{what}: {page}");
            assert!(page.contains("just now"), "{what}: {page}");
        }
        server.stop().await;
    }
}

/// With script, a page where a reason was being typed when someone else answered keeps the
/// reason (read-only, nothing to send) and says the question was answered; a page where
/// nothing was typed drops its forms.
#[tokio::test]
async fn an_answer_arriving_while_a_reason_is_typed_keeps_the_reason() {
    let Some(mut driver) = crate::browser::driver().await else {
        return;
    };
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let approval = parked_gate(&server, &alice, "late-2", "Rotate?").await;
        let item = format!("{}/inbox/items/{approval}", server.base);
        let typing = driver.browser(1000, 800, true).await;
        let idle = driver.browser(1000, 800, true).await;
        for page in [&typing, &idle] {
            page.sign_in(&server.base, &alice).await;
            page.open(&item).await;
            page.wait_for("#approve").await;
        }
        typing
            .wait_for("#reason")
            .await
            .send_keys("Not tonight.")
            .await
            .expect("type");
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}"),
                &alice,
                json!({"text": "approve"}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        typing
            .wait_until(
                "document.getElementById('answer-title').textContent === 'Your answer (not sent)'",
            )
            .await;
        let kept = typing
            .eval("[document.getElementById('reason').value, document.getElementById('reason').readOnly, document.getElementById('reject').disabled]")
            .await;
        assert_eq!(kept, json!(["Not tonight.", true, true]));
        idle.wait_until("document.getElementById('answer') === null")
            .await;
        for page in [typing, idle] {
            page.close().await;
        }
        server.stop().await;
    }
}
