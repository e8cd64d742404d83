//! `list_listed`: the approvals queue's page in one read — the same threads `list_threads`
//! lists, each with its question (the last message with text), its parents nearest first (cut
//! at `MAX_PARENTS`) and whether a deadline waits on the question it is parked at; and one
//! thread of it by id.

use super::*;
use duet_runtime::deadline::Subject;
use duet_runtime::{Commit, Listed, MAX_PARENTS, Message, ThreadId, ThreadQuery, TimerStatus};

const ALICE: &str = r#"{"iss":"test","sub":"alice"}"#;
const BOB: &str = r#"{"iss":"test","sub":"bob"}"#;

/// Parks `t` (`awaiting_human`, session 1, turns 2 + 1) after `texts` (a `None` is a message
/// without text), with a deadline timer on `subject` (`Some("")`: on the question it parks at).
async fn park(
    store: &Arc<dyn Store>,
    t: &Thread,
    texts: &[Option<&str>],
    subject: Option<&str>,
) -> Thread {
    let owner = Uuid::now_v7();
    assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
    let mut parked = Thread {
        status: ThreadStatus::AwaitingHuman,
        session: 1,
        ..t.clone()
    };
    parked.turns[SideId::A] = 2;
    parked.turns[SideId::B] = 1;
    let messages = texts
        .iter()
        .map(|text| {
            let m = Message::text(
                parked.take_seq(),
                1,
                Role::User,
                Some(SideId::A),
                String::new(),
                5,
            );
            Message {
                content: text.map(str::to_owned),
                ..m
            }
        })
        .collect();
    let question = Subject::parked(&parked).map(|s| s.to_string());
    let timers = match subject {
        Some("") => vec![super::timers::deadline(&question.expect("parked"), 9_000)],
        Some(other) => vec![super::timers::deadline(other, 9_000)],
        None => vec![],
    };
    let commit = Commit {
        messages,
        timers,
        settle: true,
        ..Commit::default()
    };
    store.commit(&parked, owner, commit).await.expect("commit");
    store
        .thread_by_id(t.id)
        .await
        .expect("read")
        .expect("thread")
}

fn ids(listed: &[Listed]) -> Vec<ThreadId> {
    listed.iter().map(|l| l.thread.id).collect()
}

#[tokio::test]
async fn the_queue_page_comes_with_questions_parents_and_deadlines_in_one_read() {
    each(async |store, name| {
        let open = async |key: &str, principal, parent| {
            let new = NewThread {
                principal,
                parent,
                ..new("helper", 100)
            };
            store.open_thread(key, new).await.expect("open")
        };
        let top = open("top", Some(ALICE), None).await;
        let middle = open("top/m", Some(ALICE), Some(top.id)).await;
        let child = open("top/m/c", Some(ALICE), Some(middle.id)).await;
        let plain = open("plain", Some(ALICE), None).await;
        let other = open("other", Some(ALICE), None).await;
        let bobs = open("bob", Some(BOB), None).await;
        // The question is the last message with text (a tool call after it has none).
        let child = park(
            &store,
            &child,
            &[Some("hello"), Some("which one?"), None],
            Some(""),
        )
        .await;
        // No message; a deadline on another question is not this one's.
        let plain = park(&store, &plain, &[], Some("question:9:9")).await;
        let other = park(&store, &other, &[Some("and this?")], None).await;
        park(&store, &bobs, &[Some("bob's")], Some("")).await;

        let q = ThreadQuery {
            status: Some(ThreadStatus::AwaitingHuman),
            principal: Some(ALICE),
            ..ThreadQuery::default()
        };
        let listed = store.list_listed(&q, None).await.expect("listed");
        let listing: Vec<ThreadId> = store
            .list_threads(&q)
            .await
            .expect("list")
            .iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(
            ids(&listed),
            listing,
            "{name}: the same page as list_threads"
        );
        assert_eq!(ids(&listed), vec![child.id, plain.id, other.id], "{name}");
        assert_eq!(listed[0].thread, child, "{name}: the thread as read");
        assert_eq!(listed[0].question.as_deref(), Some("which one?"), "{name}");
        let parents: Vec<ThreadId> = listed[0].parents.iter().map(|p| p.id).collect();
        assert_eq!(parents, vec![middle.id, top.id], "{name}: nearest first");
        assert_eq!(listed[0].parents[1].key, "top", "{name}");
        assert!(listed[0].deadline, "{name}: a deadline on its question");
        assert_eq!(listed[1].question, None, "{name}: no message");
        assert!(listed[1].parents.is_empty(), "{name}");
        assert!(!listed[1].deadline, "{name}: another question's deadline");
        assert_eq!(listed[2].question.as_deref(), Some("and this?"), "{name}");
        assert!(!listed[2].deadline, "{name}: no deadline");

        // Newest first, a page at a time after a cursor.
        let newest = ThreadQuery {
            newest_first: true,
            limit: 2,
            ..q
        };
        let page = store.list_listed(&newest, None).await.expect("page");
        assert_eq!(ids(&page), vec![other.id, plain.id], "{name}");
        let next = ThreadQuery {
            after: Some(plain.id),
            ..newest
        };
        let page = store.list_listed(&next, None).await.expect("page");
        assert_eq!(ids(&page), vec![child.id], "{name}");
        assert_eq!(page[0].parents.len(), 2, "{name}");

        // One thread by id, under the same filters: another principal's is not there.
        let one = store.list_listed(&q, Some(other.id)).await.expect("one");
        assert_eq!(ids(&one), vec![other.id], "{name}");
        assert_eq!(one[0].question.as_deref(), Some("and this?"), "{name}");
        let none = store.list_listed(&q, Some(bobs.id)).await.expect("one");
        assert!(none.is_empty(), "{name}: bob's is not alice's");
        let any = ThreadQuery::default();
        let idle = store.list_listed(&any, Some(middle.id)).await.expect("one");
        assert_eq!(ids(&idle), vec![middle.id], "{name}: any status");
        assert!(!idle[0].deadline, "{name}: not parked, no deadline");
        assert_eq!(idle[0].parents.len(), 1, "{name}");

        // A cancelled deadline is no deadline.
        let owner = Uuid::now_v7();
        assert!(
            store
                .claim(child.id, lease(owner, 2_000))
                .await
                .expect("claim")
        );
        let cancel = Commit {
            cancel_subjects: vec![Subject::parked(&child).expect("parked").to_string()],
            ..Commit::default()
        };
        store.commit(&child, owner, cancel).await.expect("cancel");
        let timers = store
            .timers(&duet_runtime::TimerQuery {
                thread: Some(child.id),
                ..duet_runtime::TimerQuery::default()
            })
            .await
            .expect("timers");
        assert!(
            timers.iter().all(|t| t.status == TimerStatus::Cancelled),
            "{name}: {timers:?}"
        );
        let one = store.list_listed(&q, Some(child.id)).await.expect("one");
        assert!(!one[0].deadline, "{name}: cancelled");
    })
    .await;
}

#[tokio::test]
async fn a_parent_chain_is_cut_at_max_parents() {
    each(async |store, name| {
        let mut up: Option<ThreadId> = None;
        let mut chain = Vec::new();
        for i in 0..MAX_PARENTS + 2 {
            let new = NewThread {
                parent: up,
                ..new("helper", 100)
            };
            let t = store
                .open_thread(&format!("deep-{i}"), new)
                .await
                .expect("open");
            up = Some(t.id);
            chain.push(t.id);
        }
        let deepest = chain.pop().expect("chain");
        let listed = store
            .list_listed(&ThreadQuery::default(), Some(deepest))
            .await
            .expect("listed");
        let parents: Vec<ThreadId> = listed[0].parents.iter().map(|p| p.id).collect();
        chain.reverse();
        chain.truncate(MAX_PARENTS);
        assert_eq!(
            parents, chain,
            "{name}: nearest first, {MAX_PARENTS} of them"
        );
    })
    .await;
}
