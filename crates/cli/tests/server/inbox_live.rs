//! The live inbox sends what changed: after the whole list at first, a question that arrives
//! comes as an `item` event (its `<li>` and the counts), one answered as a `remove` event, and
//! another principal's question sends nothing — never the whole list again.

use serde_json::{Value, json};

use crate::harness::{self, Server, Sse};
use crate::support;

/// Parks a `question_gate` thread `key` of `token`'s: its approval id and thread id.
async fn parked(server: &Server, token: &str, key: &str) -> (String, String) {
    let (status, body) = server
        .post(
            "/threads?wait=true",
            token,
            json!({"agent": "question_gate", "key": key, "text": "Rotate the keys tonight?"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let approval = body["approval"].as_str().expect("approval").to_owned();
    let thread = approval.split(':').next().expect("thread").to_owned();
    (approval, thread)
}

/// The next event of `queue`: its name and its data. (A blank block, which the harness reads
/// as an empty `message`, is no event of the queue's.)
async fn next(queue: &mut Sse) -> (String, String) {
    loop {
        let e = queue.next().await.expect("the queue's stream");
        let data = match e.data {
            Value::String(s) => s,
            other => other.to_string(),
        };
        if e.event == "message" && data.is_empty() {
            continue;
        }
        return (e.event, data);
    }
}

#[tokio::test]
async fn a_change_sends_only_the_thread_it_names() {
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let bob = server.key("bob", false).await;
        let (first, _) = parked(&server, &alice, "live-1").await;
        let (cookie, _) = harness::sign_in(&server, &alice).await;
        let resp = reqwest::Client::new()
            .get(format!("{}/inbox/events", server.base))
            .header("cookie", &cookie)
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("inbox events");
        assert_eq!(resp.status(), 200);
        let mut queue = Sse::new(resp);
        let (kind, whole) = next(&mut queue).await;
        assert_eq!(kind, "queue", "{whole}");
        assert!(whole.contains(&first), "{whole}");
        assert!(whole.contains("1 question waits for you."), "{whole}");

        // Bob's question is none of alice's business; alice's second comes as one item.
        parked(&server, &bob, "bobs-1").await;
        let (second, thread) = parked(&server, &alice, "live-2").await;
        let (kind, data) = next(&mut queue).await;
        assert_eq!(kind, "item", "{data}");
        assert!(
            data.contains(&format!("data-thread=\"{thread}\"")),
            "{data}"
        );
        assert!(data.contains(&second) && !data.contains(&first), "{data}");
        assert!(data.contains("2 questions wait for you."), "{data}");
        assert!(!data.contains("bobs-1"), "{data}");

        // Answered: removed, with the counts.
        let (status, body) = server
            .post(
                &format!("/approvals/{first}?wait=true"),
                &alice,
                json!({"text": "Yes."}),
            )
            .await;
        assert!(status == 200 || status == 202, "{body}");
        let (kind, data) = loop {
            let (kind, data) = next(&mut queue).await;
            // The answered thread may first be re-read while it still waits (nothing new).
            if kind != "item" || !data.contains(&first) {
                break (kind, data);
            }
        };
        assert_eq!(kind, "remove", "{data}");
        assert!(!data.contains("<li"), "{data}");
        assert!(data.contains("1 question waits for you."), "{data}");
    }
}

#[tokio::test]
async fn in_a_browser_a_question_comes_in_place_and_leaves_with_the_counts() {
    let Some(mut driver) = crate::browser::driver().await else {
        return;
    };
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let page = driver.browser(1000, 800, true).await;
        page.sign_in(&server.base, &alice).await;
        assert_eq!(page.text("#count").await, "Nothing waits for you.");
        let (first, _) = parked(&server, &alice, "in-1").await;
        page.wait_for(&format!("li.item[data-id=\"{first}\"]"))
            .await;
        let (second, _) = parked(&server, &alice, "in-2").await;
        page.wait_for(&format!("li.item[data-id=\"{second}\"]"))
            .await;
        assert_eq!(page.text("#count").await, "2 questions wait for you.");
        // Oldest first: the first asked is above.
        let order = page
            .eval("[...document.querySelectorAll('li.item')].map((li) => li.dataset.id)")
            .await;
        assert_eq!(order, json!([first, second]), "{order}");
        let (status, body) = server
            .post(
                &format!("/approvals/{first}?wait=true"),
                &alice,
                json!({"text": "Yes."}),
            )
            .await;
        assert!(status == 200 || status == 202, "{body}");
        page.wait_until(&format!(
            "document.querySelector('li.item[data-id=\"{first}\"]') === null"
        ))
        .await;
        assert_eq!(page.text("#count").await, "1 question waits for you.");
        page.close().await;
    }
}
