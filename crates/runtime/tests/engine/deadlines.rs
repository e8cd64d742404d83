//! Deadlines on questions (issue #30), end to end with a test clock: a parked question and a
//! pending tool call each schedule their deadline's timers; reminders fire once each (not
//! again on a second pass or after a restart); escalation records who may answer from then on;
//! the default answers when nobody did, and the thread goes on with it. Whichever of a person
//! and the deadline comes first wins — raced in both orders — and the other is refused with
//! `already_answered` naming the first; an answer naming the park from before a reminder or an
//! effect moved it still answers it. Time moves only with `ManualClock::advance`.
//!
//! Runs on every backend (one whose timer table refuses to be listed is skipped, loudly).

use crate::support;

use std::sync::Arc;

use duet_runtime::deadline::{self, Subject};
use duet_runtime::{
    Accepted, CancellationToken, Delivery, EventSink, ManualClock, Origin, RecordBody, Role,
    RunError, Runtime, Store, ThreadStatus, TimerKind, TimerQuery, TimerStatus,
};
use duet_spec::Decision;

const MIN: i64 = 60_000;
const START: i64 = 1_000_000;

/// A gate whose model asks, then says `Noted.` after the answer; its person's questions
/// remind at 10 and 20 minutes, escalate to `managers` at 30 and answer by default at 60.
fn question_project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("deadlines");
    dir.write(
        "agents/agents/gate.yaml",
        "name: gate\nsideA: { prompt: ask }\nsideB:\n  human: true\n  approver: true\n  deadline:\n    after: 1h\n    default: \"reject: no answer within 1 h\"\n    remind: [10m, 20m]\n    escalate: { after: 30m, roles: [managers] }\n",
    );
    dir.write(
        "agents/prompts/ask.yaml",
        "name: ask\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\n",
    );
    dir.write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string } } }\nbuiltin: refund\napproval:\n  deadline:\n    after: 2h\n    default: { decision: reject, reason: nobody answered }\n    remind: [1h]\n",
    );
    dir.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - text: May I ship?\n  - text: Noted.\n  - tool_calls: [{ name: refund, arguments: { order: A1 } }]\n  - text: Refund handled.\n",
    );
    dir.project()
}

struct Fixture {
    rt: Runtime,
    clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
}

fn fixture(store: &Arc<dyn Store>) -> Fixture {
    let clock = Arc::new(ManualClock::new(START));
    let rt = support::runtime(question_project(), store.clone())
        .tool("refund", crate::approvals::Calls::default())
        .clock(clock.clone())
        .build();
    Fixture {
        rt,
        clock,
        store: store.clone(),
    }
}

impl Fixture {
    /// Moves the clock to `at` ms after the start and fires what is due; how many fired.
    async fn at(&self, at: i64) -> usize {
        let now = self.rt.now_ms();
        self.clock.advance(START + at - now);
        let n = self.rt.run_due_timers().await.expect("timers");
        self.rt.quiesce().await;
        n
    }

    async fn thread(&self, key: &str) -> duet_runtime::Thread {
        self.store.thread(key).await.expect("read").expect("thread")
    }

    /// The deadline timers of `key` as (name, status), of its first question (or call) only.
    async fn timers(&self, key: &str) -> Option<Vec<(String, TimerStatus)>> {
        let t = self.thread(key).await;
        let q = TimerQuery {
            thread: Some(t.id),
            kind: Some(TimerKind::Deadline),
            limit: 100,
            ..TimerQuery::default()
        };
        let timers = self.store.timers(&q).await.ok()?;
        let first = timers.iter().min_by_key(|t| t.created_at)?.subject.clone();
        Some(
            timers
                .into_iter()
                .filter(|t| t.subject == first)
                .map(|t| (t.name, t.status))
                .collect(),
        )
    }

    async fn records(&self, key: &str) -> Vec<RecordBody> {
        let t = self.thread(key).await;
        let records = self.store.records(t.id).await.expect("records");
        records.into_iter().map(|r| r.body).collect()
    }

    /// A person's answer to the park `key` is at now, as `author`, accepted (not yet run).
    async fn accept_answer(
        &self,
        key: &str,
        text: &str,
        author: &str,
    ) -> Result<Accepted, RunError> {
        let park = self.thread(key).await.park();
        let delivery = Delivery {
            answers: park,
            origin: Origin {
                author: Some(author),
                ..Origin::default()
            },
            ..Delivery::new(key, text)
        };
        self.rt.accept(delivery).await
    }

    async fn run(&self, accepted: Accepted) {
        if let Accepted::Claimed(claim) = accepted {
            let (sink, cancel) = (EventSink::discard(), CancellationToken::new());
            self.rt
                .run_claimed(claim, &sink, &cancel)
                .await
                .expect("run");
        }
    }
}

/// The backends whose timer table works (the rest are named and skipped).
async fn timed() -> Vec<(String, Arc<dyn Store>)> {
    let mut out = Vec::new();
    for backend in support::backends().await {
        let store = backend.open().await;
        let probe = store
            .timers(&TimerQuery {
                limit: 1,
                ..TimerQuery::default()
            })
            .await;
        match probe {
            Ok(_) => out.push((backend.name().to_owned(), store)),
            Err(e) => eprintln!(
                "SKIPPED on {}: its timer table is not built ({e})",
                backend.name()
            ),
        }
    }
    out
}

fn user_texts(texts: &[(Role, bool, String)]) -> Vec<&str> {
    texts
        .iter()
        .filter(|(r, silent, _)| *r == Role::User && !silent)
        .map(|(_, _, t)| t.as_str())
        .collect()
}

#[tokio::test]
async fn nobody_answers_reminders_escalation_then_the_default() {
    for (name, store) in timed().await {
        let f = fixture(&store);
        let k = "nobody";
        support::send(&f.rt, k, Some("gate"), "ship it?").await;
        let t = f.thread(k).await;
        assert_eq!(t.status, ThreadStatus::AwaitingHuman, "{name}");
        let subject = Subject::parked(&t).expect("parked");
        let pending = f.timers(k).await.expect("timers");
        assert_eq!(pending.len(), 4, "{name}: {pending:?}");
        assert!(
            pending.iter().all(|(_, s)| *s == TimerStatus::Pending),
            "{name}"
        );

        // Nothing is due before its time.
        assert_eq!(f.at(10 * MIN - 1).await, 0, "{name}");
        // Each reminder once: a second pass, and a restarted runtime, fire nothing more.
        assert_eq!(f.at(10 * MIN).await, 1, "{name}");
        assert_eq!(f.at(10 * MIN).await, 0, "{name}");
        assert_eq!(f.at(25 * MIN).await, 1, "{name}");
        let restarted = fixture(&store);
        restarted.clock.advance(25 * MIN);
        assert_eq!(
            restarted.rt.run_due_timers().await.expect("timers"),
            0,
            "{name}"
        );
        let reminded: Vec<u32> = f
            .records(k)
            .await
            .into_iter()
            .filter_map(|r| match r {
                RecordBody::QuestionReminded { subject: s, n } if s == subject.to_string() => {
                    Some(n)
                }
                _ => None,
            })
            .collect();
        assert_eq!(reminded, [1, 2], "{name}");
        // Still parked: a reminder does not answer.
        assert_eq!(
            f.thread(k).await.status,
            ThreadStatus::AwaitingHuman,
            "{name}"
        );

        // Escalation: recorded, naming the role, only once due.
        let records: Vec<duet_runtime::Record> = {
            let t = f.thread(k).await;
            f.store.records(t.id).await.expect("records")
        };
        assert!(
            deadline::escalated(&records, subject).roles.is_empty(),
            "{name}"
        );
        assert_eq!(f.at(30 * MIN).await, 1, "{name}");
        let records = f
            .store
            .records(f.thread(k).await.id)
            .await
            .expect("records");
        assert_eq!(
            deadline::escalated(&records, subject).roles,
            ["managers"],
            "{name}"
        );

        // The default answers, and the thread goes on with it.
        assert_eq!(f.at(60 * MIN).await, 1, "{name}");
        let texts = support::texts(&store, k).await;
        assert_eq!(
            user_texts(&texts),
            ["ship it?", "reject: no answer within 1 h"],
            "{name}"
        );
        assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Noted."), "{name}");
        let t = f.thread(k).await;
        let answered = store
            .answered(&duet_runtime::AnsweredQuery {
                thread: Some(t.id),
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("answered");
        assert_eq!(answered.len(), 1, "{name}");
        assert!(
            deadline::is_deadline(answered[0].answer.author.as_deref()),
            "{name}: {answered:?}"
        );
        let timers = f.timers(k).await.expect("timers");
        assert!(
            timers.iter().all(|(_, s)| *s == TimerStatus::Completed),
            "{name}: {timers:?}"
        );
    }
}

#[tokio::test]
async fn a_person_just_before_the_deadline_wins() {
    for (name, store) in timed().await {
        let f = fixture(&store);
        // Answered and run a moment before: the drain cancels every timer of the question.
        let k = "early";
        support::send(&f.rt, k, Some("gate"), "ship it?").await;
        f.at(60 * MIN - 1).await;
        let accepted = f
            .accept_answer(k, "yes, ship", "alice")
            .await
            .expect("accepted");
        f.run(accepted).await;
        assert_eq!(f.at(60 * MIN).await, 0, "{name}: nothing left to fire");
        let timers = f.timers(k).await.expect("timers");
        let left: Vec<_> = timers
            .iter()
            .filter(|(_, s)| *s != TimerStatus::Completed)
            .map(|(n, s)| (n.as_str(), *s))
            .collect();
        assert_eq!(left, [("default", TimerStatus::Cancelled)], "{name}");

        // The race: the person's answer is queued (not yet drained) when the default fires —
        // the default is refused, and the timer completes doing nothing.
        let k = "race";
        support::send(&f.rt, k, Some("gate"), "ship it?").await;
        let start = f.rt.now_ms() - START;
        f.at(start + 60 * MIN - 1).await;
        let accepted = f
            .accept_answer(k, "yes, ship", "alice")
            .await
            .expect("accepted");
        assert!(
            f.at(start + 60 * MIN).await >= 1,
            "{name}: the default fired"
        );
        f.run(accepted).await;
        let texts = support::texts(&store, k).await;
        assert_eq!(user_texts(&texts), ["ship it?", "yes, ship"], "{name}");
        assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Noted."), "{name}");
    }
}

#[tokio::test]
async fn the_deadline_first_then_the_person_is_refused_naming_it() {
    for (name, store) in timed().await {
        let f = fixture(&store);
        for (k, drained) in [("late", true), ("late-queued", false)] {
            support::send(&f.rt, k, Some("gate"), "ship it?").await;
            let park = f.thread(k).await.park().expect("parked");
            let start = f.rt.now_ms() - START;
            if drained {
                f.at(start + 60 * MIN).await;
            } else {
                // The default queued, its run not yet taken: hold the lease elsewhere first.
                let t = f.thread(k).await;
                let owner = uuid::Uuid::now_v7();
                let lease = duet_runtime::Lease {
                    owner,
                    until: f.rt.now_ms() + 120 * MIN,
                    now: f.rt.now_ms(),
                };
                assert!(store.claim(t.id, lease).await.expect("claim"), "{name}");
                f.at(start + 60 * MIN).await;
                store.release(t.id, owner).await.expect("release");
            }
            let delivery = Delivery {
                answers: Some(park),
                origin: Origin {
                    author: Some("alice"),
                    ..Origin::default()
                },
                ..Delivery::new(k, "yes")
            };
            match f.rt.accept(delivery).await {
                Err(RunError::AlreadyAnswered { first, .. }) => {
                    let first = first.expect("the first answer is named");
                    assert!(deadline::is_deadline(first.author.as_deref()), "{name} {k}");
                    assert_eq!(first.content, "reject: no answer within 1 h", "{name} {k}");
                }
                other => panic!("{name} {k}: {other:?}"),
            }
        }
    }
}

fn input(decision: Decision) -> duet_runtime::DecisionInput {
    duet_runtime::DecisionInput {
        decision,
        args: None,
        reason: None,
        text: None,
        remember: None,
    }
}

/// The approval ids of `key`'s `approval_requested` records.
async fn asked(f: &Fixture, key: &str) -> Vec<i64> {
    let t = f.thread(key).await;
    let records = f.store.records(t.id).await.expect("records");
    records
        .into_iter()
        .filter(|r| matches!(r.body, RecordBody::ApprovalRequested(_)))
        .map(|r| r.seq)
        .collect()
}

/// Thread `key` asked, answered, then sent `refund please`: its refund call is pending.
async fn pending_call(f: &Fixture, key: &str) -> i64 {
    support::send(&f.rt, key, Some("gate"), "ship it?").await;
    let accepted = f
        .accept_answer(key, "yes", "alice")
        .await
        .expect("accepted");
    f.run(accepted).await;
    support::send(&f.rt, key, None, "refund please").await;
    assert_eq!(f.thread(key).await.status, ThreadStatus::Waiting);
    asked(f, key).await[0]
}

#[tokio::test]
async fn a_pending_call_decided_by_its_deadline_or_by_a_person_first() {
    for (name, store) in timed().await {
        let f = fixture(&store);
        // Nobody decides: reminded once, then rejected with the deadline's reason.
        let k = "call-nobody";
        let id = pending_call(&f, k).await;
        let start = f.rt.now_ms() - START;
        assert_eq!(f.at(start + 60 * MIN).await, 1, "{name}: the reminder");
        assert_eq!(f.at(start + 120 * MIN).await, 1, "{name}: the default");
        let decided = f.records(k).await.into_iter().find_map(|r| match r {
            RecordBody::ApprovalDecided(d) if d.approval == id => Some(d),
            _ => None,
        });
        let decided = decided.expect("decided");
        assert_eq!(decided.decision, Decision::Reject, "{name}");
        assert_eq!(decided.reason.as_deref(), Some("nobody answered"), "{name}");
        assert!(deadline::is_deadline(decided.author.as_deref()), "{name}");
        let texts = support::texts(&store, k).await;
        assert_eq!(
            texts.last().map(|t| t.2.as_str()),
            Some("Refund handled."),
            "{name}"
        );
        // A person after it: refused, naming the deadline.
        match f
            .rt
            .decide(k, id, input(Decision::Approve), Some("bob".into()))
            .await
        {
            Err(RunError::DecisionTaken { first, .. }) => {
                assert!(deadline::is_deadline(first.author.as_deref()), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }

        // A person first (queued, not yet run when the default fires): the deadline is refused.
        let k = "call-person";
        let id = pending_call(&f, k).await;
        let start = f.rt.now_ms() - START;
        f.at(start + 120 * MIN - 1).await;
        let accepted =
            f.rt.accept_decision(k, id, input(Decision::Approve), Some("bob".into()), None)
                .await
                .expect("decided");
        assert!(f.at(start + 120 * MIN).await >= 1, "{name}");
        if let duet_runtime::DecisionLanded::Claimed(claim) = accepted.landed {
            let (sink, cancel) = (EventSink::discard(), CancellationToken::new());
            f.rt.run_claimed(claim, &sink, &cancel).await.expect("run");
        }
        let decided: Vec<_> = f
            .records(k)
            .await
            .into_iter()
            .filter_map(|r| match r {
                RecordBody::ApprovalDecided(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(decided.len(), 1, "{name}");
        assert_eq!(decided[0].author.as_deref(), Some("bob"), "{name}");
        assert_eq!(decided[0].decision, Decision::Approve, "{name}");
        // Decided and run: its deadline's timers are cancelled.
        let t = f.thread(k).await;
        let q = TimerQuery {
            thread: Some(t.id),
            limit: 100,
            ..TimerQuery::default()
        };
        let subject = format!("approval:{id}");
        let left: Vec<_> = store
            .timers(&q)
            .await
            .expect("timers")
            .into_iter()
            .filter(|t| t.subject.as_deref() == Some(subject.as_str()))
            .map(|t| (t.name, t.status))
            .collect();
        assert_eq!(left.len(), 2, "{name}: {left:?}");
        assert!(left.iter().all(|(_, s)| s.is_final()), "{name}: {left:?}");
    }
}

#[tokio::test]
async fn an_answer_naming_the_park_from_before_an_effect_ran_still_answers_it() {
    for (name, store) in timed().await {
        let f = fixture(&store);
        let k = "moved";
        support::send(&f.rt, k, Some("gate"), "ship it?").await;
        let before = f.thread(k).await;
        let park = before.park().expect("parked");
        // An effect runs on the parked thread (its record, as `fire_effect` commits it): the
        // thread's next seq, and so its park id, moves on.
        let mut t = before.clone();
        let owner = uuid::Uuid::now_v7();
        let now = f.rt.now_ms();
        let lease = duet_runtime::Lease {
            owner,
            until: now + MIN,
            now,
        };
        assert!(store.claim(t.id, lease).await.expect("claim"), "{name}");
        let ran = duet_runtime::Record::new(
            t.take_seq(),
            RecordBody::EffectRan {
                id: uuid::Uuid::now_v7(),
                name: "ping".into(),
                attempt: 1,
                messages: Vec::new(),
            },
            now,
        );
        let commit = duet_runtime::Commit {
            records: vec![ran],
            settle: true,
            ..duet_runtime::Commit::default()
        };
        store.commit(&t, owner, commit).await.expect("commit");
        assert_ne!(
            f.thread(k).await.park(),
            Some(park),
            "{name}: the park moved"
        );

        let delivery = Delivery {
            answers: Some(park),
            origin: Origin {
                author: Some("alice"),
                ..Origin::default()
            },
            ..Delivery::new(k, "yes, ship")
        };
        let accepted = f.rt.accept(delivery).await.expect("accepted, not refused");
        f.run(accepted).await;
        let texts = support::texts(&store, k).await;
        assert_eq!(user_texts(&texts), ["ship it?", "yes, ship"], "{name}");
    }
}
