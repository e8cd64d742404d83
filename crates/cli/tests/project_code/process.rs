//! Real `duet` processes for the project-code tests: a command with zod on `NODE_PATH` and none
//! of the caller's provider or database variables, `duet serve` on a free port with its log lines
//! on a channel, an API key, and scratch copies of the TypeScript example.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::support::{self, Backend, Scratch};

/// The folder `NODE_PATH` names: it must hold zod (`scripts/test-servers` installs it).
pub(crate) fn node_modules() -> PathBuf {
    let dir = support::repo().join(".ci/node/node_modules");
    assert!(
        dir.join("zod/package.json").is_file(),
        "zod is not installed in {}: run scripts/test-servers",
        dir.display()
    );
    dir
}

/// Whether the node the node host starts is there (`DUET_NODE`, else `node` on `PATH`): when it
/// is not, the test says it is skipped, unless `DUET_REQUIRE_NODE=1` makes that a failure.
pub(crate) fn node_here() -> bool {
    let found = std::process::Command::new(duet_js::NodeOptions::default().node)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("DUET_REQUIRE_NODE").as_deref() != Ok("1"),
            "DUET_REQUIRE_NODE=1 and there is no `node` on PATH"
        );
        eprintln!("skipped: no `node` on PATH (set DUET_REQUIRE_NODE=1 to make this a failure)");
    }
    found
}

/// The `--db` a `duet` process opens to reach `backend`'s database.
pub(crate) fn db_arg(backend: &Backend) -> String {
    match backend {
        Backend::Sqlite(p) => p.display().to_string(),
        Backend::Postgres(url) => url.clone(),
        Backend::Memory(..) => panic!("a process cannot open another's memory store"),
    }
}

/// `duet ARGS --project PROJECT --db DB`, killed when dropped; short leases, so that a killed
/// process's thread is another's soon.
pub(crate) fn duet(project: &Path, db: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args)
        .arg("--project")
        .arg(project)
        .arg("--db")
        .arg(db)
        .env("NODE_PATH", node_modules())
        .env("DUET_LEASE_MS", "600")
        .env("DUET_RECOVER_EVERY_MS", "200")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DUET_DATABASE_URL")
        .env_remove("ORDERS_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs `cmd` to its end: (exit code, stdout, stderr).
pub(crate) async fn output(mut cmd: Command) -> (i32, String, String) {
    let out = cmd.output().await.expect("duet runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A new API key for `ops`: its bearer token.
pub(crate) async fn key(project: &Path, db: &str) -> String {
    let (code, stdout, stderr) =
        output(duet(project, db, &["keys", "create", "--principal", "ops"])).await;
    assert_eq!(code, 0, "{stderr}");
    stdout.trim().to_owned()
}

/// A `duet serve` process: its address, an HTTP client under one key, and its log lines (JSON,
/// `duet::code` at info: the project's `console`).
pub(crate) struct Served {
    child: Child,
    pub(crate) base: String,
    token: String,
    http: reqwest::Client,
    logs: mpsc::UnboundedReceiver<Value>,
}

impl Served {
    /// Starts `duet serve` for `project` on `db` with `env` set.
    pub(crate) async fn start(project: &Path, db: &str, env: &[(&str, &str)]) -> Served {
        let token = key(project, db).await;
        let mut cmd = duet(
            project,
            db,
            &["serve", "--listen", "127.0.0.1:0", "--log-format", "json"],
        );
        cmd.env("RUST_LOG", "warn,duet::code=info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("duet serve starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut early = Vec::new();
        let base = loop {
            let line = lines.next_line().await.expect("stderr");
            let Some(line) = line else {
                panic!("duet serve exited: {early:#?}");
            };
            if let Some(addr) = line.strip_prefix("duet serve: listening on ") {
                break addr.trim().to_owned();
            }
            early.push(line);
        };
        let (tx, logs) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Served {
            child,
            base,
            token,
            http: reqwest::Client::new(),
            logs,
        }
    }

    /// A request to `path` under the key.
    pub(crate) fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// `GET path`: (status, body as JSON, or the text as a JSON string).
    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        send(self.req(reqwest::Method::GET, path)).await
    }

    /// `POST path` with a JSON body: (status, body).
    pub(crate) async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        send(self.req(reqwest::Method::POST, path).json(&body)).await
    }

    /// Thread `key`'s journal from its event stream: each entry's kind and its data (a message's
    /// fields, a record's), read until a status of the thread (the SSE `status` event without
    /// an id: a `status` record has one) satisfies `done` — the entries up to it. Panics after
    /// 20 s (a hung test).
    pub(crate) async fn journal_until(
        &self,
        key: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Vec<(String, Value)> {
        use futures::StreamExt;
        let resp = self
            .req(reqwest::Method::GET, &format!("/threads/{key}/events"))
            .send()
            .await
            .expect("events");
        assert_eq!(resp.status(), 200, "{key}");
        let mut body = resp.bytes_stream();
        let mut buffer = String::new();
        let mut entries = Vec::new();
        let read = async {
            loop {
                while let Some(end) = buffer.find("\n\n") {
                    let block: String = buffer.drain(..end + 2).collect();
                    let field = |name: &str| {
                        block
                            .lines()
                            .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
                    };
                    let (Some(event), Some(data)) = (field("event"), field("data")) else {
                        continue;
                    };
                    let data: Value = serde_json::from_str(data).expect("JSON data");
                    if event == "status" && field("id").is_none() {
                        if done(&data) {
                            return;
                        }
                        continue;
                    }
                    entries.push((event.to_owned(), data["data"].clone()));
                }
                match body.next().await {
                    Some(Ok(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
                    _ => panic!("the events of {key} ended first: {entries:#?}"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .unwrap_or_else(|_| panic!("the journal of {key} was not read"));
        entries
    }

    /// Thread `key`'s journal as it is (up to the status the stream starts with).
    pub(crate) async fn journal(&self, key: &str) -> Vec<(String, Value)> {
        self.journal_until(key, |_| true).await
    }

    /// Kills the process (SIGKILL) and waits until it is gone.
    pub(crate) async fn kill(mut self) {
        self.child.kill().await.expect("SIGKILL");
    }

    /// Log lines until one satisfies `done` (panics after 20 s: a hung test).
    pub(crate) async fn log_until(&mut self, done: impl Fn(&Value) -> bool) -> Value {
        let wait = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = self.logs.recv().await {
                if done(&line) {
                    return Some(line);
                }
            }
            None
        });
        match wait.await {
            Ok(Some(line)) => line,
            _ => panic!("no such log line"),
        }
    }
}

/// Sends `req`: (status, body as JSON, or the text as a JSON string).
pub(crate) async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// A copy of `examples/typescript` in a scratch folder, with `edit` applied to each file's
/// text (by its path from the project's root).
pub(crate) fn example_copy(tag: &str, edit: impl Fn(&str, String) -> String) -> Scratch {
    let copy = Scratch::new(tag);
    let from = support::repo().join("examples/typescript");
    let mut stack = vec![from.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                // A `node_modules` installed in the example (as its README suggests for a
                // project of your own) is not the example: zod comes from `NODE_PATH`.
                // Nor is a dot folder (a `duet run` of the example leaves its database in `.duet`).
                if entry.file_name() != "node_modules"
                    && !entry.file_name().to_string_lossy().starts_with('.')
                {
                    stack.push(path);
                }
                continue;
            }
            let rel = path
                .strip_prefix(&from)
                .expect("inside")
                .display()
                .to_string();
            let text = std::fs::read_to_string(&path).expect("a text file");
            copy.write(&rel, &edit(&rel, text));
        }
    }
    copy
}

/// `old` replaced by `new` in `text`, which must hold it.
pub(crate) fn replaced(text: &str, old: &str, new: &str) -> String {
    assert!(text.contains(old), "`{old}` is not in {text}");
    text.replace(old, new)
}
