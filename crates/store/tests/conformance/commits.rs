//! Commits: fenced by the lease, all or nothing, read back whole; the journal from a cursor.

use super::*;
use duet_runtime::{
    Commit, CommitOutcome, JournalEntry, Message, Record, RecordBody, StopReason, ToolCall,
    ToolStatus,
};
use serde_json::json;

#[tokio::test]
async fn commits_are_fenced_by_the_lease() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(store.claim(t.id, lease(a, 1_000)).await.expect("claim"));
        t.status = ThreadStatus::Running;
        let seq = t.take_seq();
        let commit = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "hello".into(),
                5,
            )],
            ..Commit::default()
        };
        let err = store.commit(&t, b, commit.clone()).await;
        assert!(
            matches!(err, Err(StoreError::LeaseLost(_))),
            "{name}: {err:?}"
        );
        assert!(
            store.messages(t.id).await.expect("read").is_empty(),
            "{name}: nothing written"
        );
        assert_eq!(
            store.commit(&t, a, commit).await.expect("commit"),
            CommitOutcome::Committed { queued: false }
        );
        assert_eq!(store.messages(t.id).await.expect("read").len(), 1);
        assert_eq!(
            store
                .thread_by_id(t.id)
                .await
                .expect("read")
                .map(|x| x.status),
            Some(ThreadStatus::Running)
        );
    })
    .await;
}

#[tokio::test]
async fn a_write_that_breaks_a_constraint_is_a_conflict_and_writes_nothing() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        let seq = t.take_seq();
        let first = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "one".into(),
                5,
            )],
            ..Commit::default()
        };
        store.commit(&t, owner, first).await.expect("commit");
        // The same seq again (a runner that lost track of its thread): the journal's key is taken.
        let again = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "two".into(),
                6,
            )],
            values: vec![("written".into(), Some(json!(true)))],
            ..Commit::default()
        };
        t.status = ThreadStatus::Running;
        let err = store.commit(&t, owner, again).await;
        assert!(
            matches!(err, Err(StoreError::Conflict(_))),
            "{name}: {err:?}"
        );
        let contents: Vec<_> = store
            .messages(t.id)
            .await
            .expect("read")
            .into_iter()
            .filter_map(|m| m.content)
            .collect();
        assert_eq!(contents, ["one"], "{name}");
        assert_eq!(
            store.value(t.id, "written").await.expect("read"),
            None,
            "{name}"
        );
        assert_eq!(
            store
                .thread_by_id(t.id)
                .await
                .expect("read")
                .map(|x| x.status),
            Some(ThreadStatus::Idle),
            "{name}: the thread row was not written either"
        );
        // A new thread reusing another's id under a new key.
        let taken = NewThread {
            id: t.id,
            ..new("agent", 200)
        };
        let err = store.open_thread("other key", taken).await;
        assert!(
            matches!(err, Err(StoreError::Conflict(_))),
            "{name}: {err:?}"
        );
        // The store still works after both.
        store
            .open_thread("fine", new("agent", 300))
            .await
            .expect("open");
    })
    .await;
}

#[tokio::test]
async fn everything_a_commit_writes_reads_back() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        t.status = ThreadStatus::AwaitingHuman;
        t.status_text = Some("half".into());
        t.session = 3;
        t.session_open = true;
        t.stop_reason = Some(StopReason::StopTool);
        t.result = Some("r".into());
        t.turns.a = 2;
        t.turns.b = 1;
        t.steps.a = 4;
        t.steps.b = 5;
        t.steps_total = 9;
        t.acting = Some(SideId::B);
        t.watermarks.a = 7;
        t.watermarks.b = 8;
        let s1 = t.take_seq();
        let s2 = t.take_seq();
        let s3 = t.take_seq();
        let mut call = Message::text(
            s1,
            3,
            Role::Assistant,
            Some(SideId::A),
            "calling".into(),
            10,
        );
        call.thinking = Some("hm".into());
        call.model = Some("demo".into());
        call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "look".into(),
            arguments: json!({"q": "ünïcode"}),
        }];
        let mut result = Message::text(s2, 3, Role::Tool, Some(SideId::A), "found".into(), 11);
        result.tool_call_id = Some("c1".into());
        result.tool_name = Some("look".into());
        result.tool_status = Some(ToolStatus::Error);
        result.silent = true;
        let record = Record {
            seq: s3,
            body: RecordBody::TurnCompleted { side: SideId::A },
            created_at: 12,
        };
        let commit = Commit {
            messages: vec![call.clone(), result.clone()],
            records: vec![record.clone()],
            values: vec![
                ("count".into(), Some(json!({"n": 1}))),
                ("gone".into(), None),
            ],
            ..Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        let mut back = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        back.updated_at = t.updated_at;
        assert_eq!(
            back,
            Thread {
                lease_owner: Some(owner),
                lease_expires: 2_000,
                ..t.clone()
            },
            "{name}"
        );
        assert_eq!(
            store.messages(t.id).await.expect("read"),
            vec![call, result],
            "{name}"
        );
        assert_eq!(
            store.records(t.id).await.expect("read"),
            vec![record],
            "{name}"
        );
        assert_eq!(
            store.value(t.id, "count").await.expect("read"),
            Some(json!({"n": 1}))
        );
        let delete = Commit {
            values: vec![("count".into(), None)],
            ..Commit::default()
        };
        store.commit(&t, owner, delete).await.expect("commit");
        assert_eq!(
            store.value(t.id, "count").await.expect("read"),
            None,
            "{name}"
        );
        // A key written more than once in one commit: its last write stands.
        let rewrites = Commit {
            values: vec![
                ("twice".into(), Some(json!(1))),
                ("twice".into(), Some(json!(2))),
                ("back".into(), None),
                ("back".into(), Some(json!("again"))),
                ("gone".into(), Some(json!(3))),
                ("gone".into(), None),
            ],
            ..Commit::default()
        };
        store.commit(&t, owner, rewrites).await.expect("commit");
        for (key, value) in [
            ("twice", Some(json!(2))),
            ("back", Some(json!("again"))),
            ("gone", None),
        ] {
            assert_eq!(
                store.value(t.id, key).await.expect("read"),
                value,
                "{name}: {key}"
            );
        }
        let parked = store
            .threads(Some(ThreadStatus::AwaitingHuman))
            .await
            .expect("list");
        assert_eq!(parked.len(), 1);
        assert!(
            store
                .threads(Some(ThreadStatus::Running))
                .await
                .expect("list")
                .is_empty()
        );
        assert!(store.size_bytes().await.expect("size") > 0);
    })
    .await;
}

#[tokio::test]
async fn the_journal_reads_from_a_cursor_in_seq_order() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let mut other = thread(&store, "other").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        assert!(
            store
                .claim(other.id, lease(owner, 1_000))
                .await
                .expect("claim")
        );
        let text = |seq, s: &str| Message::text(seq, 1, Role::User, Some(SideId::B), s.into(), 5);
        let record = |seq, kind: &str| Record {
            seq,
            body: RecordBody::from_parts(kind, json!({"at": seq})),
            created_at: 6,
        };
        // Two commits, each with messages and records whose seqs interleave.
        let (m1, r2, m3) = (t.take_seq(), t.take_seq(), t.take_seq());
        let first = Commit {
            messages: vec![text(m1, "one"), text(m3, "three")],
            records: vec![record(r2, "turn_completed")],
            ..Commit::default()
        };
        store.commit(&t, owner, first).await.expect("commit");
        let (r4, m5) = (t.take_seq(), t.take_seq());
        let second = Commit {
            messages: vec![text(m5, "five")],
            records: vec![record(r4, "stopped")],
            ..Commit::default()
        };
        store.commit(&t, owner, second).await.expect("commit");
        let noise = Commit {
            messages: vec![text(other.take_seq(), "elsewhere")],
            ..Commit::default()
        };
        store.commit(&other, owner, noise).await.expect("commit");

        let all = store.journal_since(t.id, 0).await.expect("read");
        assert_eq!(
            all.iter().map(JournalEntry::seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5],
            "{name}"
        );
        assert_eq!(all[0], JournalEntry::Message(text(m1, "one")), "{name}");
        assert_eq!(
            all[3],
            JournalEntry::Record(record(r4, "stopped")),
            "{name}"
        );
        let later = store.journal_since(t.id, 2).await.expect("read");
        assert_eq!(later, all[2..].to_vec(), "{name}");
        assert!(
            store.journal_since(t.id, 5).await.expect("read").is_empty(),
            "{name}: nothing after the last"
        );
        assert!(
            store
                .journal_since(Uuid::now_v7(), 0)
                .await
                .expect("read")
                .is_empty(),
            "{name}: no such thread, no entries"
        );
    })
    .await;
}

/// Commits of many threads at once (SQLite writes waiting commits together): each gets its own
/// outcome. One whose lease is another's writes nothing and fails alone; one that breaks a
/// constraint is a conflict and writes nothing, and the others are written all the same.
#[tokio::test]
async fn commits_at_once_each_get_their_own_outcome() {
    each(async |store, name| {
        let mut cases = Vec::new();
        for i in 0..24 {
            let mut t = thread(&store, &format!("at-once-{i}")).await;
            let owner = Uuid::now_v7();
            assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
            let seq = t.take_seq();
            let message =
                |text: &str| Message::text(seq, 1, Role::User, Some(SideId::B), text.into(), 5);
            if i % 4 == 1 {
                // The seq is taken already: this commit breaks the journal's key.
                store
                    .commit(
                        &t,
                        owner,
                        Commit {
                            messages: vec![message("first")],
                            ..Commit::default()
                        },
                    )
                    .await
                    .expect("commit");
            }
            t.status = ThreadStatus::Running;
            let committer = if i % 4 == 2 { Uuid::now_v7() } else { owner };
            let commit = Commit {
                messages: vec![message(&format!("m{i}"))],
                values: vec![("written".into(), Some(json!(i)))],
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
            let contents: Vec<String> = store
                .messages(t.id)
                .await
                .expect("read")
                .into_iter()
                .filter_map(|m| m.content)
                .collect();
            let value = store.value(t.id, "written").await.expect("read");
            match i % 4 {
                1 => {
                    assert!(
                        matches!(outcome, Err(StoreError::Conflict(_))),
                        "{name} {i}: {outcome:?}"
                    );
                    assert_eq!(contents, ["first"], "{name} {i}");
                    assert_eq!(value, None, "{name} {i}");
                }
                2 => {
                    assert!(
                        matches!(outcome, Err(StoreError::LeaseLost(_))),
                        "{name} {i}: {outcome:?}"
                    );
                    assert!(contents.is_empty(), "{name} {i}");
                    assert_eq!(value, None, "{name} {i}");
                }
                _ => {
                    assert_eq!(
                        outcome.expect("committed"),
                        CommitOutcome::Committed { queued: false },
                        "{name} {i}"
                    );
                    assert_eq!(contents, [format!("m{i}")], "{name} {i}");
                    assert_eq!(value, Some(json!(i)), "{name} {i}");
                }
            }
        }
    })
    .await;
}

/// Texts a JSON or SQL layer could bend — quotes, escapes, control characters, a NUL, line
/// separators, characters outside the BMP, a long text — and numbers at their edges, each in
/// every text column of a message (a different text in each): a commit of them (one a
/// message, and all in one commit) reads back exactly.
#[tokio::test]
async fn every_text_and_number_reads_back_exactly() {
    let texts: Vec<String> = vec![
        "plain".into(),
        r#"a "quote", a \ backslash, a \" both, and '' two"#.into(),
        "new\nline\ttab\rreturn\u{8}\u{c}".into(),
        "\u{1}\u{1f}\u{7f} controls".into(),
        "before\0after a NUL".into(),
        "\u{2028}\u{2029} separators".into(),
        "😀 ünïcödé 漢字 \u{10ffff}".into(),
        "[1, 2, {\"json\": null}]".into(),
        "$1 ?2 :3 @4 placeholders".into(),
        "12345".into(),
        "x".repeat(200_000),
        String::new(),
    ];
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        let message = |t: &mut Thread, i: usize, at: i64| {
            let text = &texts[i % texts.len()];
            let other = &texts[(i + 1) % texts.len()];
            let mut m = Message::text(
                t.take_seq(),
                1,
                Role::Assistant,
                Some(SideId::A),
                text.clone(),
                at,
            );
            m.thinking = Some(format!("thinking: {other}"));
            m.model = Some(format!("model: {text}"));
            m.tool_call_id = Some(other.clone());
            m.tool_name = Some(format!("name: {other}"));
            m.silent = i % 2 == 1;
            m
        };
        let mut written = Vec::new();
        // One commit a text...
        for i in 0..texts.len() {
            let m = message(&mut t, i, [i64::MAX, i64::MIN, 0, -1, 1 << 53][i % 5]);
            let commit = Commit {
                messages: vec![m.clone()],
                ..Commit::default()
            };
            store.commit(&t, owner, commit).await.expect("commit");
            written.push(m);
        }
        // ...and all of them in one.
        let all: Vec<Message> = (0..texts.len()).map(|i| message(&mut t, i, 7)).collect();
        let commit = Commit {
            messages: all.clone(),
            ..Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        written.extend(all);
        let back = store.messages(t.id).await.expect("read");
        assert_eq!(back.len(), written.len(), "{name}");
        for (b, w) in back.iter().zip(&written) {
            let start: Option<String> = w.content.as_deref().map(|c| c.chars().take(40).collect());
            // A NUL reads back as U+FFFD, on every backend (`nul.rs`); the rest exactly.
            let mut w = w.clone();
            duet_runtime::nul::message(&mut w);
            assert_eq!(b, &w, "{name}: {start:?}");
        }
    })
    .await;
}
