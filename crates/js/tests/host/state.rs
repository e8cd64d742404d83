//! `state` for code: its members reach the bridge in order with the contract's parameters, the
//! answers come back into the code, a refusal is thrown there, and a `state` outlives nothing.

use duet_runtime::CodeHost;
use serde_json::{Value, json};

use crate::support::{Recorder, call, host, logged, record_logs, run};

const COUNTER: &str = r#"
import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

export default defineTool({
  description: 'Counts',
  args: z.object({ key: z.string() }),
  execute: async (state, args: { key: string }) => {
    const before: number = await state.getValue(args.key);
    await state.setValue(args.key, before + 1);
    const secret = await state.env('API_KEY');
    return { before, secret, thread: state.threadId, agent: state.agentId, context: state.context };
  },
});
"#;

#[tokio::test]
async fn three_state_calls_reach_the_bridge_in_order_and_answer_the_code() {
    let host = host(&[("agents/tools/counter.ts", COUNTER)], 1);
    let mut bridge = Recorder::new(|method, _| match method {
        "getValue" => Ok(json!(41)),
        "env" => Ok(json!("s3cret")),
        _ => Ok(Value::Null),
    });
    let out = host
        .call(
            call("agents/tools/counter.ts", vec![json!({ "key": "n" })]),
            &mut bridge,
        )
        .await
        .expect("runs");
    assert_eq!(
        bridge.seen,
        vec![
            ("getValue".to_owned(), json!({ "key": "n" })),
            ("setValue".to_owned(), json!({ "key": "n", "value": 42 })),
            ("env".to_owned(), json!({ "name": "API_KEY" })),
        ]
    );
    assert_eq!(
        out,
        json!({ "before": 41, "secret": "s3cret", "thread": "t-1", "agent": "support", "context": {} })
    );
}

const MEMBERS: &str = r#"
export default {
  execute: async (state) => {
    await state.setValue('gone', undefined);
    await state.getMessages();
    await state.scheduleEffect('follow_up', { orderId: 'A1' });
    const queued = state.queueTool('lookup', { id: 1 });
    state.emit('progress', { pct: 50 });
    await state.readFile('notes/a.txt', { encoding: 'utf8' });
    const child = await state.getChildThread('ref-7');
    await child.setValue('k', 1);
    const none = await state.getChildThread('ref-8');
    return { queued: queued === undefined, childId: child.threadId, childContext: child.context, none };
  },
};
"#;

#[tokio::test]
async fn members_send_the_contracts_parameters_and_children_name_their_thread() {
    let host = host(&[("agents/tools/members.js", MEMBERS)], 1);
    let mut bridge = Recorder::new(|method, params| match (method, &params["referenceId"]) {
        ("getChildThread", Value::String(r)) if r == "ref-7" => {
            Ok(json!({ "threadId": "child-1", "agentId": "helper" }))
        }
        _ => Ok(Value::Null),
    });
    let out = host
        .call(call("agents/tools/members.js", vec![]), &mut bridge)
        .await
        .expect("runs");
    assert_eq!(
        out,
        json!({ "queued": true, "childId": "child-1", "childContext": {}, "none": null })
    );
    assert_eq!(
        bridge.seen,
        vec![
            (
                "setValue".to_owned(),
                json!({ "key": "gone", "value": null })
            ),
            ("getMessages".to_owned(), json!({ "options": {} })),
            (
                "scheduleEffect".to_owned(),
                json!({ "name": "follow_up", "args": { "orderId": "A1" }, "delayMs": null })
            ),
            (
                "queueTool".to_owned(),
                json!({ "name": "lookup", "args": { "id": 1 } })
            ),
            (
                "emit".to_owned(),
                json!({ "event": "progress", "data": { "pct": 50 } })
            ),
            ("readFile".to_owned(), json!({ "path": "notes/a.txt" })),
            (
                "getChildThread".to_owned(),
                json!({ "referenceId": "ref-7" })
            ),
            (
                "setValue".to_owned(),
                json!({ "key": "k", "value": 1, "$thread": "ref-7" })
            ),
            (
                "getChildThread".to_owned(),
                json!({ "referenceId": "ref-8" })
            ),
        ]
    );
}

const REFUSED: &str = r#"
export default {
  execute: async (state) => {
    const out = [];
    try { await state.getValue('x'); } catch (e) { out.push(String(e)); }
    try { state.emit('e', {}); } catch (e) { out.push(String(e)); }
    try { await fetch('https://example.com/'); } catch (e) { out.push(e instanceof TypeError, e.message); }
    return out;
  },
};
"#;

#[tokio::test]
async fn a_bridge_refusal_is_thrown_in_the_code() {
    let host = host(&[("agents/tools/refused.js", REFUSED)], 1);
    let mut bridge = Recorder::new(|method, _| Err(format!("`{method}` is not allowed here")));
    let out = host
        .call(call("agents/tools/refused.js", vec![]), &mut bridge)
        .await
        .expect("runs");
    assert_eq!(
        out,
        json!([
            "Error: `getValue` is not allowed here",
            "Error: `emit` is not allowed here",
            true,
            "`fetch` is not allowed here"
        ])
    );
}

const KEEPER: &str = r#"
let kept;
export default {
  execute: async (state) => {
    if (kept === undefined) {
      kept = state;
      return 'kept';
    }
    try {
      await kept.getValue('x');
      return 'the old state answered';
    } catch (e) {
      return String(e);
    }
  },
};
"#;

#[tokio::test]
async fn a_state_kept_past_its_call_is_refused() {
    let host = host(&[("agents/tools/keeper.js", KEEPER)], 1);
    let file = "agents/tools/keeper.js";
    assert_eq!(run(&host, call(file, vec![])).await, Ok(json!("kept")));
    let mut bridge = Recorder::null();
    let out = host.call(call(file, vec![]), &mut bridge).await;
    let out = out.expect("runs");
    assert!(
        out.as_str()
            .is_some_and(|s| s.contains("belongs to a call that has ended")),
        "{out}"
    );
    assert!(bridge.seen.is_empty(), "{:?}", bridge.seen);
}

const LOGS: &str = r#"
export default {
  execute: async (state, n) => {
    console.log('order %s has %d items', 'A1', 3, { more: true });
    console.error(new Error('bad'));
    console.debug([1, 2]);
    return n;
  },
};
"#;

#[tokio::test]
async fn console_is_tracing_with_the_thread_and_the_call() {
    record_logs();
    let host = host(&[("agents/tools/logs.js", LOGS)], 1);
    let mut c = call("agents/tools/logs.js", vec![json!(1)]);
    c.call = "call-logs".to_owned();
    c.thread = "thread-logs".to_owned();
    run(&host, c).await.expect("runs");
    let ours: Vec<_> = logged()
        .into_iter()
        .filter(|l| l.field("call") == Some("call-logs"))
        .collect();
    assert_eq!(ours.len(), 3, "{ours:#?}");
    assert!(ours.iter().all(|l| l.target == "duet::code"));
    assert!(
        ours.iter()
            .all(|l| l.field("thread") == Some("thread-logs"))
    );
    assert_eq!(
        ours[0].field("message"),
        Some(r#"order A1 has 3 items {"more":true}"#)
    );
    assert_eq!(ours[0].level, tracing::Level::INFO);
    assert_eq!(ours[1].level, tracing::Level::ERROR);
    assert!(
        ours[1]
            .field("message")
            .is_some_and(|m| m.starts_with("Error: bad")),
        "{ours:#?}"
    );
    assert_eq!(ours[2].field("message"), Some("[1,2]"));
}

const PATCH: &str = r#"
export default {
  execute: async (state, patch) => {
    if (patch) {
      JSON.stringify = () => '"hijacked"';
      JSON.parse = () => 'hijacked';
      Object.keys = () => [];
      globalThis.Promise = function () {};
      return 'patched';
    }
    return await state.getValue('k');
  },
};
"#;

#[tokio::test]
async fn code_that_replaces_builtins_does_not_change_what_reaches_the_runtime() {
    let host = host(&[("agents/tools/patch.js", PATCH)], 1);
    let file = "agents/tools/patch.js";
    assert_eq!(
        run(&host, call(file, vec![json!(true)])).await,
        Ok(json!("patched"))
    );
    let mut bridge = Recorder::new(|_, _| Ok(json!({ "v": 1 })));
    let out = host.call(call(file, vec![json!(false)]), &mut bridge).await;
    assert_eq!(out, Ok(json!({ "v": 1 })));
    assert_eq!(
        bridge.seen,
        vec![("getValue".to_owned(), json!({ "key": "k" }))]
    );
}
