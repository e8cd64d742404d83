//! For tests of stores and of what runs on them (feature `test-util`): the backends to run
//! against. SQLite always (a fresh file per store); Postgres too when `DATABASE_URL` is set (a
//! fresh database per store, created through that URL's server — `scripts/test` names them
//! with `DUET_TEST_DB_PREFIX` and drops them when it exits); for the store conformance suite,
//! the in-memory store as well. Tests may panic here: a backend that cannot be opened is a
//! broken test machine, said loudly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use duet_runtime::Store;

/// Where a test's stores live; reopening gives a new connection to the same database.
#[derive(Clone, Debug)]
pub enum Backend {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A Postgres database's URL.
    Postgres(String),
    /// One in-memory store (and the server's tables beside it): every `open` is the same
    /// database (as a reconnection would be).
    Memory(
        Arc<duet_runtime::testing::MemoryStore>,
        Arc<duet_server_store::testing::MemoryServerStore>,
    ),
}

impl Backend {
    /// `sqlite`, `postgres` or `memory`.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
            Backend::Memory(..) => "memory",
        }
    }

    /// A new connection to this backend's database (migrated): the engine's port.
    pub async fn open(&self) -> Arc<dyn Store> {
        self.open_both().await.engine
    }

    /// A new connection to this backend's database (migrated), with both of its ports.
    pub async fn open_both(&self) -> crate::Stores {
        let url = match self {
            Backend::Sqlite(p) => p.display().to_string(),
            Backend::Postgres(u) => u.clone(),
            Backend::Memory(engine, server) => {
                return crate::Stores {
                    engine: engine.clone(),
                    server: server.clone(),
                };
            }
        };
        crate::open(&url)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join("duet-tests");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A fresh database on every SQL backend available.
pub async fn backends() -> Vec<Backend> {
    let id = uuid::Uuid::now_v7().simple().to_string();
    let mut out = vec![Backend::Sqlite(scratch().join(format!("{id}.db")))];
    if let Ok(url) = std::env::var("DATABASE_URL") {
        let prefix = std::env::var("DUET_TEST_DB_PREFIX").unwrap_or_else(|_| "duet_test_".into());
        out.push(Backend::Postgres(
            create_database(&url, &format!("{prefix}{id}")).await,
        ));
    }
    out
}

/// A fresh store on every store implementation: [`backends`] and the in-memory store. (Engine
/// tests run on the SQL backends only.)
pub async fn store_backends() -> Vec<Backend> {
    let mut out = backends().await;
    out.push(Backend::Memory(Arc::default(), Arc::default()));
    out
}

/// Creates database `name` on the server of `url` (through `psql`, which CI and developers
/// have with the server) and returns its URL.
async fn create_database(url: &str, name: &str) -> String {
    let status = tokio::process::Command::new("psql")
        .arg(url)
        .arg("-qc")
        .arg(format!("CREATE DATABASE {name}"))
        .status()
        .await
        .expect("psql runs");
    assert!(
        status.success(),
        "cannot create database {name} through {url}"
    );
    let (base, _) = url.rsplit_once('/').expect("DATABASE_URL ends in /DBNAME");
    format!("{base}/{name}")
}

/// Runs `sql` through `psql` on the database of `url` and returns its unaligned output.
pub async fn psql(url: &str, sql: &str) -> String {
    let out = tokio::process::Command::new("psql")
        .arg(url)
        .arg("-qtAc")
        .arg(sql)
        .output()
        .await
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
