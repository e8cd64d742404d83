//! Rolling upgrades, on both SQL backends: this build, meeting a database a newer build
//! migrated further with an additive migration it does not know, opens it and keeps working
//! (the other process's column does not get in the way); once a newer build marks the schema
//! incompatible with older builds (`duet_schema.min_compatible`), this build refuses to open it
//! with a message that says so, and writes nothing.

use duet_runtime::ThreadStatus;
use uuid::Uuid;

use super::{human, lease, new, support};

/// Runs `sql` on `backend`'s database, as another build's migration would.
async fn exec(backend: &support::Backend, sql: &str) {
    match backend {
        support::Backend::Sqlite(path) => {
            use sqlx::Connection;
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
                .await
                .expect("connect");
            let owned: String = sql.to_owned();
            sqlx::raw_sql(sqlx::AssertSqlSafe(owned))
                .execute(&mut conn)
                .await
                .expect("run the SQL");
        }
        support::Backend::Postgres(url) => {
            support::psql(url, sql).await;
        }
        support::Backend::Memory(..) => unreachable!("SQL backends only"),
    }
}

/// A future build's additive migration: a table and a nullable column this build never writes,
/// recorded as applied.
const NEWER: &str = "ALTER TABLE threads ADD COLUMN future_note TEXT; \
     CREATE TABLE future_things (id BIGINT PRIMARY KEY); \
     INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
     VALUES (99990101000000, 'a future additive migration', TRUE, X'00', 0);";

#[tokio::test]
async fn an_older_build_runs_on_an_additive_newer_schema_and_stops_on_an_incompatible_one() {
    for backend in support::backends().await {
        let name = backend.name();
        drop(backend.open().await);
        let newer = match backend {
            support::Backend::Postgres(_) => NEWER.replace("X'00'", "'\\x00'::bytea"),
            _ => NEWER.to_owned(),
        };
        exec(&backend, &newer).await;

        // This build opens it and keeps working: creates, parks nothing, reads back.
        let store = backend.open().await;
        let t = store
            .create_with(
                "old-build",
                new("agent", 100),
                human("hi"),
                lease(Uuid::now_v7(), 100),
            )
            .await
            .expect("create")
            .expect("new");
        let read = store
            .thread("old-build")
            .await
            .expect("read")
            .expect("thread");
        assert_eq!((read.id, read.status), (t.id, t.status), "{name}");
        assert_ne!(read.status, ThreadStatus::Terminated, "{name}");
        drop(store);

        // A later migration that older builds cannot run on: this build stops at open.
        exec(
            &backend,
            "UPDATE duet_schema SET min_compatible = 99990101000000",
        )
        .await;
        let url = match &backend {
            support::Backend::Sqlite(p) => p.display().to_string(),
            support::Backend::Postgres(u) => u.clone(),
            support::Backend::Memory(..) => unreachable!(),
        };
        let refused = duet_store::open(&url).await.err().map(|e| e.to_string());
        let said = refused.unwrap_or_else(|| panic!("{name}: an incompatible schema was opened"));
        assert!(
            said.contains("needs a newer duet") && said.contains("99990101000000"),
            "{name}: {said}"
        );
    }
}

/// Postgres's commit and answer functions keep the planner settings of migration 0025 (and
/// 0010's generic plans): a `CREATE OR REPLACE FUNCTION` of one of them in a later migration
/// drops its `SET` clauses unless it repeats them, and its one plan a connection, made while
/// `threads` is small, would scan the whole table on every commit again.
#[tokio::test]
async fn postgres_commit_and_answer_functions_keep_their_planner_settings() {
    for backend in support::backends().await {
        let support::Backend::Postgres(url) = &backend else {
            continue;
        };
        drop(backend.open().await);
        let out = support::psql(
            url,
            "SELECT proname || ' ' || array_to_string(proconfig, ',') FROM pg_proc \
             WHERE proname IN ('duet_commit', 'duet_commit_files', 'duet_answer') ORDER BY proname",
        )
        .await;
        let rows: Vec<&str> = out.lines().collect();
        assert_eq!(rows.len(), 3, "{out}");
        for row in rows {
            for setting in [
                "plan_cache_mode=force_generic_plan",
                "enable_seqscan=off",
                "enable_hashjoin=off",
                "enable_mergejoin=off",
            ] {
                assert!(
                    row.split([' ', ',']).any(|s| s == setting),
                    "{row}: {setting}"
                );
            }
        }
    }
}
