//! Subagents whose timing is not a script's to fix: non-blocking children (their results reach
//! the parent whenever they finish), explicit parent communication, and `maxInstances`. The
//! assertions hold whatever the interleaving. On every backend.

mod support;

use std::sync::Arc;

use duet_runtime::{CancellationToken, Delivered, EventSink, Role, Runtime, Store};

fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("subagents");
    let write = |path: &str, text: &str| dir.write(path, text);
    // A child that ends its session at once with a summary.
    write(
        "agents/agents/summarizer.yaml",
        "name: summarizer\nexposeAsTool: true\ntoolDescription: Summarizes.\nsideA:\n  prompt: sum\n  sessionStop: { name: finish, messageProperty: summary }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/sum.yaml",
        "name: sum\ntoolDescription: d\nmodel: sum_model\nprompt: p\ntools: [finish]\n",
    );
    write(
        "agents/tools/finish.yaml",
        "description: Done.\nargs: { type: object, properties: { summary: { type: string } }, required: [summary] }\nresult: ok\n",
    );
    write(
        "agents/models/sum_model.yaml",
        "name: sum_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: finish, arguments: { summary: short and sweet } }]\n",
    );
    // Parents: one implicit and one explicit, each allowing a single live child.
    for (name, communication) in [("boss", "implicit"), ("quiet_boss", "explicit")] {
        write(
            &format!("agents/agents/{name}.yaml"),
            &format!(
                "name: {name}\nsideA:\n  prompt: {name}\n  subagents:\n    - {{ agent: summarizer, as: summary, maxInstances: 1, parentCommunication: {communication} }}\nsideB: {{ human: true }}\n"
            ),
        );
        write(
            &format!("agents/prompts/{name}.yaml"),
            &format!(
                "name: {name}\ntoolDescription: d\nmodel: {name}_model\nincludeChat: true\nprompt: p\n"
            ),
        );
        let create = "  - tool_calls: [{ name: subagent_create, arguments: { agent: summary, name: one, message: Summarize it., attachments: [] } }]\n";
        // The implicit parent gets a turn for the child's result; the explicit one does not.
        let middle = if communication == "implicit" {
            "  - text: noted\n"
        } else {
            ""
        };
        write(
            &format!("agents/models/{name}_model.yaml"),
            &format!(
                "name: {name}_model\nprovider: scripted\nmodel: demo\nscript:\n{create}  - text: started\n{middle}{create}  - text: refused\n"
            ),
        );
    }
    dir.project()
}

async fn send(rt: &Runtime, key: &str, agent: Option<&str>, text: &str) {
    let done = rt
        .send(
            key,
            agent,
            text,
            &EventSink::discard(),
            &CancellationToken::new(),
        )
        .await;
    assert!(
        matches!(done, Ok(Delivered::Settled(_) | Delivered::Queued { .. })),
        "{done:?}"
    );
}

async fn texts(store: &Arc<dyn Store>, key: &str) -> Vec<(Role, bool, String)> {
    let t = store.thread(key).await.expect("read").expect("thread");
    store
        .messages(t.id)
        .await
        .expect("messages")
        .into_iter()
        .filter_map(|m| m.content.map(|c| (m.role, m.silent, c)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_blocking_childs_result_reaches_its_parent_which_runs_on() {
    let project = project();
    for backend in support::backends().await {
        let rt = support::runtime(project.clone(), backend.open().await).build();
        send(&rt, "p", Some("boss"), "Summarize the report, please.").await;
        rt.quiesce().await;
        let store = rt.store();
        let parent = texts(store, "p").await;
        let completion = "Subagent (reference: p/summary-1) has returned the following result:\n\nshort and sweet";
        assert!(
            parent
                .iter()
                .any(|(role, silent, c)| *role == Role::User && *silent && c == completion),
            "{}: {parent:?}",
            backend.name()
        );
        // The parent ran on after the result: its last word comes after the result.
        let at = parent
            .iter()
            .position(|(_, _, c)| c == completion)
            .expect("result");
        assert!(
            parent[at + 1..]
                .iter()
                .any(|(role, _, _)| *role == Role::Assistant),
            "{}: {parent:?}",
            backend.name()
        );
        let t = store.thread("p").await.expect("read").expect("thread");
        let children = store.children(t.id).await.expect("registry");
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].status, "idle", "{}", backend.name());
        let child = store
            .thread("p/summary-1")
            .await
            .expect("read")
            .expect("child");
        assert_eq!(child.parent, Some(t.id));
        assert_eq!(child.result.as_deref(), Some("short and sweet"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_communication_delivers_nothing_and_max_instances_holds() {
    let project = project();
    for backend in support::backends().await {
        let rt = support::runtime(project.clone(), backend.open().await).build();
        send(&rt, "q", Some("quiet_boss"), "Summarize it.").await;
        rt.quiesce().await;
        let store = rt.store();
        let parent = texts(store, "q").await;
        assert!(
            !parent.iter().any(|(_, silent, _)| *silent),
            "{}: nothing delivered: {parent:?}",
            backend.name()
        );
        let child = store
            .thread("q/summary-1")
            .await
            .expect("read")
            .expect("child");
        assert_eq!(
            child.result.as_deref(),
            Some("short and sweet"),
            "{}: the child still finished",
            backend.name()
        );
        // A second instance of a relationship capped at one is refused, naming the live one.
        send(&rt, "q", None, "Another one.").await;
        rt.quiesce().await;
        let t = store.thread("q").await.expect("read").expect("thread");
        let refused = store
            .messages(t.id)
            .await
            .expect("messages")
            .into_iter()
            .find(|m| {
                m.tool_name.as_deref() == Some("subagent_create")
                    && m.tool_status == Some(duet_runtime::ToolStatus::Error)
            })
            .and_then(|m| m.content);
        assert_eq!(
            refused.as_deref(),
            Some(
                "Subagent instance limit reached for \"summary\" (1). Use subagent_message with an existing reference instead. Active references: q/summary-1"
            ),
            "{}",
            backend.name()
        );
        assert_eq!(store.children(t.id).await.expect("registry").len(), 1);
    }
}

/// A child that reports through `notify_parent` and ends its session.
struct Reporter;

#[async_trait::async_trait]
impl duet_runtime::Handler for Reporter {
    async fn handle(
        &self,
        state: &mut duet_runtime::ThreadState<'_>,
        _: &duet_runtime::Message,
    ) -> Result<(), duet_runtime::HandlerError> {
        state
            .notify_parent("Progress: half way. No reply needed.")
            .await?;
        state.stop_session(Some("done".into()));
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_child_speaks_to_its_parent_only_through_notify_parent() {
    let dir = support::Scratch::new("notify");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/reporter.yaml",
        "name: reporter\nexposeAsTool: true\ntoolDescription: Reports.\nsideA: { handler: report }\nsideB: { human: true }\n",
    );
    write(
        "agents/handlers/report.yaml",
        "description: Reports progress to its parent.\n",
    );
    write(
        "agents/agents/watcher.yaml",
        "name: watcher\nsideA:\n  prompt: watcher\n  subagents: [{ agent: reporter, parentCommunication: explicit }]\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/watcher.yaml",
        "name: watcher\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: subagent_create, arguments: { agent: reporter, name: r, message: Go., attachments: [] } }]\n  - text: started\n  - text: heard\n",
    );
    let project = dir.project();
    for backend in support::backends().await {
        let rt = support::runtime(project.clone(), backend.open().await)
            .handler("report", Reporter)
            .build();
        send(&rt, "w", Some("watcher"), "Watch this.").await;
        rt.quiesce().await;
        let parent = texts(rt.store(), "w").await;
        let silent: Vec<&str> = parent
            .iter()
            .filter(|(_, s, _)| *s)
            .map(|(_, _, c)| c.as_str())
            .collect();
        assert_eq!(
            silent,
            ["Progress: half way. No reply needed."],
            "{}: {parent:?}",
            backend.name()
        );
        // However the runs interleaved, the parent's model spoke after the notice reached it.
        let at = parent.iter().position(|(_, s, _)| *s).expect("notice");
        assert!(
            parent[at + 1..]
                .iter()
                .any(|(role, _, _)| *role == Role::Assistant),
            "{}: {parent:?}",
            backend.name()
        );
        let child = rt
            .store()
            .thread("w/reporter-1")
            .await
            .expect("read")
            .expect("child");
        assert_eq!(child.result.as_deref(), Some("done"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_a_parent_terminates_its_children_and_refuses_them_after() {
    let project = support::project(&support::repo());
    for backend in support::backends().await {
        let rt = support::runtime(project.clone(), backend.open().await).build();
        send(&rt, "o", Some("orchestrator"), "Rotate the keys tonight.").await;
        rt.quiesce().await;
        let store = rt.store();
        let child = store
            .thread("o/approval-1")
            .await
            .expect("read")
            .expect("the gate");
        assert_eq!(
            child.status,
            duet_runtime::ThreadStatus::AwaitingHuman,
            "{}",
            backend.name()
        );
        let count = rt
            .terminate(&duet_runtime::Scope::new("o"))
            .await
            .expect("terminates");
        assert_eq!(count, 2, "{}: the parent and its child", backend.name());
        for key in ["o", "o/approval-1"] {
            let t = store.thread(key).await.expect("read").expect("thread");
            assert_eq!(
                t.status,
                duet_runtime::ThreadStatus::Terminated,
                "{}: {key}",
                backend.name()
            );
            let refused = rt
                .send(
                    key,
                    None,
                    "still there?",
                    &EventSink::discard(),
                    &CancellationToken::new(),
                )
                .await;
            assert!(
                matches!(refused, Err(duet_runtime::RunError::Terminated(_))),
                "{}: {key}: {refused:?}",
                backend.name()
            );
        }
        let parent = store.thread("o").await.expect("read").expect("thread");
        let entries = store.children(parent.id).await.expect("registry");
        assert_eq!(entries[0].status, "terminated", "{}", backend.name());
    }
}
