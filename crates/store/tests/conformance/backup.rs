//! SQLite only: the online backup (`duet_store::sqlite_backup`) of a database a writer keeps
//! committing to. Each copy passes `PRAGMA integrity_check`, opens as a store, and is the
//! database of one moment: the threads a sequential writer created form a prefix of its
//! sequence, each with its first message (`create_with` writes both in one transaction), and
//! every thread acknowledged before the backup began is in it. A backup never replaces a file
//! unless asked, never creates a source, and leaves nothing under a temporary name.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use duet_runtime::Store;
use duet_store::{BackupError, SqliteStore, sqlite_backup};
use uuid::Uuid;

use super::{human, lease, new, support};

/// The writer's thread keys, in the order it created them.
fn key(i: usize) -> String {
    format!("w-{i}")
}

async fn sqlite_file() -> PathBuf {
    match support::backends().await.remove(0) {
        support::Backend::Sqlite(path) => path,
        other => panic!("the first backend is SQLite, not {}", other.name()),
    }
}

/// Creates threads `w-0`, `w-1`, … one after another until `stop`, counting each once its
/// commit returned.
async fn write(store: Arc<dyn Store>, acked: Arc<AtomicUsize>, stop: Arc<AtomicBool>) {
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        store
            .create_with(
                &key(i),
                new("agent", 100),
                human(&"x".repeat(512)),
                lease(Uuid::now_v7(), 100),
            )
            .await
            .expect("create")
            .expect("a new key");
        i += 1;
        acked.store(i, Ordering::SeqCst);
    }
}

/// What a copy at `path` holds, read through a connection of its own: `PRAGMA
/// integrity_check`'s report, the writer's threads (their numbers, sorted), and how many
/// threads have no queued message.
async fn inspect(path: &Path) -> (Vec<String>, Vec<usize>, i64) {
    use sqlx::{ConnectOptions, Connection};
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .connect()
        .await
        .expect("the copy opens");
    let report = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_all(&mut conn)
        .await
        .expect("checks");
    let keys: Vec<String> = sqlx::query_scalar("SELECT key FROM threads WHERE key LIKE 'w-%'")
        .fetch_all(&mut conn)
        .await
        .expect("keys");
    let mut written: Vec<usize> = keys
        .iter()
        .filter_map(|k| k.strip_prefix("w-")?.parse().ok())
        .collect();
    written.sort_unstable();
    let bare = sqlx::query_scalar(
        "SELECT count(*) FROM threads t WHERE NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = t.num)",
    )
    .fetch_one(&mut conn)
    .await
    .expect("count");
    conn.close().await.expect("closes");
    (report, written, bare)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_writing_is_one_consistent_moment() {
    let db = sqlite_file().await;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).await.expect("opens"));
    // Some bulk first (about 6 MB), so a copy takes long enough for commits to land meanwhile.
    for i in 0..1_500 {
        store
            .create_with(
                &format!("bulk-{i}"),
                new("agent", 100),
                human(&"b".repeat(4_096)),
                lease(Uuid::now_v7(), 100),
            )
            .await
            .expect("create")
            .expect("new");
    }
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write(store.clone(), acked.clone(), stop.clone()));
    let dir = db.with_extension("backups");
    std::fs::create_dir_all(&dir).expect("mkdir");

    let mut overlapped = 0;
    let mut first = None;
    for round in 0..3 {
        let to = dir.join(format!("copy-{round}.db"));
        let before = acked.load(Ordering::SeqCst);
        let copy = sqlite_backup(&db, &to, false).await.expect("backs up");
        let after = acked.load(Ordering::SeqCst);
        overlapped += usize::from(after > before);
        assert_eq!(copy.path, to);
        assert_eq!(copy.bytes, std::fs::metadata(&to).expect("written").len());
        let (report, written, bare) = inspect(&to).await;
        assert_eq!(report, ["ok"], "round {round}");
        let n = written.len();
        assert_eq!(
            written,
            (0..n).collect::<Vec<_>>(),
            "round {round}: a prefix"
        );
        assert!(
            n >= before,
            "round {round}: {before} threads acknowledged before the backup, {n} in it"
        );
        assert!(
            n <= after,
            "round {round}: {n} in it, {after} acknowledged after"
        );
        assert_eq!(
            bare, 0,
            "round {round}: every thread with its first message"
        );

        let restored: Arc<dyn Store> = Arc::new(
            SqliteStore::open(&to)
                .await
                .expect("the copy opens as a store"),
        );
        let threads = restored.threads(None).await.expect("threads");
        assert_eq!(copy.threads, threads.len() as i64, "round {round}");
        first.get_or_insert(copy.threads);
    }
    stop.store(true, Ordering::SeqCst);
    writer.await.expect("the writer ends");
    let all = 1_500 + acked.load(Ordering::SeqCst) as i64;
    assert!(overlapped > 0, "no commit landed while a backup ran");

    // Refusals: a file already there (left as it was), a source that does not exist (not
    // created); asked to, a backup replaces a file.
    let taken = dir.join("copy-0.db");
    let kept = std::fs::read(&taken).expect("read");
    assert!(matches!(
        sqlite_backup(&db, &taken, false).await,
        Err(BackupError::Exists(p)) if p == taken
    ));
    assert_eq!(std::fs::read(&taken).expect("read"), kept);
    let ghost = dir.join("ghost.db");
    assert!(matches!(
        sqlite_backup(&ghost, &dir.join("never.db"), false).await,
        Err(BackupError::NoDatabase(p)) if p == ghost
    ));
    assert!(!ghost.exists() && !dir.join("never.db").exists());
    let replaced = sqlite_backup(&db, &taken, true).await.expect("replaces");
    assert_eq!(inspect(&taken).await.0, ["ok"]);
    assert_eq!(
        replaced.threads, all,
        "every thread, once the writer stopped"
    );
    assert!(first.is_some_and(|n| n < all));

    let partial: Vec<_> = std::fs::read_dir(&dir)
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".partial-"))
        .collect();
    assert_eq!(partial, Vec::<String>::new(), "no partial copy is left");
}
