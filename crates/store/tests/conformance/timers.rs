//! The timer table as commits write it: atomically, fenced by the lease; cancelled by id or
//! subject, and completed, within their own thread only. `cancel_timer`, and the listing a page
//! at a time. (Claims, outcomes, counts and wakeups: `timer_claims.rs`.)

use super::*;

use duet_runtime::{
    CancelOutcome, Commit, Message, NewTimer, Timer, TimerKind, TimerQuery, TimerStatus,
};
use serde_json::json;

/// A new effect timer `name` due at `due_at`.
pub(crate) fn effect(name: &str, due_at: i64) -> NewTimer {
    NewTimer {
        id: Uuid::now_v7(),
        kind: TimerKind::Effect,
        name: name.into(),
        args: json!({"name": name, "n": [1, 2]}),
        subject: None,
        due_at,
        max_attempts: 3,
    }
}

/// A deadline timer acting on `subject`, due at `due_at`.
pub(crate) fn deadline(subject: &str, due_at: i64) -> NewTimer {
    NewTimer {
        kind: TimerKind::Deadline,
        subject: Some(subject.into()),
        ..effect("remind", due_at)
    }
}

/// Thread `key`, its lease held by the owner returned.
pub(crate) async fn leased(store: &Arc<dyn Store>, key: &str) -> (Thread, Uuid) {
    let t = thread(store, key).await;
    let owner = Uuid::now_v7();
    assert!(store.claim(t.id, lease(owner, 100)).await.expect("claim"));
    (t, owner)
}

/// Commits `commit` on `t` at `now` (the time its timers are written at).
pub(crate) async fn commit_at(
    store: &Arc<dyn Store>,
    t: &mut Thread,
    owner: Uuid,
    now: i64,
    commit: Commit,
) -> Result<(), StoreError> {
    t.updated_at = now;
    store.commit(t, owner, commit).await.map(|_| ())
}

/// Writes `timers` on `t` in one commit at time 100.
pub(crate) async fn schedule(
    store: &Arc<dyn Store>,
    t: &mut Thread,
    owner: Uuid,
    timers: &[NewTimer],
) {
    let commit = Commit {
        timers: timers.to_vec(),
        ..Commit::default()
    };
    commit_at(store, t, owner, 100, commit)
        .await
        .expect("scheduled");
}

/// `claim_due(owner, until, now, limit)`, which must not fail.
pub(crate) async fn claim(
    store: &Arc<dyn Store>,
    owner: Uuid,
    until: i64,
    now: i64,
    limit: usize,
) -> Vec<Timer> {
    store
        .claim_due(owner, until, now, limit)
        .await
        .expect("claim")
}

pub(crate) async fn get(store: &Arc<dyn Store>, id: Uuid) -> Timer {
    store.timer(id).await.expect("read").expect("the timer")
}

pub(crate) fn ids(timers: &[Timer]) -> Vec<Uuid> {
    timers.iter().map(|t| t.id).collect()
}

pub(crate) fn all(limit: usize) -> TimerQuery<'static> {
    TimerQuery {
        limit,
        ..TimerQuery::default()
    }
}

#[tokio::test]
async fn a_commit_writes_its_timers_with_the_rest_or_not_at_all() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "k").await;
        let first = effect("ping", 5_000);
        let zero = NewTimer {
            max_attempts: 0,
            ..deadline("park:1:2", 9_000)
        };
        schedule(&store, &mut t, owner, &[first.clone(), zero.clone()]).await;
        let written = get(&store, first.id).await;
        assert_eq!(
            written,
            Timer {
                id: first.id,
                thread: t.id,
                kind: TimerKind::Effect,
                name: "ping".into(),
                args: first.args.clone(),
                subject: None,
                due_at: 5_000,
                created_at: 100,
                status: TimerStatus::Pending,
                attempts: 0,
                max_attempts: 3,
                last_error: None,
                updated_at: 100,
                claimed_by: None,
                claimed_until: None,
            },
            "{name}"
        );
        let zero = get(&store, zero.id).await;
        assert_eq!(zero.subject.as_deref(), Some("park:1:2"), "{name}");
        assert_eq!(zero.max_attempts, 1, "{name}: always at least one attempt");

        // A commit without the lease writes none of its timers.
        let lost = Commit {
            timers: vec![effect("lost", 1)],
            ..Commit::default()
        };
        let refused = commit_at(&store, &mut t, Uuid::now_v7(), 200, lost.clone()).await;
        assert!(
            matches!(refused, Err(StoreError::LeaseLost(_))),
            "{name}: {refused:?}"
        );
        assert_eq!(
            store.timer(lost.timers[0].id).await.expect("read"),
            None,
            "{name}"
        );

        // A timer id taken (by another timer, or twice in the commit) fails the commit whole:
        // its message and its other timers too.
        let seq = t.take_seq();
        let twice = Uuid::now_v7();
        for taken in [vec![first.id], vec![twice, twice]] {
            let other = effect("other", 7_000);
            let mut timers = vec![other.clone()];
            timers.extend(taken.iter().map(|&id| NewTimer {
                id,
                ..effect("taken", 1)
            }));
            let commit = Commit {
                messages: vec![Message::text(
                    seq,
                    1,
                    Role::User,
                    Some(SideId::B),
                    "hi".into(),
                    5,
                )],
                timers,
                ..Commit::default()
            };
            let refused = commit_at(&store, &mut t, owner, 300, commit).await;
            assert!(
                matches!(refused, Err(StoreError::Conflict(_))),
                "{name}: {refused:?}"
            );
            assert_eq!(store.timer(other.id).await.expect("read"), None, "{name}");
            assert!(
                store.messages(t.id).await.expect("read").is_empty(),
                "{name}"
            );
        }
        assert_eq!(store.timer(twice).await.expect("read"), None, "{name}");
        assert_eq!(
            get(&store, first.id).await,
            written,
            "{name}: the first one untouched"
        );
        assert_eq!(
            store.timers(&all(10)).await.expect("list").len(),
            2,
            "{name}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_of_commits_a_taken_timer_id_fails_only_its_own_commit() {
    each(async |store, name| {
        let (mut first, owner) = leased(&store, "first").await;
        let taken = effect("taken", 10);
        schedule(&store, &mut first, owner, std::slice::from_ref(&taken)).await;
        let mut writes = Vec::new();
        for i in 0..12 {
            let (mut t, owner) = leased(&store, &format!("t{i}")).await;
            let mut timer = effect(&format!("e{i}"), 1_000 + i);
            if i == 5 {
                timer.id = taken.id;
            }
            let store = store.clone();
            writes.push(tokio::spawn(async move {
                let commit = Commit {
                    timers: vec![timer.clone()],
                    ..Commit::default()
                };
                (timer, commit_at(&store, &mut t, owner, 100, commit).await)
            }));
        }
        for (i, write) in writes.into_iter().enumerate() {
            let (timer, written) = write.await.expect("joins");
            if i == 5 {
                assert!(
                    matches!(written, Err(StoreError::Conflict(_))),
                    "{name}: {written:?}"
                );
                assert_eq!(get(&store, taken.id).await.name, "taken", "{name}");
            } else {
                written.expect("the others are written");
                assert_eq!(get(&store, timer.id).await.name, timer.name, "{name}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_commit_cancels_only_its_own_threads_pending_timers() {
    each(async |store, name| {
        let (mut a, owner_a) = leased(&store, "a").await;
        let (mut b, owner_b) = leased(&store, "b").await;
        let (a1, a2, a3, a_running) = (
            deadline("park:1:5", 1_000),
            deadline("park:1:5", 2_000),
            effect("keep", 3_000),
            deadline("park:1:5", 50),
        );
        let (b1, b2) = (deadline("park:1:5", 1_000), effect("theirs", 1_000));
        schedule(
            &store,
            &mut a,
            owner_a,
            &[a1.clone(), a2.clone(), a3.clone(), a_running.clone()],
        )
        .await;
        schedule(&store, &mut b, owner_b, &[b1.clone(), b2.clone()]).await;
        let claimer = Uuid::now_v7();
        let running = claim(&store, claimer, 99_000, 60, 10).await;
        assert_eq!(ids(&running), [a_running.id], "{name}");

        // By subject and by id; the other thread's ids and subjects are out of its reach, and
        // so is a timer already running.
        let fresh = deadline("park:1:5", 4_000);
        let commit = Commit {
            cancel_subjects: vec!["park:1:5".into(), "nothing".into()],
            cancel_timers: vec![b2.id, a3.id, fresh.id],
            timers: vec![fresh.clone()],
            ..Commit::default()
        };
        commit_at(&store, &mut a, owner_a, 700, commit)
            .await
            .expect("commit");
        for id in [a1.id, a2.id, a3.id] {
            let t = get(&store, id).await;
            assert_eq!(
                (t.status, t.updated_at),
                (TimerStatus::Cancelled, 700),
                "{name}"
            );
        }
        assert_eq!(
            get(&store, a_running.id).await.status,
            TimerStatus::Processing,
            "{name}"
        );
        assert_eq!(
            get(&store, fresh.id).await.status,
            TimerStatus::Pending,
            "{name}: a commit's cancellations do not reach the timers it writes"
        );
        for id in [b1.id, b2.id] {
            assert_eq!(get(&store, id).await.status, TimerStatus::Pending, "{name}");
        }
        // A cancelled timer is no longer due, nor counted.
        assert_eq!(
            claim(&store, claimer, 9_000, 5_000, 10).await.len(),
            3,
            "{name}: b's two and the fresh one"
        );
    })
    .await;
}

#[tokio::test]
async fn cancel_timer_cancels_a_pending_timer_and_says_what_else_it_found() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "k").await;
        let (pending, running) = (effect("later", 9_000), effect("now", 10));
        schedule(&store, &mut t, owner, &[pending.clone(), running.clone()]).await;
        claim(&store, Uuid::now_v7(), 1_000, 20, 10).await;
        match store.cancel_timer(pending.id, 500).await.expect("cancel") {
            CancelOutcome::Cancelled(c) => {
                assert_eq!(
                    (c.id, c.status, c.updated_at),
                    (pending.id, TimerStatus::Cancelled, 500),
                    "{name}"
                );
                assert_eq!(get(&store, pending.id).await, c, "{name}: as stored");
            }
            other => panic!("{name}: {other:?}"),
        }
        for (id, status) in [
            (pending.id, TimerStatus::Cancelled),
            (running.id, TimerStatus::Processing),
        ] {
            match store.cancel_timer(id, 600).await.expect("cancel") {
                CancelOutcome::NotPending(t) => {
                    assert_eq!(t.status, status, "{name}");
                    assert_eq!(get(&store, id).await, t, "{name}: unchanged");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!(
            store
                .cancel_timer(Uuid::now_v7(), 600)
                .await
                .expect("cancel"),
            CancelOutcome::NotFound,
            "{name}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_commit_completes_its_threads_running_timers_it_names() {
    each(async |store, name| {
        let (mut a, owner_a) = leased(&store, "a").await;
        let (mut b, owner_b) = leased(&store, "b").await;
        let (mine, waiting) = (effect("mine", 10), effect("waiting", 5_000));
        let theirs = effect("theirs", 10);
        schedule(&store, &mut a, owner_a, &[mine.clone(), waiting.clone()]).await;
        schedule(&store, &mut b, owner_b, std::slice::from_ref(&theirs)).await;
        let run = Uuid::now_v7();
        assert_eq!(claim(&store, run, 1_000, 20, 10).await.len(), 2);
        let commit = Commit {
            timers_done: vec![mine.id, waiting.id, theirs.id],
            ..Commit::default()
        };
        commit_at(&store, &mut a, owner_a, 300, commit)
            .await
            .expect("commit");
        let done = get(&store, mine.id).await;
        assert_eq!(
            (
                done.status,
                done.claimed_by,
                done.claimed_until,
                done.updated_at
            ),
            (TimerStatus::Completed, None, None, 300),
            "{name}"
        );
        assert_eq!(
            get(&store, waiting.id).await.status,
            TimerStatus::Pending,
            "{name}: not running"
        );
        assert_eq!(
            get(&store, theirs.id).await.status,
            TimerStatus::Processing,
            "{name}: another thread's"
        );
    })
    .await;
}

#[tokio::test]
async fn timers_are_listed_by_filter_a_page_at_a_time() {
    each(async |store, name| {
        let (mut a, owner_a) = leased(&store, "a").await;
        let (mut b, owner_b) = leased(&store, "b").await;
        let mut mine: Vec<NewTimer> = (0..7)
            .map(|i| effect(if i % 2 == 0 { "even" } else { "odd" }, 100 * (i / 2)))
            .collect();
        mine.push(deadline("park:1:1", 150));
        schedule(&store, &mut a, owner_a, &mine).await;
        schedule(
            &store,
            &mut b,
            owner_b,
            &[effect("even", 0), effect("odd", 50)],
        )
        .await;
        store.cancel_timer(mine[2].id, 120).await.expect("cancel");

        let list = async |q: TimerQuery<'static>| store.timers(&q).await.expect("list");
        let every = list(all(100)).await;
        assert_eq!(every.len(), 10, "{name}");
        assert!(
            every
                .windows(2)
                .all(|w| (w[0].due_at, w[0].id) < (w[1].due_at, w[1].id)),
            "{name}: in (due_at, id) order"
        );

        // Each filter, and all of them together.
        let of_a = list(TimerQuery {
            thread: Some(a.id),
            ..all(100)
        })
        .await;
        assert_eq!(of_a.len(), 8, "{name}");
        assert!(of_a.iter().all(|t| t.thread == a.id), "{name}");
        let named = list(TimerQuery {
            name: Some("even"),
            ..all(100)
        })
        .await;
        assert_eq!(named.len(), 5, "{name}");
        let cancelled = list(TimerQuery {
            status: Some(TimerStatus::Cancelled),
            ..all(100)
        })
        .await;
        assert_eq!(ids(&cancelled), [mine[2].id], "{name}");
        let deadlines = list(TimerQuery {
            kind: Some(TimerKind::Deadline),
            ..all(100)
        })
        .await;
        assert_eq!(ids(&deadlines), [mine[7].id], "{name}");
        let narrow = TimerQuery {
            thread: Some(a.id),
            status: Some(TimerStatus::Pending),
            kind: Some(TimerKind::Effect),
            name: Some("even"),
            ..all(100)
        };
        let expected: Vec<Uuid> = of_a
            .iter()
            .filter(|t| t.name == "even" && t.status == TimerStatus::Pending)
            .map(|t| t.id)
            .collect();
        assert_eq!(ids(&list(narrow).await), expected, "{name}");
        assert!(
            list(TimerQuery {
                thread: Some(Uuid::now_v7()),
                ..all(100)
            })
            .await
            .is_empty(),
            "{name}"
        );

        // Pages of three, each after the last of the one before: every timer once, in order
        // (ties on due_at broken by id).
        let mut paged = Vec::new();
        let mut after = None;
        loop {
            let page = list(TimerQuery { after, ..all(3) }).await;
            assert!(page.len() <= 3, "{name}");
            let Some(last) = page.last() else { break };
            after = Some((last.due_at, last.id));
            paged.extend(page);
        }
        assert_eq!(paged, every, "{name}");
        let filtered_page = list(TimerQuery {
            after: Some((of_a[2].due_at, of_a[2].id)),
            thread: Some(a.id),
            ..all(2)
        })
        .await;
        assert_eq!(ids(&filtered_page), ids(&of_a[3..5]), "{name}");

        // Latest due first, in pages of three: the same timers in the reverse order.
        let mut paged = Vec::new();
        let mut after = None;
        loop {
            let page = list(TimerQuery {
                after,
                newest_first: true,
                ..all(3)
            })
            .await;
            let Some(last) = page.last() else { break };
            after = Some((last.due_at, last.id));
            paged.extend(page);
        }
        let mut reversed = every.clone();
        reversed.reverse();
        assert_eq!(paged, reversed, "{name}: newest first");
    })
    .await;
}

#[tokio::test]
async fn terminating_a_thread_cancels_its_pending_timers_only() {
    each(async |store, name| {
        let (mut t, owner) = leased(&store, "k").await;
        let (running, later, question) = (
            effect("running", 10),
            effect("later", 5_000),
            deadline("park:1:2", 9_000),
        );
        schedule(
            &store,
            &mut t,
            owner,
            &[running.clone(), later.clone(), question.clone()],
        )
        .await;
        let (mut other, other_owner) = leased(&store, "other").await;
        let elsewhere = effect("elsewhere", 5_000);
        schedule(
            &store,
            &mut other,
            other_owner,
            std::slice::from_ref(&elsewhere),
        )
        .await;
        // One is being fired when the thread is terminated.
        let claimed = claim(&store, Uuid::now_v7(), 1_000, 20, 10).await;
        assert_eq!(ids(&claimed), [running.id], "{name}");
        store.terminate(t.id, 400).await.expect("terminate");
        for id in [later.id, question.id] {
            let gone = get(&store, id).await;
            assert_eq!(
                (gone.status, gone.updated_at),
                (TimerStatus::Cancelled, 400),
                "{name}"
            );
        }
        assert_eq!(
            get(&store, running.id).await.status,
            TimerStatus::Processing,
            "{name}: the fire in flight finds the thread terminated"
        );
        assert_eq!(
            get(&store, elsewhere.id).await.status,
            TimerStatus::Pending,
            "{name}: another thread's"
        );
    })
    .await;
}
