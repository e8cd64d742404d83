//! Writes of every kind at once (SQLite writes whatever waits in one transaction: deliveries,
//! answers, creations and commits together): each gets its own outcome, as if written alone —
//! and when one of them breaks a constraint, the others are written all the same.

use super::answers::parked;
use super::*;
use duet_runtime::{AnswerOutcome, Commit, CommitOutcome, Message, Park, Starting};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};

/// What one write of the batch told.
#[derive(Debug)]
enum Told {
    Enqueue(Result<bool, StoreError>),
    Answer(Result<AnswerOutcome, StoreError>),
    Started(Result<Starting<AnswerOutcome>, StoreError>),
    Create(Result<Option<Thread>, StoreError>),
    Commit(Result<CommitOutcome, StoreError>),
}

fn with_id(text: &str, id: &str) -> NewQueued {
    NewQueued {
        message_id: Some(id.into()),
        ..human(text)
    }
}

/// A commit of one message at `t`'s next seq by `owner`.
fn one_message(t: &Thread, text: &str) -> Commit {
    let seq = t.next_seq;
    Commit {
        messages: vec![Message::text(
            seq,
            1,
            Role::User,
            Some(SideId::B),
            text.into(),
            5,
        )],
        ..Commit::default()
    }
}

#[tokio::test]
async fn writes_of_every_kind_at_once_each_get_their_own_outcome() {
    each(async |store, name| {
        for conflict in [false, true] {
            let tag = if conflict { "with a conflict" } else { "clean" };
            let k = |s: &str| format!("{s}-{conflict}");
            let idle = thread(&store, &k("idle")).await;
            let idle2 = thread(&store, &k("idle2")).await;
            let (p0, park0) = parked(&store, &k("p0")).await;
            let (p1, park1) = parked(&store, &k("p1")).await;
            let (p2, park2) = parked(&store, &k("p2")).await;
            let (p3, park3) = parked(&store, &k("p3")).await;
            let mut c0 = thread(&store, &k("c0")).await;
            let run0 = Uuid::now_v7();
            assert!(store.claim(c0.id, lease(run0, 1_000)).await.expect("claim"));
            c0.status = ThreadStatus::Running;
            let c1 = thread(&store, &k("c1")).await;
            let run1 = Uuid::now_v7();
            assert!(store.claim(c1.id, lease(run1, 1_000)).await.expect("claim"));
            if conflict {
                // c1's next seq is taken: its commit breaks the journal's key, and the group it
                // lands in is rolled back and written again one by one.
                store
                    .commit(&c1, run1, one_message(&c1, "first"))
                    .await
                    .expect("commit");
            }
            let claim = || lease(Uuid::now_v7(), 1_000);
            let wrong = Park {
                seq: park2.seq + 5,
                ..park2
            };
            let s = &store;
            let (c0r, c1r) = (&c0, &c1);
            let batch: Vec<BoxFuture<'_, Told>> = vec![
                async move { Told::Enqueue(s.enqueue(idle.id, with_id("e", "m"), Some(claim()), 1_000).await) }.boxed(),
                async move { Told::Enqueue(s.enqueue(idle.id, with_id("e again", "m"), Some(claim()), 1_000).await) }.boxed(),
                async move { Told::Enqueue(s.enqueue(idle2.id, human("plain"), None, 1_000).await) }.boxed(),
                async move { Told::Enqueue(s.enqueue(Uuid::now_v7(), human("nobody"), Some(claim()), 1_000).await) }.boxed(),
                async move { Told::Answer(s.answer(p0.id, with_id("yes", "a0"), park0, claim()).await) }.boxed(),
                async move { Told::Answer(s.answer(p1.id, with_id("one", "a1"), park1, claim()).await) }.boxed(),
                async move { Told::Answer(s.answer(p1.id, with_id("two", "a2"), park1, claim()).await) }.boxed(),
                async move { Told::Answer(s.answer(p2.id, human("late"), wrong, claim()).await) }.boxed(),
                async move { Told::Started(s.answer_starting(p3.id, human("go"), park3, claim()).await) }.boxed(),
                async move { Told::Create(s.create_with(&k("new"), new("agent", 1_000), human("hi"), claim()).await) }.boxed(),
                async move { Told::Create(s.create_with(&k("new"), new("agent", 1_000), human("hi again"), claim()).await) }.boxed(),
                async move { Told::Commit(s.commit(c0r, run0, one_message(c0r, "c0")).await) }.boxed(),
                async move { Told::Commit(s.commit(c1r, run1, one_message(c1r, "c1")).await) }.boxed(),
            ];
            let told = futures::future::join_all(batch).await;
            let at = |i: usize| &told[i];
            // Two deliveries of message id `m`: exactly one queued, the other a duplicate.
            let firsts: Vec<bool> = [at(0), at(1)]
                .iter()
                .map(|t| match t {
                    Told::Enqueue(Ok(claimed)) => {
                        assert!(claimed, "{name} {tag}: the lease was free");
                        true
                    }
                    Told::Enqueue(Err(StoreError::Duplicate { message_id, .. })) => {
                        assert_eq!(message_id, "m");
                        false
                    }
                    other => panic!("{name} {tag}: {other:?}"),
                })
                .collect();
            assert_eq!(firsts.iter().filter(|f| **f).count(), 1, "{name} {tag}");
            assert_eq!(store.queue(idle.id).await.expect("queue").len(), 1, "{name} {tag}");
            assert!(matches!(at(2), Told::Enqueue(Ok(false))), "{name} {tag}: {:?}", at(2));
            assert_eq!(store.queue(idle2.id).await.expect("queue").len(), 1);
            assert!(
                matches!(at(3), Told::Enqueue(Err(StoreError::NotFound(_)))),
                "{name} {tag}: {:?}",
                at(3)
            );
            assert!(
                matches!(at(4), Told::Answer(Ok(AnswerOutcome::Accepted { claimed: true }))),
                "{name} {tag}: {:?}",
                at(4)
            );
            // Two answers to one question: one accepted, the other refused and told of it.
            let (won, lost) = match (at(5), at(6)) {
                (Told::Answer(Ok(AnswerOutcome::Accepted { .. })), Told::Answer(Ok(AnswerOutcome::Refused { first }))) => ("one", first),
                (Told::Answer(Ok(AnswerOutcome::Refused { first })), Told::Answer(Ok(AnswerOutcome::Accepted { .. }))) => ("two", first),
                other => panic!("{name} {tag}: {other:?}"),
            };
            assert_eq!(lost.as_ref().map(|f| f.content.as_str()), Some(won), "{name} {tag}");
            let queued = store.queue(p1.id).await.expect("queue");
            assert_eq!(queued.len(), 1, "{name} {tag}");
            assert_eq!(queued[0].content, won);
            assert!(
                matches!(at(7), Told::Answer(Ok(AnswerOutcome::Refused { .. }))),
                "{name} {tag}: {:?}",
                at(7)
            );
            assert!(store.queue(p2.id).await.expect("queue").is_empty());
            match at(8) {
                Told::Started(Ok(s)) => {
                    assert_eq!(s.outcome, AnswerOutcome::Accepted { claimed: true }, "{name} {tag}");
                    // A backend that reads the start with the write reads this thread's.
                    if let Some(start) = &s.start {
                        assert_eq!(start.thread.as_ref().map(|t| t.id), Some(p3.id), "{name} {tag}");
                        let queue: Vec<&str> = start.queue.iter().map(|q| q.content.as_str()).collect();
                        assert_eq!(queue, ["go"], "{name} {tag}");
                        assert_eq!(start.messages.len(), 1, "{name} {tag}: the question");
                    }
                }
                other => panic!("{name} {tag}: {other:?}"),
            }
            // One key, two creations: one thread, with the first message of the one that won.
            let made: Vec<&Thread> = [at(9), at(10)]
                .iter()
                .filter_map(|t| match t {
                    Told::Create(Ok(made)) => made.as_ref(),
                    other => panic!("{name} {tag}: {other:?}"),
                })
                .collect();
            assert_eq!(made.len(), 1, "{name} {tag}");
            assert_eq!(store.queue(made[0].id).await.expect("queue").len(), 1);
            assert_eq!(
                store.thread(&k("new")).await.expect("read").map(|t| t.id),
                Some(made[0].id)
            );
            assert!(
                matches!(at(11), Told::Commit(Ok(CommitOutcome::Committed { .. }))),
                "{name} {tag}: {:?}",
                at(11)
            );
            let contents = |id| {
                let store = store.clone();
                async move {
                    store
                        .messages(id)
                        .await
                        .expect("read")
                        .into_iter()
                        .filter_map(|m| m.content)
                        .collect::<Vec<_>>()
                }
            };
            assert_eq!(contents(c0.id).await, ["c0"], "{name} {tag}");
            if conflict {
                assert!(
                    matches!(at(12), Told::Commit(Err(StoreError::Conflict(_)))),
                    "{name} {tag}: {:?}",
                    at(12)
                );
                assert_eq!(contents(c1.id).await, ["first"], "{name} {tag}");
            } else {
                assert!(matches!(at(12), Told::Commit(Ok(_))), "{name} {tag}: {:?}", at(12));
                assert_eq!(contents(c1.id).await, ["c1"], "{name} {tag}");
            }
        }
    })
    .await;
}

/// A few writes at once (on SQLite, one call of one text: a commit, a delivery and an answer
/// side by side): each reads back its own rows.
#[tokio::test]
async fn a_commit_a_delivery_and_an_answer_in_one_call_each_get_their_own_rows() {
    each(async |store, name| {
        for round in 0..3 {
            let k = |s: &str| format!("{s}-{round}");
            let idle = thread(&store, &k("idle")).await;
            let (p, park) = parked(&store, &k("p")).await;
            let mut c = thread(&store, &k("c")).await;
            let run = Uuid::now_v7();
            assert!(store.claim(c.id, lease(run, 1_000)).await.expect("claim"));
            c.status = ThreadStatus::Running;
            let s = &store;
            let cr = &c;
            let claim = || lease(Uuid::now_v7(), 1_000);
            let batch: Vec<BoxFuture<'_, Told>> = vec![
                async move { Told::Commit(s.commit(cr, run, one_message(cr, "said")).await) }
                    .boxed(),
                async move {
                    Told::Enqueue(
                        s.enqueue(idle.id, human("queued"), Some(claim()), 1_000)
                            .await,
                    )
                }
                .boxed(),
                async move {
                    Told::Started(s.answer_starting(p.id, human("go"), park, claim()).await)
                }
                .boxed(),
            ];
            let told = futures::future::join_all(batch).await;
            assert!(
                matches!(
                    &told[0],
                    Told::Commit(Ok(CommitOutcome::Committed { queued: false }))
                ),
                "{name}: {:?}",
                told[0]
            );
            assert!(
                matches!(&told[1], Told::Enqueue(Ok(true))),
                "{name}: {:?}",
                told[1]
            );
            match &told[2] {
                Told::Started(Ok(s)) => {
                    assert_eq!(
                        s.outcome,
                        AnswerOutcome::Accepted { claimed: true },
                        "{name}"
                    );
                    if let Some(start) = &s.start {
                        assert_eq!(start.thread.as_ref().map(|t| t.id), Some(p.id), "{name}");
                        let queue: Vec<&str> =
                            start.queue.iter().map(|q| q.content.as_str()).collect();
                        assert_eq!(queue, ["go"], "{name}");
                    }
                }
                other => panic!("{name}: {other:?}"),
            }
            let said: Vec<Option<String>> = store
                .messages(c.id)
                .await
                .expect("read")
                .into_iter()
                .map(|m| m.content)
                .collect();
            assert_eq!(said, [Some("said".to_owned())], "{name}");
        }
    })
    .await;
}

/// A delivery and a commit of one thread at once (on SQLite, one group, the delivery written
/// first): the feed tells them in the order they were written, so its last change of the thread
/// is the thread as it now stands.
#[tokio::test]
async fn a_delivery_and_a_commit_of_one_thread_at_once_are_told_in_the_order_written() {
    each(async |store, name| {
        for round in 0..3 {
            let mut t = thread(&store, &format!("both-{round}")).await;
            let run = Uuid::now_v7();
            assert!(store.claim(t.id, lease(run, 1_000)).await.expect("claim"));
            t.status = ThreadStatus::Running;
            let mut feed = super::feed::live(&store).await;
            let (committed, queued) = futures::join!(
                store.commit(&t, run, one_message(&t, "said")),
                store.enqueue(t.id, human("more"), None, 1_000)
            );
            committed.expect("commit");
            assert!(!queued.expect("enqueue"), "{name}: the run holds the lease");
            let now = store
                .thread_by_id(t.id)
                .await
                .expect("read")
                .expect("thread");
            // Every change of the thread told before a marker written after both writes (the
            // feed tells changes in the order written, whatever their thread): both writes',
            // the later one last. (Those of its opening and its claim, written before the
            // subscription, may come first: on Postgres a notice can still be on its way.)
            let marker = thread(&store, &format!("marker-{round}")).await;
            let mut told = Vec::new();
            loop {
                match tokio::time::timeout(std::time::Duration::from_secs(10), feed.next()).await {
                    Ok(Some(duet_runtime::FeedEvent::Changed(c))) if c.thread == t.id => {
                        told.push(c)
                    }
                    Ok(Some(duet_runtime::FeedEvent::Changed(c))) if c.thread == marker.id => {
                        break;
                    }
                    Ok(Some(_)) => {}
                    other => panic!("{name}: {other:?} after {told:?}"),
                }
            }
            assert!(told.len() >= 2, "{name} {round}: {told:?}");
            assert!(
                told.iter().any(|c| c.seq == now.next_seq - 1),
                "{name} {round}: the commit's change was told: {told:?}"
            );
            let last = told[told.len() - 1];
            assert_eq!(
                (last.seq, last.status),
                (now.next_seq - 1, now.status),
                "{name} {round}: {told:?}"
            );
        }
    })
    .await;
}
