//! No U+0000 is stored, on any backend (`duet_runtime::nul`): a commit carrying one in any of
//! its texts — a message's, a record's, a value's, a queued message's, a timer's, the thread's
//! own — is written whole, each NUL read back as U+FFFD. Postgres refused such a commit
//! outright (`invalid byte sequence for encoding "UTF8": 0x00`).

use super::*;
use duet_runtime::{
    Commit, Message, Record, RecordBody, TimerQuery, ToolCall, ToolReply, ToolStatus,
};
use serde_json::json;

const R: &str = "\u{FFFD}";

#[tokio::test]
async fn a_commit_with_nul_in_every_text_is_written_with_replacements() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        t.status = ThreadStatus::Running;
        t.status_text = Some("status\0".into());
        t.result = Some("result\0".into());
        let mut m = Message::text(
            t.take_seq(),
            1,
            Role::Assistant,
            Some(SideId::A),
            "a\0b".into(),
            5,
        );
        m.thinking = Some("think\0".into());
        m.model = Some("model\0".into());
        m.tool_calls = vec![ToolCall {
            id: "call\0".into(),
            name: "tool\0".into(),
            arguments: json!({"k\0": ["v\0", {"literal": "\\u0000"}]}),
        }];
        m.provider_data = Some(json!({"signature": "s\0"}));
        let mut tool = Message::text(
            t.take_seq(),
            1,
            Role::Tool,
            Some(SideId::A),
            "result\0".into(),
            5,
        );
        tool.tool_call_id = Some("call\0".into());
        tool.tool_name = Some("tool\0".into());
        tool.tool_status = Some(ToolStatus::Error);
        let error = Record::new(
            t.take_seq(),
            RecordBody::StepError {
                error: "provider said \0".into(),
            },
            6,
        );
        let emitted = Record::new(
            t.take_seq(),
            RecordBody::Emitted {
                event: "e\0".into(),
                data: json!({"x\0": "y\0"}),
            },
            6,
        );
        let mut timer = crate::timers::effect("effect\0", 10_000);
        timer.args = json!({"arg": "a\0"});
        timer.subject = Some("subject\0".into());
        let queued = NewQueued {
            tool: Some(ToolReply {
                call_id: "c\0".into(),
                name: "n\0".into(),
                status: ToolStatus::Success,
            }),
            ..human("queued\0")
        };
        let commit = Commit {
            messages: vec![m, tool],
            records: vec![error, emitted],
            values: vec![
                ("key".into(), Some(json!({"v": "x\0"}))),
                ("named\0".into(), Some(json!(1))),
            ],
            enqueue: vec![queued],
            timers: vec![timer.clone()],
            ..Commit::default()
        };
        store
            .commit(&t, owner, commit)
            .await
            .unwrap_or_else(|e| panic!("{name}: a commit with NULs: {e}"));

        let messages = store.messages(t.id).await.expect("messages");
        assert_eq!(messages.len(), 2, "{name}");
        let m = &messages[0];
        assert_eq!(
            m.content.as_deref(),
            Some(format!("a{R}b").as_str()),
            "{name}"
        );
        assert_eq!(m.thinking.as_deref(), Some(format!("think{R}").as_str()));
        assert_eq!(m.model.as_deref(), Some(format!("model{R}").as_str()));
        assert_eq!(m.tool_calls[0].id, format!("call{R}"), "{name}");
        assert_eq!(m.tool_calls[0].name, format!("tool{R}"), "{name}");
        assert_eq!(
            m.tool_calls[0].arguments,
            json!({format!("k{R}"): [format!("v{R}"), {"literal": "\\u0000"}]}),
            "{name}: a written-out escape is text"
        );
        assert_eq!(
            m.provider_data,
            Some(json!({"signature": format!("s{R}")})),
            "{name}"
        );
        let tool = &messages[1];
        assert_eq!(tool.content.as_deref(), Some(format!("result{R}").as_str()));
        assert_eq!(
            tool.tool_call_id.as_deref(),
            Some(format!("call{R}").as_str())
        );
        assert_eq!(tool.tool_name.as_deref(), Some(format!("tool{R}").as_str()));

        let records = store.records(t.id).await.expect("records");
        let bodies: Vec<&RecordBody> = records.iter().map(|r| &r.body).collect();
        assert!(
            bodies.contains(&&RecordBody::StepError {
                error: format!("provider said {R}"),
            }),
            "{name}: {bodies:?}"
        );
        assert!(
            bodies.contains(&&RecordBody::Emitted {
                event: format!("e{R}"),
                data: json!({format!("x{R}"): format!("y{R}")}),
            }),
            "{name}: {bodies:?}"
        );
        assert_eq!(
            store.value(t.id, "key").await.expect("value"),
            Some(json!({"v": format!("x{R}")})),
            "{name}"
        );
        assert_eq!(
            store
                .value(t.id, &format!("named{R}"))
                .await
                .expect("value"),
            Some(json!(1)),
            "{name}: a key too"
        );
        let queue = store.queue(t.id).await.expect("queue");
        assert_eq!(queue.len(), 1, "{name}");
        assert_eq!(queue[0].content, format!("queued{R}"), "{name}");
        let reply = queue[0].tool.as_ref().expect("a tool reply");
        assert_eq!(
            (reply.call_id.as_str(), reply.name.as_str()),
            (format!("c{R}").as_str(), format!("n{R}").as_str())
        );
        let timers = store
            .timers(&TimerQuery {
                thread: Some(t.id),
                status: None,
                kind: None,
                name: None,
                after: None,
                newest_first: false,
                limit: 10,
            })
            .await
            .expect("timers");
        assert_eq!(timers.len(), 1, "{name}");
        assert_eq!(timers[0].name, format!("effect{R}"), "{name}");
        assert_eq!(timers[0].args, json!({"arg": format!("a{R}")}), "{name}");
        assert_eq!(timers[0].subject, Some(format!("subject{R}")), "{name}");
        let back = store
            .thread_by_id(t.id)
            .await
            .expect("thread")
            .expect("there");
        assert_eq!(
            back.status_text.as_deref(),
            Some(format!("status{R}").as_str())
        );
        assert_eq!(back.result.as_deref(), Some(format!("result{R}").as_str()));
    })
    .await;
}

/// A message queued outside a commit (a subagent's first message, code's `notifyParent`, a
/// library caller's delivery) is stored with its NULs replaced too.
#[tokio::test]
async fn a_queued_message_with_nul_is_stored_with_replacements() {
    each(async |store, name| {
        let t = thread(&store, "q").await;
        let message = NewQueued {
            tool: Some(ToolReply {
                call_id: "c\0".into(),
                name: "n\0".into(),
                status: ToolStatus::Success,
            }),
            ..human("from a model\0")
        };
        store
            .enqueue(t.id, message, None, 100)
            .await
            .unwrap_or_else(|e| panic!("{name}: a message with NULs: {e}"));
        let queue = store.queue(t.id).await.expect("queue");
        assert_eq!(queue.len(), 1, "{name}");
        assert_eq!(queue[0].content, format!("from a model{R}"), "{name}");
        let reply = queue[0].tool.as_ref().expect("a tool reply");
        assert_eq!(reply.call_id, format!("c{R}"), "{name}");
        assert_eq!(reply.name, format!("n{R}"), "{name}");
    })
    .await;
}
