//! `duet files ls|get|put|rm` as a user runs them on a SQLite database: a file put from disk
//! (a few chunks' worth) comes back byte for byte to a file and to standard output, is listed
//! with its type and size, and is removed; a thread that is not there, a hostile path and a
//! missing file exit 2 with the reason. With `DUET_FILES_DIR`, the content is in that directory
//! and the database holds the rows; `DUET_MAX_FILE_BYTES` refuses a larger file.

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
    duet_with(db, args, &[])
}

/// [`duet`] with `env` set.
fn duet_with(db: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_duet"))
        .envs(env.iter().copied())
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
    let db = database().await;
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

/// A database with thread `ops`.
async fn database() -> PathBuf {
    let db = scratch("db.sqlite");
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
    db
}

#[tokio::test]
async fn files_dir_and_limits_come_from_the_environment() {
    let db = database().await;
    let dir = scratch("chunks");
    let dir_str = dir.to_str().expect("utf-8");
    let local = scratch("note.txt");
    std::fs::write(&local, b"kept in a directory").expect("local file");
    let local_str = local.to_str().expect("utf-8");
    let env = [("DUET_FILES_DIR", dir_str)];
    let (code, _, err) = duet_with(&db, &["files", "put", "ops", local_str, "/n.txt"], &env);
    assert_eq!(code, 0, "{err}");
    // The content is a chunk file under the directory (DIR/ab/abcd…), not in the database.
    let chunks: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.path().is_dir())
        .flat_map(|e| std::fs::read_dir(e.path()).expect("sub").flatten())
        .collect();
    assert_eq!(chunks.len(), 1, "{chunks:?}");
    let (code, out, err) = duet_with(&db, &["files", "get", "ops", "/n.txt"], &env);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"kept in a directory");
    // Read without the directory, the row names a chunk the database does not have.
    let (code, _, _) = duet(&db, &["files", "get", "ops", "/n.txt"]);
    assert_ne!(code, 0);
    // A limit from the environment.
    let (code, _, err) = duet_with(
        &db,
        &["files", "put", "ops", local_str, "/small.txt"],
        &[("DUET_MAX_FILE_BYTES", "5")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("over the limit of 5"), "{err}");
    let (code, _, err) = duet_with(
        &db,
        &["files", "ls", "ops"],
        &[("DUET_MAX_FILE_BYTES", "x")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("DUET_MAX_FILE_BYTES must be a whole number"),
        "{err}"
    );
}
