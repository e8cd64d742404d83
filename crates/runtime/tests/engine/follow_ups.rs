//! Follow-ups to a live child: by `subagent_message` and its legacy name, queued behind a slow
//! session, each session the child ends reporting to its parent in order — also for a blocking
//! child a person writes to meanwhile. On every backend.

use crate::support;

use support::{send, texts};

use std::sync::Arc;

use duet_runtime::{CancellationToken, Delivered, EventSink, Role};

fn follow_up_project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("follow-ups");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/lead.yaml",
        "name: lead\nsideA:\n  prompt: lead\n  stopOnResponse: true\n  subagents: [{ agent: scribe, blocking: true }]\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/lead.yaml",
        "name: lead\ntoolDescription: d\nmodel: lead_model\nincludeChat: true\nprompt: p\n",
    );
    // Each follow-up comes 150 ms after the one before: the child has taken the earlier one in
    // (and is answering it, slowly) when the next arrives.
    let call = |tool: &str, reference: &str, text: &str| {
        format!(
            "  - {{ delayMs: 150, tool_calls: [{{ name: {tool}, arguments: {{ referenceId: {reference}, message: {text}, attachments: [] }} }}] }}\n"
        )
    };
    let mut script = String::from(
        "name: lead_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: subagent_create, arguments: { agent: scribe, name: s, message: Note A., attachments: [] } }]\n",
    );
    script.push_str(&call("subagent_message", "f/scribe-1", "Note B."));
    script.push_str(&call("send_to_agent", "f/scribe-1", "Note C."));
    script.push_str(&call("subagent_message", "f/nobody-9", "Hello?"));
    script.push_str(&"  - text: ok\n".repeat(8));
    write("agents/models/lead_model.yaml", &script);
    // A lead that only asks once, blocking, then answers whatever comes back.
    write(
        "agents/agents/asker.yaml",
        "name: asker\nsideA:\n  prompt: asker\n  stopOnResponse: true\n  subagents: [{ agent: scribe, blocking: true }]\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/asker.yaml",
        "name: asker\ntoolDescription: d\nmodel: asker_model\nincludeChat: true\nprompt: p\n",
    );
    write(
        "agents/models/asker_model.yaml",
        &format!(
            "name: asker_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{{ name: subagent_create, arguments: {{ agent: scribe, name: s, message: Note A., attachments: [] }} }}]\n{}",
            "  - text: ok\n".repeat(4)
        ),
    );
    write(
        "agents/agents/scribe.yaml",
        "name: scribe\nexposeAsTool: true\ntoolDescription: Takes notes.\nhooks: [taken_in]\nsideA:\n  prompt: scribe\n  sessionStop: { name: finish, messageProperty: summary }\nsideB: { human: true }\n",
    );
    // Says when the scribe has taken a message in, so a test can wait on it.
    write(
        "agents/hooks/taken_in.yaml",
        "hook: after_create_message\nid: taken_in\n",
    );
    write(
        "agents/prompts/scribe.yaml",
        "name: scribe\ntoolDescription: d\nmodel: scribe_model\nprompt: p\ntools: [finish]\n",
    );
    write(
        "agents/tools/finish.yaml",
        "description: Done.\nargs: { type: object, properties: { summary: { type: string } }, required: [summary] }\nresult: ok\n",
    );
    let mut script = String::from("name: scribe_model\nprovider: scripted\nmodel: demo\nscript:\n");
    // Slow answers, so that a message sent meanwhile waits for a session of its own.
    for n in 1..=3 {
        script.push_str(&format!(
            "  - {{ delayMs: 400, tool_calls: [{{ name: finish, arguments: {{ summary: noted {n} }} }}] }}\n"
        ));
    }
    write("agents/models/scribe_model.yaml", &script);
    dir.project()
}

/// Signals each message the scribe commits (its `taken_in` hook).
#[derive(Clone, Default)]
struct TakenIn(Arc<tokio::sync::Notify>);

#[async_trait::async_trait]
impl duet_runtime::hooks::Hook for TakenIn {
    async fn after_create_message(
        &self,
        _ctx: &duet_runtime::hooks::HookContext<'_>,
        _message: &duet_runtime::Message,
    ) -> Result<(), duet_runtime::hooks::HookError> {
        self.0.notify_one();
        Ok(())
    }
}

/// The follow-up project's runtime, with the scribe's `taken_in` hook.
fn follow_up_runtime(
    project: &Arc<duet_spec::Project>,
    store: Arc<dyn duet_runtime::Store>,
    taken_in: &TakenIn,
) -> duet_runtime::Runtime {
    support::runtime(project.clone(), store)
        .hooks(duet_handlers::hooks().with("taken_in", taken_in.clone()))
        .build()
}

/// Follow-ups reach a live child by `subagent_message` and by its legacy name `send_to_agent`;
/// an unknown reference is an error; and every session the child ends reports to the parent —
/// also when follow-ups queued behind each other run as several sessions in one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_reach_the_child_and_every_session_reports_back() {
    let project = follow_up_project();
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = follow_up_runtime(&project, store.clone(), &TakenIn::default());
        send(&rt, "f", Some("lead"), "Take notes.").await;
        rt.quiesce().await;

        let lead = store.thread("f").await.expect("read").expect("lead");
        let messages = store.messages(lead.id).await.expect("messages");
        let results: Vec<(&str, &str)> = messages
            .iter()
            .filter_map(|m| Some((m.tool_name.as_deref()?, m.content.as_deref()?)))
            .collect();
        assert_eq!(
            results,
            [
                ("subagent_create", "noted 1\n\nReference: f/scribe-1"),
                ("subagent_message", "Message sent to subagent f/scribe-1."),
                ("send_to_agent", "Message sent to subagent f/scribe-1."),
                (
                    "subagent_message",
                    "Subagent reference \"f/nobody-9\" is not active."
                ),
            ],
            "{}",
            backend.name()
        );
        let child = store
            .thread("f/scribe-1")
            .await
            .expect("read")
            .expect("child");
        let inbound: Vec<String> = texts(&store, "f/scribe-1")
            .await
            .into_iter()
            .filter(|(role, _, _)| *role == Role::User)
            .map(|(_, _, text)| text)
            .collect();
        assert_eq!(inbound, ["Note A.", "Note B.", "Note C."]);
        // The first session's result was the blocking tool result; each later one is a message.
        let ended = store
            .records(child.id)
            .await
            .expect("records")
            .iter()
            .filter(|r| r.kind() == "session_ended")
            .count();
        assert_eq!(
            ended, 3,
            "C arrived while B's slow session ran: a session each"
        );
        assert_eq!(
            reports(&messages, "f/scribe-1"),
            ["noted 1", "noted 2", "noted 3"],
            "{}: the first as the tool result, each later session as a message, in order",
            backend.name()
        );
    }
}

/// The results a parent's history holds from child `key`, in order.
fn reports(messages: &[duet_runtime::Message], key: &str) -> Vec<String> {
    let head = format!("Subagent (reference: {key}) has returned the following result:\n\n");
    messages
        .iter()
        .filter_map(|m| {
            let c = m.content.as_deref()?;
            if let Some(result) = c.strip_prefix(&head) {
                return m.silent.then(|| result.to_owned());
            }
            // A blocking call's tool result.
            (m.tool_name.as_deref() == Some("subagent_create")).then(|| {
                c.split("\n\nReference: ")
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
        })
        .collect()
}

/// A person writes to a child while its parent waits for it (blocking): the parent's tool result
/// is the session it asked for, and the person's session reports after it, as a message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_childs_later_session_reports_after_the_tool_result() {
    let project = follow_up_project();
    for backend in support::backends().await {
        let store = backend.open().await;
        let taken_in = TakenIn::default();
        let rt = follow_up_runtime(&project, store.clone(), &taken_in);
        let parent = {
            let rt = rt.clone();
            tokio::spawn(async move { send(&rt, "g", Some("asker"), "Take notes.").await })
        };
        // The child's first answer takes 400 ms: once it has taken its first message in, write
        // to it.
        tokio::time::timeout(std::time::Duration::from_secs(20), taken_in.0.notified())
            .await
            .expect("the child never started");
        let queued = rt
            .send(
                "g/scribe-1",
                None,
                "Note B.",
                &EventSink::discard(),
                &CancellationToken::new(),
            )
            .await;
        assert!(matches!(queued, Ok(Delivered::Queued { .. })), "{queued:?}");
        parent.await.expect("parent run");
        rt.quiesce().await;

        let asker = store.thread("g").await.expect("read").expect("parent");
        let messages = store.messages(asker.id).await.expect("messages");
        assert_eq!(
            reports(&messages, "g/scribe-1"),
            ["noted 1", "noted 2"],
            "{}: {messages:#?}",
            backend.name()
        );
        let child = store
            .thread("g/scribe-1")
            .await
            .expect("read")
            .expect("child");
        assert_eq!(child.session, 2);
        let entry = store.child(child.id).await.expect("read").expect("entry");
        assert_eq!(entry.status.as_str(), "idle");
    }
}
