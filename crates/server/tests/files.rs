//! A thread's files over HTTP (`/threads/{key}/files`) on a server in this process on
//! 127.0.0.1, on the memory stores, SQLite and Postgres (with `DATABASE_URL`), with small file
//! limits: uploads raw and multipart, listing,
//! downloads whole and by `Range` (206, 416), `HEAD`, removal; 413 on a `Content-Length` and on
//! a streamed body past the limit; hostile paths (a table) refused with 400; a MIME lie served as
//! the sniffed type; a thread opened by an upload with `agent`; another principal's thread not
//! there; a message naming an attachment that exists and one that does not; a body broken off
//! mid-upload leaving no file.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use duet_runtime::files::FileLimits;
use duet_runtime::testing::Scratch;
use duet_runtime::{Handler, HandlerError, Message, Runtime, ThreadState};
use duet_store::testing::{Backend, store_backends};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// The per-file limit of the test server.
const MAX: u64 = 64 * 1024;
/// The per-thread limit of the test server: three files at the per-file limit and 8 KiB.
const THREAD_MAX: u64 = 3 * MAX + 8 * 1024;

/// `desk`: side A answers each message naming its attachments, side B is a person.
fn project() -> Arc<duet_spec::Project> {
    let dir = Scratch::new("server-files");
    dir.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { handler: clerk }\nsideB: { human: true }\n",
    );
    dir.write("agents/handlers/clerk.yaml", "description: Answers.\n");
    dir.project()
}

struct Clerk;

#[async_trait]
impl Handler for Clerk {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let names: Vec<String> = message
            .attachments
            .iter()
            .map(|a| format!("{} {} {}", a.path, a.mime_type, a.size))
            .collect();
        state.reply(format!(
            "clerk: {} [{}]",
            message.content.as_deref().unwrap_or(""),
            names.join(", ")
        ));
        Ok(())
    }
}

struct Server {
    base: String,
    addr: std::net::SocketAddr,
    owner: String,
    stranger: String,
    http: reqwest::Client,
    stop: CancellationToken,
}

impl Server {
    /// A server with keys for `owner` and `stranger`, and thread `t` of `owner`'s, settled.
    async fn start(backend: &Backend) -> Server {
        let stores = backend.open_both().await;
        let (store, tables) = (stores.engine, stores.server);
        let rt = Runtime::builder(project(), store)
            .handler("clerk", Clerk)
            .file_limits(FileLimits {
                max_file_bytes: MAX,
                max_thread_bytes: THREAD_MAX,
                ..FileLimits::default()
            })
            .build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut keys = Vec::new();
        for principal in ["owner", "stranger"] {
            let new = duet_server::auth::new_key(principal, false, None, 0).unwrap();
            tables.create_key(&new.key, &new.hash).await.unwrap();
            keys.push(new.token);
        }
        let state = duet_server::AppState::new(rt, tables, duet_server::Options::default());
        let stop = CancellationToken::new();
        let signal = stop.clone();
        tokio::spawn(duet_server::serve(state, listener, async move {
            signal.cancelled().await;
        }));
        let server = Server {
            base: format!("http://{addr}"),
            addr,
            stranger: keys.pop().unwrap(),
            owner: keys.pop().unwrap(),
            http: reqwest::Client::new(),
            stop,
        };
        let created = server
            .req("POST", "/threads?wait=true", &server.owner)
            .json(&json!({ "agent": "desk", "key": "t", "text": "hello" }))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 200, "{}", created.text().await.unwrap());
        server
    }

    fn req(&self, method: &str, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth(token)
    }

    /// Uploads `data` raw to `path` of thread `t` as `mime`.
    async fn put(&self, path: &str, mime: &str, data: Vec<u8>) -> (u16, String) {
        let r = self
            .req(
                "POST",
                &at("/threads/t/files", &[("path", path)]),
                &self.owner,
            )
            .header("content-type", mime)
            .body(data);
        let (status, _, body) = send(r).await;
        (status, body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// `path` with `pairs` as its query, encoded.
fn at(path: &str, pairs: &[(&str, &str)]) -> String {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    format!("{path}?{query}")
}

/// (status, headers, body) of `req`.
async fn send(req: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// `n` bytes that are not all alike.
fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

#[tokio::test]
async fn files_go_up_list_come_down_by_range_and_go() {
    for backend in store_backends().await {
        let s = Server::start(&backend).await;
        let data = bytes(5000);
        let (status, body) = s
            .put("/docs/a.bin", "application/x-thing", data.clone())
            .await;
        assert_eq!(status, 201, "{body}");
        let made = json_of(&body);
        assert_eq!(made["path"], "/docs/a.bin");
        assert_eq!(made["size"], 5000);

        // Multipart: the part's file name, made safe, under `dir`.
        let boundary = "XyZ";
        let mut form = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nignored\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"re\u{2215}port.txt\"\r\n\
             Content-Type: text/plain\r\n\r\n"
        )
        .into_bytes();
        form.extend_from_slice(b"quarterly numbers\n");
        form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let r = s
            .req("POST", "/threads/t/files", &s.owner)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(form);
        let (status, headers, body) = send(r).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(json_of(&body)["path"], "/attachments/re_port.txt");
        assert_eq!(
            headers["location"],
            "/threads/t/files/attachments/re_port.txt"
        );

        // Listing: the root's directories, then a directory's files, a page at a time.
        let (status, _, body) = send(s.req("GET", "/threads/t/files", &s.owner)).await;
        assert_eq!(status, 200, "{body}");
        let page = json_of(&body);
        let names: Vec<&str> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["/attachments", "/docs"]);
        assert_eq!(page["items"][0]["type"], "directory");
        let (_, _, body) = send(s.req("GET", "/threads/t/files?dir=/&limit=1", &s.owner)).await;
        let first = json_of(&body);
        assert_eq!(first["nextCursor"], "/attachments");
        let (_, _, body) = send(s.req(
            "GET",
            "/threads/t/files?dir=/&limit=1&after=/attachments",
            &s.owner,
        ))
        .await;
        assert_eq!(json_of(&body)["items"][0]["path"], "/docs");
        let (_, _, body) = send(s.req("GET", "/threads/t/files?dir=/attachments", &s.owner)).await;
        let listed = json_of(&body);
        let entry = &listed["items"][0];
        assert_eq!(
            (
                &entry["name"],
                &entry["type"],
                &entry["mimeType"],
                &entry["size"]
            ),
            (
                &json!("re_port.txt"),
                &json!("file"),
                &json!("text/plain"),
                &json!(18)
            )
        );
        assert!(entry["createdAt"].as_i64().unwrap() > 0);

        // Whole, then ranges.
        let resp = s
            .req("GET", "/threads/t/files/docs/a.bin", &s.owner)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let headers = resp.headers().clone();
        assert_eq!(resp.bytes().await.unwrap().to_vec(), data);
        assert_eq!(headers["accept-ranges"], "bytes");
        assert_eq!(headers["content-length"], "5000");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(
            headers["content-disposition"]
                .to_str()
                .unwrap()
                .starts_with("attachment;")
        );
        let etag = headers["etag"].clone();
        for (range, status, want, content_range) in [
            ("bytes=10-19", 206, &data[10..20], Some("bytes 10-19/5000")),
            (
                "bytes=4990-",
                206,
                &data[4990..],
                Some("bytes 4990-4999/5000"),
            ),
            ("bytes=-3", 206, &data[4997..], Some("bytes 4997-4999/5000")),
            ("bytes=0-1,4-5", 200, &data[..], None),
        ] {
            let resp = s
                .req("GET", "/threads/t/files/docs/a.bin", &s.owner)
                .header("range", range)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), status, "{range}");
            assert_eq!(
                resp.headers()
                    .get("content-range")
                    .map(|v| v.to_str().unwrap()),
                content_range,
                "{range}"
            );
            assert_eq!(resp.headers()["etag"], etag);
            assert_eq!(resp.bytes().await.unwrap().to_vec(), want, "{range}");
        }
        let r = s
            .req("GET", "/threads/t/files/docs/a.bin", &s.owner)
            .header("range", "bytes=5000-");
        let (status, headers, body) = send(r).await;
        assert_eq!(status, 416, "{body}");
        assert_eq!(headers["content-range"], "bytes */5000");

        // HEAD: the headers alone.
        let (status, headers, body) =
            send(s.req("HEAD", "/threads/t/files/docs/a.bin", &s.owner)).await;
        assert_eq!((status, body.as_str()), (200, ""));
        assert_eq!(headers["content-length"], "5000");
        assert_eq!(headers["etag"], etag);

        // Another principal's thread is not there; a directory is no download.
        let (status, _, _) = send(s.req("GET", "/threads/t/files/docs/a.bin", &s.stranger)).await;
        assert_eq!(status, 404);
        let (status, _, _) = send(s.req("GET", "/threads/t/files", &s.stranger)).await;
        assert_eq!(status, 404);
        let (status, _, body) = send(s.req("GET", "/threads/t/files/docs", &s.owner)).await;
        assert_eq!(
            (status, json_of(&body)["code"].as_str()),
            (409, Some("wrong_kind"))
        );

        // Removal.
        let (status, _, _) = send(s.req("DELETE", "/threads/t/files/docs/a.bin", &s.owner)).await;
        assert_eq!(status, 204);
        let (status, _, body) = send(s.req("GET", "/threads/t/files/docs/a.bin", &s.owner)).await;
        assert_eq!(
            (status, json_of(&body)["code"].as_str()),
            (404, Some("not_found"))
        );
        let (status, _, _) = send(s.req("DELETE", "/threads/t/files/docs/a.bin", &s.owner)).await;
        assert_eq!(status, 404);
    }
}

#[tokio::test]
async fn a_mime_lie_is_served_as_what_the_bytes_are() {
    for backend in store_backends().await {
        let s = Server::start(&backend).await;
        let png =
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89"
                .to_vec();
        let (status, body) = s.put("/attachments/cat.png", "text/html", png).await;
        assert_eq!(status, 201, "{body}");
        let (status, headers, _) =
            send(s.req("GET", "/threads/t/files/attachments/cat.png", &s.owner)).await;
        assert_eq!(status, 200);
        assert_eq!(headers["content-type"], "image/png");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(
            headers["content-disposition"]
                .to_str()
                .unwrap()
                .starts_with("inline;")
        );

        let html = b"<!DOCTYPE html><script>alert(1)</script>".to_vec();
        let (status, body) = s.put("/attachments/page.png", "image/png", html).await;
        assert_eq!(status, 201, "{body}");
        let (_, headers, _) =
            send(s.req("GET", "/threads/t/files/attachments/page.png", &s.owner)).await;
        let served = headers["content-type"].to_str().unwrap().to_owned();
        // Neither the declared type nor the `.png` name is believed: the bytes are text.
        assert_eq!(
            served, "text/plain",
            "HTML declared as PNG is served as what its bytes are"
        );
        assert!(
            headers["content-disposition"]
                .to_str()
                .unwrap()
                .starts_with("attachment;"),
            "{served}"
        );
    }
}

#[tokio::test]
async fn hostile_paths_are_refused_and_store_nothing() {
    for backend in store_backends().await {
        let s = Server::start(&backend).await;
        let long = format!("/{}", "a".repeat(300));
        let deep = "/d".repeat(40);
        for path in [
            "../etc/passwd",
            "/attachments/../../etc/passwd",
            "/a/%2e%2e/b",
            "/a/%2F/b",
            "/a\\b",
            "/a\0b",
            "/a\u{7}b",
            "/a\u{202E}gpj.exe",
            "/a\u{2215}..\u{2215}b",
            "/\u{FF0E}\u{FF0E}/b",
            long.as_str(),
            deep.as_str(),
            "/",
            "",
        ] {
            let (status, body) = s.put(path, "text/plain", b"x".to_vec()).await;
            assert_eq!(status, 400, "{path:?}: {body}");
            assert_eq!(json_of(&body)["code"], "invalid_path", "{path:?}");
        }
        let (_, _, body) = send(s.req("GET", "/threads/t/files", &s.owner)).await;
        assert_eq!(json_of(&body)["items"], json!([]));
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    for backend in store_backends().await {
        let s = Server::start(&backend).await;
        // A Content-Length over the limit: refused before a byte is read.
        let (status, body) = s
            .put(
                "/big.bin",
                "application/octet-stream",
                bytes(MAX as usize + 1),
            )
            .await;
        assert_eq!(status, 413, "{body}");
        assert_eq!(json_of(&body)["code"], "too_large");
        // A streamed body without a length (chunked): refused as it passes the limit, the rest
        // unread.
        let mut sock = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        let head = format!(
            "POST /threads/t/files?path=/big.bin HTTP/1.1\r\nHost: {}\r\n\
             Authorization: Bearer {}\r\nTransfer-Encoding: chunked\r\n\r\n",
            s.addr, s.owner
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        for _ in 0..8 {
            let piece = bytes(16 * 1024);
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(&piece);
            chunk.extend_from_slice(b"\r\n");
            // The server may stop reading once it has refused.
            if sock.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = sock.write_all(b"0\r\n\r\n").await;
        let mut answer = vec![0; 4096];
        let n = sock.read(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        // Exactly the limit is fine.
        let (status, body) = s
            .put("/edge.bin", "application/octet-stream", bytes(MAX as usize))
            .await;
        assert_eq!(status, 201, "{body}");
        let (_, _, body) = send(s.req("GET", "/threads/t/files", &s.owner)).await;
        let items = json_of(&body)["items"].clone();
        assert_eq!(items.as_array().unwrap().len(), 1, "{items}");
        // The thread's own limit: two more at the file limit fit, then 8 KiB is what is left, so
        // a 10 KiB body is refused by its length before anything is stored.
        for name in ["/edge2.bin", "/edge3.bin"] {
            let (status, body) = s
                .put(name, "application/octet-stream", bytes(MAX as usize))
                .await;
            assert_eq!(status, 201, "{} {name}: {body}", backend.name());
        }
        let (status, body) = s
            .put("/over.bin", "application/octet-stream", bytes(10 * 1024))
            .await;
        assert_eq!(status, 413, "{}: {body}", backend.name());
        assert!(
            json_of(&body)["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(&(8 * 1024).to_string()),
            "{body}"
        );
        let (status, body) = s
            .put("/fits.bin", "application/octet-stream", bytes(8 * 1024))
            .await;
        assert_eq!(status, 201, "{}: {body}", backend.name());
    }
}

#[tokio::test]
async fn an_upload_needs_its_thread_or_an_agent_to_open_one() {
    for backend in store_backends().await {
        let s = Server::start(&backend).await;
        let r = s
            .req(
                "POST",
                &at("/threads/new-one/files", &[("path", "/attachments/a.txt")]),
                &s.owner,
            )
            .body("hi");
        assert_eq!(send(r).await.0, 404);
        let r = s
            .req(
                "POST",
                &at(
                    "/threads/new-one/files",
                    &[("path", "/attachments/a.txt"), ("agent", "nobody")],
                ),
                &s.owner,
            )
            .body("hi");
        let (status, _, body) = send(r).await;
        assert_eq!(status, 422, "{body}");
        let r = s
            .req(
                "POST",
                &at(
                    "/threads/new-one/files",
                    &[("path", "/attachments/a.txt"), ("agent", "desk")],
                ),
                &s.owner,
            )
            .body("hi");
        let (status, _, body) = send(r).await;
        assert_eq!(status, 201, "{body}");
        // Opened idle, the owner's alone.
        let (status, _, body) = send(s.req("GET", "/threads/new-one", &s.owner)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(json_of(&body)["status"], "idle");
        let (status, _, _) = send(s.req(
            "GET",
            "/threads/new-one/files/attachments/a.txt",
            &s.stranger,
        ))
        .await;
        assert_eq!(status, 404);
        // The stranger's own `new-one` is another thread.
        let r = s
            .req(
                "POST",
                &at(
                    "/threads/new-one/files",
                    &[("path", "/attachments/b.txt"), ("agent", "desk")],
                ),
                &s.stranger,
            )
            .body("theirs");
        assert_eq!(send(r).await.0, 201);
        let (_, _, body) =
            send(s.req("GET", "/threads/new-one/files?dir=/attachments", &s.owner)).await;
        assert_eq!(json_of(&body)["items"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn a_message_names_attachments_of_its_thread() {
    for backend in store_backends().await {
        let s = Server::start(&backend).await;
        let (status, body) = s
            .put(
                "/attachments/q3.pdf",
                "application/pdf",
                b"%PDF-1.7\n...".to_vec(),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        let r = s
            .req("POST", "/threads/t/messages?wait=true", &s.owner)
            .json(&json!({ "text": "read this", "attachments": ["/attachments/q3.pdf"] }));
        let (status, _, body) = send(r).await;
        assert_eq!(status, 200, "{body}");
        let (_, _, body) = send(s.req("GET", "/threads/t/messages", &s.owner)).await;
        let page = json_of(&body);
        let said: Vec<&str> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["data"]["content"].as_str())
            .collect();
        assert!(
            said.contains(&"clerk: read this [/attachments/q3.pdf application/pdf 12]"),
            "{said:?}"
        );

        let before = said.len();
        for (attachments, path) in [
            (json!(["/attachments/nope.pdf"]), "/attachments/nope.pdf"),
            (json!(["/attachments"]), "/attachments"),
        ] {
            let r = s
                .req("POST", "/threads/t/messages", &s.owner)
                .json(&json!({ "text": "and this", "attachments": attachments }));
            let (status, _, body) = send(r).await;
            assert_eq!(status, 422, "{body}");
            let p = json_of(&body);
            assert_eq!(
                (p["code"].as_str(), p["path"].as_str()),
                (Some("invalid_attachment"), Some(path))
            );
        }
        let r = s
            .req("POST", "/threads/t/messages", &s.owner)
            .json(&json!({ "text": "x", "attachments": ["../etc/passwd"] }));
        let (status, _, body) = send(r).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(json_of(&body)["field"], "attachments[0]");
        // Nothing was written by the refusals.
        let (_, _, body) = send(s.req("GET", "/threads/t/messages", &s.owner)).await;
        assert_eq!(json_of(&body)["items"].as_array().unwrap().len(), before);
    }
}

#[tokio::test]
async fn a_body_broken_off_mid_upload_leaves_no_file() {
    for backend in store_backends().await {
        let s = Server::start(&backend).await;
        let mut sock = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        let head = format!(
            "POST /threads/t/files?path=/attachments/half.bin HTTP/1.1\r\nHost: {}\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: 40000\r\n\r\n",
            s.addr, s.owner
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        sock.write_all(&bytes(20000)).await.unwrap();
        // The client goes away mid-body (its half of the connection closed): the server reads the
        // end of the stream before the length it was promised, and answers (if it can) once the
        // upload is abandoned.
        sock.shutdown().await.unwrap();
        let mut answer = Vec::new();
        let _ = sock.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
            "{answer}"
        );
        let (_, _, body) = send(s.req("GET", "/threads/t/files?dir=/", &s.owner)).await;
        assert_eq!(json_of(&body)["items"], json!([]), "{body}");
        let (status, _, _) =
            send(s.req("GET", "/threads/t/files/attachments/half.bin", &s.owner)).await;
        assert_eq!(status, 404);
    }
}
