//! Who answered a park: the accepted answer is recorded with its author and message id, and a
//! refused one is told about it; without a record, the queue and then the journal say what won.

use super::*;
use duet_runtime::{AnswerOutcome, AnsweredQuery, Commit, FirstAnswer, Message, NewThread, Park};

const ALICE: &str = r#"{"iss":"test","sub":"alice"}"#;
const BOB: &str = r#"{"iss":"test","sub":"bob"}"#;

/// Thread `key` asking a question in session 1 and parked on it: the thread and its park.
pub(crate) async fn parked(store: &Arc<dyn Store>, key: &str) -> (Thread, Park) {
    parked_as(store, key, "agent", None).await
}

/// [`parked`], for a thread of `agent` owned by `principal`.
async fn parked_as(
    store: &Arc<dyn Store>,
    key: &str,
    agent: &str,
    principal: Option<&str>,
) -> (Thread, Park) {
    let mut t = store
        .open_thread(
            key,
            NewThread {
                principal,
                ..new(agent, 100)
            },
        )
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
    let t = store
        .thread_by_id(t.id)
        .await
        .expect("read")
        .expect("thread");
    let park = t.park().expect("parked");
    (t, park)
}

fn by(author: &str, message_id: &str, text: &str) -> NewQueued {
    NewQueued {
        author: Some(author.into()),
        message_id: Some(message_id.into()),
        ..human(text)
    }
}

/// The run that took the answer writes it at the park and settles idle.
async fn apply_answer(store: &Arc<dyn Store>, mut t: Thread, runner: Uuid) {
    let queue = store.queue(t.id).await.expect("queue");
    let seq = t.take_seq();
    t.status = ThreadStatus::Idle;
    let commit = Commit {
        drained: queue.iter().map(|q| q.id).collect(),
        messages: vec![Message::text(
            seq,
            1,
            Role::User,
            Some(SideId::B),
            queue[0].content.clone(),
            2_500,
        )],
        settle: true,
        ..Commit::default()
    };
    store.commit(&t, runner, commit).await.expect("commit");
}

#[tokio::test]
async fn a_refused_answer_names_the_author_and_message_id_of_the_one_that_won() {
    each(async |store, name| {
        let (t, park) = parked(&store, "k").await;
        let runner = Uuid::now_v7();
        assert_eq!(
            store
                .answer(
                    t.id,
                    by(ALICE, "m-alice", "the red one"),
                    park,
                    lease(runner, 2_000)
                )
                .await
                .expect("answer"),
            AnswerOutcome::Accepted { claimed: true },
            "{name}"
        );
        let winner = FirstAnswer {
            content: "the red one".into(),
            at: 2_000,
            author: Some(ALICE.into()),
            message_id: Some("m-alice".into()),
        };
        assert_eq!(
            store
                .answer(
                    t.id,
                    by(BOB, "m-bob", "the blue one"),
                    park,
                    lease(Uuid::now_v7(), 2_100)
                )
                .await
                .expect("answer"),
            AnswerOutcome::Refused {
                first: Some(winner.clone())
            },
            "{name}: while the winner is queued"
        );
        assert_eq!(
            store
                .queue(t.id)
                .await
                .expect("queue")
                .iter()
                .map(|q| q.content.as_str())
                .collect::<Vec<_>>(),
            ["the red one"],
            "{name}: the refused one wrote nothing"
        );
        // Once the run has written the answer at the park, a late one still learns who won.
        apply_answer(&store, t.clone(), runner).await;
        assert_eq!(
            store
                .answer(
                    t.id,
                    by(BOB, "m-bob", "the blue one"),
                    park,
                    lease(Uuid::now_v7(), 3_000)
                )
                .await
                .expect("answer"),
            AnswerOutcome::Refused {
                first: Some(winner)
            },
            "{name}: after it was applied (and bob's message id was never taken)"
        );
        // An answer without an author or message id is recorded as such.
        let (t2, park2) = parked(&store, "k2").await;
        assert_eq!(
            store
                .answer(t2.id, human("plain"), park2, lease(Uuid::now_v7(), 4_000))
                .await
                .expect("answer"),
            AnswerOutcome::Accepted { claimed: true },
            "{name}"
        );
        assert_eq!(
            store
                .answer(
                    t2.id,
                    by(BOB, "m-2", "late"),
                    park2,
                    lease(Uuid::now_v7(), 4_100)
                )
                .await
                .expect("answer"),
            AnswerOutcome::Refused {
                first: Some(FirstAnswer {
                    content: "plain".into(),
                    at: 4_000,
                    author: None,
                    message_id: None
                })
            },
            "{name}"
        );
    })
    .await;
}

#[tokio::test]
async fn without_a_recorded_answer_the_queue_then_the_journal_say_what_won() {
    each(async |store, name| {
        // A message queued at the park by a plain delivery, not as an answer.
        let (t, park) = parked(&store, "queued").await;
        store
            .enqueue(t.id, human("typed"), None, 2_000)
            .await
            .expect("enqueue");
        assert_eq!(
            store
                .answer(
                    t.id,
                    by(BOB, "m-1", "late"),
                    park,
                    lease(Uuid::now_v7(), 2_100)
                )
                .await
                .expect("answer"),
            AnswerOutcome::Refused {
                first: Some(FirstAnswer {
                    content: "typed".into(),
                    at: 2_000,
                    author: None,
                    message_id: None
                })
            },
            "{name}: the queued one"
        );
        // Applied, the journal has it at the park's seq.
        let runner = Uuid::now_v7();
        assert!(
            store
                .claim(t.id, lease(runner, 2_200))
                .await
                .expect("claim")
        );
        apply_answer(&store, t.clone(), runner).await;
        assert_eq!(
            store
                .answer(
                    t.id,
                    by(BOB, "m-1", "late"),
                    park,
                    lease(Uuid::now_v7(), 3_000)
                )
                .await
                .expect("answer"),
            AnswerOutcome::Refused {
                first: Some(FirstAnswer {
                    content: "typed".into(),
                    at: 2_500,
                    author: None,
                    message_id: None
                })
            },
            "{name}: the journaled one"
        );
    })
    .await;
}

#[tokio::test]
async fn answered_parks_are_listed_newest_first_with_their_question_by_owner_and_agent() {
    each(async |store, name| {
        let (a, park_a) = parked_as(&store, "a", "gate", Some(ALICE)).await;
        let (b, park_b) = parked_as(&store, "b", "gate", Some(BOB)).await;
        let (c, park_c) = parked_as(&store, "c", "other", Some(ALICE)).await;
        let (_waiting, _) = parked_as(&store, "unanswered", "gate", Some(ALICE)).await;
        for (t, park, at, text) in [
            (&a, park_a, 2_000, "yes"),
            (&b, park_b, 3_000, "no"),
            (&c, park_c, 3_000, "maybe"),
        ] {
            let answer = store
                .answer(
                    t.id,
                    by(ALICE, &format!("m-{at}-{}", t.key), text),
                    park,
                    lease(Uuid::now_v7(), at),
                )
                .await
                .expect("answer");
            assert_eq!(answer, AnswerOutcome::Accepted { claimed: true }, "{name}");
        }
        let all = store
            .answered(&AnsweredQuery {
                limit: 10,
                ..AnsweredQuery::default()
            })
            .await
            .expect("answered");
        let listed = |list: &[duet_runtime::Answered]| {
            list.iter()
                .map(|x| (x.key.clone(), x.answer.content.clone()))
                .collect::<Vec<_>>()
        };
        // Newest first; the two at 3_000 by thread id, descending (c was made after b).
        assert_eq!(
            listed(&all),
            [
                ("c".into(), "maybe".into()),
                ("b".into(), "no".into()),
                ("a".into(), "yes".into())
            ],
            "{name}: the unanswered park is not history"
        );
        assert_eq!(
            all[2].question.as_deref(),
            Some("which?"),
            "{name}: the question asked"
        );
        assert_eq!(all[2].park, park_a, "{name}");
        assert_eq!(all[2].agent, "gate", "{name}");
        assert_eq!(all[2].principal.as_deref(), Some(ALICE), "{name}");
        assert_eq!(
            all[2].answer.author.as_deref(),
            Some(ALICE),
            "{name}: who answered"
        );
        assert_eq!(all[2].answer.at, 2_000, "{name}: when");

        let alices = store
            .answered(&AnsweredQuery {
                principal: Some(ALICE),
                limit: 10,
                ..AnsweredQuery::default()
            })
            .await
            .expect("answered");
        assert_eq!(
            listed(&alices),
            [("c".into(), "maybe".into()), ("a".into(), "yes".into())],
            "{name}: the owner's threads only"
        );
        let gates = store
            .answered(&AnsweredQuery {
                agent: Some("gate"),
                limit: 10,
                ..AnsweredQuery::default()
            })
            .await
            .expect("answered");
        assert_eq!(
            listed(&gates),
            [("b".into(), "no".into()), ("a".into(), "yes".into())],
            "{name}: by agent"
        );
        let bs = store
            .answered(&AnsweredQuery {
                thread: Some(b.id),
                limit: 10,
                ..AnsweredQuery::default()
            })
            .await
            .expect("answered");
        assert_eq!(
            listed(&bs),
            [("b".into(), "no".into())],
            "{name}: by thread"
        );

        // A page at a time: the cursor is the last item's (at, thread, park).
        let first = store
            .answered(&AnsweredQuery {
                limit: 2,
                ..AnsweredQuery::default()
            })
            .await
            .expect("answered");
        let last = &first[1];
        let rest = store
            .answered(&AnsweredQuery {
                limit: 2,
                before: Some((last.answer.at, last.thread, last.park)),
                ..AnsweredQuery::default()
            })
            .await
            .expect("answered");
        assert_eq!(listed(&first), listed(&all[..2]), "{name}");
        assert_eq!(
            listed(&rest),
            listed(&all[2..]),
            "{name}: the next page, nothing twice"
        );
    })
    .await;
}

#[tokio::test]
async fn status_counts_count_threads_by_status_and_find_the_oldest_park() {
    each(async |store, name| {
        assert_eq!(
            store.status_counts().await.expect("counts"),
            duet_runtime::StatusCounts::default(),
            "{name}: an empty store"
        );
        let (a, _) = parked(&store, "a").await;
        let (b, _) = parked(&store, "b").await;
        thread(&store, "idle").await;
        let counts = store.status_counts().await.expect("counts");
        assert_eq!(
            counts.by_status,
            [(ThreadStatus::AwaitingHuman, 2), (ThreadStatus::Idle, 1)],
            "{name}"
        );
        assert_eq!(
            counts.oldest_awaiting,
            Some(a.updated_at.min(b.updated_at)),
            "{name}"
        );
    })
    .await;
}

/// An answer whose message id was delivered before is a `Duplicate` whatever the park's state,
/// an answer to no thread is `NotFound`, a refused or duplicate answer writes nothing (no queue
/// row, no message id, no record), and an accepted one leaves a held lease with its holder.
#[tokio::test]
async fn an_answer_writes_everything_or_nothing() {
    each(async |store, name| {
        let (t, park) = parked(&store, "k").await;
        let holder = Uuid::now_v7();
        assert!(
            store
                .claim(t.id, lease(holder, 2_000))
                .await
                .expect("claim")
        );
        let accepted = store
            .answer(
                t.id,
                by(ALICE, "m-1", "yes"),
                park,
                lease(Uuid::now_v7(), 2_001),
            )
            .await
            .expect("answer");
        assert_eq!(
            accepted,
            AnswerOutcome::Accepted { claimed: false },
            "{name}"
        );
        let held = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        assert_eq!(
            held.lease_owner,
            Some(holder),
            "{name}: the holder keeps it"
        );
        let again = store
            .answer(
                t.id,
                by(BOB, "m-1", "no"),
                park,
                lease(Uuid::now_v7(), 2_002),
            )
            .await;
        assert!(
            matches!(&again, Err(StoreError::Duplicate { message_id, .. }) if message_id == "m-1"),
            "{name}: {again:?}"
        );
        let refused = store
            .answer(
                t.id,
                by(BOB, "m-2", "no"),
                park,
                lease(Uuid::now_v7(), 2_003),
            )
            .await
            .expect("answer");
        assert!(
            matches!(refused, AnswerOutcome::Refused { .. }),
            "{name}: {refused:?}"
        );
        let queue: Vec<String> = store
            .queue(t.id)
            .await
            .expect("queue")
            .into_iter()
            .map(|q| q.content)
            .collect();
        assert_eq!(queue, ["yes"], "{name}: only the accepted answer is queued");
        assert!(
            store.delivered(t.id, "m-1").await.expect("delivered"),
            "{name}"
        );
        assert!(
            !store.delivered(t.id, "m-2").await.expect("delivered"),
            "{name}: a refused answer's id is not taken"
        );
        let missing = store
            .answer(
                Uuid::now_v7(),
                by(BOB, "m-3", "no"),
                park,
                lease(Uuid::now_v7(), 2_004),
            )
            .await;
        assert!(
            matches!(missing, Err(StoreError::NotFound(_))),
            "{name}: {missing:?}"
        );
    })
    .await;
}

/// A person's next message to a thread they read as idle goes in only while the thread is as
/// they read it: once another session has asked something meanwhile, it is refused and writes
/// nothing, rather than becoming the answer to a question its sender never saw.
#[tokio::test]
async fn a_next_message_read_before_a_park_is_not_its_answer() {
    each(async |store, name| {
        let read = store
            .open_thread("k", new("agent", 100))
            .await
            .expect("open");
        let (now, _) = parked(&store, "k").await;
        assert_ne!(read.next_seq, now.next_seq, "{name}: the park was written");
        assert!(
            !store
                .deliver_if_free(
                    now.id,
                    human("start over"),
                    lease(Uuid::now_v7(), 2_000),
                    Some(read.next_seq)
                )
                .await
                .expect("deliver"),
            "{name}: read before the park"
        );
        assert!(
            store.queue(now.id).await.expect("queue").is_empty(),
            "{name}: the refused message left no trace"
        );
        assert!(
            store
                .deliver_if_free(
                    now.id,
                    human("yes"),
                    lease(Uuid::now_v7(), 2_100),
                    Some(now.next_seq)
                )
                .await
                .expect("deliver"),
            "{name}: read as it stands"
        );
    })
    .await;
}
