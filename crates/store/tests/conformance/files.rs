//! The thread filesystem (#34): file rows written outside a run and by commits (fenced by the
//! lease, all or nothing, in group commits too), listings a page at a time, stats; queued
//! messages' attachments; chunks in the database (put twice, 5 MiB, the sweep) and in a
//! directory (`DirBlobs`: hostile names refused, the sweep against the file rows).

use super::*;

use duet_runtime::files::chunk;
use duet_runtime::{
    AttachmentRef, BlobStore, Commit, CommitOutcome, FileKind, FileQuery, FileRecord, FileStats,
    FileWrite, Message,
};
use duet_store::DirBlobs;
use serde_json::json;

/// File `path` holding `content` (its chunks' hashes; the chunks are not stored), written at `at`.
fn file(path: &str, content: &[u8], at: i64) -> FileRecord {
    FileRecord {
        path: path.into(),
        kind: FileKind::File,
        size: i64::try_from(content.len()).expect("small"),
        mime_type: Some("text/plain".into()),
        declared_type: Some("image/png".into()),
        chunks: chunk::split(content).map(chunk::hash).collect(),
        meta: json!({"description": format!("{path} at {at}"), "n": [1, 2]}),
        created_at: at,
        updated_at: at + 1,
    }
}

fn dir(path: &str) -> FileRecord {
    FileRecord::directory(path.into(), 7)
}

fn paths(records: &[FileRecord]) -> Vec<&str> {
    records.iter().map(|r| r.path.as_str()).collect()
}

/// Thread `key` with a tree of entries, written outside a run: `/docs` (`a.txt`, `sub/`,
/// `sub/b.txt`), `/docs.bak`, `/docsx`, `/top.md`; a removed file and a `Mkdir` over a file
/// leave no trace.
async fn tree(store: &Arc<dyn Store>, key: &str) -> Thread {
    let t = thread(store, key).await;
    store
        .write_files(
            t.id,
            vec![
                FileWrite::Mkdir(dir("/docs")),
                FileWrite::Put(file("/docs/a.txt", b"first", 10)),
                FileWrite::Put(file("/docs/a.txt", b"alpha", 11)),
                FileWrite::Mkdir(dir("/docs/sub")),
                FileWrite::Put(file("/docs/sub/b.txt", b"beta!", 12)),
                FileWrite::Put(file("/docs.bak", b"x", 13)),
                FileWrite::Put(file("/docsx", b"yy", 14)),
                FileWrite::Put(file("/docs/gone.txt", b"zz", 15)),
                FileWrite::Remove("/docs/gone.txt".into()),
                FileWrite::Put(file("/top.md", b"# top", 16)),
                FileWrite::Mkdir(dir("/top.md")),
                FileWrite::Mkdir(dir("/docs")),
            ],
        )
        .await
        .expect("written");
    t
}

#[tokio::test]
async fn written_files_read_back_and_list_by_directory_depth_and_page() {
    each(async |store, name| {
        let t = tree(&store, "files").await;
        let other = thread(&store, "other").await;
        assert_eq!(
            store.file(t.id, "/docs/a.txt").await.expect("read"),
            Some(file("/docs/a.txt", b"alpha", 11)),
            "{name}: a Put replaces"
        );
        assert_eq!(
            store.file(t.id, "/top.md").await.expect("read"),
            Some(file("/top.md", b"# top", 16)),
            "{name}: a Mkdir keeps what is there"
        );
        assert_eq!(
            store.file(t.id, "/docs").await.expect("read"),
            Some(dir("/docs"))
        );
        assert_eq!(
            store.file(t.id, "/docs/gone.txt").await.expect("read"),
            None
        );
        assert_eq!(
            store.file(other.id, "/docs/a.txt").await.expect("read"),
            None,
            "{name}: files are the thread's"
        );
        let q = |dir: Option<&str>, under: Option<&str>, files_only: bool| FileQuery {
            dir: dir.map(str::to_owned),
            under: under.map(str::to_owned),
            files_only,
            ..FileQuery::default()
        };
        let all = [
            "/docs",
            "/docs.bak",
            "/docs/a.txt",
            "/docs/sub",
            "/docs/sub/b.txt",
            "/docsx",
            "/top.md",
        ];
        let cases: Vec<(FileQuery, Vec<&str>)> = vec![
            (FileQuery::default(), all.to_vec()),
            (q(None, Some("/"), false), all.to_vec()),
            (
                q(Some("/"), None, false),
                vec!["/docs", "/docs.bak", "/docsx", "/top.md"],
            ),
            (
                q(Some("/docs"), None, false),
                vec!["/docs/a.txt", "/docs/sub"],
            ),
            (q(Some("/docs"), None, true), vec!["/docs/a.txt"]),
            (
                q(None, Some("/docs"), false),
                vec!["/docs/a.txt", "/docs/sub", "/docs/sub/b.txt"],
            ),
            (
                q(None, Some("/docs"), true),
                vec!["/docs/a.txt", "/docs/sub/b.txt"],
            ),
            (q(None, Some("/docs/sub"), false), vec!["/docs/sub/b.txt"]),
            (q(Some("/nowhere"), None, false), vec![]),
            (
                q(None, None, true),
                vec![
                    "/docs.bak",
                    "/docs/a.txt",
                    "/docs/sub/b.txt",
                    "/docsx",
                    "/top.md",
                ],
            ),
        ];
        for (query, expected) in cases {
            let listed = store.files(t.id, &query).await.expect("list");
            assert_eq!(paths(&listed), expected, "{name}: {query:?}");
            // The same a page at a time, each page after the last path of the one before.
            for limit in [1, 2, 3] {
                let mut paged = Vec::new();
                let mut after = None;
                loop {
                    let page = store
                        .files(
                            t.id,
                            &FileQuery {
                                after: after.clone(),
                                limit,
                                ..query.clone()
                            },
                        )
                        .await
                        .expect("page");
                    assert!(page.len() <= limit, "{name}");
                    let Some(last) = page.last() else { break };
                    after = Some(last.path.clone());
                    paged.extend(page);
                }
                assert_eq!(paths(&paged), expected, "{name}: {query:?} by {limit}");
            }
        }
        assert_eq!(
            store
                .files(other.id, &FileQuery::default())
                .await
                .expect("list"),
            Vec::new()
        );
        assert_eq!(
            store.file_stats(t.id).await.expect("stats"),
            FileStats {
                files: 5,
                directories: 2,
                bytes: 5 + 5 + 1 + 2 + 5,
            },
            "{name}"
        );
        assert_eq!(
            store.file_stats(other.id).await.expect("stats"),
            FileStats::default()
        );
        let missing = store
            .write_files(Uuid::now_v7(), vec![FileWrite::Put(file("/a", b"a", 1))])
            .await;
        assert!(
            matches!(missing, Err(StoreError::NotFound(_))),
            "{name}: {missing:?}"
        );
    })
    .await;
}

/// Thread `key` leased, with its run's owner.
async fn leased(store: &Arc<dyn Store>, key: &str) -> (Thread, Uuid) {
    let t = thread(store, key).await;
    let owner = Uuid::now_v7();
    assert!(store.claim(t.id, lease(owner, 100)).await.expect("claim"));
    (t, owner)
}

#[tokio::test]
async fn a_commits_files_are_written_with_it_and_not_without_its_lease() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "commit").await;
        store
            .write_files(t.id, vec![FileWrite::Put(file("/old.txt", b"old", 1))])
            .await
            .expect("written");
        let seq = t.take_seq();
        let mut m = Message::text(
            seq,
            1,
            Role::Assistant,
            Some(SideId::A),
            "made it".into(),
            5,
        );
        m.attachments = vec![file("/out/report.txt", b"report", 5).attachment()];
        let commit = Commit {
            messages: vec![m.clone()],
            files: vec![
                FileWrite::Mkdir(dir("/out")),
                FileWrite::Put(file("/out/draft.txt", b"draft", 5)),
                FileWrite::Put(file("/out/report.txt", b"report", 5)),
                FileWrite::Remove("/out/draft.txt".into()),
                FileWrite::Remove("/old.txt".into()),
            ],
            ..Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        let listed = store
            .files(t.id, &FileQuery::default())
            .await
            .expect("list");
        assert_eq!(paths(&listed), ["/out", "/out/report.txt"], "{name}");
        assert_eq!(listed[1], file("/out/report.txt", b"report", 5), "{name}");
        assert_eq!(store.messages(t.id).await.expect("read"), [m], "{name}");

        // Another run's commit (the lease is not its): no file, no message.
        let seq = t.take_seq();
        let lost = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "x".into(),
                6,
            )],
            files: vec![
                FileWrite::Put(file("/lost.txt", b"lost", 6)),
                FileWrite::Remove("/out/report.txt".into()),
            ],
            ..Commit::default()
        };
        let err = store.commit(&t, Uuid::now_v7(), lost.clone()).await;
        assert!(
            matches!(err, Err(StoreError::LeaseLost(_))),
            "{name}: {err:?}"
        );
        // A commit that breaks a constraint (a journal seq taken) writes no file either.
        let taken = Commit {
            messages: vec![Message::text(
                seq - 1,
                1,
                Role::User,
                Some(SideId::B),
                "y".into(),
                6,
            )],
            ..lost
        };
        let err = store.commit(&t, owner, taken).await;
        assert!(
            matches!(err, Err(StoreError::Conflict(_))),
            "{name}: {err:?}"
        );
        assert_eq!(
            paths(
                &store
                    .files(t.id, &FileQuery::default())
                    .await
                    .expect("list")
            ),
            ["/out", "/out/report.txt"],
            "{name}: neither wrote a file"
        );
    })
    .await;
}

/// Commits of many threads at once, each writing a file: only those that commit write theirs.
#[tokio::test]
async fn commits_at_once_write_files_only_for_those_that_commit() {
    each(async |store, name| {
        let mut cases = Vec::new();
        for i in 0..18 {
            let (mut t, owner) = leased(&store, &format!("group-{i}")).await;
            let seq = t.take_seq();
            let message =
                |text: &str| Message::text(seq, 1, Role::User, Some(SideId::B), text.into(), 5);
            if i % 3 == 1 {
                // The seq is taken already: this commit breaks the journal's key.
                let first = Commit {
                    messages: vec![message("first")],
                    ..Commit::default()
                };
                store.commit(&t, owner, first).await.expect("commit");
            }
            let committer = if i % 3 == 2 { Uuid::now_v7() } else { owner };
            let commit = Commit {
                messages: vec![message(&format!("m{i}"))],
                files: vec![
                    FileWrite::Mkdir(dir("/g")),
                    FileWrite::Put(file(&format!("/g/{i}.txt"), b"mine", 5)),
                ],
                ..Commit::default()
            };
            cases.push((i, t, committer, commit));
        }
        let outcomes = futures::future::join_all(
            cases
                .iter()
                .map(|(_, t, committer, commit)| store.commit(t, *committer, commit.clone())),
        )
        .await;
        for ((i, t, _, _), outcome) in cases.iter().zip(outcomes) {
            let listed = store
                .files(t.id, &FileQuery::default())
                .await
                .expect("list");
            match i % 3 {
                1 => assert!(
                    matches!(outcome, Err(StoreError::Conflict(_))),
                    "{name} {i}: {outcome:?}"
                ),
                2 => assert!(
                    matches!(outcome, Err(StoreError::LeaseLost(_))),
                    "{name} {i}: {outcome:?}"
                ),
                _ => assert_eq!(
                    outcome.expect("committed"),
                    CommitOutcome::Committed { queued: false },
                    "{name} {i}"
                ),
            }
            let expected = if i % 3 == 0 {
                vec!["/g".to_owned(), format!("/g/{i}.txt")]
            } else {
                Vec::new()
            };
            assert_eq!(paths(&listed), expected, "{name} {i}");
        }
    })
    .await;
}

fn attachment(path: &str) -> AttachmentRef {
    AttachmentRef {
        width: Some(4),
        height: Some(3),
        ..file(path, b"png!", 1).attachment()
    }
}

#[tokio::test]
async fn queued_attachments_round_trip_through_every_queue_write_and_the_drain() {
    each(async |store, name| {
        let with = |text: &str, paths: &[&str]| NewQueued {
            attachments: paths.iter().map(|p| attachment(p)).collect(),
            ..human(text)
        };
        let (mut t, owner) = leased(&store, "queue").await;
        store
            .enqueue(
                t.id,
                with("two files", &["/attachments/a.png", "/attachments/b.png"]),
                None,
                10,
            )
            .await
            .expect("enqueue");
        store
            .enqueue(t.id, human("none"), None, 11)
            .await
            .expect("enqueue");
        assert!(
            store
                .enqueue_if_running(t.id, with("while running", &["/attachments/c.png"]), 12)
                .await
                .expect("enqueue")
                .is_some()
        );
        let queued = store.queue(t.id).await.expect("queue");
        let attached: Vec<Vec<AttachmentRef>> =
            queued.iter().map(|q| q.attachments.clone()).collect();
        assert_eq!(
            attached,
            [
                vec![
                    attachment("/attachments/a.png"),
                    attachment("/attachments/b.png")
                ],
                vec![],
                vec![attachment("/attachments/c.png")],
            ],
            "{name}"
        );
        assert_eq!(
            store.run_start(t.id).await.expect("start").queue,
            queued,
            "{name}: the run starts with them"
        );
        // Drained into the journal, and one queued by the commit itself.
        let seq = t.take_seq();
        let mut m = Message::text(seq, 1, Role::User, Some(SideId::B), "two files".into(), 13);
        m.attachments = queued[0].attachments.clone();
        let commit = Commit {
            drained: vec![queued[0].id],
            messages: vec![m.clone()],
            enqueue: vec![with("from the step", &["/attachments/d.png"])],
            ..Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        assert_eq!(store.messages(t.id).await.expect("read"), [m], "{name}");
        let attached: Vec<Vec<AttachmentRef>> = store
            .queue(t.id)
            .await
            .expect("queue")
            .into_iter()
            .map(|q| q.attachments)
            .collect();
        assert_eq!(
            attached,
            [
                vec![],
                vec![attachment("/attachments/c.png")],
                vec![attachment("/attachments/d.png")]
            ],
            "{name}"
        );
        // A thread created with its first message.
        let created = store
            .create_with(
                "created",
                new("agent", 20),
                with("first", &["/attachments/e.png"]),
                lease(Uuid::now_v7(), 20),
            )
            .await
            .expect("create")
            .expect("new");
        let first = store.queue(created.id).await.expect("queue");
        assert_eq!(
            first[0].attachments,
            [attachment("/attachments/e.png")],
            "{name}"
        );
    })
    .await;
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits")
}

/// Chunks put twice and read back (a 5 MiB one too); a sweep keeps the chunks a file row of
/// any thread names and those stored after its time, and removes the rest.
async fn blobs_and_their_sweep(
    blobs: &dyn BlobStore,
    store: &Arc<dyn Store>,
    sweep: impl AsyncFn(i64) -> u64,
    name: &str,
) {
    let big: Vec<u8> = (0..5 << 20).map(|i: u32| (i % 251) as u8).collect();
    let (named, loose) = (b"named chunk".to_vec(), b"loose chunk".to_vec());
    for data in [&named, &loose, &big] {
        let h = chunk::hash(data);
        assert!(!blobs.has_blob(&h).await.expect("has"), "{name}");
        assert_eq!(blobs.blob(&h).await.expect("read"), None, "{name}");
        blobs.put_blob(&h, data.clone()).await.expect("put");
        blobs.put_blob(&h, data.clone()).await.expect("put twice");
        assert!(blobs.has_blob(&h).await.expect("has"), "{name}");
        assert_eq!(
            blobs.blob(&h).await.expect("read").as_ref(),
            Some(data),
            "{name}"
        );
    }
    let t = thread(store, "blobs").await;
    store
        .write_files(
            t.id,
            vec![FileWrite::Put(file("/named", b"named chunk", 1))],
        )
        .await
        .expect("written");
    let (named, loose, big) = (chunk::hash(&named), chunk::hash(&loose), chunk::hash(&big));
    assert_eq!(
        store
            .blobs_named(&[loose.clone(), named.clone(), big.clone()])
            .await
            .expect("named"),
        vec![named.clone()],
        "{name}"
    );
    assert_eq!(
        sweep(now_ms() - 60_000).await,
        0,
        "{name}: all newer than the sweep's time"
    );
    assert_eq!(sweep(now_ms() + 60_000).await, 2, "{name}");
    assert!(blobs.has_blob(&named).await.expect("has"), "{name}: named");
    assert!(!blobs.has_blob(&loose).await.expect("has"), "{name}: swept");
    assert!(!blobs.has_blob(&big).await.expect("has"), "{name}: swept");
    // Named by a copy in another thread, after the first row goes: still kept.
    let copy = thread(store, "copy").await;
    store
        .write_files(
            copy.id,
            vec![FileWrite::Put(file("/copy", b"named chunk", 2))],
        )
        .await
        .expect("written");
    store
        .write_files(t.id, vec![FileWrite::Remove("/named".into())])
        .await
        .expect("written");
    assert_eq!(sweep(now_ms() + 60_000).await, 0, "{name}");
    assert!(
        blobs.has_blob(&named).await.expect("has"),
        "{name}: named by the copy"
    );
}

#[tokio::test]
async fn database_blobs_put_twice_read_back_and_sweep() {
    each(async |store, name| {
        let sweep = async |before| store.sweep_blobs(before).await.expect("sweep");
        blobs_and_their_sweep(&*store, &store, sweep, name).await;
    })
    .await;
}

#[tokio::test]
async fn directory_blobs_refuse_hostile_names_and_sweep_against_the_file_rows() {
    each(async |store, name| {
        let root = std::env::temp_dir()
            .join("duet-tests")
            .join(format!("blobs-{}", Uuid::now_v7().simple()));
        let blobs = DirBlobs::open(&root).expect("open");
        let sweep = async |before| blobs.sweep(&*store, before).await.expect("sweep");
        blobs_and_their_sweep(&blobs, &store, sweep, name).await;
        let h = chunk::hash(b"named chunk");
        assert!(
            root.join(&h[..2]).join(&h).is_file(),
            "{name}: DIR/h[0..2]/h"
        );
        for hostile in [
            "../../etc/passwd".to_owned(),
            format!("../{}", &h[3..]),
            h.to_uppercase(),
            h[..63].to_owned(),
            format!("{h}0"),
            "g".repeat(64),
            format!("{}/{}", &h[..31], &h[32..]),
            String::new(),
        ] {
            assert!(
                blobs.put_blob(&hostile, b"x".to_vec()).await.is_err(),
                "{name}: {hostile}"
            );
            assert!(blobs.blob(&hostile).await.is_err(), "{name}: {hostile}");
            assert!(blobs.has_blob(&hostile).await.is_err(), "{name}: {hostile}");
        }
        // A write that never finished leaves a temporary file; the sweep takes it.
        let temporary = root.join(&h[..2]).join(".tmp-left-over");
        std::fs::write(&temporary, b"half").expect("scratch");
        blobs
            .sweep(&*store, now_ms() + 60_000)
            .await
            .expect("sweep");
        assert!(!temporary.exists(), "{name}");
        let _ = std::fs::remove_dir_all(root);
    })
    .await;
}
