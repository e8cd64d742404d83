//! The thread filesystem through a handler's `ThreadState` (#34): a Rust handler writes, reads
//! (its own writes before they commit), lists, greps and finds; a delivery that fails writes
//! no file; limits and hostile paths (the table `hostile_paths.txt`) are refused with clear
//! errors; a reply carries files and the session ends with it (`reply_with_files`). On every
//! backend.

use crate::support;

use std::sync::Arc;

use async_trait::async_trait;
use duet_runtime::{FileLimits, Handler, HandlerError, Message, Store, ThreadState};

/// The backends the file tests run on: every one (the SQL stores' file tables are built).
pub(crate) async fn file_backends() -> Vec<support::Backend> {
    support::backends().await
}

/// The hostile paths of the table, each with the word its refusal must hold.
fn hostile() -> Vec<(String, String)> {
    let table = include_str!("hostile_paths.txt");
    table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (path, why) = l.split_once('\t').expect("path<TAB>why");
            (unescape(path), why.to_owned())
        })
        .collect()
}

fn unescape(raw: &str) -> String {
    if let Some(n) = raw.strip_prefix("{deep:").and_then(|r| r.strip_suffix('}')) {
        return "/a".repeat(n.parse().expect("n"));
    }
    let mut out = String::new();
    let mut rest = raw;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("{long:") {
            let (n, r) = r.split_once('}').expect("}");
            out.push_str(&"a".repeat(n.parse().expect("n")));
            rest = r;
        } else if let Some(r) = rest.strip_prefix("\\u{") {
            let (hex, r) = r.split_once('}').expect("}");
            out.push(char::from_u32(u32::from_str_radix(hex, 16).expect("hex")).expect("char"));
            rest = r;
        } else if let Some(r) = rest.strip_prefix("\\0") {
            out.push('\0');
            rest = r;
        } else if let Some(r) = rest.strip_prefix("\\t") {
            out.push('\t');
            rest = r;
        } else if let Some(r) = rest.strip_prefix("\\\\") {
            out.push('\\');
            rest = r;
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Acts on its message's first word: `write` (writes, reads back, lists, greps, finds),
/// `fail` (writes, then fails), `limits` (passes each limit), `hostile` (the table's paths),
/// `answer` (a reply carrying a file it writes, and the session's end), `answer-missing` (a
/// reply naming a file that is not there).
struct Filer;

#[async_trait]
impl Handler for Filer {
    async fn handle(&self, state: &mut ThreadState<'_>, m: &Message) -> Result<(), HandlerError> {
        let text = m.content.clone().unwrap_or_default();
        match text.as_str() {
            "write" => {
                state
                    .write_file("/notes/a.txt", b"alpha\nneedle in a\n", None)
                    .await?;
                state
                    .write_file("notes/b.md", b"# b\nno match\n", Some("text/markdown"))
                    .await?;
                state.mkdir_file("/empty/dir").await?;
                state.write_file("/gone.txt", b"bye", None).await?;
                state.unlink_file("/gone.txt").await?;
                let read = state.read_file("/notes/a.txt").await?.unwrap_or_default();
                let listed: Vec<String> = state
                    .readdir_file("/notes")
                    .await?
                    .into_iter()
                    .map(|r| r.path)
                    .collect();
                let (grep, _) = state.grep_files("needle").await?;
                let (found, _) = state.find_files("**/*.txt").await?;
                let stats = state.file_stats().await?;
                let missing = state.read_file("/gone.txt").await?;
                state.reply(
                    serde_json::json!({
                        "read": String::from_utf8_lossy(&read),
                        "listed": listed,
                        "grep": grep.iter().map(|g| format!("{}:{}", g.path, g.line)).collect::<Vec<_>>(),
                        "found": found,
                        "stats": [stats.files, stats.directories, stats.bytes],
                        "gone": missing.is_none(),
                    })
                    .to_string(),
                );
            }
            "fail" => {
                state.write_file("/fail/x.txt", b"never kept", None).await?;
                return Err(HandlerError::new("failed after writing"));
            }
            "limits" => {
                let mut codes = Vec::new();
                let big = vec![b'x'; 101];
                for r in [
                    state.write_file("/big.bin", &big, None).await.map(|_| ()),
                    state
                        .write_file("/ok1.bin", &[1; 60], None)
                        .await
                        .map(|_| ()),
                    state
                        .write_file("/ok2.bin", &[2; 60], None)
                        .await
                        .map(|_| ()),
                    state.mkdir_file("/d1/d2/d3/d4").await,
                    state
                        .write_file("/ok1.bin/under", b"x", None)
                        .await
                        .map(|_| ()),
                    state.rmdir_file("/").await,
                    state.unlink_file("/nothing").await,
                    state.grep_files("(").await.map(|_| ()),
                ] {
                    codes.push(match r {
                        Ok(()) => "ok".to_owned(),
                        Err(e) => format!("{}: {e}", e.code()),
                    });
                }
                state.reply(serde_json::json!(codes).to_string());
            }
            "hostile" => {
                let mut refused = Vec::new();
                for (path, _) in hostile() {
                    refused.push(match state.write_file(&path, b"x", None).await {
                        Ok(r) => format!("written: {}", r.path),
                        Err(e) => format!("{}: {e}", e.code()),
                    });
                }
                state.reply(serde_json::json!(refused).to_string());
            }
            "answer" => {
                state
                    .write_file("/attachments/answer.txt", b"Received: answer\n", None)
                    .await?;
                state
                    .reply_with_files("Here it is.", &["/attachments/answer.txt"])
                    .await?;
                state.stop_session(Some("answered".to_owned()));
            }
            "answer-missing" => {
                state.reply("before");
                state.reply_with_files("never", &["/nothing.txt"]).await?;
            }
            _ => state.reply("?"),
        }
        Ok(())
    }
}

fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("files");
    dir.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { handler: filer }\nsideB: { human: true }\n",
    );
    dir.write(
        "agents/handlers/filer.yaml",
        "description: Works with the thread's files.\n",
    );
    dir.project()
}

fn runtime(store: Arc<dyn Store>, limits: FileLimits) -> duet_runtime::Runtime {
    support::runtime(project(), store)
        .handler("filer", Filer)
        .file_limits(limits)
        .build()
}

async fn last_reply(store: &Arc<dyn Store>, key: &str) -> serde_json::Value {
    let texts = support::texts(store, key).await;
    let last = texts.last().map(|(_, _, t)| t.clone()).unwrap_or_default();
    serde_json::from_str(&last).unwrap_or(serde_json::Value::String(last))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_writes_reads_its_own_writes_lists_and_greps() {
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = runtime(store.clone(), FileLimits::default());
        support::send(&rt, "f1", Some("desk"), "write").await;
        let reply = last_reply(&store, "f1").await;
        assert_eq!(
            reply,
            serde_json::json!({
                "read": "alpha\nneedle in a\n",
                "listed": ["/notes/a.txt", "/notes/b.md"],
                "grep": ["/notes/a.txt:2"],
                "found": ["/notes/a.txt"],
                "stats": [2, 3, 31],
                "gone": true,
            }),
            "{}",
            backend.name()
        );
        // Committed with the delivery.
        let t = store.thread("f1").await.expect("read").expect("thread");
        let files = rt.files();
        let a = files.file(t.id, "/notes/a.txt").await.expect("a");
        assert_eq!(
            a.mime_type.as_deref(),
            Some("text/plain"),
            "{}",
            backend.name()
        );
        let b = files.file(t.id, "/notes/b.md").await.expect("b");
        assert_eq!(b.declared_type.as_deref(), Some("text/markdown"));
        assert_eq!(
            files.content(&a).await.expect("content"),
            b"alpha\nneedle in a\n"
        );
        assert!(
            files
                .stat(t.id, "/empty/dir")
                .await
                .expect("stat")
                .is_some()
        );
        assert!(files.stat(t.id, "/gone.txt").await.expect("stat").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_fails_after_writing_leaves_no_file() {
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = runtime(store.clone(), FileLimits::default());
        support::send(&rt, "f2", Some("desk"), "fail").await;
        let t = store.thread("f2").await.expect("read").expect("thread");
        let records = store.records(t.id).await.expect("records");
        assert!(
            records.iter().any(|r| r.kind() == "handler_error"),
            "{}: {records:?}",
            backend.name()
        );
        let stats = rt.files().stats(t.id).await.expect("stats");
        assert_eq!(
            (stats.files, stats.directories, stats.bytes),
            (0, 0, 0),
            "{}",
            backend.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_give_clear_errors() {
    let limits = FileLimits {
        max_file_bytes: 100,
        max_thread_bytes: 100,
        max_entries: 4,
        ..FileLimits::default()
    };
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = runtime(store.clone(), limits);
        support::send(&rt, "f3", Some("desk"), "limits").await;
        let reply = last_reply(&store, "f3").await;
        let codes: Vec<String> = serde_json::from_value(reply.clone()).expect("list");
        let expected = [
            "too_large: file: 101 bytes is over the limit of 100",
            "ok",
            "too_large: thread's files: 120 bytes is over the limit of 100",
            "too_many: the thread holds 4 files and directories, its limit",
            "wrong_kind: /ok1.bin is a file",
            "invalid_path",
            "not_found: no such file or directory: /nothing",
            "invalid_pattern",
        ];
        assert_eq!(codes.len(), expected.len(), "{}: {codes:?}", backend.name());
        for (got, want) in codes.iter().zip(expected) {
            assert!(
                got.starts_with(want),
                "{}: {got} is not {want}",
                backend.name()
            );
        }
        let t = store.thread("f3").await.expect("read").expect("thread");
        let stats = rt.files().stats(t.id).await.expect("stats");
        assert_eq!((stats.files, stats.bytes), (1, 60), "{}", backend.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_are_refused() {
    let table = hostile();
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = runtime(store.clone(), FileLimits::default());
        support::send(&rt, "f4", Some("desk"), "hostile").await;
        let reply = last_reply(&store, "f4").await;
        let got: Vec<String> = serde_json::from_value(reply).expect("list");
        assert_eq!(got.len(), table.len());
        for ((path, why), got) in table.iter().zip(&got) {
            assert!(
                got.starts_with("invalid_path: ") && got.contains(why.as_str()),
                "{}: {path:?} gave {got}, not a refusal naming {why}",
                backend.name()
            );
        }
        let t = store.thread("f4").await.expect("read").expect("thread");
        let stats = rt.files().stats(t.id).await.expect("stats");
        assert_eq!(stats.files + stats.directories, 0, "{}", backend.name());
    }
}

/// What refused or unnamed writes stored is swept; what a file names stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_takes_only_chunks_no_file_names() {
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = runtime(store.clone(), FileLimits::default());
        support::send(&rt, "s1", Some("desk"), "write").await;
        let t = store.thread("s1").await.expect("read").expect("thread");
        let files = rt.files();
        let kept = files
            .write(t.id, "/kept.txt", b"named by a row", None)
            .await
            .expect("write");
        // Stored, never named (an upload refused after its chunks were stored).
        let orphan = files
            .store_bytes("/orphan.txt", b"named by nothing", None)
            .await
            .expect("store");
        let blobs = files.blobs();
        assert!(blobs.has_blob(&orphan.chunks[0]).await.expect("has"));
        // A day's grace keeps both: they are new.
        assert_eq!(
            files
                .sweep(duet_runtime::SWEEP_GRACE_MS)
                .await
                .expect("sweep"),
            0
        );
        // A grace in the future: everything unnamed goes.
        let swept = files.sweep(-60_000).await.expect("sweep");
        assert!(swept >= 1, "{}: {swept}", backend.name());
        assert!(
            !blobs.has_blob(&orphan.chunks[0]).await.expect("has"),
            "{}",
            backend.name()
        );
        assert_eq!(
            files.content(&kept).await.expect("read"),
            b"named by a row",
            "{}",
            backend.name()
        );
    }
}

/// A reply written with `reply_with_files` carries its files (the delivery's own write among
/// them), and a stop in the same delivery ends the session after it: that message is the
/// session's last of side A. A path that is no file fails the delivery, writing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_carries_its_files_and_the_session_ends_with_it() {
    for backend in file_backends().await {
        let store = backend.open().await;
        let rt = runtime(store.clone(), FileLimits::default());
        support::send(&rt, "r1", Some("desk"), "answer").await;
        let t = store.thread("r1").await.expect("read").expect("thread");
        assert!(!t.session_open, "{}", backend.name());
        assert_eq!(t.result.as_deref(), Some("answered"), "{}", backend.name());
        let messages = store.messages(t.id).await.expect("messages");
        let last = messages.last().expect("a reply");
        assert_eq!(last.content.as_deref(), Some("Here it is."));
        assert_eq!(
            last.side,
            Some(duet_runtime::SideId::A),
            "{}",
            backend.name()
        );
        let attached: Vec<(&str, &str, i64)> = last
            .attachments
            .iter()
            .map(|a| (a.path.as_str(), a.mime_type.as_str(), a.size))
            .collect();
        assert_eq!(
            attached,
            [("/attachments/answer.txt", "text/plain", 17)],
            "{}",
            backend.name()
        );
        let file = rt.files().file(t.id, "/attachments/answer.txt").await;
        assert_eq!(
            rt.files()
                .content(&file.expect("file"))
                .await
                .expect("read"),
            b"Received: answer\n"
        );

        support::send(&rt, "r2", Some("desk"), "answer-missing").await;
        let t = store.thread("r2").await.expect("read").expect("thread");
        let records = store.records(t.id).await.expect("records");
        let error = records.iter().find_map(|r| match &r.body {
            duet_runtime::RecordBody::HandlerError { error, .. } => Some(error.clone()),
            _ => None,
        });
        assert!(
            error.as_deref().is_some_and(|e| e.contains("/nothing.txt")),
            "{}: {error:?}",
            backend.name()
        );
        let messages = store.messages(t.id).await.expect("messages");
        assert!(
            messages
                .iter()
                .all(|m| m.side != Some(duet_runtime::SideId::A)),
            "{}: {messages:?}",
            backend.name()
        );
    }
}
