//! Each thread's tree (`threads.root`, migration 0021), on both SQL backends: a top-level
//! thread is its own root, a child and a grandchild take the top-level one's, however they are
//! inserted (`open_thread`, `create_with`, a retry that finds the key taken); an unknown parent
//! starts a tree of its own. The memory store keeps no such column (nothing reads it yet).

use duet_runtime::{NewThread, Store};
use uuid::Uuid;

use super::{human, lease, new, support};

/// `root` and `num` of thread `id`, read with SQL beside the store.
async fn root_of(backend: &support::Backend, id: Uuid) -> (i64, i64) {
    let sql = format!("SELECT root, num FROM threads WHERE id = '{id}'");
    match backend {
        support::Backend::Sqlite(path) => {
            use sqlx::Connection;
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
                .await
                .expect("connect");
            sqlx::query_as::<_, (i64, i64)>(sqlx::AssertSqlSafe(sql))
                .fetch_one(&mut conn)
                .await
                .expect("the row")
        }
        support::Backend::Postgres(url) => {
            let out = support::psql(url, &sql).await;
            let (root, num) = out.trim().split_once('|').expect("root|num");
            (root.parse().expect("root"), num.parse().expect("num"))
        }
        support::Backend::Memory(..) => unreachable!("SQL backends only"),
    }
}

fn child(agent: &str, parent: Uuid) -> NewThread<'_> {
    NewThread {
        parent: Some(parent),
        ..new(agent, 100)
    }
}

#[tokio::test]
async fn every_thread_of_a_tree_carries_its_top_level_num() {
    for backend in support::backends().await {
        let name = backend.name();
        let store: std::sync::Arc<dyn Store> = backend.open().await;
        let top = store.open_thread("top", new("a", 100)).await.expect("open");
        let kid = store
            .create_with(
                "kid",
                child("b", top.id),
                human("go"),
                lease(Uuid::now_v7(), 100),
            )
            .await
            .expect("create")
            .expect("new");
        let grandkid = store
            .open_thread("grandkid", child("c", kid.id))
            .await
            .expect("open");
        // A retry of the child's creation writes nothing, the root included.
        let again = store
            .create_with(
                "kid",
                child("b", top.id),
                human("go"),
                lease(Uuid::now_v7(), 100),
            )
            .await
            .expect("create");
        assert!(again.is_none(), "{name}");
        let other = store
            .open_thread("other", new("a", 100))
            .await
            .expect("open");
        let orphan = store
            .open_thread("orphan", child("d", Uuid::now_v7()))
            .await
            .expect("open");

        let (top_root, top_num) = root_of(&backend, top.id).await;
        assert_eq!(
            top_root, top_num,
            "{name}: a top-level thread is its own root"
        );
        for t in [kid.id, grandkid.id] {
            assert_eq!(root_of(&backend, t).await.0, top_num, "{name}: {t}");
        }
        let (other_root, other_num) = root_of(&backend, other.id).await;
        assert_eq!(other_root, other_num, "{name}");
        assert_ne!(other_root, top_root, "{name}");
        let (orphan_root, orphan_num) = root_of(&backend, orphan.id).await;
        assert_eq!(
            orphan_root, orphan_num,
            "{name}: an unknown parent starts a tree"
        );

        // The child's first message was queued with it (the SQLite trigger's update does not
        // count as the insert's change).
        let queued = store.queue(kid.id).await.expect("queue");
        assert_eq!(
            queued
                .iter()
                .map(|q| q.content.as_str())
                .collect::<Vec<_>>(),
            ["go"],
            "{name}"
        );
    }
}
