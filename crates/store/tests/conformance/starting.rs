//! The claiming writes that may read the run's start with them (`create_starting`,
//! `enqueue_starting`, `answer_starting`): the same outcome as the plain write, and a start only
//! when the lease was taken — then exactly what `run_start` reads right after (SQLite reads it in
//! the same call; the others leave it to the run).

use super::*;
use duet_runtime::{AnswerOutcome, Commit, Message, RunStart};
use serde_json::json;

/// `start`, if any, is what `run_start` reads now (its deadline override too, when both read it).
async fn same_as_read(store: &Arc<dyn Store>, start: Option<RunStart>, name: &str) {
    let Some(start) = start else {
        return;
    };
    let id = start.thread.as_ref().expect("a start has its thread").id;
    let read = store.run_start(id).await.expect("run_start");
    assert_eq!(start.thread, read.thread, "{name}: the thread");
    assert_eq!(start.messages, read.messages, "{name}: the messages");
    assert_eq!(start.queue, read.queue, "{name}: the queue");
    if let (Some(a), Some(b)) = (&start.deadline_override, &read.deadline_override) {
        assert_eq!(a, b, "{name}: the deadline override");
    }
}

#[tokio::test]
async fn a_claiming_write_reads_the_runs_start_only_when_it_took_the_lease() {
    each(async |store, name| {
        // A new thread: its start is its one queued message.
        let run = Uuid::now_v7();
        let made = store
            .create_starting("k", new("agent", 5), human("first"), lease(run, 5))
            .await
            .expect("create");
        let mut t = made.outcome.expect("a new key");
        if let Some(start) = &made.start {
            assert_eq!(start.queue.len(), 1, "{name}");
            assert!(start.messages.is_empty(), "{name}");
            assert_eq!(
                start.thread.as_ref().map(|t| t.lease_owner),
                Some(Some(run))
            );
        }
        same_as_read(&store, made.start, name).await;
        let again = store
            .create_starting("k", new("agent", 6), human("again"), lease(run, 6))
            .await
            .expect("create");
        assert!(again.outcome.is_none() && again.start.is_none(), "{name}");

        // The run drains it, sets a deadline override and settles.
        let queue = store.queue(t.id).await.expect("queue");
        t.session = 1;
        t.session_open = true;
        let seq = t.take_seq();
        let commit = Commit {
            drained: queue.iter().map(|q| q.id).collect(),
            messages: vec![Message::text(
                seq,
                1,
                Role::User,
                Some(SideId::B),
                "first".into(),
                7,
            )],
            values: vec![(
                duet_runtime::deadline::OVERRIDE_KEY.to_owned(),
                Some(json!({"after": "1h"})),
            )],
            settle: true,
            ..Commit::default()
        };
        store.commit(&t, run, commit).await.expect("commit");

        // A message to a held thread takes nothing and reads nothing.
        let holder = Uuid::now_v7();
        assert!(store.claim(t.id, lease(holder, 8)).await.expect("claim"));
        let queued = store
            .enqueue_starting(t.id, human("busy"), lease(Uuid::now_v7(), 9), 9)
            .await
            .expect("enqueue");
        assert!(!queued.outcome && queued.start.is_none(), "{name}");
        assert!(store.release(t.id, holder).await.expect("release"));

        // One to a free thread takes it: its history, both queued messages, the override.
        let next = Uuid::now_v7();
        let claimed = store
            .enqueue_starting(t.id, human("next"), lease(next, 10), 10)
            .await
            .expect("enqueue");
        assert!(claimed.outcome, "{name}: the lease was free");
        if let Some(start) = &claimed.start {
            assert_eq!(start.messages.len(), 1, "{name}");
            assert_eq!(start.queue.len(), 2, "{name}");
            assert_eq!(
                start.deadline_override,
                Some(Some(json!({"after": "1h"}))),
                "{name}"
            );
        }
        same_as_read(&store, claimed.start, name).await;
    })
    .await;
}

#[tokio::test]
async fn an_answer_reads_the_runs_start_only_when_accepted_and_claiming() {
    each(async |store, name| {
        let mut t = store
            .open_thread("q", new("agent", 100))
            .await
            .expect("open");
        let run = Uuid::now_v7();
        assert!(store.claim(t.id, lease(run, 1_000)).await.expect("claim"));
        t.session = 1;
        let seq = t.take_seq();
        t.status = ThreadStatus::AwaitingHuman;
        let commit = Commit {
            messages: vec![Message::text(
                seq,
                1,
                Role::Assistant,
                Some(SideId::A),
                "which?".into(),
                1_000,
            )],
            settle: true,
            ..Commit::default()
        };
        store.commit(&t, run, commit).await.expect("commit");
        let park = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .and_then(|t| t.park())
            .expect("parked");

        let first = Uuid::now_v7();
        let accepted = store
            .answer_starting(t.id, human("the red one"), park, lease(first, 2_000))
            .await
            .expect("answer");
        assert_eq!(
            accepted.outcome,
            AnswerOutcome::Accepted { claimed: true },
            "{name}"
        );
        if let Some(start) = &accepted.start {
            assert_eq!(start.queue.len(), 1, "{name}: the answer, queued");
            assert_eq!(start.deadline_override, Some(None), "{name}: none set");
        }
        same_as_read(&store, accepted.start, name).await;

        let refused = store
            .answer_starting(
                t.id,
                human("the blue one"),
                park,
                lease(Uuid::now_v7(), 2_100),
            )
            .await
            .expect("answer");
        assert!(
            matches!(refused.outcome, AnswerOutcome::Refused { .. }) && refused.start.is_none(),
            "{name}: {:?}",
            refused.outcome
        );
    })
    .await;
}
