//! A decision on a pending tool call (issue #29): the first one wins — queued, and once its run
//! has written it as an `approval_decided` record — a second is refused naming the first, and a
//! refusal (or a decision on no pending call) writes nothing.

use super::*;
use duet_runtime::approval::{Asked, Decided, Decision};
use duet_runtime::{AnsweredQuery, Commit, DecideOutcome, Message, Record, RecordBody, ToolCall};

/// A thread whose step called `refund` (call `c1`) and waits for a decision on it: the thread
/// and the approval id (the seq of its `approval_requested` record).
async fn pending(store: &Arc<dyn Store>, key: &str) -> (Thread, i64) {
    let mut t = thread(store, key).await;
    let run = Uuid::now_v7();
    assert!(store.claim(t.id, lease(run, 1_000)).await.expect("claim"));
    t.session = 1;
    let mut m = Message::text(
        t.take_seq(),
        1,
        Role::Assistant,
        Some(SideId::A),
        String::new(),
        1_000,
    );
    m.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "refund".into(),
        arguments: serde_json::json!({"amount": 250}),
    }];
    let approval = t.take_seq();
    let asked = Record::new(
        approval,
        RecordBody::ApprovalRequested(Asked {
            call: "c1".into(),
            tool: "refund".into(),
            arguments: serde_json::json!({"amount": 250}),
            decisions: Decision::ALL.to_vec(),
            remember: Vec::new(),
            approvers: Default::default(),
            revision: None,
            policy: None,
            deadline: None,
        }),
        1_000,
    );
    t.status = ThreadStatus::Waiting;
    t.acting = Some(SideId::A);
    let commit = Commit {
        messages: vec![m],
        records: vec![asked],
        settle: true,
        ..Commit::default()
    };
    store.commit(&t, run, commit).await.expect("commit");
    let t = store
        .thread_by_id(t.id)
        .await
        .expect("read")
        .expect("thread");
    (t, approval)
}

fn decided(approval: i64, decision: Decision, author: &str, at: i64) -> Decided {
    Decided {
        approval,
        call: "c1".into(),
        tool: "refund".into(),
        decision,
        args: None,
        reason: (decision == Decision::Reject).then(|| "too much".to_owned()),
        text: None,
        remember: None,
        author: Some(author.into()),
        at,
        message_id: None,
    }
}

#[tokio::test]
async fn the_first_decision_wins_and_a_second_is_refused_naming_it() {
    each(async |store, name| {
        let (t, approval) = pending(&store, "k").await;
        let first = decided(approval, Decision::Reject, "alice", 2_000);
        let outcome = store
            .decide(t.id, first.clone(), SideId::A, lease(Uuid::now_v7(), 2_000))
            .await
            .expect("decide");
        assert_eq!(outcome, DecideOutcome::Accepted { claimed: true }, "{name}");
        let queue = store.queue(t.id).await.expect("queue");
        assert_eq!(queue.len(), 1, "{name}");
        assert_eq!(queue[0].decision.as_ref(), Some(&first), "{name}");
        assert_eq!(
            queue[0].tool.as_ref().map(|r| r.call_id.as_str()),
            Some("c1")
        );

        // A second decision, queued behind the first: refused, naming it; nothing written.
        let next = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        let second = decided(approval, Decision::Approve, "bob", 2_100);
        let outcome = store
            .decide(
                t.id,
                second.clone(),
                SideId::A,
                lease(Uuid::now_v7(), 2_100),
            )
            .await
            .expect("decide");
        assert_eq!(
            outcome,
            DecideOutcome::Refused {
                first: Box::new(first.clone())
            },
            "{name}"
        );
        assert_eq!(
            store.queue(t.id).await.expect("queue").len(),
            1,
            "{name}: nothing queued"
        );
        let after = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        assert_eq!(after.next_seq, next.next_seq, "{name}: nothing journalled");

        // The run drains it as the `approval_decided` record: a late decision still learns who won.
        let owner = after
            .lease_owner
            .expect("the first decision took the lease");
        let mut t = after;
        let seq = t.take_seq();
        let commit = Commit {
            drained: queue.iter().map(|q| q.id).collect(),
            records: vec![Record::new(
                seq,
                RecordBody::ApprovalDecided(first.clone()),
                2_200,
            )],
            ..Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        let outcome = store
            .decide(t.id, second, SideId::A, lease(Uuid::now_v7(), 2_300))
            .await
            .expect("decide");
        assert_eq!(
            outcome,
            DecideOutcome::Refused {
                first: Box::new(first.clone())
            },
            "{name}: from the journal"
        );
        assert!(store.queue(t.id).await.expect("queue").is_empty(), "{name}");

        // The history lists it as written (the refused ones were never written); a cursor at
        // it, or another owner, lists nothing.
        let query = |before, principal| AnsweredQuery {
            before,
            principal,
            limit: 10,
            ..AnsweredQuery::default()
        };
        let listed = store
            .decisions(&query(None, None))
            .await
            .expect("decisions");
        assert_eq!(listed.len(), 1, "{name}: {listed:?}");
        let d = &listed[0];
        assert_eq!(
            (d.thread, d.key.as_str(), d.session, d.seq, d.written_at),
            (t.id, "k", 1, seq, 2_200),
            "{name}"
        );
        assert_eq!(d.decided, first, "{name}");
        let park = duet_runtime::Park { session: 1, seq };
        let after = store
            .decisions(&query(Some((2_200, t.id, park)), None))
            .await
            .expect("decisions");
        assert!(after.is_empty(), "{name}: {after:?}");
        let other = store
            .decisions(&query(None, Some(r#"{"sub":"nobody"}"#)))
            .await
            .expect("decisions");
        assert!(other.is_empty(), "{name}: {other:?}");
    })
    .await;
}

#[tokio::test]
async fn a_retried_decision_is_a_duplicate_and_writes_nothing() {
    each(async |store, name| {
        let (t, approval) = pending(&store, "k").await;
        let first = Decided {
            message_id: Some("key-1".into()),
            ..decided(approval, Decision::Approve, "alice", 2_000)
        };
        let outcome = store
            .decide(t.id, first.clone(), SideId::A, lease(Uuid::now_v7(), 2_000))
            .await
            .expect("decide");
        assert_eq!(outcome, DecideOutcome::Accepted { claimed: true }, "{name}");
        assert!(
            store.delivered(t.id, "key-1").await.expect("delivered"),
            "{name}"
        );
        let before = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        // The same key again (even with another decision): a duplicate, never "refused".
        let retry = Decided {
            message_id: Some("key-1".into()),
            ..decided(approval, Decision::Reject, "alice", 2_100)
        };
        let outcome = store
            .decide(t.id, retry, SideId::A, lease(Uuid::now_v7(), 2_100))
            .await
            .expect("decide");
        assert_eq!(outcome, DecideOutcome::Duplicate, "{name}");
        // Another key: refused naming the first, and that key is not recorded.
        let other = Decided {
            message_id: Some("key-2".into()),
            ..decided(approval, Decision::Reject, "bob", 2_200)
        };
        let outcome = store
            .decide(t.id, other, SideId::A, lease(Uuid::now_v7(), 2_200))
            .await
            .expect("decide");
        assert_eq!(
            outcome,
            DecideOutcome::Refused {
                first: Box::new(first)
            },
            "{name}"
        );
        assert!(
            !store.delivered(t.id, "key-2").await.expect("delivered"),
            "{name}"
        );
        assert_eq!(store.queue(t.id).await.expect("queue").len(), 1, "{name}");
        let after = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        assert_eq!(
            after.next_seq, before.next_seq,
            "{name}: nothing journalled"
        );
    })
    .await;
}

#[tokio::test]
async fn a_decision_on_no_pending_call_writes_nothing() {
    each(async |store, name| {
        let (t, approval) = pending(&store, "k").await;
        let cases = [
            // Not the seq of an `approval_requested` record.
            decided(approval - 1, Decision::Approve, "alice", 2_000),
            decided(approval + 7, Decision::Approve, "alice", 2_000),
            // The record's seq, but another call.
            Decided {
                call: "c2".into(),
                ..decided(approval, Decision::Approve, "alice", 2_000)
            },
        ];
        for d in cases {
            let outcome = store
                .decide(t.id, d.clone(), SideId::A, lease(Uuid::now_v7(), 2_000))
                .await
                .expect("decide");
            assert_eq!(outcome, DecideOutcome::NotPending, "{name}: {d:?}");
        }
        assert!(store.queue(t.id).await.expect("queue").is_empty(), "{name}");
        let after = store
            .thread_by_id(t.id)
            .await
            .expect("read")
            .expect("thread");
        assert_eq!(after.lease_owner, None, "{name}: no lease taken");
    })
    .await;
}
