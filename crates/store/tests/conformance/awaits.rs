//! A waiting call answered exactly once, and which queued rows keep a lease or need a runner:
//! none after an abort; while a thread waits, only late tool results.

use duet_runtime::{
    Child, ChildStatus, Commit, CommitOutcome, NewQueued, Role, SideId, StopReason, ThreadStatus,
    ToolReply, ToolStatus,
};
use serde_json::json;
use uuid::Uuid;

use crate::{each, human, lease, thread};

fn reply(call: &str) -> NewQueued {
    NewQueued {
        tool: Some(ToolReply {
            call_id: call.into(),
            name: "subagent_create".into(),
            status: ToolStatus::Success,
        }),
        ..NewQueued::new(Role::Tool, SideId::A, "approved")
    }
}

#[tokio::test]
async fn a_waiting_call_is_answered_exactly_once() {
    each(async |store, name| {
        let parent = thread(&store, "p").await;
        let child = thread(&store, "p/gate-1").await;
        store
            .put_child(&Child {
                child: child.id,
                parent: parent.id,
                relationship: "gate".into(),
                owner: SideId::A,
                agent: "gate".into(),
                name: None,
                blocking: true,
                explicit: false,
                status: ChildStatus::Running,
                status_text: None,
                awaiting: Some("c1".into()),
                created_at: 1,
                arguments: json!({}),
                env: Default::default(),
            })
            .await
            .expect("put");
        let run = Uuid::now_v7();
        // The wrong call answers nothing.
        assert_eq!(
            store
                .resolve_await(child.id, "c2", parent.id, reply("c2"), lease(run, 10))
                .await
                .expect("resolve"),
            None,
            "{name}"
        );
        assert_eq!(
            store
                .resolve_await(child.id, "c1", parent.id, reply("c1"), lease(run, 10))
                .await
                .expect("resolve"),
            Some(true),
            "{name}: answered, and the parent's free lease taken"
        );
        // A second answer (another process, a retry) finds nothing waiting and writes nothing.
        assert_eq!(
            store
                .resolve_await(
                    child.id,
                    "c1",
                    parent.id,
                    reply("c1"),
                    lease(Uuid::now_v7(), 11)
                )
                .await
                .expect("resolve"),
            None,
            "{name}"
        );
        let queue = store.queue(parent.id).await.expect("queue");
        assert_eq!(queue.len(), 1, "{name}: one answer queued");
        assert_eq!(
            queue[0].tool.as_ref().map(|r| r.call_id.as_str()),
            Some("c1"),
            "{name}"
        );
        assert_eq!(
            store
                .child(child.id)
                .await
                .expect("read")
                .and_then(|c| c.awaiting),
            None,
            "{name}: the wait is over"
        );
        // Set and cleared directly too.
        assert!(
            store.set_awaiting(child.id, Some("c9")).await.expect("set"),
            "{name}"
        );
        assert!(
            store.set_awaiting(child.id, None).await.expect("set"),
            "{name}"
        );
        assert!(
            !store.set_awaiting(parent.id, None).await.expect("set"),
            "{name}: not a child"
        );
    })
    .await;
}

#[tokio::test]
async fn only_runnable_rows_keep_a_lease_or_need_a_runner() {
    each(async |store, name| {
        // A waiting thread with a person's message queued: the message is held, the settle
        // releases the lease, and nothing needs recovering.
        let mut t = thread(&store, "w").await;
        let run = Uuid::now_v7();
        assert!(store.claim(t.id, lease(run, 0)).await.expect("claim"));
        store
            .enqueue(t.id, human("are you there?"), None, 1)
            .await
            .expect("enqueue");
        t.status = ThreadStatus::Waiting;
        t.lease_owner = Some(run);
        let settle = Commit {
            settle: true,
            ..Commit::default()
        };
        assert_eq!(
            store.commit(&t, run, settle.clone()).await.expect("commit"),
            CommitOutcome::Settled,
            "{name}: a held message does not keep the lease"
        );
        assert!(
            store
                .recoverable(10_000)
                .await
                .expect("recoverable")
                .is_empty(),
            "{name}: nor needs a runner"
        );
        // A late tool result does both.
        store
            .enqueue(t.id, reply("c1"), None, 2)
            .await
            .expect("enqueue");
        assert_eq!(
            store.recoverable(10_000).await.expect("recoverable"),
            [t.id],
            "{name}"
        );
        let run = Uuid::now_v7();
        assert!(store.claim(t.id, lease(run, 3)).await.expect("claim"));
        t.lease_owner = Some(run);
        assert!(
            matches!(
                store.commit(&t, run, settle.clone()).await.expect("commit"),
                CommitOutcome::Committed { queued: true }
            ),
            "{name}: the answer keeps the lease for its drain"
        );

        // An aborted thread: `release` gives the lease up with messages queued, and recovery
        // leaves them for the next delivery.
        let mut a = thread(&store, "a").await;
        let run = Uuid::now_v7();
        assert!(store.claim(a.id, lease(run, 0)).await.expect("claim"));
        store
            .enqueue(a.id, human("next"), None, 1)
            .await
            .expect("enqueue");
        a.status = ThreadStatus::Idle;
        a.stop_reason = Some(StopReason::Aborted);
        a.lease_owner = Some(run);
        let abort = Commit {
            settle: true,
            release: true,
            ..Commit::default()
        };
        assert_eq!(
            store.commit(&a, run, abort).await.expect("commit"),
            CommitOutcome::Settled,
            "{name}"
        );
        assert!(
            !store
                .recoverable(10_000)
                .await
                .expect("recoverable")
                .contains(&a.id),
            "{name}: an aborted thread's queue waits for the next delivery"
        );
        assert_eq!(
            store.queue(a.id).await.expect("queue").len(),
            1,
            "{name}: kept"
        );
    })
    .await;
}
