//! `duet notifications list|retry|revoke` on a database, on SQLite and (with `DATABASE_URL`)
//! Postgres: a delivery its receiver refused for good is listed `failed` with its error — its
//! target without the credentials in its URL —, in the table and as JSON; retried, it is
//! pending again; a second retry, an unknown id and bad arguments are refused in words.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use duet_server_store::NewDelivery;
use duet_store::testing::Backend;
use serde_json::Value;

fn db_arg(backend: &Backend) -> String {
    match backend {
        Backend::Sqlite(p) => p.display().to_string(),
        Backend::Postgres(url) => url.clone(),
        Backend::Memory(..) => unreachable!("a process cannot open another's memory store"),
    }
}

fn duet(project: &Path, db: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(args)
        .arg("--project")
        .arg(project)
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("duet runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A webhook delivery to a URL with credentials in it, as the outbox holds one.
fn webhook(key: &str) -> NewDelivery {
    NewDelivery {
        channel: "webhook".into(),
        stream: "webhook:sub-1:hook".into(),
        target: "https://ops:hunter2@hooks.example.com/duet?token=s3cret".into(),
        event: "question.parked".into(),
        subject: Some("0195f0aa-0000-7000-8000-000000000001:1:9".into()),
        subscription: Some("sub-1".into()),
        recipient: Some("alice".into()),
        body: "{}".into(),
        meta: Some(r#"{"secret":"whsec_c2VjcmV0"}"#.into()),
        idempotency_key: key.into(),
        due_at: 0,
        ..NewDelivery::default()
    }
}

#[tokio::test]
async fn a_failed_delivery_is_listed_with_its_error_and_retried() {
    for backend in support::backends().await {
        let db = db_arg(&backend);
        let project = support::repo();
        let tables = backend.open_both().await.server;
        let ids = tables
            .enqueue(&[webhook("n1-0"), webhook("n1-1")])
            .await
            .expect("enqueue");
        // The first is refused for good, as the sender records a `410 Gone`.
        let claimed = tables.claim_deliveries(1, 30_000, 1).await.expect("claim");
        assert_eq!(claimed.iter().map(|d| d.id).collect::<Vec<_>>(), [ids[0]]);
        tables
            .delivery_failed(
                ids[0],
                None,
                "permanent: HTTP 410 (the receiver wants no more)",
                2,
            )
            .await
            .expect("fail");

        let table = duet(&project, &db, &["notifications", "list"]);
        assert!(table.status.success(), "{}", text(&table.stderr));
        let table = text(&table.stdout);
        let mut lines = table.lines();
        assert_eq!(
            lines.next(),
            Some("ID\tCHANNEL\tEVENT\tTARGET\tSTATUS\tATTEMPTS\tLAST ERROR")
        );
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
        assert_eq!(rows.len(), 2, "{table}");
        let failed = ids[0].to_string();
        assert_eq!(
            rows[1],
            [
                failed.as_str(),
                "webhook",
                "question.parked",
                "https://hooks.example.com/…",
                "failed",
                "1",
                "permanent: HTTP 410 (the receiver wants no more)"
            ],
            "newest first: {table}"
        );
        assert_eq!(rows[0][4], "pending", "{table}");
        assert!(
            !table.contains("hunter2") && !table.contains("s3cret") && !table.contains("whsec"),
            "{table}"
        );

        let json = duet(
            &project,
            &db,
            &["notifications", "list", "--status", "failed", "--json"],
        );
        assert!(json.status.success(), "{}", text(&json.stderr));
        let listed: Value = serde_json::from_slice(&json.stdout).expect("JSON");
        let listed = listed.as_array().expect("an array");
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0]["id"], ids[0]);
        assert_eq!(listed[0]["status"], "failed");
        assert_eq!(listed[0]["recipient"], "alice");
        assert_eq!(listed[0]["target"], "https://hooks.example.com/…");
        assert!(
            listed[0]["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("410")),
            "{listed:?}"
        );
        assert!(listed[0].get("meta").is_none() && listed[0].get("body").is_none());

        // Retried: pending again, due now, its attempts counted afresh.
        let retried = duet(&project, &db, &["notifications", "retry", &failed]);
        assert!(retried.status.success(), "{}", text(&retried.stderr));
        assert!(text(&retried.stdout).contains("pending again"));
        let pending = duet(
            &project,
            &db,
            &["notifications", "list", "--status", "pending", "--json"],
        );
        let pending: Value = serde_json::from_slice(&pending.stdout).expect("JSON");
        let again = pending
            .as_array()
            .and_then(|a| a.iter().find(|d| d["id"] == ids[0]))
            .unwrap_or_else(|| panic!("{pending}"));
        assert_eq!(again["attempts"], 0, "{again}");
        assert!(again["nextAt"].is_i64(), "{again}");
        let limited = duet(
            &project,
            &db,
            &["notifications", "list", "--limit", "1", "--json"],
        );
        let limited: Value = serde_json::from_slice(&limited.stdout).expect("JSON");
        assert_eq!(limited.as_array().map(Vec::len), Some(1), "{limited}");

        // Refused in words: not failed, not there, not an id, not a status, not a thread.
        for (args, says) in [
            (vec!["retry", failed.as_str()], "is pending, not failed"),
            (vec!["retry", "999999"], "no delivery 999999"),
            (vec!["retry", "x"], "is not a delivery id"),
            (vec!["list", "--status", "sent"], "unknown status `sent`"),
            (vec!["list", "--thread", "nope"], "no thread `nope`"),
        ] {
            let mut all = vec!["notifications"];
            all.extend(args.iter().copied());
            let out = duet(&project, &db, &all);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            assert!(
                text(&out.stderr).contains(says),
                "{args:?}: {}",
                text(&out.stderr)
            );
        }
        let revoked = duet(
            &project,
            &db,
            &[
                "notifications",
                "revoke",
                "0195f0aa-0000-7000-8000-000000000001:1:9",
            ],
        );
        assert!(revoked.status.success(), "{}", text(&revoked.stderr));
        assert_eq!(
            text(&revoked.stdout).trim(),
            "revoked 0 links to 0195f0aa-0000-7000-8000-000000000001:1:9"
        );
    }
}
