//! One SQLite commit of a ping-pong turn's shape (a message and a record into the journal, the
//! thread row updated under its lease, in one `BEGIN IMMEDIATE` transaction), and one read of a
//! thread row: through sqlx 0.9 (one multi-statement call, as duet's committer sends it; the
//! driver runs it on its own thread) and through rusqlite on the calling thread. Each variant
//! runs on a tokio runtime of two workers, as a server's would, in turns of 5,000 commits.

use std::time::{Duration, Instant};

use sqlx::ConnectOptions;

const N: usize = 5_000;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS threads (num INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, \
    status TEXT NOT NULL, next_seq INTEGER NOT NULL, lease_owner TEXT, updated_at INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS journal (thread INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, \
    content TEXT, data TEXT, created_at INTEGER NOT NULL, PRIMARY KEY (thread, seq));
    INSERT OR IGNORE INTO threads (id, status, next_seq, lease_owner, updated_at) VALUES ('t', 'running', 1, 'run', 0);";

const COMMIT: &str = "BEGIN IMMEDIATE;
    INSERT INTO journal (thread, seq, kind, content, data, created_at) SELECT t.num, v.* FROM threads t, \
      (VALUES ($1, 'message', $2, NULL, $3), ($4, 'turn_completed', NULL, '{\"side\":\"a\"}', $3)) v \
      WHERE t.id = 't' AND t.lease_owner = 'run';
    UPDATE threads SET next_seq = $5, updated_at = $3 WHERE id = 't' AND lease_owner = 'run' RETURNING lease_owner;
    COMMIT;";

fn percentiles(mut lat: Vec<Duration>) -> String {
    lat.sort();
    let at = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6;
    let total: Duration = lat.iter().sum();
    format!(
        "{:>7.0}/s  p50 {:>5.0} µs  p99 {:>5.0} µs",
        lat.len() as f64 / total.as_secs_f64(),
        at(0.5),
        at(0.99)
    )
}

async fn with_sqlx(path: &std::path::Path) -> (String, String) {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .connect()
        .await
        .expect("open");
    sqlx::raw_sql(sqlx::AssertSqlSafe(SCHEMA))
        .execute(&mut conn)
        .await
        .expect("schema");
    let mut commits = Vec::with_capacity(N);
    let mut seq: i64 = 1_000_000;
    for _ in 0..N {
        let t = Instant::now();
        sqlx::query(COMMIT)
            .bind(seq)
            .bind("Pong, with a reply of a realistic length for a turn.")
            .bind(seq)
            .bind(seq + 1)
            .bind(seq + 2)
            .fetch_all(&mut conn)
            .await
            .expect("commit");
        commits.push(t.elapsed());
        seq += 2;
    }
    let mut reads = Vec::with_capacity(N);
    for _ in 0..N {
        let t = Instant::now();
        sqlx::query(
            "SELECT num, id, status, next_seq, lease_owner, updated_at FROM threads WHERE id = $1",
        )
        .bind("t")
        .fetch_one(&mut conn)
        .await
        .expect("read");
        reads.push(t.elapsed());
    }
    (percentiles(commits), percentiles(reads))
}

fn with_rusqlite(path: &std::path::Path) -> (String, String) {
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", "NORMAL")
        .expect("normal");
    conn.execute_batch(SCHEMA).expect("schema");
    let parts: Vec<&str> = COMMIT
        .split(";\n")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let mut commits = Vec::with_capacity(N);
    let mut seq: i64 = 2_000_000;
    for _ in 0..N {
        let t = Instant::now();
        conn.prepare_cached(parts[0])
            .expect("begin")
            .execute([])
            .expect("begin");
        conn.prepare_cached(parts[1])
            .expect("insert")
            .execute(rusqlite::params![
                seq,
                "Pong, with a reply of a realistic length for a turn.",
                seq,
                seq + 1
            ])
            .expect("insert");
        let owner: Option<String> = conn
            .prepare_cached(parts[2].trim_end_matches(';'))
            .expect("update")
            .query_row(rusqlite::params![seq + 2, seq], |r| r.get(0))
            .expect("update");
        assert!(owner.is_some());
        conn.prepare_cached("COMMIT")
            .expect("commit")
            .execute([])
            .expect("commit");
        commits.push(t.elapsed());
        seq += 2;
    }
    let mut reads = Vec::with_capacity(N);
    for _ in 0..N {
        let t = Instant::now();
        let _: (i64, String) = conn
            .prepare_cached("SELECT num, id, status, next_seq, lease_owner, updated_at FROM threads WHERE id = ?1")
            .expect("read")
            .query_row(["t"], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("read");
        reads.push(t.elapsed());
    }
    (percentiles(commits), percentiles(reads))
}

fn main() {
    let dir = std::env::temp_dir().join(format!("duet-bench-alt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for round in 1..=2 {
        let (c, r) = rt.block_on(with_sqlx(&dir.join(format!("sqlx-{round}.db"))));
        println!("round {round} sqlx      commit {c} | read {r}");
        let path = dir.join(format!("rusqlite-{round}.db"));
        let (c, r) = rt.block_on(async move { with_rusqlite(&path) });
        println!("round {round} rusqlite  commit {c} | read {r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
