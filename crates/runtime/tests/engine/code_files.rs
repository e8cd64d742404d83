//! Thread files and code, and thread files sent to models (#34). A `.ts` tool's `writeFile`
//! (bytes as `{"$bytes": base64}`) is read back within its step and committed with it, and a
//! tool that throws after writing leaves no file. A message with an image, a PDF and a CSV
//! attached reaches the model as an image part, a document part and a line naming the CSV; a
//! model whose definition takes neither images nor documents gets three lines. On every
//! backend whose file tables are built (`files::file_backends`).

use crate::code::{Act, ScriptHost};
use crate::files::file_backends;
use crate::support;

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use duet_runtime::{
    CodeErrorKind, Model, ModelChunk, ModelError, ModelRequest, NewQueued, Provider, Providers,
    Role, SideId,
};
use futures::stream::{self, BoxStream, StreamExt};
use serde_json::json;

/// `saver`: its model calls `save` (writes two files and reads one back), then `spill` (writes
/// one, then throws), then answers.
fn saver() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("code-files");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/saver.yaml",
        "name: saver\nsideA: { prompt: saver }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/saver.yaml",
        "name: saver\ntoolDescription: Saves.\nmodel: scripted\nprompt: Save.\ntools: [save, spill]\n",
    );
    write(
        "agents/models/scripted.yaml",
        "name: scripted\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls:\n      - { name: save, arguments: {} }\n      - { name: spill, arguments: {} }\n  - text: Saved.\n",
    );
    for (name, what) in [("save", "Saves."), ("spill", "Spills.")] {
        write(
            &format!("agents/tools/{name}.ts"),
            &format!(
                "import {{ defineTool }} from '@standardagents/spec';\nexport default defineTool({{\n  description: '{what}',\n  execute: async (state) => 'ok',\n}});\n"
            ),
        );
    }
    dir.project()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ts_tools_files_commit_with_its_step_and_a_throw_leaves_none() {
    for backend in file_backends().await {
        let store = backend.open().await;
        let host = ScriptHost::new(vec![
            (
                "agents/tools/save.ts",
                vec![
                    Act::Ask(
                        "writeFile",
                        json!({ "path": "/notes/tea.txt", "data": "tea", "mimeType": "text/plain" }),
                    ),
                    Act::Ask(
                        "writeFile",
                        json!({ "path": "/bin/x.bin", "data": { "$bytes": STANDARD.encode([0u8, 1, 2, 255]) } }),
                    ),
                    // Its own write, before the commit.
                    Act::Ask("readFile", json!({ "path": "/notes/tea.txt" })),
                    Act::Return(json!("saved")),
                ],
            ),
            (
                "agents/tools/spill.ts",
                vec![
                    // The step's earlier tool's write, not committed yet.
                    Act::Ask("statFile", json!({ "path": "/notes/tea.txt" })),
                    Act::Ask("writeFile", json!({ "path": "/spill.txt", "data": "oops" })),
                    Act::Fail(CodeErrorKind::Thrown, "Error: spilt"),
                ],
            ),
        ]);
        let rt = support::runtime(saver(), store.clone())
            .code_host(Arc::new(host.clone()))
            .build();
        support::send(&rt, "f1", Some("saver"), "save it").await;
        let texts = support::texts(&store, "f1").await;
        assert!(texts.iter().any(|(_, _, t)| t == "Saved."), "{texts:?}");
        assert_eq!(
            host.answer("readFile"),
            Some(Ok(json!({ "$bytes": STANDARD.encode("tea") })))
        );
        let stat = host.answer("statFile").expect("asked").expect("answered");
        assert_eq!(stat["path"], "/notes/tea.txt");
        assert_eq!(stat["name"], "tea.txt");
        assert_eq!(stat["type"], "file");
        assert_eq!(stat["mimeType"], "text/plain");
        assert_eq!(stat["size"], 3);
        let t = store.thread("f1").await.expect("read").expect("thread");
        let files = rt.files();
        let tea = files.file(t.id, "/notes/tea.txt").await.expect("committed");
        assert_eq!(files.content(&tea).await.expect("read"), b"tea");
        let bin = files.file(t.id, "/bin/x.bin").await.expect("committed");
        assert_eq!(files.content(&bin).await.expect("read"), [0, 1, 2, 255]);
        assert_eq!(
            files.stat(t.id, "/spill.txt").await.expect("stat"),
            None,
            "{}: the tool that threw wrote no file",
            backend.name()
        );
    }
}

/// A model that records each request and answers `Seen.`.
#[derive(Clone, Default)]
struct Recording {
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Model for Recording {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        self.requests.lock().expect("lock").push(request);
        stream::iter([Ok(ModelChunk::Text("Seen.".into()))]).boxed()
    }
}

impl Provider for Recording {
    fn model(&self, _: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        Ok(Arc::new(self.clone()))
    }
}

/// `viewer` talks to `model`; `sees` takes images and documents, `blind` neither.
fn viewer(model: &str) -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("model-files");
    dir.write(
        "agents/agents/viewer.yaml",
        "name: viewer\nsideA: { prompt: viewer, stopOnResponse: true }\nsideB: { human: true }\n",
    );
    dir.write(
        "agents/prompts/viewer.yaml",
        &format!("name: viewer\ntoolDescription: Looks.\nmodel: {model}\nprompt: Look.\n"),
    );
    dir.write(
        "agents/models/sees.yaml",
        "name: sees\nprovider: openai\nmodel: m\n",
    );
    dir.write(
        "agents/models/blind.yaml",
        "name: blind\nprovider: openai\nmodel: m\ncapabilities: { supportsImages: false, supportsDocuments: false }\n",
    );
    dir.project()
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01";
const PDF: &[u8] = b"%PDF-1.4\n%%EOF\n";
const CSV: &[u8] = b"a,b\n1,2\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_reach_the_model_as_its_definition_allows() {
    let lines = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .map(|n| match *n {
                "png" => format!(
                    "[attachment /attachments/pixel.png, image/png, {} bytes]",
                    PNG.len()
                ),
                "pdf" => format!(
                    "[attachment /attachments/report.pdf, application/pdf, {} bytes]",
                    PDF.len()
                ),
                _ => "[attachment /attachments/data.csv, text/csv, 8 bytes]".to_owned(),
            })
            .collect()
    };
    // (model, images sent, documents sent, the lines in the text)
    let cases = [
        ("sees", 1, 1, lines(&["csv"])),
        ("blind", 0, 0, lines(&["png", "pdf", "csv"])),
    ];
    for backend in file_backends().await {
        for (model, images, documents, want_lines) in &cases {
            let store = backend.open().await;
            let fake = Recording::default();
            let rt = support::runtime(viewer(model), store.clone())
                .providers(Providers::new().with("openai", fake.clone()))
                .build();
            let key = format!("v-{model}");
            support::send(&rt, &key, Some("viewer"), "hello").await;
            let t = store.thread(&key).await.expect("read").expect("thread");
            let mut attachments = Vec::new();
            for (path, bytes) in [
                ("/attachments/pixel.png", PNG),
                ("/attachments/report.pdf", PDF),
                ("/attachments/data.csv", CSV),
            ] {
                let r = rt
                    .files()
                    .write(t.id, path, bytes, None)
                    .await
                    .expect("written");
                attachments.push(r.attachment());
            }
            let mut message = NewQueued::new(Role::User, SideId::B, "What are these?");
            message.human = true;
            message.attachments = attachments;
            store
                .enqueue(t.id, message, None, rt.now_ms())
                .await
                .expect("queued");
            support::send(&rt, &key, None, "Well?").await;
            let requests = fake.requests.lock().expect("lock").clone();
            let last = requests.last().expect("asked");
            let m = last
                .messages
                .iter()
                .find(|m| {
                    m.content
                        .as_deref()
                        .is_some_and(|c| c.starts_with("What are these?"))
                })
                .expect("the message with attachments");
            let at = format!("{} on {}", model, backend.name());
            assert_eq!(m.images.len(), *images, "{at}");
            assert_eq!(m.documents.len(), *documents, "{at}");
            if *images == 1 {
                assert_eq!(m.images[0].mime_type, "image/png");
                assert_eq!(STANDARD.decode(&m.images[0].data).expect("b64"), PNG);
            }
            if *documents == 1 {
                assert_eq!(m.documents[0].mime_type, "application/pdf");
                assert_eq!(m.documents[0].filename(), "report.pdf");
                assert_eq!(STANDARD.decode(&m.documents[0].data).expect("b64"), PDF);
            }
            assert_eq!(
                m.content.as_deref(),
                Some(format!("What are these?\n\n{}", want_lines.join("\n")).as_str()),
                "{at}"
            );
            assert!(m.attachments.is_empty(), "{at}: the step drained them");
        }
    }
}
