//! duet behind PgBouncer (Debian's `pgbouncer`, started here from a config of its own on a
//! loopback port, in front of a fresh database of `DATABASE_URL`'s server, and gone with the
//! test). In session mode the server works as on Postgres itself: a question parked, followed
//! over SSE (the change feed's `LISTEN` goes through the pooler too: on Postgres nothing else
//! wakes a follower) and answered. In transaction and statement mode the store refuses to open
//! and `duet serve` to start, saying why and what to use, before writing anything. Without
//! Postgres or pgbouncer this says SKIPPED loudly, unless `DUET_REQUIRE_PGBOUNCER=1` (CI).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::harness::Server;
use crate::support::{self, Backend};

/// The pool modes a PgBouncer database can have; the config names a database after each.
const MODES: [&str; 3] = ["session", "transaction", "statement"];

/// Stops the test where it cannot run: loudly, or as a failure under `DUET_REQUIRE_PGBOUNCER=1`.
fn skip(why: &str) {
    assert!(
        std::env::var("DUET_REQUIRE_PGBOUNCER").map_or(true, |v| v != "1"),
        "DUET_REQUIRE_PGBOUNCER=1 but {why}: .ci/run installs pgbouncer (apt-get) and sets DATABASE_URL"
    );
    eprintln!("\n!!! SKIPPED: {why} (DUET_REQUIRE_PGBOUNCER=1 makes this a failure) !!!\n");
}

/// The `pgbouncer` binary: on `PATH`, or where Debian puts it.
fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("pgbouncer"))
        .find(|p| p.is_file())
}

/// A PgBouncer in front of one database, with a database of its own per pool mode. It runs
/// under a shell that stops it when its stdin closes — when this is dropped, or when the test
/// process dies however it dies — and under `timeout` in any case.
struct Bouncer {
    port: u16,
    user: String,
    dir: PathBuf,
    stdin: Option<ChildStdin>,
    _child: Child,
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `"$@"` (pgbouncer and its arguments) until stdin closes, for at most ten minutes.
const SUPERVISOR: &str =
    "timeout 600 \"$@\" & pid=$!; read -r _; kill \"$pid\" 2>/dev/null; wait \"$pid\"";

impl Bouncer {
    /// A PgBouncer for the database at `direct` (a URL of `DATABASE_URL`'s server), or `None`
    /// (said loudly) without one installed.
    async fn start(direct: &str) -> Option<Bouncer> {
        let Some(binary) = binary() else {
            skip("pgbouncer is not installed");
            return None;
        };
        let version = std::process::Command::new(&binary)
            .arg("--version")
            .output()
            .expect("pgbouncer --version");
        let version = String::from_utf8_lossy(&version.stdout);
        eprintln!("pooler tests on {}", version.lines().next().unwrap_or("?"));
        let url = reqwest::Url::parse(direct).expect("DATABASE_URL is a URL");
        let user = url.username().to_owned();
        let mut server = format!(
            "host={} port={} dbname={} user={user}",
            url.host_str().unwrap_or("127.0.0.1"),
            url.port().unwrap_or(5432),
            url.path().trim_start_matches('/'),
        );
        if let Some(password) = url.password() {
            server.push_str(&format!(" password={password}"));
        }
        let dir = std::env::temp_dir().join(format!("duet-pgbouncer-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        // PgBouncer will not run as root: it is started as `nobody` then, who must read this.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        // A free port can be taken between finding it and PgBouncer binding it: try again.
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let databases: String = MODES
                .iter()
                .map(|mode| format!("duet_{mode} = {server} pool_mode={mode}\n"))
                .collect();
            let users = dir.join("users.txt");
            write(&users, &format!("\"{user}\" \"\"\n"));
            let config = dir.join("pgbouncer.ini");
            write(
                &config,
                &format!(
                    "[databases]\n{databases}\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                     listen_port = {port}\nunix_socket_dir =\nauth_type = trust\n\
                     auth_file = {}\nmax_client_conn = 100\ndefault_pool_size = 20\n\
                     max_db_connections = 20\n",
                    users.display()
                ),
            );
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(SUPERVISOR).arg("sh").arg(&binary);
            if root {
                cmd.args(["-u", "nobody"]);
            }
            let mut child = cmd
                .arg(&config)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("sh starts pgbouncer");
            let stdin = child.stdin.take();
            let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
            let mut log = Vec::new();
            let up = loop {
                match lines.next_line().await {
                    Ok(Some(line)) if line.contains("process up") => break true,
                    Ok(Some(line)) => log.push(line),
                    _ => break false,
                }
            };
            if up {
                tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                return Some(Bouncer {
                    port,
                    user,
                    dir,
                    stdin,
                    _child: child,
                });
            }
            let log = log.join("\n");
            assert!(
                log.contains("Address already in use"),
                "pgbouncer did not start:\n{log}"
            );
        }
        panic!("pgbouncer found no free port in three tries");
    }

    /// The URL of the database in pool mode `mode`.
    fn url(&self, mode: &str) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/duet_{mode}",
            self.user, self.port
        )
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// A fresh database on `DATABASE_URL`'s server, or `None` (said loudly) without one.
async fn database() -> Option<String> {
    let postgres = support::backends().await.into_iter().find_map(|b| match b {
        Backend::Postgres(url) => Some(url),
        _ => None,
    });
    if postgres.is_none() {
        skip("DATABASE_URL is not set (the pooler tests need Postgres)");
    }
    postgres
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_pgbouncer_in_session_mode_the_server_works_as_on_postgres() {
    let Some(direct) = database().await else {
        return;
    };
    let Some(bouncer) = Bouncer::start(&direct).await else {
        return;
    };
    let server = Server::start(&Backend::Postgres(bouncer.url("session"))).await;
    let token = server.key("alice", false).await;
    let (status, parked) = server
        .post(
            "/threads?wait=true",
            &token,
            json!({"agent": "question_gate", "key": "k", "text": "Rotate the keys?"}),
        )
        .await;
    assert_eq!(
        (status, parked["status"].as_str()),
        (200, Some("awaiting_human")),
        "{parked}"
    );
    let approval = parked["approval"].as_str().expect("approval id");

    // Followed: once the stream has said where the thread is, what comes next reaches it only
    // through LISTEN.
    let mut events = server.events("/threads/k/events", &token, None).await;
    let now = events.until(|e| e.event == "status").await;
    assert_eq!(
        now.last().map(|e| &e.data["status"]),
        Some(&json!("awaiting_human"))
    );
    let (status, body) = server
        .post(
            &format!("/approvals/{approval}"),
            &token,
            json!({"text": "Yes, approved."}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // (`until` gives up after 20 s: then the pooler kept the feed from the follower.)
    let settled = events
        .until(|e| e.event == "status" && e.data["status"] == "idle")
        .await;
    assert!(
        settled
            .iter()
            .any(|e| e.event == "message" && e.data["data"]["content"] == "Yes, approved."),
        "{settled:?}"
    );
    let (_, thread) = server.get("/threads/k", &token).await;
    assert_eq!(thread["result"], "approved", "{thread}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_pgbouncer_in_transaction_mode_duet_refuses_to_start_and_says_why() {
    let Some(direct) = database().await else {
        return;
    };
    let Some(bouncer) = Bouncer::start(&direct).await else {
        return;
    };
    for mode in ["transaction", "statement"] {
        let url = bouncer.url(mode);
        let refused = match duet_store::open(&url).await {
            Ok(_) => panic!("{mode} mode: the store opened"),
            Err(e) => e.to_string(),
        };
        assert!(
            refused.contains("does not keep one Postgres session")
                && refused.contains("`pool_mode = session`"),
            "{mode} mode: {refused}"
        );

        let serve = Command::new(env!("CARGO_BIN_EXE_duet"))
            .args([
                "serve",
                "--no-auth",
                "--listen",
                "127.0.0.1:0",
                "--db",
                &url,
            ])
            .arg("--project")
            .arg(support::repo())
            .env_remove("DUET_DATABASE_URL")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), serve)
            .await
            .expect("duet serve exits at once")
            .expect("duet serve runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{mode} mode: {stderr}");
        assert!(
            stderr.contains("does not keep one Postgres session")
                && stderr.contains("`pool_mode = session`")
                && !stderr.contains("listening on"),
            "{mode} mode: {stderr}"
        );
    }
    // Refused before migrating: nothing was written.
    let tables = support::psql(
        &direct,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    )
    .await;
    assert_eq!(tables.trim(), "0");
}
