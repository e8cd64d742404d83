//! On each backend, a `duet serve` killed (SIGKILL) while a TS tool's `fetch` POST is in flight: the next
//! `duet serve` on the database takes the thread over once the dead one's lease expires and
//! redoes the step, and the shop sees the same `Idempotency-Key` on both requests; the tool's
//! result is committed once.
//!
//! The key is `duet:THREAD:tool:CALL:N` and the scripted model's tool call ids are the same when a
//! step is redone (they follow the journal); a real model gives the redone step a new call id,
//! and so a new key.

use serde_json::{Value, json};

use super::origin::Origin;
use super::process::{Served, db_arg};
use crate::support::{self, Scratch};

/// `pay`: its model calls `charge`, which POSTs to the shop, then says it is done.
fn project(origin: &Origin) -> Scratch {
    let p = Scratch::new("ts-crash");
    p.write(
        "agents/agents/pay.yaml",
        "name: pay\nsideA: { prompt: pay }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/pay.yaml",
        "name: pay\ntoolDescription: d\nmodel: pay_model\nprompt: Charge the order.\ntools: [charge]\n",
    );
    p.write(
        "agents/models/pay_model.yaml",
        "name: pay_model\nprovider: scripted\nmodel: demo\nscript:\n  \
         - tool_calls: [{ name: charge, arguments: { orderId: A-1001 } }]\n  - text: Charged.\n",
    );
    p.write(
        "agents/code.yaml",
        &format!("fetch:\n  allow:\n    - {}\n", origin.addr),
    );
    p.write(
        "agents/tools/charge.ts",
        &format!(
            "import {{ defineTool }} from '@standardagents/spec';\n\
             export default defineTool({{\n  description: 'Charges an order',\n  \
             args: {{ type: 'object', properties: {{ orderId: {{ type: 'string' }} }}, required: ['orderId'] }},\n  \
             execute: async (state, args) => {{\n    \
             const res = await fetch('{}/charges', {{ method: 'POST', headers: {{ 'content-type': 'application/json' }}, body: JSON.stringify({{ order: args.orderId }}) }});\n    \
             return `charged: ${{res.status}} ${{await res.text()}}`;\n  }},\n}});\n",
            origin.url()
        ),
    );
    p
}

#[tokio::test]
async fn a_step_killed_mid_fetch_is_redone_with_the_same_idempotency_key() {
    for backend in support::backends().await {
        killed_mid_fetch(&db_arg(&backend)).await;
    }
}

async fn killed_mid_fetch(db: &str) {
    let mut origin = Origin::start().await;
    let p = project(&origin);

    let victim = Served::start(p.root(), db, &[]).await;
    let (status, body) = victim
        .post(
            "/threads",
            json!({"agent": "pay", "key": "pay-1", "text": "Charge A-1001."}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // The shop holds the first request: the call is in flight.
    let first = origin.next().await;
    assert_eq!(
        (first.method.as_str(), first.path.as_str()),
        ("POST", "/charges")
    );
    victim.kill().await;

    // The next process takes the thread over once the dead one's lease expires.
    let next = Served::start(p.root(), db, &[]).await;
    let second = origin.next().await;
    assert_eq!(
        (second.method.as_str(), second.path.as_str()),
        ("POST", "/charges")
    );
    let key = first.header("idempotency-key").expect("an Idempotency-Key");
    assert!(key.starts_with("duet:ops/pay-1:"), "{key}");
    assert_eq!(second.header("idempotency-key"), Some(key));
    assert_eq!(first.body, r#"{"order":"A-1001"}"#);
    assert_eq!(second.body, first.body);

    let journal = next
        .journal_until("pay-1", |s| s["status"] != "running")
        .await;
    let messages: Vec<(&str, &str)> = journal
        .iter()
        .filter(|(kind, _)| kind == "message")
        .map(|(_, m)| {
            (
                m["role"].as_str().unwrap_or(""),
                m["content"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            ("user", "Charge A-1001."),
            ("assistant", ""),
            ("tool", r#"charged: 201 {"charged":true}"#),
            ("assistant", "Charged."),
        ],
        "{journal:#?}"
    );
    let call: Vec<&Value> = journal
        .iter()
        .filter_map(|(_, m)| m["toolCalls"].as_array())
        .flatten()
        .collect();
    assert_eq!(call.len(), 1, "one call: {journal:#?}");
    let id = call[0]["id"].as_str().expect("the call's id");
    assert_eq!(key, format!("duet:ops/pay-1:tool:{id}:1"));
    assert_eq!(origin.seen().len(), 0, "{db}: exactly two requests");
}
