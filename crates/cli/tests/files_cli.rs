//! `duet files ls|get|put|rm` as a user runs them on a SQLite database: a file put from disk
//! (a few chunks' worth) comes back byte for byte to a file and to standard output, is listed
//! with its type and size, and is removed; a thread that is not there, a hostile path and a
//! missing file exit 2 with the reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("files-{}-{name}", uuid::Uuid::now_v7().simple()))
}

/// `duet ARGS --project REPO --db DB`: (exit code, stdout, stderr).
fn duet(db: &Path, args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(args)
        .arg("--project")
        .arg(repo())
        .arg("--db")
        .arg(db)
        .env_remove("DUET_DATABASE_URL")
        .env_remove("DUET_PRINCIPAL")
        .stdin(Stdio::null())
        .output()
        .expect("duet runs");
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn files_go_in_and_out_of_a_thread_from_the_command_line() {
    let db = scratch("db.sqlite");
    {
        let stores = duet_store::open(db.to_str().expect("utf-8"))
            .await
            .expect("db");
        let new = duet_runtime::NewThread {
            id: uuid::Uuid::now_v7(),
            agent: "instant_answer",
            parent: None,
            principal: None,
            source: Some("test"),
            now: 1,
        };
        stores.engine.open_thread("ops", new).await.expect("thread");
    }
    let local = scratch("report.bin");
    let data: Vec<u8> = (0..2_500_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&local, &data).expect("local file");
    let local_str = local.to_str().expect("utf-8");

    let (code, out, err) = duet(&db, &["files", "put", "ops", local_str, "/docs/report.bin"]);
    assert_eq!(code, 0, "{err}");
    assert!(String::from_utf8_lossy(&out).contains("/docs/report.bin\tfile\t2500000"));

    // The default path: `/attachments/<its name>`.
    let (code, _, err) = duet(&db, &["files", "put", "ops", local_str]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = duet(&db, &["files", "ls", "ops", "/attachments", "--json"]);
    assert_eq!(code, 0, "{err}");
    let listed: serde_json::Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(listed[0]["size"], 2_500_000);
    assert!(
        listed[0]["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/attachments/files-")),
        "{listed}"
    );

    let (code, out, err) = duet(&db, &["files", "ls", "ops"]);
    assert_eq!(code, 0, "{err}");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("/attachments\tdir") && text.contains("/docs\tdir"),
        "{text}"
    );

    let copy = scratch("copy.bin");
    let (code, _, err) = duet(
        &db,
        &[
            "files",
            "get",
            "ops",
            "/docs/report.bin",
            "-o",
            copy.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&copy).expect("copy"), data);
    let (code, out, err) = duet(&db, &["files", "get", "ops", "/docs/report.bin"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, data);

    let (code, _, err) = duet(&db, &["files", "rm", "ops", "/docs/report.bin"]);
    assert_eq!(code, 0, "{err}");
    for (args, says) in [
        (
            vec!["files", "get", "ops", "/docs/report.bin"],
            "no such file or directory: /docs/report.bin",
        ),
        (vec!["files", "ls", "nobody"], "nobody"),
        (
            vec!["files", "put", "ops", local_str, "/../etc/x"],
            "invalid path",
        ),
        (vec!["files", "rm", "ops", "/docs"], "/docs is a directory"),
    ] {
        let (code, _, err) = duet(&db, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
