//! The thread filesystem's benchmark (a documented command, not a test): write and read
//! throughput of files of 1 KiB, 1 MiB and 100 MiB on SQLite and, when `DATABASE_URL` is set,
//! on Postgres (a fresh database, dropped at the end), each with its chunks in the database's
//! `blobs` table and in a directory (`DirBlobs`); and a copy of the 100 MiB file to another
//! thread.
//!
//! ```sh
//! cargo bench -p duet-store --bench files                                        # SQLite
//! DATABASE_URL=postgres://root@127.0.0.1:5432/test cargo bench -p duet-store --bench files
//! BENCH_BIG_MIB=20 cargo bench -p duet-store --bench files                       # smaller
//! ```
//!
//! A write is what an upload does: the content through `Chunker` (64 KiB at a time), each 1 MiB
//! chunk hashed and `put_blob`, then one `write_files` Put of the row. A read is the row, then
//! its chunks one by one. MiB/s counts the file's bytes over the whole of it. The copy is a Put
//! of the same chunks in another thread: its time, and the bytes it wrote (the database's size
//! before and after, and the directory's).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use duet_runtime::files::chunk::{self, Chunker};
use duet_runtime::{BlobStore, FileKind, FileRecord, FileWrite, NewThread, Store, ThreadId};
use duet_store::DirBlobs;
use uuid::Uuid;

const MIB: f64 = 1024.0 * 1024.0;

/// Bytes that do not repeat (so every chunk is its own), from `seed`.
fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits")
}

/// Writes `data` as file `path` of `thread`: chunked, each chunk put, then the row.
async fn write(
    store: &dyn Store,
    blobs: &dyn BlobStore,
    thread: ThreadId,
    path: &str,
    data: &[u8],
) -> FileRecord {
    let mut chunker = Chunker::new();
    let mut chunks = Vec::new();
    for piece in data.chunks(64 << 10) {
        for c in chunker.push(piece) {
            let h = chunk::hash(&c);
            blobs.put_blob(&h, c).await.expect("put");
            chunks.push(h);
        }
    }
    if let Some(c) = chunker.finish() {
        let h = chunk::hash(&c);
        blobs.put_blob(&h, c).await.expect("put");
        chunks.push(h);
    }
    let at = now_ms();
    let record = FileRecord {
        path: path.into(),
        kind: FileKind::File,
        size: i64::try_from(data.len()).expect("fits"),
        mime_type: Some("application/octet-stream".into()),
        declared_type: None,
        chunks,
        meta: serde_json::Value::Null,
        created_at: at,
        updated_at: at,
    };
    store
        .write_files(thread, vec![FileWrite::Put(record.clone())])
        .await
        .expect("row");
    record
}

/// Reads file `path` of `thread` back, chunk by chunk; its bytes.
async fn read(store: &dyn Store, blobs: &dyn BlobStore, thread: ThreadId, path: &str) -> usize {
    let record = store.file(thread, path).await.expect("row").expect("there");
    let mut n = 0;
    for h in &record.chunks {
        n += blobs.blob(h).await.expect("chunk").expect("stored").len();
    }
    assert_eq!(n as i64, record.size);
    n
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

async fn thread(store: &dyn Store, key: &str) -> ThreadId {
    let new = NewThread {
        id: Uuid::now_v7(),
        agent: "bench",
        parent: None,
        principal: None,
        source: None,
        now: now_ms(),
    };
    store.open_thread(key, new).await.expect("thread").id
}

/// One backend and chunk store: the size rows, then the copy.
async fn run(store: Arc<dyn Store>, blobs: Arc<dyn BlobStore>, label: &str, dir: Option<&Path>) {
    let big_mib: usize = std::env::var("BENCH_BIG_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let owner = thread(&*store, &format!("{label}-owner")).await;
    for (name, size, count) in [
        ("1 KiB", 1usize << 10, 500usize),
        ("1 MiB", 1 << 20, 50),
        (&format!("{big_mib} MiB"), big_mib << 20, 1),
    ] {
        let files: Vec<Vec<u8>> = (0..count)
            .map(|i| content(size, (size + i) as u64))
            .collect();
        let started = Instant::now();
        for (i, data) in files.iter().enumerate() {
            write(&*store, &*blobs, owner, &format!("/{name}/{i}"), data).await;
        }
        let wrote = started.elapsed();
        let started = Instant::now();
        let mut bytes = 0;
        for i in 0..count {
            bytes += read(&*store, &*blobs, owner, &format!("/{name}/{i}")).await;
        }
        let read_in = started.elapsed();
        let total = (size * count) as f64 / MIB;
        assert_eq!(bytes, size * count);
        println!(
            "| {label} | {name} × {count} | {:.1} MiB/s ({:.0} files/s) | {:.1} MiB/s ({:.0} files/s) |",
            total / wrote.as_secs_f64(),
            count as f64 / wrote.as_secs_f64(),
            total / read_in.as_secs_f64(),
            count as f64 / read_in.as_secs_f64(),
        );
    }
    // The copy: the big file's row, its chunks named again, in another thread.
    let child = thread(&*store, &format!("{label}-child")).await;
    let record = store
        .file(owner, &format!("/{big_mib} MiB/0"))
        .await
        .expect("row")
        .expect("there");
    let (db_before, dir_before) = (
        store.size_bytes().await.expect("size"),
        dir.map_or(0, dir_bytes),
    );
    let started = Instant::now();
    store
        .write_files(
            child,
            vec![FileWrite::Put(FileRecord {
                path: "/attachments/big".into(),
                ..record
            })],
        )
        .await
        .expect("copy");
    let took = started.elapsed();
    let (db_after, dir_after) = (
        store.size_bytes().await.expect("size"),
        dir.map_or(0, dir_bytes),
    );
    println!(
        "| {label} | copy of {big_mib} MiB to another thread | {:.2} ms | database {:+} bytes, directory {:+} bytes |",
        took.as_secs_f64() * 1e3,
        db_after - db_before,
        dir_after as i64 - dir_before as i64,
    );
}

/// Removes the scratch folder, and drops the Postgres database, when dropped (even by a panic).
struct Cleanup {
    root: PathBuf,
    pg: Option<(String, String)>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        if let Some((url, name)) = &self.pg {
            let _ = std::process::Command::new("psql")
                .arg(url)
                .arg("-qc")
                .arg(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .status();
        }
    }
}

#[tokio::main]
async fn main() {
    let root = std::env::temp_dir().join(format!("duet-bench-files-{}", std::process::id()));
    std::fs::create_dir_all(&root).expect("scratch");
    let mut cleanup = Cleanup {
        root: root.clone(),
        pg: None,
    };
    let mut urls = vec![("sqlite", root.join("files.db").display().to_string())];
    if let Ok(url) = std::env::var("DATABASE_URL") {
        let name = format!("duet_bench_{}", Uuid::now_v7().simple());
        let status = std::process::Command::new("psql")
            .arg(&url)
            .arg("-qc")
            .arg(format!("CREATE DATABASE {name}"))
            .status()
            .expect("psql");
        assert!(status.success());
        let (base, _) = url.rsplit_once('/').expect("URL ends in /DB");
        urls.push(("postgres", format!("{base}/{name}")));
        cleanup.pg = Some((url.clone(), name));
    }
    println!("| store, chunks in | files | write | read |\n|---|---|---|---|");
    for (backend, url) in urls {
        let store = duet_store::connect(&url).await.expect("store");
        run(
            store.clone(),
            store.clone(),
            &format!("{backend}, database"),
            None,
        )
        .await;
        let dir = root.join(format!("{backend}-chunks"));
        let blobs = Arc::new(DirBlobs::open(&dir).expect("dir"));
        run(store, blobs, &format!("{backend}, directory"), Some(&dir)).await;
    }
    drop(cleanup);
}
