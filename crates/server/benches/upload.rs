//! The upload benchmark (a documented command, not a test): a 200 MiB body streamed over HTTP on
//! 127.0.0.1 to `POST /threads/{key}/files` of `duet serve`'s router, then downloaded; the
//! throughput of each, and the process's peak resident memory (`VmHWM` in `/proc/self/status`)
//! before and after — which should stay flat, not grow by the file's size.
//!
//! ```sh
//! cargo bench -p duet-server --bench upload                      # SQLite (a scratch file)
//! BENCH_STORE=memory cargo bench -p duet-server --bench upload   # rows in memory, chunks in DirBlobs
//! BENCH_MIB=1024 cargo bench -p duet-server --bench upload
//! ```
//!
//! The client writes the body 64 KiB at a time as it makes it, with its `Content-Length`, and
//! reads the download the same way, so the peak is the server's.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use duet_runtime::files::FileLimits;
use duet_runtime::testing::{MemoryStore, Scratch};
use duet_runtime::{Handler, HandlerError, Message, Runtime, ThreadState};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Clerk;

#[async_trait]
impl Handler for Clerk {
    async fn handle(&self, state: &mut ThreadState<'_>, _: &Message) -> Result<(), HandlerError> {
        state.reply("ok");
        Ok(())
    }
}

/// The process's peak resident set, in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Piece `i` of the body (64 KiB, not all alike).
fn piece(i: usize) -> Vec<u8> {
    (0..64 * 1024)
        .map(|j| ((i * 31 + j * 7) % 251) as u8)
        .collect()
}

#[tokio::main]
async fn main() {
    let mib: usize = std::env::var("BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let memory = std::env::var("BENCH_STORE").is_ok_and(|v| v == "memory");
    let dir = Scratch::new("bench-upload");
    dir.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { handler: clerk }\nsideB: { human: true }\n",
    );
    dir.write("agents/handlers/clerk.yaml", "description: Answers.\n");
    let scratch = std::env::temp_dir().join(format!("duet-upload-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&scratch).expect("scratch");
    let (store, tables, name): (
        Arc<dyn duet_runtime::Store>,
        Arc<dyn duet_server_store::ServerStore>,
        &str,
    ) = if memory {
        (
            Arc::new(MemoryStore::new()),
            Arc::new(duet_server_store::testing::MemoryServerStore::default()),
            "memory rows, chunks on disk",
        )
    } else {
        let db = scratch.join("duet.db");
        let stores = duet_store::open(db.to_str().expect("utf-8"))
            .await
            .expect("SQLite");
        (stores.engine, stores.server, "SQLite")
    };
    let mut builder = Runtime::builder(dir.project(), store)
        .handler("clerk", Clerk)
        .file_limits(FileLimits {
            max_file_bytes: (mib as u64 + 1) << 20,
            max_thread_bytes: (mib as u64 + 1) << 20,
            ..FileLimits::default()
        });
    if memory {
        let blobs = scratch.join("blobs");
        std::fs::create_dir_all(&blobs).expect("blobs");
        builder = builder.blobs(Arc::new(duet_store::DirBlobs::open(blobs).expect("blobs")));
    }
    let rt = builder.build();
    let options = duet_server::Options {
        auth: false,
        ..duet_server::Options::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let state = duet_server::AppState::new(rt, tables, options);
    let stop = tokio_util::sync::CancellationToken::new();
    let signal = stop.clone();
    tokio::spawn(duet_server::serve(state, listener, async move {
        signal.cancelled().await;
    }));
    let http = reqwest::Client::new();
    let made = http
        .post(format!("http://{addr}/threads?wait=true"))
        .json(&json!({ "agent": "desk", "key": "t", "text": "hello" }))
        .send()
        .await
        .expect("thread");
    assert_eq!(made.status(), 200);

    let before = peak_mib();
    let pieces = mib * 16;
    let started = Instant::now();
    let mut sock = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /threads/t/files?path=/attachments/big.bin HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        pieces * 64 * 1024
    );
    sock.write_all(head.as_bytes()).await.expect("head");
    for i in 0..pieces {
        sock.write_all(&piece(i)).await.expect("body");
    }
    let mut answer = String::new();
    sock.read_to_string(&mut answer).await.expect("answer");
    let up = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let after_up = peak_mib();

    let started = Instant::now();
    let mut resp = http
        .get(format!("http://{addr}/threads/t/files/attachments/big.bin"))
        .send()
        .await
        .expect("download");
    assert_eq!(resp.status(), 200);
    let mut got = 0usize;
    while let Some(chunk) = resp.chunk().await.expect("chunk") {
        got += chunk.len();
    }
    let down = started.elapsed();
    assert_eq!(got, pieces * 64 * 1024);
    let after_down = peak_mib();
    stop.cancel();
    let _ = std::fs::remove_dir_all(&scratch);

    println!("upload benchmark: {mib} MiB on {name}");
    println!(
        "  upload   {:>8.1} MiB/s ({:.2} s)",
        mib as f64 / up.as_secs_f64(),
        up.as_secs_f64()
    );
    println!(
        "  download {:>8.1} MiB/s ({:.2} s)",
        mib as f64 / down.as_secs_f64(),
        down.as_secs_f64()
    );
    println!(
        "  peak RSS (VmHWM): {before:.1} MiB before, {after_up:.1} MiB after the upload, {after_down:.1} MiB after the download"
    );
}
