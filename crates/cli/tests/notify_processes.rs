//! Notifications across real processes (issue #31), received by a loopback webhook
//! (`support/hook.rs`) that the scratch project's `agents/notifications/hook.yaml` names:
//!
//! - a thread parked by `duet run` and `duet send` with no server running (the database wrote
//!   each notice in the fact's own transaction) is announced by the `duet serve` started after:
//!   every event once, in order, signed (but a question answered by then, which is not asked);
//! - a `duet serve` SIGKILLed after its receiver answered 503 leaves the delivery to the next
//!   `duet serve`, which delivers it once the receiver is back: the same `webhook-id`, taken once.
//!
//! On SQLite, and on Postgres when `DATABASE_URL` is set.

mod support;

#[path = "support/hook.rs"]
mod hook;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use duet_server_store::{Delivery, DeliveryQuery, DeliveryStatus, ServerStore};
use duet_store::testing::Backend;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use hook::{Hit, Hook};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `desk` asks which order, proposes the refund (a decision), then says it is done; `hook`
/// hears of every question parked and answered at `url`, signed with `HOOK_SECRET`.
fn project(url: &str) -> support::Scratch {
    let p = support::Scratch::new("notify-processes");
    p.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: desk\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    p.write(
        "agents/models/desk.yaml",
        "name: desk\nprovider: scripted\nmodel: demo\nscript:\n  - text: Which order?\n  - tool_calls: [{ name: refund, arguments: { order: A1 } }]\n  - text: Done.\n",
    );
    p.write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string } }, required: [order] }\nresult: \"refunded {{order}}\"\napproval: { decisions: [approve, reject] }\n",
    );
    p.write(
        "agents/notifications/hook.yaml",
        &format!(
            "events: [question.parked, question.answered]\nwebhook: {{ url: \"{url}\", secretEnv: HOOK_SECRET }}\n"
        ),
    );
    p
}

fn db_arg(backend: &Backend) -> String {
    match backend {
        Backend::Sqlite(p) => p.display().to_string(),
        Backend::Postgres(url) => url.clone(),
        Backend::Memory(..) => unreachable!("a process cannot open another's memory store"),
    }
}

fn now_s() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_secs()).expect("fits")
}

/// `duet ARGS --project P --db DB` to its end, with no server: it must succeed.
async fn duet(project: &Path, db: &str, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(args)
        .arg("--project")
        .arg(project)
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("duet runs");
    assert!(
        out.status.success(),
        "duet {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `duet serve --allow-private-push` on 127.0.0.1 with the webhook's secret, once it listens:
/// the process and its base URL. Killed when dropped.
async fn serve(project: &Path, db: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--allow-private-push",
            "--project",
        ])
        .arg(project)
        .arg("--db")
        .arg(db)
        .env("HOOK_SECRET", SECRET)
        .env("DUET_RECOVER_EVERY_MS", "200")
        .env("DUET_LEASE_MS", "600")
        .env("RUST_LOG", "warn")
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("duet serve starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let base = loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr")
            .expect("serve printed its address");
        if let Some(base) = line.strip_prefix("duet serve: listening on ") {
            break base.to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, base)
}

async fn sigkill(mut child: Child) {
    child.start_kill().expect("SIGKILL");
    let _ = child.wait().await;
}

/// `hit` is signed with the project's secret (checked now by the server's public verifier).
fn signed(hit: &Hit) -> bool {
    use duet_server::signatures::{Signed, TOLERANCE_S, verify};
    Signed::from_headers(&hit.headers)
        .is_ok_and(|s| verify(SECRET, s, hit.raw.as_bytes(), now_s(), TOLERANCE_S).is_ok())
}

/// The outbox, oldest first.
async fn outbox(tables: &dyn ServerStore) -> Vec<Delivery> {
    let query = DeliveryQuery {
        limit: 100,
        ..DeliveryQuery::default()
    };
    let mut found = tables.deliveries(&query).await.expect("deliveries");
    found.reverse();
    found
}

/// Reads the outbox until `done` holds (two minutes at most): what is awaited is another
/// process's write, which this process hears of no other way.
async fn until_outbox(tables: &dyn ServerStore, done: impl Fn(&[Delivery]) -> bool) {
    let start = Instant::now();
    while !done(&outbox(tables).await) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "still waiting: {:#?}",
            outbox(tables).await
        );
        // tidy:allow-sleep: the condition is a row another process writes; this reads it again
        // after a pause ("wait until", never a timed assertion).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn what_parked_with_no_server_running_is_delivered_once_by_the_next_serve() {
    for backend in support::backends().await {
        let at = backend.name();
        let db = db_arg(&backend);
        let tables = backend.open_both().await.server;
        let mut hook = Hook::up().await;
        let dir = project(&hook.url);

        // No server: the thread parks for its person, is answered, and waits on its refund.
        duet(
            dir.root(),
            &db,
            &["run", "desk", "--session", "n1", "-m", "refund please"],
        )
        .await;
        duet(dir.root(), &db, &["send", "n1", "A1"]).await;
        assert!(
            outbox(tables.as_ref()).await.is_empty(),
            "{at}: no router ran"
        );

        let (server, base) = serve(dir.root(), &db).await;
        // The person's question was answered before any server ran: it is not announced as
        // waiting (nobody should be asked it), its answer is; the call still waits, and is.
        let first = [hook.next().await, hook.next().await];
        let seen: Vec<(&str, &str, u16)> = first
            .iter()
            .map(|h| {
                (
                    h.event(),
                    h.body["question"]["kind"].as_str().unwrap_or(""),
                    h.status,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("question.answered", "question", 200),
                ("question.parked", "tool_call", 200),
            ],
            "{at}: every event, in order"
        );
        assert_eq!(first[0].body["question"]["text"], "Which order?", "{at}");
        assert_eq!(first[0].body["answer"]["text"], "A1", "{at}");
        assert_eq!(first[1].body["question"]["call"]["tool"], "refund", "{at}");
        for hit in &first {
            assert!(signed(hit), "{at}: {hit:?}");
            assert_eq!(hit.body["thread"]["key"], "n1", "{at}");
            let open = hit.body["links"]["open"].as_str().unwrap_or("");
            assert!(
                open.starts_with(&format!("{base}/inbox/items/")),
                "{at}: {open}"
            );
        }

        // A later park on the same subscription: nothing of n1 came again before it.
        duet(
            dir.root(),
            &db,
            &["run", "desk", "--session", "n2", "-m", "hi"],
        )
        .await;
        let later = hook.next().await;
        assert_eq!(later.body["thread"]["key"], "n2", "{at}: {}", later.body);
        let ids: BTreeSet<&str> = first.iter().chain([&later]).map(Hit::id).collect();
        assert_eq!(ids.len(), 3, "{at}: {ids:?}");
        let stored = outbox(tables.as_ref()).await;
        assert_eq!(stored.len(), 3, "{at}: {stored:#?}");
        assert!(
            stored[..2]
                .iter()
                .all(|d| d.status == DeliveryStatus::Delivered && d.attempts == 0),
            "{at}: {stored:#?}"
        );
        sigkill(server).await;
        assert!(hook.drain().is_empty(), "{at}");
    }
}

#[tokio::test]
async fn a_serve_killed_while_the_receiver_is_down_leaves_the_delivery_to_the_next() {
    for backend in support::backends().await {
        let at = backend.name();
        let db = db_arg(&backend);
        let tables = backend.open_both().await.server;
        let mut hook = Hook::start().await;
        let dir = project(&hook.url);

        let (first, _) = serve(dir.root(), &db).await;
        duet(
            dir.root(),
            &db,
            &["run", "desk", "--session", "k1", "-m", "refund please"],
        )
        .await;
        let refused = hook.next().await;
        assert_eq!(refused.status, 503, "{at}");
        assert_eq!(refused.event(), "question.parked", "{at}");
        // Killed once it recorded the refusal (killed before, its claim would hold the delivery
        // for 30 s more).
        until_outbox(tables.as_ref(), |d| {
            d.first().is_some_and(|d| d.attempts == 1)
        })
        .await;
        sigkill(first).await;

        hook.set_up(true);
        let (second, _) = serve(dir.root(), &db).await;
        let delivered = hook.next().await;
        assert_eq!(delivered.status, 200, "{at}");
        assert_eq!(delivered.id(), refused.id(), "{at}: the same webhook-id");
        assert_eq!(delivered.raw, refused.raw, "{at}: the same body");
        assert!(signed(&delivered), "{at}");

        // Later events on the same subscription: the first came once.
        duet(dir.root(), &db, &["send", "k1", "A1"]).await;
        let later = [hook.next().await, hook.next().await];
        assert_eq!(
            later.iter().map(Hit::event).collect::<Vec<_>>(),
            ["question.answered", "question.parked"],
            "{at}"
        );
        assert!(later.iter().all(|h| h.id() != refused.id()), "{at}");
        let stored = outbox(tables.as_ref()).await;
        assert_eq!(stored.len(), 3, "{at}: {stored:#?}");
        let d = &stored[0];
        assert_eq!(d.idempotency_key, refused.id(), "{at}");
        assert_eq!(
            (d.status, d.attempts, d.last_error.as_deref()),
            (DeliveryStatus::Delivered, 1, Some("HTTP 503")),
            "{at}: {d:?}"
        );
        sigkill(second).await;
        assert!(hook.drain().is_empty(), "{at}");
    }
}
