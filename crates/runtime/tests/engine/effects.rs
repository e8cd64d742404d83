//! Scheduled effects, with a test clock: a handler schedules them through its `ThreadState`
//! (`remind MS TEXT`, `flaky`, `again`, `cancel ID`) or calls the `effect:` tool `remind_me`
//! (`tool JSON`), time moves with `ManualClock::advance`,
//! and `run_due_timers` fires what is due. No test sleeps. On every backend (memory, SQLite,
//! Postgres when `DATABASE_URL` is set).

use crate::support;

use std::sync::Arc;

use async_trait::async_trait;
use duet_runtime::{
    Effect, Handler, HandlerError, Lease, ManualClock, Message, Role, Runtime, Store, ThreadState,
    Timer, TimerQuery, TimerStatus,
};
use uuid::Uuid;

/// `planner`: side A is the `scheduler` handler, side B a person.
fn project(remind_args: &str) -> Arc<duet_spec::Project> {
    let dir = support::Scratch::new("effects");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/planner.yaml",
        "name: planner\nsideA: { handler: scheduler }\nsideB: { human: true }\n",
    );
    write(
        "agents/handlers/scheduler.yaml",
        "description: Schedules effects.\n",
    );
    write(
        "agents/effects/remind.yaml",
        &format!("description: Reminds.\nbuiltin: queue_message\nargs: {remind_args}\n"),
    );
    write(
        "agents/tools/remind_me.yaml",
        "description: Reminds later.\neffect: remind\nargs: { type: object, properties: { content: { type: string }, delayMs: { type: integer } } }\n",
    );
    write(
        "agents/effects/flaky.yaml",
        "description: Always fails.\nmaxAttempts: 2\n",
    );
    write(
        "agents/effects/again.yaml",
        "description: Counts, and schedules itself again until 3.\n",
    );
    dir.project()
}

const REMIND_ARGS: &str =
    "{ type: object, properties: { content: { type: string } }, required: [content] }";

/// Takes commands: `remind MS TEXT`, `flaky`, `again`, `cancel ID`, `bad`; anything else is
/// answered `ok: TEXT`.
struct Scheduler;

#[async_trait]
impl Handler for Scheduler {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let text = message.content.clone().unwrap_or_default();
        let words: Vec<&str> = text.splitn(3, ' ').collect();
        let scheduled = match words.as_slice() {
            ["remind", ms, content] => {
                let ms = ms.parse().unwrap_or(0);
                state.schedule_effect("remind", serde_json::json!({ "content": content }), ms)
            }
            ["bad"] => state.schedule_effect("remind", serde_json::json!({ "content": 7 }), 0),
            ["nope"] => state.schedule_effect("nope", serde_json::json!({}), 0),
            ["tool", ..] => {
                let args = text.strip_prefix("tool ").unwrap_or_default();
                let args =
                    serde_json::from_str(args).map_err(|e| HandlerError::new(e.to_string()))?;
                let result = state.invoke_tool("remind_me", args).await;
                state.reply(format!("{:?}: {}", result.status, result.content));
                return Ok(());
            }
            ["flaky"] => state.schedule_effect("flaky", serde_json::json!({}), 0),
            ["again"] => state.schedule_effect("again", serde_json::json!({}), 1_000),
            ["cancel", id] => {
                let id = Uuid::parse_str(id).map_err(|e| HandlerError::new(e.to_string()))?;
                let removed = state.remove_scheduled_effect(id).await?;
                let left = state.scheduled_effects(None).await?.len();
                state.reply(format!("removed {removed}, {left} left"));
                return Ok(());
            }
            _ => {
                state.reply(format!("ok: {text}"));
                return Ok(());
            }
        };
        match scheduled {
            Ok(id) => state.reply(format!("scheduled {id}")),
            Err(e) => state.reply(format!("refused: {e}")),
        }
        Ok(())
    }
}

struct Flaky;

#[async_trait]
impl Effect for Flaky {
    async fn run(
        &self,
        state: &mut ThreadState<'_>,
        _args: &serde_json::Value,
    ) -> Result<(), HandlerError> {
        // Written, then failed: nothing of it may be kept.
        state.set_value("flaky", Some(serde_json::json!(true)));
        Err(HandlerError::new("the flaky effect failed"))
    }
}

/// Counts its runs in the value `n` and schedules itself again until it ran 3 times.
struct Again;

#[async_trait]
impl Effect for Again {
    async fn run(
        &self,
        state: &mut ThreadState<'_>,
        _args: &serde_json::Value,
    ) -> Result<(), HandlerError> {
        let n = state
            .get_value("n")
            .await?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            + 1;
        state.set_value("n", Some(serde_json::json!(n)));
        if n < 3 {
            state.schedule_effect("again", serde_json::json!({}), 1_000)?;
        }
        Ok(())
    }
}

fn runtime(
    project: &Arc<duet_spec::Project>,
    store: Arc<dyn Store>,
    clock: &Arc<ManualClock>,
) -> Runtime {
    support::runtime(project.clone(), store)
        .clock(clock.clone())
        .handler("scheduler", Scheduler)
        .effect("flaky", Flaky)
        .effect("again", Again)
        .build()
}

async fn timers(store: &Arc<dyn Store>, key: &str) -> Vec<Timer> {
    let t = store.thread(key).await.expect("read").expect("thread");
    let q = TimerQuery {
        thread: Some(t.id),
        limit: 100,
        ..TimerQuery::default()
    };
    store.timers(&q).await.expect("timers")
}

async fn kinds(store: &Arc<dyn Store>, key: &str) -> Vec<String> {
    let t = store.thread(key).await.expect("read").expect("thread");
    let records = store.records(t.id).await.expect("records");
    records.iter().map(|r| r.kind().to_owned()).collect()
}

/// Moves the clock to `timer`'s due time (if it is later) and fires what is due.
async fn fire_at(rt: &Runtime, clock: &ManualClock, due_at: i64) -> usize {
    let now = rt.now_ms();
    if due_at > now {
        clock.advance(due_at - now);
    }
    let n = rt.run_due_timers().await.expect("timers run");
    rt.quiesce().await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_runs_once_after_its_delay_and_writes_its_message() {
    for backend in support::backends().await {
        let project = project(REMIND_ARGS);
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let rt = runtime(&project, store.clone(), &clock);
        support::send(&rt, "p1", Some("planner"), "remind 5000 stand up").await;
        let scheduled = timers(&store, "p1").await;
        assert_eq!(scheduled.len(), 1);
        assert_eq!(scheduled[0].due_at, 1_005_000);
        assert_eq!(scheduled[0].max_attempts, 3);
        // Not before its time.
        clock.advance(4_999);
        assert_eq!(rt.run_due_timers().await.expect("run"), 0);
        assert!(
            !support::texts(&store, "p1")
                .await
                .iter()
                .any(|(_, _, t)| t == "stand up")
        );
        // At its time: queued as the person's message, which the handler then takes.
        assert_eq!(fire_at(&rt, &clock, 1_005_000).await, 1);
        let texts = support::texts(&store, "p1").await;
        let tail: Vec<&str> = texts
            .iter()
            .rev()
            .take(2)
            .map(|(_, _, t)| t.as_str())
            .collect();
        assert_eq!(tail, ["ok: stand up", "stand up"]);
        let done = timers(&store, "p1").await;
        assert_eq!(done[0].status, TimerStatus::Completed);
        assert_eq!(done[0].attempts, 1);
        assert!(kinds(&store, "p1").await.contains(&"effect_ran".to_owned()));
        // Once.
        clock.advance(60_000);
        assert_eq!(rt.run_due_timers().await.expect("run"), 0);
        let again = support::texts(&store, "p1").await;
        assert_eq!(again.iter().filter(|(_, _, t)| t == "stand up").count(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_checks_the_effect_and_its_arguments_at_once() {
    for backend in support::backends().await {
        let project = project(REMIND_ARGS);
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let rt = runtime(&project, store.clone(), &clock);
        support::send(&rt, "p2", Some("planner"), "bad").await;
        support::send(&rt, "p2", None, "nope").await;
        let texts = support::texts(&store, "p2").await;
        let refusals: Vec<&str> = texts
            .iter()
            .filter(|(_, _, t)| t.starts_with("refused: "))
            .map(|(_, _, t)| t.as_str())
            .collect();
        assert_eq!(refusals.len(), 2, "{texts:?}");
        assert!(
            refusals[0].contains("arguments refused by effect `remind`"),
            "{}",
            refusals[0]
        );
        assert!(refusals[1].contains("no effect `nope`"), "{}", refusals[1]);
        assert!(timers(&store, "p2").await.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_cancelled_before_it_is_due_never_runs() {
    for backend in support::backends().await {
        let project = project(REMIND_ARGS);
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let rt = runtime(&project, store.clone(), &clock);
        support::send(&rt, "p3", Some("planner"), "remind 5000 never").await;
        let id = timers(&store, "p3").await[0].id;
        support::send(&rt, "p3", None, &format!("cancel {id}")).await;
        let texts = support::texts(&store, "p3").await;
        assert_eq!(
            texts.last().map(|(_, _, t)| t.as_str()),
            Some("removed true, 0 left")
        );
        assert_eq!(fire_at(&rt, &clock, 1_100_000).await, 0);
        assert_eq!(timers(&store, "p3").await[0].status, TimerStatus::Cancelled);
        assert!(
            !support::texts(&store, "p3")
                .await
                .iter()
                .any(|(_, _, t)| t == "never")
        );
        // A second removal finds nothing pending.
        support::send(&rt, "p3", None, &format!("cancel {id}")).await;
        let texts = support::texts(&store, "p3").await;
        assert_eq!(
            texts.last().map(|(_, _, t)| t.as_str()),
            Some("removed false, 0 left")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_effect_is_retried_then_failed_keeping_nothing_it_wrote() {
    for backend in support::backends().await {
        let project = project(REMIND_ARGS);
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let rt = runtime(&project, store.clone(), &clock);
        support::send(&rt, "p4", Some("planner"), "flaky").await;
        assert_eq!(fire_at(&rt, &clock, 1_000_000).await, 1);
        let after_one = timers(&store, "p4").await;
        assert_eq!(after_one[0].status, TimerStatus::Pending);
        assert_eq!(after_one[0].attempts, 1);
        assert_eq!(
            after_one[0].last_error.as_deref(),
            Some("the flaky effect failed")
        );
        assert_eq!(fire_at(&rt, &clock, after_one[0].due_at).await, 1);
        let after_two = timers(&store, "p4").await;
        assert_eq!(after_two[0].status, TimerStatus::Failed);
        assert_eq!(after_two[0].attempts, 2);
        assert_eq!(
            after_two[0].last_error.as_deref(),
            Some("the flaky effect failed")
        );
        let t = store.thread("p4").await.expect("read").expect("thread");
        assert_eq!(store.value(t.id, "flaky").await.expect("value"), None);
        let failed = kinds(&store, "p4").await;
        assert_eq!(failed.iter().filter(|k| *k == "effect_failed").count(), 2);
        // Its lease was given back each time: the thread takes messages as before.
        support::send(&rt, "p4", None, "hello").await;
        let texts = support::texts(&store, "p4").await;
        assert_eq!(texts.last().map(|(_, _, t)| t.as_str()), Some("ok: hello"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_the_changed_definition_refuses_fail_it_and_write_nothing() {
    for backend in support::backends().await {
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let before = runtime(&project(REMIND_ARGS), store.clone(), &clock);
        support::send(&before, "p5", Some("planner"), "remind 1000 old shape").await;
        let journal = support::texts(&store, "p5").await;
        // The definition changes: `content` must now be a number.
        let changed = project(
            "{ type: object, properties: { content: { type: integer } }, required: [content] }",
        );
        let after = runtime(&changed, store.clone(), &clock);
        assert_eq!(fire_at(&after, &clock, 1_001_000).await, 1);
        let t = &timers(&store, "p5").await[0];
        assert_eq!(
            t.status,
            TimerStatus::Failed,
            "no retry: the arguments will not change"
        );
        assert!(
            t.last_error
                .as_deref()
                .is_some_and(|e| e.contains("arguments refused")),
            "{:?}",
            t.last_error
        );
        assert_eq!(support::texts(&store, "p5").await, journal);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_thread_defers_the_effect_without_spending_an_attempt() {
    for backend in support::backends().await {
        let project = project(REMIND_ARGS);
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let rt = runtime(&project, store.clone(), &clock);
        support::send(&rt, "p6", Some("planner"), "remind 0 later").await;
        // Another run holds the thread.
        let t = store.thread("p6").await.expect("read").expect("thread");
        let other = Uuid::now_v7();
        let lease = Lease {
            owner: other,
            until: rt.now_ms() + 60_000,
            now: rt.now_ms(),
        };
        assert!(store.claim(t.id, lease).await.expect("claim"));
        assert_eq!(fire_at(&rt, &clock, 1_000_000).await, 1);
        let deferred = &timers(&store, "p6").await[0];
        assert_eq!(deferred.status, TimerStatus::Pending);
        assert_eq!(deferred.attempts, 0);
        assert!(deferred.due_at > 1_000_000);
        assert!(store.release(t.id, other).await.expect("release"));
        assert_eq!(fire_at(&rt, &clock, deferred.due_at).await, 1);
        let done = &timers(&store, "p6").await[0];
        assert_eq!((done.status, done.attempts), (TimerStatus::Completed, 1));
        let texts = support::texts(&store, "p6").await;
        assert!(
            texts
                .iter()
                .any(|(r, _, t)| *r == Role::User && t == "later")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_schedules_itself_again() {
    for backend in support::backends().await {
        let project = project(REMIND_ARGS);
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let rt = runtime(&project, store.clone(), &clock);
        support::send(&rt, "p7", Some("planner"), "again").await;
        for _ in 0..3 {
            let next = timers(&store, "p7")
                .await
                .into_iter()
                .find(|t| t.status == TimerStatus::Pending)
                .expect("one pending");
            assert_eq!(fire_at(&rt, &clock, next.due_at).await, 1);
        }
        let all = timers(&store, "p7").await;
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|t| t.status == TimerStatus::Completed));
        let t = store.thread("p7").await.expect("read").expect("thread");
        assert_eq!(
            store.value(t.id, "n").await.expect("value"),
            Some(serde_json::json!(3))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_calling_an_effect_tool_schedules_with_its_delivery() {
    let project = project(REMIND_ARGS);
    for backend in support::backends().await {
        let name = backend.name();
        let store = backend.open().await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let rt = runtime(&project, store.clone(), &clock);
        support::send(
            &rt,
            "p8",
            Some("planner"),
            r#"tool {"content":"drink","delayMs":2000}"#,
        )
        .await;
        let texts = support::texts(&store, "p8").await;
        let last = texts.last().map(|(_, _, t)| t.clone()).unwrap_or_default();
        assert!(
            last.starts_with("Success: Scheduled remind (id ")
                && last.ends_with(") for 1970-01-01T00:16:42Z"),
            "{name}: {last}"
        );
        let scheduled = timers(&store, "p8").await;
        assert_eq!(scheduled.len(), 1, "{name}");
        assert_eq!(scheduled[0].due_at, 1_002_000, "{name}");
        assert_eq!(
            scheduled[0].args,
            serde_json::json!({ "content": "drink" }),
            "{name}: the effect's arguments, less `delayMs`"
        );
        assert!(
            last.contains(&scheduled[0].id.to_string()),
            "{name}: {last}"
        );
        // Arguments the effect refuses: an error result, nothing scheduled.
        support::send(&rt, "p8", None, r#"tool {"delayMs":5}"#).await;
        let texts = support::texts(&store, "p8").await;
        let last = texts.last().map(|(_, _, t)| t.clone()).unwrap_or_default();
        assert!(
            last.starts_with("Error: Nothing was scheduled: arguments refused by effect `remind`"),
            "{name}: {last}"
        );
        assert_eq!(timers(&store, "p8").await.len(), 1, "{name}");
        assert_eq!(fire_at(&rt, &clock, 1_002_000).await, 1, "{name}");
        let texts = support::texts(&store, "p8").await;
        assert_eq!(
            texts.last().map(|(_, _, t)| t.as_str()),
            Some("ok: drink"),
            "{name}"
        );
    }
}
