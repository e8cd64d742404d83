//! `examples/typescript` over `duet serve`, on SQLite and Postgres: `lookup_order`'s `execute`
//! reads `ORDERS_URL` with `state.env`, `fetch`es the order from a shop on 127.0.0.1 (granted in
//! `agents/code.yaml`) and keeps `last_order` with `state.setValue`; the `filter_messages` hook
//! runs on every model call and the `after_create_message` hook logs each message through
//! `console.log`; the `front_desk` handler side answers with a ticket numbered from a value it
//! keeps and sets the thread's status; the thread endpoint `GET /threads/{key}/api/summary`
//! answers what the thread holds. The same project on the node host gives the same journals and
//! the same summary.

use serde_json::{Value, json};

use super::origin::Origin;
use super::process::{Served, db_arg, example_copy, node_here, replaced};
use crate::support::{self, Backend, Scratch};

/// One journal entry as the runs are compared: a message's kind, role and content (tool calls
/// by name and arguments), a record's kind and, for a status, its text.
type Entry = (String, String, Value);

/// What one run of the example left.
#[derive(Debug, PartialEq)]
struct Journals {
    order: Vec<Entry>,
    desk: Vec<Entry>,
    /// What the thread endpoint answered for `order-1`.
    summary: Value,
}

/// The example, its `fetch` granted the origin's address and its code on `host`; its
/// `filter_messages` hook logs how many messages it was handed.
fn project(origin: &Origin, host: &str) -> Scratch {
    example_copy("ts-serve", |rel, text| match rel {
        "agents/code.yaml" => {
            let text = replaced(&text, "orders.example.com", &origin.addr);
            replaced(&text, "host: embedded", &format!("host: {host}"))
        }
        // The hook says what it was handed, so that the test sees it run.
        "agents/hooks/trim_history.ts" => replaced(
            &text,
            "async (state, messages) => messages.slice(-12)",
            "async (state, messages) => {\n    console.log('trim_history', messages.length);\n    return messages.slice(-12);\n  }",
        ),
        _ => text,
    })
}

/// Thread `key`'s journal as the runs are compared.
async fn journal(served: &Served, key: &str) -> Vec<Entry> {
    served
        .journal(key)
        .await
        .into_iter()
        .map(|(kind, d)| {
            let shown = match kind.as_str() {
                "message" => json!({
                    "role": d["role"],
                    "content": d["content"],
                    "toolCalls": d["toolCalls"].as_array().map(|calls| calls
                        .iter()
                        .map(|c| json!([c["name"], c["arguments"]]))
                        .collect::<Vec<_>>()),
                }),
                "status" => d["text"].clone(),
                _ => Value::Null,
            };
            let role = d["role"].as_str().unwrap_or("").to_owned();
            (kind, role, shown)
        })
        .collect()
}

/// Runs the example on `backend` with its code on `host` and checks what it did; its journals.
async fn run(backend: &Backend, host: &str) -> Journals {
    let mut origin = Origin::start().await;
    let copy = project(&origin, host);
    let db = db_arg(backend);
    let mut served = Served::start(copy.root(), &db, &[("ORDERS_URL", &origin.url())]).await;

    // The support agent: zod refuses the first call, the second runs `execute`, which fetches.
    let (status, thread) = served
        .post(
            "/threads?wait=true",
            json!({"agent": "support_agent", "key": "order-1", "text": "Where is my order A-1001?"}),
        )
        .await;
    assert_eq!(status, 200, "{thread}");
    assert_eq!(thread["status"], "awaiting_human", "{host}: {thread}");
    let hits = origin.seen();
    let asked: Vec<(&str, &str)> = hits
        .iter()
        .map(|h| (h.method.as_str(), h.path.as_str()))
        .collect();
    assert_eq!(asked, [("GET", "/orders/A-1001")], "{host}: one fetch");
    let order = journal(&served, "order-1").await;
    let tools: Vec<&Value> = order
        .iter()
        .filter(|(kind, role, _)| kind == "message" && role == "tool")
        .map(|(_, _, shown)| &shown["content"])
        .collect();
    assert_eq!(
        tools.get(1).copied(),
        Some(&json!("Order A-1001 is shipped.")),
        "{host}: the tool's result says what the shop answered: {order:#?}"
    );
    for (kind, _, shown) in &order {
        assert!(
            !["hook_failed", "step_error", "handler_error"].contains(&kind.as_str()),
            "{host}: {kind} {shown}"
        );
    }
    // `state.setValue` was committed with the step: the thread endpoint reads it back.
    let (status, summary) = served.get("/threads/order-1/api/summary").await;
    assert_eq!(status, 200, "{host}: {summary}");
    assert_eq!(summary["lastOrder"], "A-1001", "{host}: {summary}");
    assert_eq!(summary["agent"], "support_agent", "{host}: {summary}");
    assert_eq!(summary["messages"], 8, "{host}: {summary}");
    // The `filter_messages` hook ran before each model call: before the first, on the user's
    // message alone; and the `after_create_message` hook's `console.log` for the answer. Each
    // in the server's log with the thread.
    let trimmed = served
        .log_until(|l| l["target"] == "duet::code" && l["fields"]["message"] == "trim_history 1")
        .await;
    assert!(trimmed.to_string().contains("order-1"), "{host}: {trimmed}");
    let logged = served
        .log_until(|l| {
            l["target"] == "duet::code"
                && l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("message ") && m.ends_with(" assistant"))
        })
        .await;
    assert!(
        logged.to_string().contains("order-1"),
        "{host}: the log names the thread: {logged}"
    );

    // The TS handler side: a ticket a message, numbered from a value it keeps, and a status.
    let (status, desk) = served
        .post(
            "/threads?wait=true",
            json!({"agent": "front_desk", "key": "desk-1", "text": "My parcel is late."}),
        )
        .await;
    assert_eq!(status, 200, "{desk}");
    let (status, again) = served
        .post(
            "/threads/desk-1/messages?wait=true",
            json!({"text": "Still nothing."}),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], "awaiting_human", "{host}: {again}");
    let desk = journal(&served, "desk-1").await;
    let said: Vec<&Value> = desk
        .iter()
        .filter(|(kind, role, _)| kind == "message" && role == "assistant")
        .map(|(_, _, shown)| &shown["content"])
        .collect();
    assert_eq!(
        said,
        [
            &json!("Ticket 1 opened: \"My parcel is late.\". We answer within a day."),
            &json!("Ticket 2 opened: \"Still nothing.\". We answer within a day."),
        ],
        "{host}: {desk:#?}"
    );
    let statuses: Vec<&Value> = desk
        .iter()
        .filter(|(kind, _, _)| kind == "status")
        .map(|(_, _, shown)| shown)
        .collect();
    assert_eq!(
        statuses.last().copied(),
        Some(&json!("2 ticket(s) open")),
        "{host}: {desk:#?}"
    );
    Journals {
        order,
        desk,
        summary,
    }
}

#[tokio::test]
async fn the_example_runs_its_code_over_serve_on_each_backend() {
    for backend in support::backends().await {
        run(&backend, "embedded").await;
    }
}

#[tokio::test]
async fn the_node_host_gives_the_same_journal() {
    if !node_here() {
        return;
    }
    let sqlite = |tag: &str| {
        Backend::Sqlite(std::env::temp_dir().join(format!(
            "duet-tests/ts-{tag}-{}.db",
            uuid::Uuid::now_v7().simple()
        )))
    };
    let embedded = run(&sqlite("embedded"), "embedded").await;
    let node = run(&sqlite("node"), "node").await;
    assert_eq!(node, embedded);
}
