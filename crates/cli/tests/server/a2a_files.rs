//! A2A file parts (#34), on every backend: a message's bytes part (a CSV) becomes a thread file
//! under `/attachments/` that the message names and the agent's stop can name back (the
//! `filer` agent's `sessionStop` returns `/attachments/data.csv` through `attachmentsProperty`);
//! the completed task carries it as a file artifact — bytes up to 1 MiB, a URL to the REST
//! download past it — also on a stream; a part over the file limit is refused naming the part,
//! with nothing written; a `url` part is fetched under the push guard (loopback only where
//! private targets are allowed) and refused otherwise; the official Python SDK sends a file
//! part and reads the file artifact back (`tests/clients/a2a_files_client.py`).

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{Server, Sse, options, seg};
use crate::support;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// `filer`: its model stops at once, naming `/attachments/data.csv` as the result's file.
fn project() -> support::Scratch {
    let p = support::Scratch::new("a2a-files");
    p.write(
        "agents/agents/filer.yaml",
        "name: filer\nexposeAsTool: true\ntoolDescription: Files what it is sent.\n\
         sideA: { prompt: filer, sessionStop: { name: finish, messageProperty: summary, attachmentsProperty: files } }\n\
         sideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/filer.yaml",
        "name: filer\ntoolDescription: d\nmodel: fm\nincludeChat: true\nprompt: p\ntools: [finish]\n",
    );
    p.write(
        "agents/tools/finish.yaml",
        "description: Ends the session with files.\n\
         args: { type: object, properties: { summary: { type: string }, files: { type: array, items: { type: string } } }, required: [summary] }\n\
         result: \"{{summary}}\"\n",
    );
    p.write(
        "agents/models/fm.yaml",
        "name: fm\nprovider: scripted\nmodel: demo\nscript:\n\
         \x20 - tool_calls: [{ name: finish, arguments: { summary: Filed., files: [/attachments/data.csv] } }]\n",
    );
    p
}

/// 2 MiB a file: a 1.5 MiB file is linked, a 2.5 MiB one refused.
fn limits() -> duet_runtime::files::FileLimits {
    duet_runtime::files::FileLimits {
        max_file_bytes: 2 << 20,
        ..duet_runtime::files::FileLimits::default()
    }
}

/// The harness's options with room for a few MiB of base64 in a body (1 MiB by default).
fn roomy() -> duet_server::Options {
    duet_server::Options {
        body_limit: 8 << 20,
        ..options()
    }
}

/// A message with a text part and `file` (a part's JSON).
fn with_file(id: &str, context: &str, file: Value) -> Value {
    json!({"message": {"messageId": id, "contextId": context, "role": "ROLE_USER",
        "parts": [{"text": "File this."}, file]}})
}

fn csv_part(bytes: &[u8]) -> Value {
    json!({"raw": B64.encode(bytes), "filename": "data.csv", "mediaType": "text/csv"})
}

async fn rpc(server: &Server, token: &str, method: &str, params: Value) -> Value {
    crate::harness::a2a(server, "filer", token, method, params).await
}

/// The file parts of a task's `files` artifact.
fn file_parts(task: &Value) -> Vec<Value> {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["name"] == "files")
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// One HTTP response of `body` (as `text/csv`) to each connection, on loopback: its URL.
async fn serve_once(body: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "http://{}/exports/report.csv",
        listener.local_addr().expect("addr")
    );
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/csv\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes()).await;
            let _ = conn.write_all(&body).await;
        }
    });
    url
}

#[tokio::test]
async fn file_parts_in_and_file_artifacts_out() {
    let p = project();
    let csv = b"name,qty\nbolts,40\nnuts,12\n".to_vec();
    for backend in support::backends().await {
        let server = Server::start_limited(&backend, p.root(), roomy(), limits()).await;
        let alice = server.key("alice", false).await;

        // A bytes part: a thread file the message names, returned as the task's artifact.
        let body = rpc(
            &server,
            &alice,
            "SendMessage",
            with_file("f-1", "ctx-csv", csv_part(&csv)),
        )
        .await;
        let task = &body["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_COMPLETED",
            "{backend:?} {body}"
        );
        let parts = file_parts(task);
        assert_eq!(parts.len(), 1, "{task}");
        assert_eq!(parts[0]["raw"], json!(B64.encode(&csv)), "{task}");
        assert_eq!(parts[0]["filename"], "data.csv");
        assert_eq!(parts[0]["mediaType"], "text/csv");
        let (status, got) = server
            .get("/threads/ctx-csv/files/attachments/data.csv", &alice)
            .await;
        assert_eq!((status, got), (200, json!("name,qty\nbolts,40\nnuts,12\n")));
        let t = server
            .store
            .thread("alice/ctx-csv")
            .await
            .ok()
            .flatten()
            .or(server.store.thread("ctx-csv").await.ok().flatten())
            .expect("the thread");
        let messages = server.store.messages(t.id).await.expect("messages");
        let first = messages
            .iter()
            .find(|m| m.message_id.as_deref() == Some("f-1"))
            .expect("the message");
        let named: Vec<&str> = first.attachments.iter().map(|a| a.path.as_str()).collect();
        assert_eq!(named, ["/attachments/data.csv"], "{backend:?}");

        // The same name with other content in the same context: numbered, not replaced.
        let mut again = with_file("f-2", "ctx-csv", csv_part(b"other\n"));
        again["message"]["metadata"] = json!({"followUp": true});
        let body = rpc(&server, &alice, "SendMessage", again).await;
        assert!(body.get("error").is_none(), "{body}");
        let (status, _) = server
            .get("/threads/ctx-csv/files/attachments/data-2.csv", &alice)
            .await;
        assert_eq!(status, 200, "{backend:?}");

        // Past the file limit: refused, naming the part; no thread, no file.
        let big = vec![b'x'; (2 << 20) + (512 << 10)];
        let body = rpc(
            &server,
            &alice,
            "SendMessage",
            with_file("f-3", "ctx-big", csv_part(&big)),
        )
        .await;
        assert_eq!(body["error"]["code"], -32602, "{body}");
        assert!(
            body["error"].to_string().contains("message.parts[1].raw"),
            "{body}"
        );
        let (status, _) = server.get("/threads/ctx-big/files", &alice).await;
        assert_eq!(status, 404, "{backend:?}: nothing was written");

        // Past 1 MiB: the artifact links to the download, on the request's origin.
        let large: Vec<u8> = (0..(1536u32 << 10)).map(|i| (i % 251) as u8).collect();
        let body = rpc(
            &server,
            &alice,
            "SendMessage",
            with_file("f-4", "ctx-large", csv_part(&large)),
        )
        .await;
        let parts = file_parts(&body["result"]["task"]);
        let url = parts[0]["url"].as_str().expect("a url part");
        assert!(url.starts_with(&server.base), "{url}");
        assert_eq!(parts[0]["metadata"]["size"], json!(large.len()));
        let resp = reqwest::Client::new()
            .get(url)
            .bearer_auth(&alice)
            .send()
            .await
            .expect("download");
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.bytes().await.expect("bytes").as_ref(),
            large.as_slice()
        );

        // A url part, fetched under the push guard (private targets allowed here).
        let at = serve_once(csv.clone()).await;
        let part = json!({"url": at, "filename": "data.csv"});
        let body = rpc(
            &server,
            &alice,
            "SendMessage",
            with_file("f-5", "ctx-url", part),
        )
        .await;
        let task = &body["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
        assert_eq!(
            file_parts(task)[0]["raw"],
            json!(B64.encode(&csv)),
            "{task}"
        );

        // Streamed: the file artifact comes before the final status.
        let resp = server
            .req(reqwest::Method::POST, "/a2a/filer", &alice)
            .header("A2A-Version", "1.0")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                "params": with_file("f-6", "ctx-stream", csv_part(&csv))}),
            )
            .send()
            .await
            .expect("a stream");
        let mut sse = Sse::new(resp);
        let mut files = None;
        while let Some(e) = sse.next().await {
            let a = &e.data["result"]["artifactUpdate"]["artifact"];
            if a["name"] == "files" {
                files = Some(a["parts"][0]["raw"].clone());
            }
        }
        assert_eq!(files, Some(json!(B64.encode(&csv))), "{backend:?}");
        server.stop().await;

        // Without private targets, a loopback URL is refused, naming the part.
        let strict = duet_server::Options {
            allow_private_push: false,
            ..roomy()
        };
        let server = Server::start_limited(&backend, p.root(), strict, limits()).await;
        let alice = server.key("alice", false).await;
        let part = json!({"url": at, "filename": "data.csv"});
        let body = rpc(
            &server,
            &alice,
            "SendMessage",
            with_file("f-7", "ctx-strict", part),
        )
        .await;
        assert_eq!(body["error"]["code"], -32602, "{body}");
        assert!(
            body["error"].to_string().contains("message.parts[1].url"),
            "{body}"
        );
        let (status, _) = server
            .get(&format!("/threads/{}/files", seg("ctx-strict")), &alice)
            .await;
        assert_eq!(status, 404, "{backend:?}: no thread, no file");
        server.stop().await;
    }
}

#[tokio::test]
async fn the_python_sdk_sends_a_file_and_reads_a_file_artifact() {
    let present = std::process::Command::new("python3")
        .args(["-c", "import a2a.client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        assert!(
            std::env::var_os("DUET_REQUIRE_A2A").is_none(),
            "a2a-sdk is not installed"
        );
        eprintln!("SKIPPED: a2a-sdk is not installed (scripts/test-servers installs it)");
        return;
    }
    let p = project();
    let script = support::repo().join("crates/cli/tests/clients/a2a_files_client.py");
    for backend in support::backends().await {
        let server = Server::start_limited(&backend, p.root(), roomy(), limits()).await;
        let alice = server.key("alice", false).await;
        let out = tokio::process::Command::new("python3")
            .arg(&script)
            .arg(&server.base)
            .arg(&alice)
            .output()
            .await
            .expect("the client runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("all checks passed"),
            "{backend:?}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        server.stop().await;
    }
}

/// The repository's `file_answer` (a handler, no model) answers each message with a file
/// naming what it received: every task is COMPLETED with that file as its first artifact (the
/// shape the TCK's `tck-artifact-file` checks: a `raw` part, `output.txt`, `text/plain`), its
/// result text after it; a second task of the context has its own file, and the first one's
/// artifact still shows the first.
#[tokio::test]
async fn the_file_answer_agents_tasks_complete_with_a_file_artifact() {
    let answer = |task: &Value| -> (Value, Value, String) {
        let first = &task["artifacts"][0];
        let part = &first["parts"][0];
        let raw = B64.decode(part["raw"].as_str().unwrap_or_default());
        let text = String::from_utf8(raw.unwrap_or_default()).unwrap_or_default();
        (
            json!([first["name"], part["filename"], part["mediaType"]]),
            task["artifacts"][1]["parts"][0]["text"].clone(),
            text,
        )
    };
    for backend in support::backends().await {
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let send = |id: &str, parts: Value| {
            json!({"message": {"messageId": id, "contextId": "ctx-answer", "role": "ROLE_USER",
                "parts": parts}})
        };
        let parts = json!([{"text": "Look."}, csv_part(b"a,b\n1,2\n")]);
        let body = crate::harness::a2a(
            &server,
            "file_answer",
            &alice,
            "SendMessage",
            send("fa-1", parts),
        )
        .await;
        let first = body["result"]["task"].clone();
        assert_eq!(
            first["status"]["state"], "TASK_STATE_COMPLETED",
            "{backend:?} {body}"
        );
        let want = json!(["files", "output.txt", "text/plain"]);
        assert_eq!(
            answer(&first),
            (
                want.clone(),
                json!("received"),
                "Received: Look.\nAttached: /attachments/data.csv (text/csv, 8 bytes)\n".into()
            ),
            "{backend:?} {first}"
        );

        let body = crate::harness::a2a(
            &server,
            "file_answer",
            &alice,
            "SendMessage",
            send("fa-2", json!([{"text": "Again."}])),
        )
        .await;
        let second = &body["result"]["task"];
        assert_ne!(second["id"], first["id"], "{backend:?} {body}");
        assert_eq!(
            answer(second),
            (want.clone(), json!("received"), "Received: Again.\n".into()),
            "{backend:?} {second}"
        );
        let got = crate::harness::a2a(
            &server,
            "file_answer",
            &alice,
            "GetTask",
            json!({"id": first["id"]}),
        )
        .await;
        assert_eq!(
            answer(&got["result"]).2,
            "Received: Look.\nAttached: /attachments/data.csv (text/csv, 8 bytes)\n",
            "{backend:?} {got}"
        );
        server.stop().await;
    }
}
