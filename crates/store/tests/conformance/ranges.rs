//! Reads bounded by what they return: a session's range of the journal (from its
//! `session_started` record to the next session's, below a seq) and a thread's settle records
//! newest first, a few at a time.

use super::*;
use duet_runtime::{
    Commit, JournalEntry, Message, ReadBack, Record, RecordBody, StopReason, ThreadId,
};

/// Commits `entries` (messages and records, each taking `t`'s next seq in order) to `t`.
async fn write(store: &Arc<dyn Store>, t: &mut Thread, entries: Vec<Entry>) -> Vec<i64> {
    let first = t.next_seq;
    let seqs = (first..first + i64::try_from(entries.len()).expect("few")).collect();
    let (commit, owner) = settling(store, t, entries).await;
    store.commit(t, owner, commit).await.expect("commit");
    seqs
}

/// An entry to write: a message of a session with its text, or a record.
// A handful per test: boxing the record would only make them longer to write.
#[allow(clippy::large_enum_variant)]
enum Entry {
    Said(i64, &'static str),
    Fact(RecordBody),
    /// A message of a session with every field it can have set (`rich`).
    Full(i64),
}

fn started(session: i64) -> Entry {
    Entry::Fact(RecordBody::SessionStarted { session })
}

fn stopped() -> Entry {
    Entry::Fact(RecordBody::Stopped {
        stop_reason: StopReason::AwaitingHuman,
        status: ThreadStatus::AwaitingHuman,
        trace: None,
        revision: None,
    })
}

#[tokio::test]
async fn a_session_reads_its_own_range_of_the_journal() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let mut other = thread(&store, "other").await;
        // Another thread's sessions, written between this one's, must not leak in.
        write(
            &store,
            &mut other,
            vec![started(1), Entry::Said(1, "elsewhere")],
        )
        .await;
        let first = write(
            &store,
            &mut t,
            vec![started(1), Entry::Said(1, "hello"), stopped()],
        )
        .await;
        write(
            &store,
            &mut other,
            vec![started(2), Entry::Said(2, "again")],
        )
        .await;
        let ended = Entry::Fact(RecordBody::SessionEnded {
            stop_reason: StopReason::SessionStop,
            result: Some("done".into()),
        });
        let second = write(
            &store,
            &mut t,
            vec![ended, started(2), Entry::Said(2, "more"), stopped()],
        )
        .await;
        let all = store.journal_since(t.id, 0).await.expect("read");
        let upto = |seq: i64| -> Vec<JournalEntry> {
            all.iter().filter(|e| e.seq() < seq).cloned().collect()
        };
        let one = store
            .session_entries(t.id, 1, i64::MAX)
            .await
            .expect("read");
        // The first session's range runs to the second's start: its end record is in it.
        assert_eq!(one, upto(second[1]), "{name}: session 1");
        assert_eq!(one.len(), 4, "{name}");
        let two = store
            .session_entries(t.id, 2, i64::MAX)
            .await
            .expect("read");
        assert_eq!(two, all[4..].to_vec(), "{name}: session 2 to the end");
        assert_eq!(
            store
                .session_entries(t.id, 2, second[3])
                .await
                .expect("read"),
            all[4..6].to_vec(),
            "{name}: below a seq"
        );
        assert_eq!(
            store
                .session_entries(t.id, 1, first[1])
                .await
                .expect("read"),
            all[..1].to_vec(),
            "{name}: below the first session's second entry"
        );
        for (session, below) in [(2, second[1]), (3, i64::MAX), (0, i64::MAX)] {
            assert!(
                store
                    .session_entries(t.id, session, below)
                    .await
                    .expect("read")
                    .is_empty(),
                "{name}: session {session} below {below}"
            );
        }
        assert!(
            store
                .session_entries(Uuid::now_v7(), 1, i64::MAX)
                .await
                .expect("read")
                .is_empty(),
            "{name}: no such thread"
        );
        // The same ranges' records alone (the first session's are its start, park and end).
        assert_eq!(
            store
                .session_records(t.id, 1, i64::MAX)
                .await
                .expect("read")
                .len(),
            3,
            "{name}: session 1's records"
        );
        for (session, below) in [
            (1, i64::MAX),
            (2, i64::MAX),
            (2, second[3]),
            (1, first[1]),
            (2, second[1]),
            (3, i64::MAX),
        ] {
            let records: Vec<Record> = store
                .session_entries(t.id, session, below)
                .await
                .expect("read")
                .into_iter()
                .filter_map(|e| match e {
                    JournalEntry::Record(r) => Some(r),
                    JournalEntry::Message(_) => None,
                })
                .collect();
            assert_eq!(
                store
                    .session_records(t.id, session, below)
                    .await
                    .expect("read"),
                records,
                "{name}: session {session}'s records below {below}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn settle_records_read_newest_first_a_page_at_a_time() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let seqs = write(
            &store,
            &mut t,
            vec![
                started(1),
                stopped(),
                Entry::Said(1, "go on"),
                Entry::Fact(RecordBody::RunContinued { after: 2 }),
                Entry::Fact(RecordBody::TurnCompleted { side: SideId::A }),
                Entry::Fact(RecordBody::SessionEnded {
                    stop_reason: StopReason::SessionStop,
                    result: None,
                }),
            ],
        )
        .await;
        let kinds = |rs: &[Record]| -> Vec<(i64, String)> {
            rs.iter()
                .map(|r| (r.seq, r.body.kind().to_owned()))
                .collect()
        };
        let every = store.settles(t.id, i64::MAX, 10).await.expect("read");
        assert_eq!(
            kinds(&every),
            [
                (seqs[5], "session_ended".to_owned()),
                (seqs[3], "run_continued".to_owned()),
                (seqs[1], "stopped".to_owned()),
            ],
            "{name}: the settle kinds only, newest first"
        );
        let records = store.records(t.id).await.expect("read");
        assert_eq!(every[0], records[records.len() - 1], "{name}: as stored");
        assert_eq!(
            kinds(&store.settles(t.id, i64::MAX, 2).await.expect("read")),
            kinds(&every[..2]),
            "{name}: at most the limit"
        );
        assert_eq!(
            kinds(&store.settles(t.id, seqs[3], 2).await.expect("read")),
            kinds(&every[2..]),
            "{name}: below a seq"
        );
        assert!(
            store
                .settles(Uuid::now_v7(), i64::MAX, 2)
                .await
                .expect("read")
                .is_empty(),
            "{name}: no such thread"
        );
    })
    .await;
}

/// `entries` as one settling commit of `t` (each taking `t`'s next seq), under a lease taken
/// for it: the commit and its run.
async fn settling(store: &Arc<dyn Store>, t: &mut Thread, entries: Vec<Entry>) -> (Commit, Uuid) {
    let owner = Uuid::now_v7();
    assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
    let mut commit = Commit::default();
    for e in entries {
        let seq = t.take_seq();
        match e {
            Entry::Said(s, text) => commit.messages.push(Message::text(
                seq,
                s,
                Role::User,
                Some(SideId::B),
                text.into(),
                10,
            )),
            Entry::Fact(body) => commit.records.push(Record::new(seq, body, 10)),
            Entry::Full(session) => commit.messages.push(rich(seq, session)),
        }
    }
    commit.settle = true;
    (commit, owner)
}

/// A model's message of `session` at `seq` with every field set: tool calls whose arguments
/// hold floats that print long, usage, provider data, images, files, a sender's id, and text
/// with a character outside the BMP and a control character (no NUL: Postgres stores none).
fn rich(seq: i64, session: i64) -> Message {
    use duet_runtime::{AttachmentRef, ImageRef, ToolCall, ToolStatus, Usage};
    let floats =
        serde_json::json!({"x": 0.1, "y": 1e-7, "z": 123_456.789_012_345_68, "n": [1.0, -2.5e300]});
    Message {
        seq,
        session,
        role: Role::Assistant,
        side: Some(SideId::A),
        content: Some("done \u{1F600} \u{7}".into()),
        thinking: Some("because".into()),
        tool_calls: vec![ToolCall {
            id: "call-1".into(),
            name: "decide".into(),
            arguments: floats,
        }],
        tool_call_id: Some("call-0".into()),
        tool_name: Some("look".into()),
        tool_status: Some(ToolStatus::Error),
        silent: true,
        model: Some("demo".into()),
        usage: Some(Usage {
            input_tokens: 3,
            output_tokens: 5,
            cached_tokens: 1,
            reasoning_tokens: 2,
        }),
        provider_data: Some(serde_json::json!({"signature": "s", "score": 0.30000000000000004})),
        images: vec![ImageRef {
            mime_type: "image/png".into(),
            data: "aGk=".into(),
        }],
        attachments: vec![AttachmentRef {
            path: "/out/a.txt".into(),
            name: "a.txt".into(),
            mime_type: "text/plain".into(),
            size: 2,
            width: Some(4),
            height: None,
            description: Some("the answer".into()),
        }],
        message_id: Some("m-1".into()),
        created_at: 11,
    }
}

/// An `approval_requested` record whose arguments hold floats.
fn asked() -> Entry {
    Entry::Fact(RecordBody::ApprovalRequested(
        duet_runtime::approval::Asked {
            call: "call-1".into(),
            tool: "decide".into(),
            arguments: serde_json::json!({"amount": 0.1, "rate": 2.000_000_000_000_000_4}),
            decisions: vec![duet_runtime::approval::Decision::Approve],
            remember: Vec::new(),
            approvers: Default::default(),
            revision: Some("r".into()),
            policy: None,
            deadline: None,
        },
    ))
}

/// Session `session` of thread `id` as a read now gives it, all of it.
async fn session(store: &Arc<dyn Store>, id: ThreadId, session: i64) -> Vec<JournalEntry> {
    store
        .session_entries(id, session, i64::MAX)
        .await
        .expect("read")
}

/// A new thread `key` whose session 1 holds `body` after its start.
async fn opened(store: &Arc<dyn Store>, key: &str, body: impl Iterator<Item = Entry>) -> Thread {
    let mut t = thread(store, key).await;
    let mut entries = vec![started(1)];
    entries.extend(body);
    write(store, &mut t, entries).await;
    t
}

/// Settles `entries` on `t`, reading session 1 back with the commit: how many entries it read,
/// which must be what a read after the commit gives.
async fn read_back(store: &Arc<dyn Store>, t: &mut Thread, entries: Vec<Entry>) -> Option<usize> {
    let commit = settling(store, t, entries).await;
    let read = reading(store, t, commit, 1).await?;
    assert_eq!(read, session(store, t.id, 1).await, "{}: as written", t.key);
    Some(read.len())
}

/// `commit_reading` of session `session`, which must settle: what it read, each message it
/// names by seq filled in from the thread's messages as they were before the commit (what a run
/// holds; the commit's own must come whole).
async fn reading(
    store: &Arc<dyn Store>,
    t: &Thread,
    (commit, owner): (Commit, Uuid),
    session: i64,
) -> Option<Vec<JournalEntry>> {
    let held = store.messages(t.id).await.expect("read");
    let (outcome, read) = store
        .commit_reading(t, owner, commit, session)
        .await
        .expect("commit");
    assert_eq!(outcome, duet_runtime::CommitOutcome::Settled);
    let read = read?;
    let filled = ReadBack::fill(read.clone(), &held);
    Some(filled.unwrap_or_else(|| panic!("{}: a message not written before: {read:?}", t.key)))
}

#[tokio::test]
async fn a_commit_that_reads_its_session_back_tells_what_a_read_after_it_would() {
    each(async |store, name| {
        // SQLite reads with the write; a store that does not says so with `None`.
        let reads = name == "sqlite";
        for round in 0..3 {
            let mut t = thread(&store, &format!("k-{round}")).await;
            let mut other = thread(&store, &format!("other-{round}")).await;
            write(&store, &mut t, vec![started(1), Entry::Said(1, "hello")]).await;
            let ended = Entry::Fact(RecordBody::SessionEnded {
                stop_reason: StopReason::SessionStop,
                result: None,
            });
            // Two threads' settling commits at once (on SQLite, one group of the committer):
            // each reads its own session back, the one it names.
            let mine = settling(
                &store,
                &mut t,
                vec![ended, started(2), Entry::Said(2, "more"), stopped()],
            )
            .await;
            let theirs = settling(
                &store,
                &mut other,
                vec![started(1), Entry::Said(1, "elsewhere")],
            )
            .await;
            let (mine, theirs) = tokio::join!(
                reading(&store, &t, mine, 2),
                reading(&store, &other, theirs, 1)
            );
            assert_eq!(mine.is_some(), reads, "{name}");
            assert_eq!(theirs.is_some(), reads, "{name}");
            if let (Some(mine), Some(theirs)) = (mine, theirs) {
                let after = session(&store, t.id, 2).await;
                assert_eq!(after.len(), 3, "{name}");
                assert_eq!(mine, after, "{name}: session 2 as written");
                let after = session(&store, other.id, 1).await;
                assert_eq!(after.len(), 2, "{name}");
                assert_eq!(theirs, after, "{name}: the other thread's own");
            }
            // Every field a message or a record can have, some written before the settling
            // commit and some by it: what it hands back is what a read after it gives.
            let mut rich_t = thread(&store, &format!("rich-{round}")).await;
            write(
                &store,
                &mut rich_t,
                vec![started(1), Entry::Full(1), asked()],
            )
            .await;
            let commit = settling(
                &store,
                &mut rich_t,
                vec![Entry::Full(1), asked(), stopped()],
            )
            .await;
            let read = reading(&store, &rich_t, commit, 1).await;
            assert_eq!(read.is_some(), reads, "{name}");
            if let Some(read) = read {
                let after = session(&store, rich_t.id, 1).await;
                assert_eq!(after.len(), 6, "{name}");
                assert_eq!(read, after, "{name}: every field, as written");
            }
            // A session the thread never had reads as empty, its commit's entries included.
            let commit = settling(&store, &mut rich_t, vec![Entry::Said(1, "late")]).await;
            let read = reading(&store, &rich_t, commit, 7).await;
            assert_eq!(read, reads.then(Vec::new), "{name}");
            // At most 256 entries are read back with the write (SQLite's bound): a longer
            // session is the caller's to read, whether the commit's own entries or those before
            // it make it longer.
            if round == 0 {
                let said = |n| (0..n).map(|_| Entry::Said(1, "x"));
                let mut long = opened(&store, "long", said(253)).await;
                let read = read_back(&store, &mut long, vec![Entry::Said(1, "y"), Entry::Full(1)]);
                assert_eq!(read.await, reads.then_some(256), "{name}: 256");
                let read = read_back(&store, &mut long, vec![Entry::Said(1, "z")]).await;
                assert_eq!(read, None, "{name}: 257");
                let mut longer = opened(&store, "longer", said(300)).await;
                let read = read_back(&store, &mut longer, vec![stopped()]).await;
                assert_eq!(read, None, "{name}: 302");
                // The bound holds for records and messages together: 256 of both, interleaved
                // and all written before the commit (which opens the next session), come back
                // in seq order; 302 of both (in two runs) are the caller's to read.
                let pairs = (0..127).flat_map(|_| [Entry::Said(1, "x"), stopped()]);
                let mut mixed = opened(&store, "mixed", pairs.chain(said(1))).await;
                let read = read_back(&store, &mut mixed, vec![started(2)]).await;
                assert_eq!(read, reads.then_some(256), "{name}: 256 of both kinds");
                let runs = (0..200).map(|_| stopped()).chain(said(100));
                let mut both = opened(&store, "both", runs).await;
                let read = read_back(&store, &mut both, vec![stopped()]).await;
                assert_eq!(read, None, "{name}: 302 of both kinds");
            }
            // An earlier session, read back by a later commit: up to the next session's start.
            let later = settling(&store, &mut t, vec![Entry::Said(2, "again")]).await;
            if let Some(read) = reading(&store, &t, later, 1).await {
                let one = session(&store, t.id, 1).await;
                assert_eq!(read, one, "{name}: session 1");
                assert_eq!(read.len(), 3, "{name}: its start, its message, its end");
            }
            // A settling commit that keeps the lease (a message waits: the run goes on) hands
            // nothing back: its run is not over.
            let (commit, owner) = settling(&store, &mut t, vec![stopped()]).await;
            let waiting = NewQueued::new(Role::User, SideId::B, "meanwhile");
            store
                .enqueue(t.id, waiting, None, 20)
                .await
                .expect("enqueue");
            let (outcome, read) = store
                .commit_reading(&t, owner, commit, 2)
                .await
                .expect("commit");
            assert_eq!(
                outcome,
                duet_runtime::CommitOutcome::Committed { queued: true },
                "{name}"
            );
            assert!(read.is_none(), "{name}: {read:?}");
            store.release(t.id, owner).await.expect("release");
            // A commit whose lease is gone writes nothing and reads nothing back.
            let before = store.journal_since(t.id, 0).await.expect("read");
            let (commit, _) = settling(&store, &mut t.clone(), vec![stopped()]).await;
            let lost = store.commit_reading(&t, Uuid::now_v7(), commit, 2).await;
            assert!(
                matches!(lost, Err(StoreError::LeaseLost(_))),
                "{name}: {lost:?}"
            );
            assert_eq!(store.journal_since(t.id, 0).await.expect("read"), before);
        }
    })
    .await;
}
