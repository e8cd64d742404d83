//! Subagents whose timing is not a script's to fix: non-blocking children (their results reach
//! the parent whenever they finish), explicit parent communication, and `maxInstances`. The
//! assertions hold whatever the interleaving. On every backend.

use crate::support;

use support::{send, texts};

use std::sync::Arc;

use duet_runtime::{CancellationToken, Delivered, EventSink, Role};

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
        assert_eq!(children[0].status.as_str(), "idle", "{}", backend.name());
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
        // The gate waits for a person's decision on its proposal.
        assert_eq!(
            child.status,
            duet_runtime::ThreadStatus::Waiting,
            "{}",
            backend.name()
        );
        let (records, messages) = (
            store.records(child.id).await.expect("records"),
            store.messages(child.id).await.expect("messages"),
        );
        let pending = duet_runtime::approval::pending(&records, &messages);
        assert_eq!(pending.len(), 1, "{}: {pending:?}", backend.name());
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
        // Nor is the gate's pending call decided any more.
        let decided = rt
            .decide(
                "o/approval-1",
                pending[0].seq,
                duet_runtime::DecisionInput {
                    decision: duet_spec::Decision::Approve,
                    args: None,
                    reason: None,
                    text: None,
                    remember: None,
                },
                None,
            )
            .await;
        assert!(
            matches!(decided, Err(duet_runtime::RunError::Terminated(_))),
            "{}: {decided:?}",
            backend.name()
        );
        let parent = store.thread("o").await.expect("read").expect("thread");
        let entries = store.children(parent.id).await.expect("registry");
        assert_eq!(
            entries[0].status.as_str(),
            "terminated",
            "{}",
            backend.name()
        );
    }
}

/// A handler that starts children by invoking their relationship by name: each inbound message
/// is `{"rel": NAME, "args": {...}}`, and the tool result is its reply.
struct Intake;

#[async_trait::async_trait]
impl duet_runtime::Handler for Intake {
    async fn handle(
        &self,
        state: &mut duet_runtime::ThreadState<'_>,
        message: &duet_runtime::Message,
    ) -> Result<(), duet_runtime::HandlerError> {
        let request: serde_json::Value =
            serde_json::from_str(message.content.as_deref().unwrap_or_default())
                .map_err(|e| duet_runtime::HandlerError::new(e.to_string()))?;
        let rel = request["rel"].as_str().unwrap_or_default().to_owned();
        let result = state.invoke_tool(&rel, request["args"].clone()).await;
        let status = if result.is_ok() { "ok" } else { "error" };
        state.reply(format!("{status}: {}", result.content));
        Ok(())
    }
}

/// Records the system prompts its thread's model is given.
#[derive(Clone, Default)]
struct Prompts(Arc<std::sync::Mutex<Vec<String>>>);

#[async_trait::async_trait]
impl duet_runtime::hooks::Hook for Prompts {
    async fn after_system_message(
        &self,
        _ctx: &duet_runtime::hooks::HookContext<'_>,
        text: String,
    ) -> Result<String, duet_runtime::hooks::HookError> {
        if let Ok(mut seen) = self.0.lock() {
            seen.push(text.clone());
        }
        Ok(text)
    }
}

fn intake_project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("intake");
    let write = |path: &str, text: &str| dir.write(path, text);
    write("agents/handlers/intake.yaml", "builtin: intake\n");
    write(
        "agents/agents/desk.yaml",
        "name: desk\nenv: { TEAM: platform }\nsideA:\n  handler: intake\n  subagents:\n\
         \x20   - { agent: ticketer, as: ticket, blocking: true, initUserMessageProperty: summary, initAgentNameProperty: who, scopedEnv: [TEAM] }\n\
         \x20   - { agent: ticketer, as: elsewhere, scopedEnv: [DUET_TEST_NEVER_SET] }\n\
         \x20   - { agent: ticketer, as: gated, optional: DUET_TEST_GATE_NEVER_SET }\n\
         sideB: { human: true }\n",
    );
    write(
        "agents/hooks/prompts.yaml",
        "hook: after_system_message\nid: prompts\n",
    );
    write(
        "agents/agents/ticketer.yaml",
        "name: ticketer\nexposeAsTool: true\ntoolDescription: Files a ticket.\nhooks: [prompts]\nsideA:\n  prompt: tp\n  sessionStop: { name: finish, messageProperty: summary }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/tp.yaml",
        "name: tp\ntoolDescription: d\nmodel: tm\ntools: [finish]\n\
         requiredSchema: { type: object, properties: { priority: { type: integer } }, required: [priority] }\n\
         prompt:\n  - { type: text, content: 'File a P{{priority}} ticket for' }\n  - { type: env, property: TEAM }\n",
    );
    write(
        "agents/tools/finish.yaml",
        "description: Done.\nargs: { type: object, properties: { summary: { type: string } }, required: [summary] }\nresult: ok\n",
    );
    write(
        "agents/models/tm.yaml",
        "name: tm\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: finish, arguments: { summary: filed } }]\n",
    );
    dir.project()
}

#[tokio::test]
async fn code_invokes_a_relationship_by_name_through_its_init_mappings() {
    let project = intake_project();
    for backend in support::backends().await {
        let prompts = Prompts::default();
        let rt = support::runtime(project.clone(), backend.open().await)
            .handler("intake", Intake)
            .hooks(duet_runtime::hooks::Hooks::new().with("prompts", prompts.clone()))
            .build();
        let requests = [
            r#"{"rel": "ticket", "args": {"summary": "The printer is on fire.", "priority": 2, "who": "  ana \n b  "}}"#,
            r#"{"rel": "ticket", "args": {"summary": "Again.", "priority": "high"}}"#,
            r#"{"rel": "elsewhere", "args": {"priority": 1}}"#,
            r#"{"rel": "gated", "args": {"priority": 1}}"#,
        ];
        for request in requests {
            send(&rt, "d", Some("desk"), request).await;
        }
        rt.quiesce().await;
        let store = rt.store();
        let replies: Vec<String> = texts(store, "d")
            .await
            .into_iter()
            .filter(|(role, _, _)| *role == Role::Assistant)
            .map(|(_, _, text)| text)
            .collect();
        assert_eq!(
            replies[0],
            "ok: filed\n\nReference: d/ticket-1",
            "{}: a blocking relationship's result is the tool result",
            backend.name()
        );
        assert!(
            replies[1].starts_with("error: Invalid `arguments` for `ticket`"),
            "what is left after the mapping is checked against the child's schema: {replies:?}"
        );
        assert!(
            replies[2].starts_with(
                "error: Subagent \"elsewhere\" needs env values this thread does not have: DUET_TEST_NEVER_SET."
            ),
            "{replies:?}"
        );

        assert_eq!(
            replies[3],
            "error: Subagent \"gated\" is not enabled: its `optional` flag `DUET_TEST_GATE_NEVER_SET` is not true, 1 or yes.",
            "a relationship whose flag is off is refused to code too"
        );

        let desk = store.thread("d").await.expect("read").expect("thread");
        let children = store.children(desk.id).await.expect("children");
        assert_eq!(children.len(), 1, "refused spawns create nothing");
        let child = &children[0];
        assert_eq!(
            child.name.as_deref(),
            Some("ana b"),
            "normalised whitespace"
        );
        assert_eq!(child.arguments, serde_json::json!({"priority": 2}));
        assert_eq!(child.env.get("TEAM").map(String::as_str), Some("platform"));
        // The child's first messages: its arguments (silent), then the mapped message.
        assert_eq!(
            texts(store, "d/ticket-1").await[..2],
            [
                (
                    Role::System,
                    true,
                    "Initial arguments:\n{\n  \"priority\": 2\n}".to_owned()
                ),
                (Role::User, false, "The printer is on fire.".to_owned()),
            ]
        );
        // Its prompt is filled from its arguments and its scoped env.
        assert_eq!(
            prompts.0.lock().map(|p| p.clone()).unwrap_or_default(),
            vec!["File a P2 ticket for\nplatform".to_owned()]
        );
    }
}

/// A run that died after its blocking `immediate` child finished, before its activation was
/// committed: the next run finds the child (it does not start another) and writes its result
/// into the history before the first model call.
#[tokio::test]
async fn a_blocking_immediate_childs_result_survives_the_parents_death() {
    let project = support::project(
        &support::repo().join("tests/scenarios/immediate_children_start_with_their_side"),
    );
    for backend in support::backends().await {
        let store = backend.open().await;
        let rt = support::runtime(project.clone(), store.clone()).build();
        // What the dead run left: the parent, its registry entry, and the child's finished run.
        let parent = store
            .open_thread(
                "p",
                duet_runtime::NewThread {
                    id: uuid::Uuid::now_v7(),
                    agent: "billing",
                    parent: None,
                    principal: None,
                    source: None,
                    now: 1,
                },
            )
            .await
            .expect("parent");
        let child = store
            .open_thread(
                "p/ledger-1",
                duet_runtime::NewThread {
                    id: uuid::Uuid::now_v7(),
                    agent: "ledger",
                    parent: Some(parent.id),
                    principal: None,
                    source: None,
                    now: 1,
                },
            )
            .await
            .expect("child");
        store
            .put_child(&duet_runtime::Child {
                child: child.id,
                parent: parent.id,
                relationship: "ledger".into(),
                owner: duet_runtime::SideId::A,
                agent: "ledger".into(),
                name: Some("ledger lookup".into()),
                blocking: true,
                explicit: false,
                status: duet_runtime::ChildStatus::Running,
                status_text: None,
                awaiting: None,
                created_at: 1,
                arguments: serde_json::json!({}),
                env: Default::default(),
            })
            .await
            .expect("registry");
        let origin = duet_runtime::Origin {
            parent: Some(parent.id),
            inline: true,
            ..Default::default()
        };
        let done = rt
            .deliver(
                "p/ledger-1",
                Some("ledger"),
                "You were started automatically.",
                origin,
                duet_runtime::WhenBusy::Queue,
                &EventSink::discard(),
                &CancellationToken::new(),
            )
            .await;
        assert!(matches!(done, Ok(Delivered::Settled(_))), "{done:?}");

        send(&rt, "p", Some("billing"), "I was charged twice.").await;
        let texts = texts(&store, "p").await;
        assert_eq!(
            texts[..3],
            [
                (Role::User, false, "I was charged twice.".to_owned()),
                (
                    Role::User,
                    true,
                    "Subagent (reference: p/ledger-1) has returned the following result:\n\nTwo charges of 40.00 on A-123.".to_owned()
                ),
                (
                    Role::Assistant,
                    false,
                    "Billing here. I see two charges; which order was it?".to_owned()
                ),
            ],
            "{}",
            backend.name()
        );
        assert_eq!(
            store.children(parent.id).await.expect("registry").len(),
            1,
            "no second instance"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_background_run_starts_only_when_quiesce_waits_for_it() {
    let project = project();
    for backend in support::backends().await {
        let rt = support::runtime(project.clone(), backend.open().await)
            .hold_background(true)
            .build();
        send(&rt, "h", Some("boss"), "Summarize the report, please.").await;
        let store = rt.store();
        // The parent's run is over; its child's message waits, unread, for a run not started.
        let child = store
            .thread("h/summary-1")
            .await
            .expect("read")
            .expect("child");
        assert!(
            texts(store, "h/summary-1").await.is_empty(),
            "{}: the child ran beside the send",
            backend.name()
        );
        assert_eq!(store.queue(child.id).await.expect("queue").len(), 1);
        rt.quiesce().await;
        let child = store
            .thread("h/summary-1")
            .await
            .expect("read")
            .expect("child");
        assert_eq!(
            child.result.as_deref(),
            Some("short and sweet"),
            "{}",
            backend.name()
        );
        // The parent its result woke ran too, inside the same wait.
        let parent = texts(store, "h").await;
        assert!(
            parent.iter().any(|(_, silent, _)| *silent),
            "{}: {parent:?}",
            backend.name()
        );
    }
}
