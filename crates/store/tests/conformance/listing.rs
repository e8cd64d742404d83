//! Threads and the journal a page at a time: listing filters, the id cursor in both directions,
//! principal isolation, journal pages and the last message with text.

use super::*;
use duet_runtime::{Commit, JournalEntry, Message, ParentFilter, ThreadId, ThreadQuery};

/// Settles `t` (claimed and committed by a run of its own) with status `status`.
async fn settle_as(store: &Arc<dyn Store>, t: &Thread, status: ThreadStatus) {
    let owner = Uuid::now_v7();
    assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
    let settled = Thread {
        status,
        ..t.clone()
    };
    let commit = Commit {
        settle: true,
        ..Commit::default()
    };
    store.commit(&settled, owner, commit).await.expect("commit");
}

/// `threads`' ids in listing order: by id as text, reversed when newest first.
fn ordered(threads: &[&Thread], newest_first: bool) -> Vec<ThreadId> {
    let mut ids: Vec<ThreadId> = threads.iter().map(|t| t.id).collect();
    ids.sort_by_key(ToString::to_string);
    if newest_first {
        ids.reverse();
    }
    ids
}

async fn ids(store: &Arc<dyn Store>, q: &ThreadQuery<'_>) -> Vec<ThreadId> {
    store
        .list_threads(q)
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.id)
        .collect()
}

/// Every page of `q`, `size` at a time, each after the last id of the one before.
async fn pages(store: &Arc<dyn Store>, q: ThreadQuery<'_>, size: usize) -> Vec<Vec<ThreadId>> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = ids(
            store,
            &ThreadQuery {
                after,
                limit: size,
                ..q
            },
        )
        .await;
        assert!(page.len() <= size, "a page holds at most its limit");
        let Some(&last) = page.last() else {
            return out;
        };
        after = Some(last);
        out.push(page);
    }
}

const ALICE: &str = r#"{"iss":"test","sub":"alice"}"#;
const BOB: &str = r#"{"iss":"test","sub":"bob"}"#;

#[tokio::test]
async fn threads_list_by_filter_in_id_order_and_page_without_gaps() {
    each(async |store, name| {
        let open = async |key: &str, agent: &'static str, principal, parent| {
            let new = NewThread {
                principal,
                parent,
                ..new(agent, 100)
            };
            store.open_thread(key, new).await.expect("open")
        };
        let mut alices = Vec::new();
        for i in 0..5 {
            alices.push(open(&format!("alice-{i}"), "helper", Some(ALICE), None).await);
        }
        let bobs = [
            open("bob-0", "helper", Some(BOB), None).await,
            open("bob-1", "other", Some(BOB), None).await,
        ];
        let parent = alices[0].id;
        let children = [
            open("alice-0/c-1", "child", Some(ALICE), Some(parent)).await,
            open("alice-0/c-2", "child", Some(ALICE), Some(parent)).await,
        ];
        let nobody = open("anonymous", "helper", None, None).await;
        // Two of alice's and one of bob's wait for a person.
        for t in [&alices[1], &alices[3], &bobs[1]] {
            settle_as(&store, t, ThreadStatus::AwaitingHuman).await;
        }

        let every: Vec<&Thread> = alices
            .iter()
            .chain(&bobs)
            .chain(&children)
            .chain([&nobody])
            .collect();
        let of_alice: Vec<&Thread> = alices.iter().chain(&children).collect();
        let all = ThreadQuery::default();
        assert_eq!(ids(&store, &all).await, ordered(&every, false), "{name}");
        assert_eq!(
            ids(
                &store,
                &ThreadQuery {
                    newest_first: true,
                    ..all
                }
            )
            .await,
            ordered(&every, true),
            "{name}: newest first"
        );
        let cases: [(&str, ThreadQuery<'_>, Vec<&Thread>); 9] = [
            (
                "agent",
                ThreadQuery {
                    agent: Some("child"),
                    ..all
                },
                children.iter().collect(),
            ),
            (
                "status",
                ThreadQuery {
                    status: Some(ThreadStatus::AwaitingHuman),
                    ..all
                },
                vec![&alices[1], &alices[3], &bobs[1]],
            ),
            (
                "top level",
                ThreadQuery {
                    parent: ParentFilter::TopLevel,
                    ..all
                },
                alices.iter().chain(&bobs).chain([&nobody]).collect(),
            ),
            (
                "children",
                ThreadQuery {
                    parent: ParentFilter::Of(parent),
                    ..all
                },
                children.iter().collect(),
            ),
            (
                "a thread with no children",
                ThreadQuery {
                    parent: ParentFilter::Of(bobs[0].id),
                    ..all
                },
                vec![],
            ),
            (
                "alice's",
                ThreadQuery {
                    principal: Some(ALICE),
                    ..all
                },
                of_alice.clone(),
            ),
            (
                "bob's waiting",
                ThreadQuery {
                    principal: Some(BOB),
                    status: Some(ThreadStatus::AwaitingHuman),
                    ..all
                },
                vec![&bobs[1]],
            ),
            (
                "alice's top-level helpers",
                ThreadQuery {
                    principal: Some(ALICE),
                    agent: Some("helper"),
                    parent: ParentFilter::TopLevel,
                    ..all
                },
                alices.iter().collect(),
            ),
            (
                "nobody's by that principal",
                ThreadQuery {
                    principal: Some(r#"{"iss":"test","sub":"carol"}"#),
                    ..all
                },
                vec![],
            ),
        ];
        for (what, q, want) in &cases {
            assert_eq!(ids(&store, q).await, ordered(want, false), "{name}: {what}");
        }

        // Principal isolation: bob's listing never shows alice's threads, whatever the cursor
        // (here, one of alice's ids).
        let bobs_after_alice = ThreadQuery {
            principal: Some(BOB),
            after: Some(alices[0].id),
            ..all
        };
        let shown = store.list_threads(&bobs_after_alice).await.expect("list");
        assert!(
            shown.iter().all(|t| t.principal.as_deref() == Some(BOB)),
            "{name}: {shown:?}"
        );

        // Pages of two in both directions: together exactly the listing, in order, no gap and
        // no duplicate.
        for newest_first in [false, true] {
            for (q, want) in [(all, &every), (cases[5].1, &of_alice)] {
                let q = ThreadQuery { newest_first, ..q };
                let got = pages(&store, q, 2).await;
                assert_eq!(
                    got.concat(),
                    ordered(want, newest_first),
                    "{name}: pages (newest first: {newest_first})"
                );
                assert!(
                    got.iter().rev().skip(1).all(|p| p.len() == 2),
                    "{name}: only the last page is short"
                );
            }
        }
        assert!(
            ids(&store, &ThreadQuery { limit: 0, ..all })
                .await
                .is_empty(),
            "{name}: a page of none"
        );
        let newest = ordered(&every, true)[0];
        assert!(
            ids(
                &store,
                &ThreadQuery {
                    after: Some(newest),
                    ..all
                }
            )
            .await
            .is_empty(),
            "{name}: nothing after the newest"
        );
    })
    .await;
}

#[tokio::test]
async fn the_journal_reads_a_page_at_a_time_and_finds_the_last_message_with_text() {
    each(async |store, name| {
        let mut t = thread(&store, "k").await;
        let owner = Uuid::now_v7();
        assert!(store.claim(t.id, lease(owner, 1_000)).await.expect("claim"));
        assert_eq!(
            store.last_message(t.id).await.expect("read"),
            None,
            "{name}: no messages yet"
        );
        let text = |seq, s: &str| Message::text(seq, 1, Role::User, Some(SideId::B), s.into(), 5);
        let (m1, m2, m3) = (t.take_seq(), t.take_seq(), t.take_seq());
        // The last message has no text (a tool call): the question is the one before.
        let call = Message {
            content: None,
            ..text(m3, "")
        };
        let commit = Commit {
            messages: vec![text(m1, "hello"), text(m2, "which one?"), call],
            records: vec![duet_runtime::Record {
                seq: t.take_seq(),
                body: duet_runtime::RecordBody::from_parts("turn_completed", serde_json::json!({})),
                created_at: 6,
            }],
            ..Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        let all = store.journal_since(t.id, 0).await.expect("read");
        assert_eq!(all.len(), 4, "{name}");
        let mut paged = Vec::new();
        let mut seq = 0;
        loop {
            let page = store.journal_page(t.id, seq, 3).await.expect("page");
            assert!(page.len() <= 3, "{name}");
            let Some(last) = page.last() else { break };
            seq = last.seq();
            paged.extend(page);
        }
        assert_eq!(paged, all, "{name}: the pages are the journal");
        assert_eq!(
            store.journal_page(t.id, 1, 2).await.expect("page"),
            all[1..3].to_vec(),
            "{name}"
        );
        assert!(
            store
                .journal_page(t.id, 0, 0)
                .await
                .expect("page")
                .is_empty(),
            "{name}"
        );
        assert!(
            store
                .journal_page(Uuid::now_v7(), 0, 10)
                .await
                .expect("page")
                .is_empty(),
            "{name}: no such thread"
        );
        assert_eq!(
            store.last_message(t.id).await.expect("read"),
            Some(text(m2, "which one?")),
            "{name}"
        );
        assert!(matches!(all[3], JournalEntry::Record(_)), "{name}");
        assert_eq!(
            store.last_message(Uuid::now_v7()).await.expect("read"),
            None,
            "{name}"
        );
    })
    .await;
}
