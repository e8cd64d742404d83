//! Attachments from a parent to its children (#34, spec §5.4): `subagent_create` and
//! `subagent_message` copy the parent's files into the child under `/attachments/<name>`, the
//! child gets a silent note for each and its message carries them; a missing path and a path
//! escaping the thread are tool errors naming the path, and start no child. On every backend
//! whose file tables are built.

use crate::files::file_backends;
use crate::support;

use std::sync::Arc;

use async_trait::async_trait;
use duet_runtime::{Handler, HandlerError, Message, Role, ThreadState};

/// A child that reads every file under `/attachments` and says what it found.
struct Reader;

#[async_trait]
impl Handler for Reader {
    async fn handle(&self, state: &mut ThreadState<'_>, m: &Message) -> Result<(), HandlerError> {
        // The silent notes reach a handler like any inbound message; it answers the visible one.
        if m.silent {
            return Ok(());
        }
        let mut seen = Vec::new();
        for r in state.readdir_file("/attachments").await? {
            let data = state.read_file(&r.path).await?.unwrap_or_default();
            seen.push(format!("{}={}", r.path, String::from_utf8_lossy(&data)));
        }
        let carried: Vec<&str> = m.attachments.iter().map(|a| a.path.as_str()).collect();
        state.reply(format!(
            "saw {} carried {}",
            seen.join(","),
            carried.join(",")
        ));
        Ok(())
    }
}

fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("attachments");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/reader.yaml",
        "name: reader\nexposeAsTool: true\ntoolDescription: Reads.\nsideA: { handler: reader }\nsideB: { human: true }\n",
    );
    write(
        "agents/handlers/reader.yaml",
        "description: Reads its attachments.\n",
    );
    write(
        "agents/agents/boss.yaml",
        "name: boss\nsideA:\n  prompt: boss\n  subagents: [{ agent: reader, as: reader }]\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/boss.yaml",
        "name: boss\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\n",
    );
    let create = |atts: &str| {
        format!(
            "  - tool_calls: [{{ name: subagent_create, arguments: {{ agent: reader, name: r, message: Read them., attachments: {atts} }} }}]\n"
        )
    };
    write(
        "agents/models/m.yaml",
        &format!(
            "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: ready\n{}{}{}  - tool_calls: [{{ name: subagent_message, arguments: {{ referenceId: p/reader-1, message: One more., attachments: [/in/c.txt] }} }}]\n  - text: done\n",
            create("[/in/a.txt, in/b.txt]"),
            create("[/in/missing.txt]"),
            create("['/in/../../../etc/passwd']"),
        ),
    );
    dir.project()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_sends_files_to_its_child_and_bad_paths_are_tool_errors() {
    let project = project();
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = support::runtime(project.clone(), store.clone())
            .handler("reader", Reader)
            .build();
        support::send(&rt, "p", Some("boss"), "hello").await;
        let parent = store.thread("p").await.expect("read").expect("thread");
        for (path, data) in [
            ("/in/a.txt", "AAA"),
            ("/in/b.txt", "BBB"),
            ("/in/c.txt", "CCC"),
        ] {
            rt.files()
                .write(parent.id, path, data.as_bytes(), None)
                .await
                .expect("write");
        }
        support::send(&rt, "p", Some("boss"), "go").await;
        rt.quiesce().await;
        let name = backend.name();

        // The tool results: one child started; a missing path and an escaping one refused,
        // each naming its path.
        let texts = support::texts(&store, "p").await;
        let tools: Vec<&str> = texts
            .iter()
            .filter(|(role, _, _)| *role == Role::Tool)
            .map(|(_, _, t)| t.as_str())
            .collect();
        assert_eq!(tools.len(), 4, "{name}: {texts:?}");
        assert!(
            tools[1].contains("/in/missing.txt") && tools[1].contains("no such file"),
            "{name}: {}",
            tools[1]
        );
        assert!(
            tools[2].contains("/in/../../../etc/passwd") && tools[2].contains("invalid path"),
            "{name}: {}",
            tools[2]
        );
        let children = store.children(parent.id).await.expect("children");
        assert_eq!(children.len(), 1, "{name}: refused calls start no child");

        // The child: its files, the silent notes, and what its messages carried.
        let child = store
            .thread("p/reader-1")
            .await
            .expect("read")
            .expect("child");
        let files = rt.files();
        let a = files.file(child.id, "/attachments/a.txt").await.expect("a");
        assert_eq!(files.content(&a).await.expect("a"), b"AAA", "{name}");
        assert_eq!(
            a.chunks,
            files
                .file(parent.id, "/in/a.txt")
                .await
                .expect("src")
                .chunks
        );
        let child_texts = support::texts(&store, "p/reader-1").await;
        let silent: Vec<&str> = child_texts
            .iter()
            .filter(|(_, s, _)| *s)
            .map(|(_, _, t)| t.as_str())
            .collect();
        assert_eq!(
            silent,
            [
                "Initial asset attachment path: /attachments/a.txt",
                "Initial asset attachment path: /attachments/b.txt",
                "Initial asset attachment path: /attachments/c.txt",
            ],
            "{name}: {child_texts:?}"
        );
        // What each message carried; what the child saw when it ran (the second message's file
        // may already be there when the background child first runs: the parent goes on).
        let replies: Vec<&str> = child_texts
            .iter()
            .filter(|(role, s, _)| *role == Role::Assistant && !*s)
            .map(|(_, _, t)| t.as_str())
            .collect();
        let carried: Vec<&str> = replies
            .iter()
            .filter_map(|r| r.split_once(" carried ").map(|(_, c)| c))
            .collect();
        assert_eq!(
            carried,
            [
                "/attachments/a.txt,/attachments/b.txt",
                "/attachments/c.txt"
            ],
            "{name}: {child_texts:?}"
        );
        assert!(
            replies[0].starts_with("saw /attachments/a.txt=AAA,/attachments/b.txt=BBB"),
            "{name}: {child_texts:?}"
        );
        assert_eq!(
            replies[1],
            "saw /attachments/a.txt=AAA,/attachments/b.txt=BBB,/attachments/c.txt=CCC carried /attachments/c.txt",
            "{name}: {child_texts:?}"
        );
    }
}

/// A handler that writes a file and sends it to a new child in the same delivery: the copy
/// reads the write before it is committed.
struct Sender;

#[async_trait]
impl Handler for Sender {
    async fn handle(&self, state: &mut ThreadState<'_>, _: &Message) -> Result<(), HandlerError> {
        state.write_file("/in/fresh.txt", b"FRESH", None).await?;
        let args = serde_json::json!({
            "agent": "reader", "name": "r", "message": "Read it.",
            "attachments": ["/in/fresh.txt"],
        });
        let result = state.invoke_tool("subagent_create", args).await;
        state.reply(result.content);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_sends_a_file_it_has_just_written() {
    let dir = support::Scratch::new("attachments-pending");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/reader.yaml",
        "name: reader\nexposeAsTool: true\ntoolDescription: Reads.\nsideA: { handler: reader }\nsideB: { human: true }\n",
    );
    write("agents/handlers/reader.yaml", "description: Reads.\n");
    write(
        "agents/agents/sender.yaml",
        "name: sender\nsideA:\n  handler: sender\n  subagents: [{ agent: reader }]\nsideB: { human: true }\n",
    );
    write("agents/handlers/sender.yaml", "description: Sends.\n");
    let project = dir.project();
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = support::runtime(project.clone(), store.clone())
            .handler("reader", Reader)
            .handler("sender", Sender)
            .build();
        support::send(&rt, "s", Some("sender"), "go").await;
        rt.quiesce().await;
        let name = backend.name();
        let texts = support::texts(&store, "s").await;
        assert!(
            texts
                .iter()
                .any(|(_, _, t)| t.contains("initiated successfully")),
            "{name}: {texts:?}"
        );
        let child = store
            .thread("s/reader-1")
            .await
            .expect("read")
            .expect("child");
        let files = rt.files();
        let copy = files
            .file(child.id, "/attachments/fresh.txt")
            .await
            .expect("the copy");
        assert_eq!(
            files.content(&copy).await.expect("content"),
            b"FRESH",
            "{name}"
        );
        let parent = store.thread("s").await.expect("read").expect("parent");
        assert!(
            files.file(parent.id, "/in/fresh.txt").await.is_ok(),
            "{name}"
        );
        let replies = support::texts(&store, "s/reader-1").await;
        assert!(
            replies
                .iter()
                .any(|(_, _, t)| t
                    == "saw /attachments/fresh.txt=FRESH carried /attachments/fresh.txt"),
            "{name}: {replies:?}"
        );
    }
}
