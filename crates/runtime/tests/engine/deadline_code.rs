//! A deadline set by code (issue #30), with a test clock, on every backend: a handler's
//! `ThreadState::set_question_deadline` gives its next question a deadline of its own in place
//! of the human side's (consumed by that park: the question after it has the side's again); a
//! `tool_call_policy` hook's `Ask { deadline }` gives a call one where its tool has none; a
//! `question_reminder` hook hears each reminder once, with the question and when the default
//! answers.

use crate::support;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use duet_runtime::deadline::{self, OVERRIDE_KEY};
use duet_runtime::hooks::{Hook, HookContext, HookError, Hooks, Policy, PolicyCall, Reminder};
use duet_runtime::{
    Handler, HandlerError, ManualClock, Message, RecordBody, Runtime, Store, ThreadState,
    ThreadStatus, TimerKind, TimerQuery, TimerStatus,
};
use duet_spec::{Deadline, DeadlineDefault, Decision};

const MIN: i64 = 60_000;
const START: i64 = 5_000_000;

/// `asker`: side A the `asker` handler, side B a person whose declared deadline answers `side
/// default` after an hour; the agent's `nudge` hook hears reminders. `desk`: its model calls
/// `refund` (no approval of its own), and the `policy` hook asks with a deadline.
fn project() -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("deadline-code");
    dir.write(
        "agents/agents/asker.yaml",
        "name: asker\nsideA: { handler: asker }\nsideB:\n  human: true\n  deadline: { after: 1h, default: side default }\nhooks: [nudge]\n",
    );
    dir.write("agents/handlers/asker.yaml", "description: Asks.\n");
    dir.write(
        "agents/hooks/nudge.yaml",
        "id: nudge\nhook: question_reminder\n",
    );
    dir.write(
        "agents/agents/desk.yaml",
        "name: desk\nsideA: { prompt: desk }\nsideB: { human: true }\n",
    );
    dir.write(
        "agents/prompts/desk.yaml",
        "name: desk\ntoolDescription: d\nmodel: m\nincludeChat: true\nprompt: p\ntools: [refund]\nhooks: [policy]\n",
    );
    dir.write(
        "agents/hooks/policy.yaml",
        "id: policy\nhook: tool_call_policy\n",
    );
    dir.write(
        "agents/tools/refund.yaml",
        "description: Refunds.\nargs: { type: object, properties: { order: { type: string } } }\nbuiltin: refund\n",
    );
    dir.write(
        "agents/models/m.yaml",
        "name: m\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls: [{ name: refund, arguments: { order: A1 } }]\n  - text: Done.\n",
    );
    dir.project()
}

/// `ask`: asks `Ship?` with a deadline of its own (reminds at 2 min, answers `code default` at
/// 5); anything else is answered `got: TEXT` (a question with the side's deadline).
struct Asker;

#[async_trait]
impl Handler for Asker {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let text = message.content.clone().unwrap_or_default();
        if text == "ask" {
            let own = Deadline {
                after: Some(5 * 60_000),
                default: Some(DeadlineDefault::Answer("code default".into())),
                remind: vec![2 * 60_000],
                escalate: None,
            };
            state.set_question_deadline(Some(&own));
            state.reply("Ship?");
        } else {
            state.reply(format!("got: {text}"));
        }
        Ok(())
    }
}

/// A reminder as a hook heard it: `(subject, n, question, default_at)`.
type Heard = (String, u32, String, Option<i64>);

/// Hears reminders; asks about every call with a deadline that rejects after 10 minutes.
#[derive(Clone, Default)]
struct Nudge {
    heard: Arc<Mutex<Vec<Heard>>>,
}

#[async_trait]
impl Hook for Nudge {
    async fn question_reminder(
        &self,
        _ctx: &HookContext<'_>,
        r: &Reminder<'_>,
    ) -> Result<(), HookError> {
        self.heard.lock().expect("heard").push((
            r.subject.to_owned(),
            r.n,
            r.question.to_owned(),
            r.default_at,
        ));
        Ok(())
    }

    async fn tool_call_policy(
        &self,
        _ctx: &HookContext<'_>,
        _call: &PolicyCall<'_>,
    ) -> Result<Policy, HookError> {
        Ok(Policy::Ask {
            decisions: None,
            deadline: Some(Deadline {
                after: Some(10 * 60_000),
                default: Some(DeadlineDefault::Decide {
                    decision: Decision::Reject,
                    reason: Some("policy timed out".into()),
                }),
                remind: vec![],
                escalate: None,
            }),
        })
    }
}

struct Fixture {
    rt: Runtime,
    clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
    nudge: Nudge,
}

fn fixture(store: Arc<dyn Store>) -> Fixture {
    let clock = Arc::new(ManualClock::new(START));
    let nudge = Nudge::default();
    let rt = support::runtime(project(), store.clone())
        .clock(clock.clone())
        .handler("asker", Asker)
        .hooks(
            Hooks::new()
                .with("nudge", nudge.clone())
                .with("policy", nudge.clone()),
        )
        .tool("refund", crate::approvals::Calls::default())
        .build();
    Fixture {
        rt,
        clock,
        store,
        nudge,
    }
}

impl Fixture {
    /// Moves the clock to `at` ms after the start and fires what is due.
    async fn at(&self, at: i64) {
        self.clock.advance(START + at - self.rt.now_ms());
        self.rt.run_due_timers().await.expect("timers");
        self.rt.quiesce().await;
    }

    /// `key`'s deadline timers: (name, due ms after the start, status, subject).
    async fn timers(&self, key: &str) -> Vec<(String, i64, TimerStatus, String)> {
        let t = self.store.thread(key).await.expect("read").expect("thread");
        let q = TimerQuery {
            thread: Some(t.id),
            kind: Some(TimerKind::Deadline),
            limit: 100,
            ..TimerQuery::default()
        };
        let timers = self.store.timers(&q).await.expect("timers");
        timers
            .into_iter()
            .map(|t| {
                (
                    t.name,
                    t.due_at - START,
                    t.status,
                    t.subject.unwrap_or_default(),
                )
            })
            .collect()
    }
}

#[tokio::test]
async fn a_handlers_own_deadline_replaces_the_sides_for_one_question_and_a_hook_hears_reminders() {
    for backend in support::backends().await {
        let at = backend.name();
        let f = fixture(backend.open().await);
        let k = "code";
        support::send(&f.rt, k, Some("asker"), "ask").await;
        let t = f.store.thread(k).await.expect("read").expect("thread");
        assert_eq!(t.status, ThreadStatus::AwaitingHuman, "{at}");
        let first = deadline::Subject::parked(&t).expect("parked").to_string();
        // The code's deadline, not the side's; the value that carried it is consumed.
        let timers = f.timers(k).await;
        let names: Vec<(&str, i64)> = timers.iter().map(|(n, d, ..)| (n.as_str(), *d)).collect();
        assert_eq!(names, [("remind", 2 * MIN), ("default", 5 * MIN)], "{at}");
        assert_eq!(
            f.store.value(t.id, OVERRIDE_KEY).await.expect("value"),
            None,
            "{at}"
        );

        // The reminder: the hook hears it once, with the question and the default's time.
        f.at(2 * MIN).await;
        f.at(3 * MIN).await;
        let heard = f.nudge.heard.lock().expect("heard").clone();
        assert_eq!(
            heard,
            [(first.clone(), 1, "Ship?".to_owned(), Some(5 * MIN + START))],
            "{at}"
        );
        // The code's default answers.
        f.at(5 * MIN).await;
        let texts = support::texts(&f.store, k).await;
        assert_eq!(
            texts.last().map(|t| t.2.as_str()),
            Some("got: code default"),
            "{at}: {texts:?}"
        );
        // The next question has the side's deadline again: an hour from when it parked.
        let t = f.store.thread(k).await.expect("read").expect("thread");
        assert_eq!(t.status, ThreadStatus::AwaitingHuman, "{at}");
        let second = deadline::Subject::parked(&t).expect("parked").to_string();
        let next: Vec<(String, i64, TimerStatus)> = f
            .timers(k)
            .await
            .into_iter()
            .filter(|(.., s)| *s == second)
            .map(|(n, d, st, _)| (n, d, st))
            .collect();
        assert_eq!(
            next,
            [("default".to_owned(), 65 * MIN, TimerStatus::Pending)],
            "{at}"
        );
        let records = f.store.records(t.id).await.expect("records");
        let reminded = records
            .iter()
            .filter(|r| matches!(r.body, RecordBody::QuestionReminded { .. }))
            .count();
        assert_eq!(reminded, 1, "{at}");
    }
}

#[tokio::test]
async fn a_policy_hooks_ask_gives_the_call_a_deadline_of_its_own() {
    for backend in support::backends().await {
        let at = backend.name();
        let f = fixture(backend.open().await);
        let k = "policy";
        support::send(&f.rt, k, Some("desk"), "refund A1").await;
        let t = f.store.thread(k).await.expect("read").expect("thread");
        assert_eq!(t.status, ThreadStatus::Waiting, "{at}");
        let timers = f.timers(k).await;
        assert_eq!(timers.len(), 1, "{at}: {timers:?}");
        let (name, due, status, subject) = &timers[0];
        assert_eq!(
            (name.as_str(), *due, *status),
            ("default", 10 * MIN, TimerStatus::Pending)
        );
        assert!(subject.starts_with("approval:"), "{at}: {subject}");

        f.at(10 * MIN).await;
        let records = f.store.records(t.id).await.expect("records");
        let decided = records.iter().find_map(|r| match &r.body {
            RecordBody::ApprovalDecided(d) => Some(d.clone()),
            _ => None,
        });
        let decided = decided.expect("decided by the deadline");
        assert_eq!(decided.decision, Decision::Reject, "{at}");
        assert_eq!(decided.reason.as_deref(), Some("policy timed out"), "{at}");
        assert!(deadline::is_deadline(decided.author.as_deref()), "{at}");
        let texts = support::texts(&f.store, k).await;
        assert_eq!(texts.last().map(|t| t.2.as_str()), Some("Done."), "{at}");
    }
}
