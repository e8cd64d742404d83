//! `/readyz` says what a load balancer needs to know: whether the database takes a write now.
//! A SQLite file that refuses writes while the server runs makes it 503 (and 200 again once it
//! takes them); `duet serve` refuses to start on a read-only file; a Postgres that stops
//! answering (a loopback proxy in front of it, shut) is a 503 within about a second, not after
//! the pool's five, and ready again without a restart once it is back; and a poll inside the
//! cache's life writes nothing.
//!
//! A read-only file: `chmod 0444` where that stops writes; as root, where it does not, the
//! immutable attribute (`chattr +i`), which also stops writes through descriptors already open.
//! Where neither can be had, the test says SKIPPED.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::harness::{Server, options, send};
use crate::support::{self, Backend};

/// Files made read-only until this is dropped.
struct ReadOnly {
    files: Vec<PathBuf>,
    immutable: bool,
}

impl ReadOnly {
    /// Makes `files` (those that exist) refuse writes — through descriptors already open too
    /// when `open_too` — or `None` (said) when this machine cannot.
    fn make(files: &[PathBuf], open_too: bool) -> Option<ReadOnly> {
        use std::os::unix::fs::PermissionsExt;
        let files: Vec<PathBuf> = files.iter().filter(|f| f.exists()).cloned().collect();
        for f in &files {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        }
        let mut guard = ReadOnly {
            files,
            immutable: false,
        };
        let writable = guard
            .files
            .iter()
            .any(|f| std::fs::OpenOptions::new().append(true).open(f).is_ok());
        if !writable && !open_too {
            return Some(guard);
        }
        // Root writes to a 0444 file, and an open descriptor writes whatever the mode.
        let chattr = std::process::Command::new("chattr")
            .arg("+i")
            .args(&guard.files)
            .status();
        guard.immutable = true;
        if !chattr.is_ok_and(|s| s.success()) {
            eprintln!(
                "\n!!! SKIPPED: cannot make a file refuse writes here (chmod does not stop this user, chattr +i failed) !!!\n"
            );
            return None;
        }
        Some(guard)
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.immutable {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .args(&self.files)
                .status();
        }
        for f in &self.files {
            let _ = std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644));
        }
    }
}

/// A SQLite file and its WAL. (Not its `-shm`: SQLite maps it into memory, and a mapped page of
/// a file that became immutable faults — SIGBUS — when written, which is not what a read-only
/// database does to a server.)
fn sqlite_files(db: &Path) -> Vec<PathBuf> {
    ["", "-wal"]
        .iter()
        .map(|s| PathBuf::from(format!("{}{s}", db.display())))
        .collect()
}

fn uncached() -> duet_server::Options {
    duet_server::Options {
        ready_cache: Duration::ZERO,
        ..options()
    }
}

async fn readyz(server: &Server) -> (u16, Value) {
    send(reqwest::Client::new().get(format!("{}/readyz", server.base))).await
}

/// Asks `/readyz` until it answers 200, at most `attempts` times (each a probe of its own: the
/// pool drops a connection that failed, so a few may be needed after an outage).
async fn ready_again(server: &Server, attempts: usize) -> (u16, Value) {
    let mut last = (0, Value::Null);
    for _ in 0..attempts {
        last = readyz(server).await;
        if last.0 == 200 {
            break;
        }
    }
    last
}

#[tokio::test]
async fn readyz_is_503_while_the_sqlite_file_refuses_writes() {
    let backend = support::backends().await.remove(0);
    let Backend::Sqlite(db) = &backend else {
        panic!("the first backend is SQLite")
    };
    let server = Server::start_with(&backend, &support::repo(), uncached()).await;
    assert_eq!(readyz(&server).await.0, 200);
    let Some(read_only) = ReadOnly::make(&sqlite_files(db), true) else {
        return;
    };
    let (status, body) = readyz(&server).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "database", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("does not take writes")),
        "{body}"
    );
    drop(read_only);
    let (status, body) = ready_again(&server, 5).await;
    assert_eq!(
        status, 200,
        "ready again once the file takes writes: {body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn duet_serve_refuses_to_start_on_a_read_only_database_file() {
    let backend = support::backends().await.remove(0);
    let Backend::Sqlite(db) = &backend else {
        panic!("the first backend is SQLite")
    };
    // Created and migrated, then closed: what a server finds at its next start.
    drop(backend.open_both().await);
    let Some(_read_only) = ReadOnly::make(&sqlite_files(db), false) else {
        return;
    };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["serve", "--listen", "127.0.0.1:0", "--no-auth", "--project"])
        .arg(support::repo())
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("duet serve runs");
    // Read what it says until it exits — or announces it is serving, which is the failure.
    let stderr = std::io::BufRead::lines(std::io::BufReader::new(
        child.stderr.take().expect("stderr"),
    ))
    .map_while(Result::ok)
    .inspect(|line| {
        if line.contains("listening on") {
            let _ = child.kill();
        }
    })
    .collect::<Vec<_>>()
    .join("\n");
    let status = child.wait().expect("exits");
    assert!(
        !stderr.contains("listening on"),
        "it served a read-only database: {stderr}"
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("duet: cannot serve: the database does not take writes")
            || stderr.contains("duet: cannot open the database"),
        "{stderr}"
    );
}

/// A TCP proxy on a loopback port to `target`, which can be shut (its listener closed, every
/// connection through it cut) and opened again on the same port.
struct Proxy {
    port: u16,
    target: String,
    open: CancellationToken,
}

impl Proxy {
    async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let proxy = Proxy {
            port,
            target,
            open: CancellationToken::new(),
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&self, listener: TcpListener) {
        let (open, target) = (self.open.clone(), self.target.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = open.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((mut client, _)) = accepted else {
                    return;
                };
                let (open, target) = (open.clone(), target.clone());
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        () = open.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                    }
                });
            }
        });
    }

    /// Shut: nothing listens on the port, and the connections through it are cut.
    fn shut(&mut self) {
        self.open.cancel();
    }

    /// Open again, on the same port.
    async fn reopen(&mut self) {
        self.open = CancellationToken::new();
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the same port again");
        self.serve(listener);
    }
}

#[tokio::test]
async fn readyz_fails_fast_while_postgres_is_unreachable_and_recovers() {
    let Some(Backend::Postgres(url)) = support::backends().await.into_iter().nth(1) else {
        eprintln!("\n!!! SKIPPED: no DATABASE_URL, no Postgres to stop !!!\n");
        return;
    };
    let mut direct = reqwest::Url::parse(&url).expect("a URL");
    let target = format!(
        "{}:{}",
        direct.host_str().expect("a host"),
        direct.port().unwrap_or(5432)
    );
    let mut proxy = Proxy::start(target).await;
    direct.set_host(Some("127.0.0.1")).expect("host");
    direct.set_port(Some(proxy.port)).expect("port");
    let backend = Backend::Postgres(direct.to_string());
    let server = Server::start_with(&backend, &support::repo(), uncached()).await;
    assert_eq!(readyz(&server).await.0, 200);

    proxy.shut();
    let asked = Instant::now();
    let (status, body) = readyz(&server).await;
    let took = asked.elapsed();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "database", "{body}");
    assert!(
        took < Duration::from_millis(2_500),
        "answered in {took:?}: {body}"
    );
    // And again, now that the pool has no connection left to try: still within the bound.
    let asked = Instant::now();
    let (status, body) = readyz(&server).await;
    assert_eq!(status, 503, "{body}");
    assert!(asked.elapsed() < Duration::from_millis(2_500), "{body}");

    proxy.reopen().await;
    let (status, body) = ready_again(&server, 20).await;
    assert_eq!(status, 200, "ready again without a restart: {body}");
    server.stop().await;
}

#[tokio::test]
async fn a_poll_within_the_cache_life_writes_nothing() {
    let Some(Backend::Postgres(url)) = support::backends().await.into_iter().nth(1) else {
        eprintln!("\n!!! SKIPPED: no DATABASE_URL (the heartbeat row is read with psql) !!!\n");
        return;
    };
    let backend = Backend::Postgres(url.clone());
    let cached = duet_server::Options {
        ready_cache: Duration::from_secs(600),
        ..options()
    };
    let server = Server::start_with(&backend, &support::repo(), cached).await;
    assert_eq!(readyz(&server).await.0, 200);
    let beat = duet_store::testing::psql(&url, "SELECT at FROM heartbeat").await;
    assert!(!beat.trim().is_empty(), "the probe wrote the heartbeat row");
    for _ in 0..5 {
        assert_eq!(readyz(&server).await.0, 200);
    }
    let again = duet_store::testing::psql(&url, "SELECT at FROM heartbeat").await;
    assert_eq!(
        beat, again,
        "polls inside the cache's life wrote the row again"
    );
    server.stop().await;
}
