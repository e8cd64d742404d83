//! Files back from a child (#34, spec §4 "Session result", §5.7): a parent spawns a child with
//! two attachments (one name twice: the second is numbered), the child reads them, writes a
//! report, tries to stop naming a file it does not have (the call is an error, the session goes
//! on), then stops with the report through its binding's `attachmentsProperty`. The parent
//! gets the report under `/attachments/<relationship>-<n>/`, its tool result (blocking) or
//! report message (background) lists and carries it, and the child's stop message lists no
//! path. The same with the process killed mid-child and finished by the next runner. On every
//! backend whose file tables are built.

use crate::files::file_backends;
use crate::support;

use support::Slow;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use duet_runtime::{
    CancellationToken, ManualClock, Role, Runtime, Store, ThreadFiles, Tool, ToolContext,
    ToolResult,
};
use tokio::sync::Notify;

/// The child's `compile` tool: reads every file under its `/attachments` and writes
/// `/out/report.md` listing them (at once: the tool is Rust, outside the step's commit).
struct Compile(Arc<OnceLock<ThreadFiles>>);

#[async_trait]
impl Tool for Compile {
    async fn call(&self, ctx: ToolContext, _: serde_json::Value) -> ToolResult {
        let Some(files) = self.0.get() else {
            return ToolResult::error("no files");
        };
        let mut lines = Vec::new();
        for r in files
            .list(ctx.thread, "/attachments", None, 0)
            .await
            .unwrap_or_default()
        {
            let data = files.content(&r).await.unwrap_or_default();
            lines.push(format!("{}={}", r.path, String::from_utf8_lossy(&data)));
        }
        match files
            .write(
                ctx.thread,
                "/out/report.md",
                lines.join("\n").as_bytes(),
                None,
            )
            .await
        {
            Ok(_) => ToolResult::ok("compiled"),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }
}

/// `boss` spawns `writer` (blocking or not, as `blocking` says) with `/in/a.txt` and
/// `/in/more/a.txt`; the writer compiles, waits on `slow`, stops naming a missing file, then
/// stops with its report.
fn project(blocking: bool) -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("returned");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/boss.yaml",
        &format!(
            "name: boss\nsideA:\n  prompt: boss\n  subagents: [{{ agent: writer, blocking: {blocking} }}]\nsideB: {{ human: true }}\n"
        ),
    );
    write(
        "agents/agents/writer.yaml",
        "name: writer\nexposeAsTool: true\ntoolDescription: Writes.\nsideA:\n  prompt: writer\n  sessionStop: { name: finish, messageProperty: summary, attachmentsProperty: files }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/boss.yaml",
        "name: boss\ntoolDescription: d\nmodel: boss_model\nincludeChat: true\nprompt: p\n",
    );
    write(
        "agents/prompts/writer.yaml",
        "name: writer\ntoolDescription: d\nmodel: writer_model\nincludeChat: true\nprompt: p\ntools: [compile, slow, finish]\n",
    );
    write(
        "agents/tools/compile.yaml",
        "description: Compiles.\nbuiltin: compile\n",
    );
    write(
        "agents/tools/slow.yaml",
        "description: Takes its time.\nbuiltin: slow\n",
    );
    write(
        "agents/tools/finish.yaml",
        "description: Finishes.\nargs: { type: object, properties: { summary: { type: string }, files: { type: array, items: { type: string } } }, required: [summary] }\nresult: \"Finished: {{summary}}\"\n",
    );
    write(
        "agents/models/boss_model.yaml",
        "name: boss_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: subagent_create, arguments: { agent: writer, name: w, message: Write it up., attachments: [/in/a.txt, /in/more/a.txt] } }]\n  - text: Got it.\n  - text: Got it.\n",
    );
    write(
        "agents/models/writer_model.yaml",
        "name: writer_model\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: compile }]\n  - tool_calls: [{ name: slow }]\n  - tool_calls: [{ name: finish, arguments: { summary: nope, files: [/out/missing.md] } }]\n  - tool_calls: [{ name: finish, arguments: { summary: Report ready., files: [/out/report.md] } }]\n",
    );
    dir.project()
}

fn runtime(
    project: &Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
    now: i64,
    blocks: bool,
) -> (Runtime, Arc<Notify>) {
    let entered = Arc::new(Notify::new());
    let slow = Slow {
        first: AtomicBool::new(blocks),
        entered: entered.clone(),
    };
    let files = Arc::new(OnceLock::new());
    let rt = support::runtime(project.clone(), store)
        .clock(Arc::new(ManualClock::new(now)))
        .lease_ms(60_000)
        .tool("slow", slow)
        .tool("compile", Compile(files.clone()))
        .build();
    let _ = files.set(rt.files().clone());
    (rt, entered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_returns_its_report_to_its_parent() {
    // (blocking, the process dies mid-child)
    for (blocking, crash) in [(true, false), (false, false), (true, true)] {
        let project = project(blocking);
        for backend in file_backends().await {
            let name = format!("{} blocking={blocking} crash={crash}", backend.name());
            let store = backend.open().await;
            // The parent's files, written before it runs.
            let parent = store
                .open_thread(
                    "p",
                    duet_runtime::NewThread {
                        id: uuid::Uuid::now_v7(),
                        agent: "boss",
                        parent: None,
                        principal: None,
                        source: None,
                        now: 0,
                    },
                )
                .await
                .expect("thread");
            let (rt, entered) = runtime(&project, store.clone(), 0, crash);
            for (path, data) in [("/in/a.txt", "AAA"), ("/in/more/a.txt", "BBB")] {
                rt.files()
                    .write(parent.id, path, data.as_bytes(), None)
                    .await
                    .expect("write");
            }
            let rt = if crash {
                support::kill_mid_step(rt, "p", "boss", &entered).await;
                let (heir, _) = runtime(&project, store.clone(), 60_001, false);
                let ran = heir
                    .recover(&CancellationToken::new())
                    .await
                    .expect("recover");
                assert!(ran >= 1, "{name}");
                heir
            } else {
                support::send(&rt, "p", Some("boss"), "go").await;
                rt
            };
            rt.quiesce().await;
            let files = rt.files();

            // The child: both attachments (the second `a.txt` numbered), its report, a stop
            // that named a missing file refused, and its stop's message naming no path.
            let child = store
                .thread("p/writer-1")
                .await
                .expect("read")
                .expect("child");
            let report = files
                .file(child.id, "/out/report.md")
                .await
                .expect("report");
            assert_eq!(
                String::from_utf8_lossy(&files.content(&report).await.expect("content")),
                "/attachments/a-2.txt=BBB\n/attachments/a.txt=AAA",
                "{name}"
            );
            let child_msgs = store.messages(child.id).await.expect("messages");
            let finishes: Vec<_> = child_msgs
                .iter()
                .filter(|m| m.role == Role::Tool && m.tool_name.as_deref() == Some("finish"))
                .collect();
            assert_eq!(finishes.len(), 2, "{name}: {child_msgs:#?}");
            let refused = finishes[0].content.as_deref().unwrap_or_default();
            assert!(
                refused.contains("/out/missing.md") && refused.contains("did not end the session"),
                "{name}: {refused}"
            );
            assert_eq!(
                finishes[1].content.as_deref(),
                Some("Finished: Report ready."),
                "{name}: no path is appended to the stop message"
            );
            assert_eq!(finishes[1].attachments.len(), 1, "{name}");
            assert_eq!(finishes[1].attachments[0].path, "/out/report.md", "{name}");

            // The parent: the report under where it came from, listed and carried.
            let landed = files
                .file(parent.id, "/attachments/writer-1/report.md")
                .await
                .expect("the report in the parent");
            assert_eq!(landed.chunks, report.chunks, "{name}: a copy shares chunks");
            let parent_msgs = store.messages(parent.id).await.expect("messages");
            let carrier = parent_msgs
                .iter()
                .find(|m| {
                    m.content
                        .as_deref()
                        .is_some_and(|c| c.contains("Report ready."))
                })
                .unwrap_or_else(|| panic!("{name}: {parent_msgs:#?}"));
            let text = carrier.content.as_deref().unwrap_or_default();
            assert!(
                text.contains("\n\nAttachments:\n- /attachments/writer-1/report.md"),
                "{name}: {text}"
            );
            assert!(
                !text.contains("/out/report.md"),
                "{name}: no child path leaks: {text}"
            );
            assert_eq!(
                carrier.role,
                if blocking { Role::Tool } else { Role::User },
                "{name}"
            );
            let carried: Vec<&str> = carrier
                .attachments
                .iter()
                .map(|a| a.path.as_str())
                .collect();
            assert_eq!(carried, ["/attachments/writer-1/report.md"], "{name}");
        }
    }
}

/// A code host whose every call returns `value`.
struct Returns(serde_json::Value);

#[async_trait]
impl duet_runtime::CodeHost for Returns {
    async fn call(
        &self,
        _: duet_runtime::CodeCall,
        _: &mut dyn duet_runtime::Bridge,
    ) -> Result<serde_json::Value, duet_runtime::CodeError> {
        Ok(self.0.clone())
    }
}

/// A `.ts` tool returns a file (`ToolAttachment`, base64): it is stored under `/attachments`
/// with the step, and its stored tool message carries it and lists its path. A step that dies
/// after it (its next call never returns) leaves no file; the next runner's redo writes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_tools_returned_file_is_written_with_its_step() {
    let dir = support::Scratch::new("returned-ts");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/drawer.yaml",
        "name: drawer\nsideA: { prompt: drawer }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/drawer.yaml",
        "name: drawer\ntoolDescription: d\nmodel: m\nprompt: p\ntools: [chart, slow]\n",
    );
    write(
        "agents/tools/slow.yaml",
        "description: Takes its time.\nbuiltin: slow\n",
    );
    write(
        "agents/tools/chart.ts",
        "import { defineTool } from '@standardagents/spec';\nexport default defineTool({\n  description: 'Draws.',\n  execute: async (state) => ({ status: 'success', result: 'drawn' }),\n});\n",
    );
    write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: chart }, { name: slow }]\n  - text: Here it is.\n",
    );
    let project = dir.project();
    // base64 of "CHART"
    let host = Arc::new(Returns(serde_json::json!({
        "status": "success", "result": "drawn",
        "attachments": [{ "name": "chart.txt", "mimeType": "text/plain", "data": "Q0hBUlQ=" }],
    })));
    for backend in file_backends().await {
        let name = backend.name();
        let store = backend.open().await;
        let build = |now: i64, blocks: bool| {
            let entered = Arc::new(Notify::new());
            let slow = Slow {
                first: AtomicBool::new(blocks),
                entered: entered.clone(),
            };
            let rt = support::runtime(project.clone(), store.clone())
                .clock(Arc::new(ManualClock::new(now)))
                .lease_ms(60_000)
                .tool("slow", slow)
                .code_host(host.clone())
                .build();
            (rt, entered)
        };
        let (victim, entered) = build(0, true);
        support::kill_mid_step(victim, "t", "drawer", &entered).await;
        let t = store.thread("t").await.expect("read").expect("thread");
        let (heir, _) = build(60_001, false);
        assert!(
            heir.files()
                .file(t.id, "/attachments/chart.txt")
                .await
                .is_err(),
            "{name}: the step died: no file"
        );
        heir.recover(&CancellationToken::new())
            .await
            .expect("recover");
        heir.quiesce().await;
        let chart = heir
            .files()
            .file(t.id, "/attachments/chart.txt")
            .await
            .expect("the chart, written with the redone step");
        assert_eq!(
            heir.files().content(&chart).await.expect("content"),
            b"CHART"
        );
        let msgs = store.messages(t.id).await.expect("messages");
        let drawn = msgs
            .iter()
            .find(|m| m.tool_name.as_deref() == Some("chart"))
            .unwrap_or_else(|| panic!("{name}: {msgs:#?}"));
        assert_eq!(
            drawn.content.as_deref(),
            Some("drawn\n\nAttachments:\n- /attachments/chart.txt"),
            "{name}"
        );
        assert_eq!(drawn.attachments.len(), 1, "{name}");
        assert_eq!(drawn.attachments[0].mime_type, "text/plain", "{name}");
    }
}
