//! A session's journal and status as fastagent `SessionEvent`s, for `GET /control/events`: the
//! same journal + change-feed loop as `/threads/{key}/events` (no polling), read commit by
//! commit — each `Change` says where a commit ends and the status it left — and mapped onto
//! runs. A run opens at the first entry after the last settle (`stopped` or `session_ended`)
//! that the thread is running for, and is named after that entry (`run-SEQ`), so the name
//! survives a change of process; it settles at the next settle record — unless the run went on
//! from it (a `run_continued` record opens its next commit: messages waited as it settled), so
//! a settle is held until the next commit, or the lease's release, says which. See
//! `docs/decisions.md`.

use std::collections::HashSet;
use std::sync::Arc;

use duet_runtime::{Clock, FeedEvent, JournalEntry, RecordBody, Thread, ThreadId, ThreadStatus};
use duet_spec::Project;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use super::wire::{continues, event, is_output, run_id, settled_data, settles};
use crate::auth::Caller;
use crate::service::ServiceError;
use crate::service::events::Feed;
use crate::service::threads::on_agent;

/// Entries read per journal page.
const PAGE: usize = 500;

/// Threads remembered as not the watched session before the memory is dropped.
const OTHERS: usize = 100_000;

/// Whether a thread is in a run: running, waiting for a blocking child, or leased.
pub(crate) fn active(t: &Thread, now: i64) -> bool {
    matches!(t.status, ThreadStatus::Running | ThreadStatus::Waiting)
        || (t.lease_owner.is_some() && t.lease_expires >= now)
}

/// One follower of one session.
pub(crate) struct Watch {
    feed: Feed,
    project: Arc<Project>,
    caller: Caller,
    /// The agent the route serves.
    agent: String,
    /// The session's stored key.
    stored: String,
    /// The session's thread and its agent, once it is there (and the caller's).
    thread: Option<(ThreadId, String)>,
    /// Threads seen not to be it.
    others: HashSet<ThreadId>,
    /// The last seq mapped.
    cursor: i64,
    /// The first entry since the last settle record.
    start: Option<i64>,
    /// The run open now.
    run: Option<String>,
    /// The run that settled last (entries committed with its settle are its).
    last_run: Option<String>,
    /// The open run's step error, for its `run_settled`.
    failure: Option<String>,
    /// Tool calls started and not yet finished.
    calls: HashSet<String>,
    /// The queue as last reported: (steering, follow-ups).
    queue: (usize, usize),
    /// A settle not yet known to end its run: its run and `run_settled` event.
    held: Option<(String, Value)>,
    /// The runtime's clock: leases are compared with it, and events are stamped by it.
    clock: Arc<dyn Clock>,
}

impl Watch {
    /// Subscribes to the feed, then reads where the session stands: events are what commits
    /// after this. `clock` is the runtime's, which writes the leases this compares with.
    pub(crate) async fn open(
        feed: Feed,
        project: Arc<Project>,
        caller: Caller,
        agent: String,
        stored: String,
        clock: Arc<dyn Clock>,
    ) -> Result<(Watch, BoxStream<'static, FeedEvent>), ServiceError> {
        let now = clock.now_ms();
        let changes = feed.changes();
        let mut w = Watch {
            feed,
            project,
            caller,
            agent,
            stored,
            thread: None,
            others: HashSet::new(),
            cursor: 0,
            start: None,
            run: None,
            last_run: None,
            failure: None,
            calls: HashSet::new(),
            queue: (0, 0),
            held: None,
            clock,
        };
        if let Some(t) = w.feed.by_key(&w.stored).await? {
            if on_agent(&w.caller, &w.agent, &t) {
                let start = w.feed.run_start(&t).await?;
                w.cursor = t.next_seq - 1;
                w.start = (start < t.next_seq).then_some(start);
                if active(&t, now) && t.status != ThreadStatus::Terminated {
                    w.run = w.start.map(run_id);
                }
                w.thread = Some((t.id, t.agent));
            } else {
                w.others.insert(t.id);
            }
        }
        Ok((w, changes))
    }

    /// Adopts `t` if it is the session: it appeared after the subscription, so all of it is new.
    fn adopt(&mut self, t: &Thread) -> bool {
        if t.key == self.stored && on_agent(&self.caller, &self.agent, t) {
            self.thread = Some((t.id, t.agent.clone()));
            return true;
        }
        if self.others.len() >= OTHERS {
            self.others.clear();
        }
        self.others.insert(t.id);
        false
    }

    /// The events one feed event brings.
    pub(crate) async fn wake(&mut self, feed: FeedEvent) -> Result<Vec<Value>, ServiceError> {
        let (id, upto, status) = match (feed, &self.thread) {
            (FeedEvent::Changed(c), Some((id, _))) if c.thread == *id => {
                (*id, Some(c.seq), Some(c.status))
            }
            (FeedEvent::Changed(_), Some(_)) => return Ok(Vec::new()),
            (FeedEvent::Changed(c), None) => {
                if self.others.contains(&c.thread) {
                    return Ok(Vec::new());
                }
                match self.feed.thread(c.thread).await? {
                    Some(t) if self.adopt(&t) => (c.thread, Some(c.seq), Some(c.status)),
                    _ => return Ok(Vec::new()),
                }
            }
            (FeedEvent::Resync, Some((id, _))) => (*id, None, None),
            (FeedEvent::Resync, None) => match self.feed.by_key(&self.stored).await? {
                Some(t) if self.adopt(&t) => (t.id, None, None),
                _ => return Ok(Vec::new()),
            },
        };
        let batch = self.read(id, upto).await?;
        let status = match status {
            Some(s) => s,
            None => match self.feed.thread(id).await? {
                Some(t) => t.status,
                None => return Ok(Vec::new()),
            },
        };
        let mut out = self.apply(&batch, status);
        if self.held.is_some() {
            out.extend(self.settle_if_released(id).await?);
        }
        if self.run.is_some() {
            out.extend(self.queue_changed(id).await?);
        }
        Ok(out)
    }

    /// The journal after the cursor, up to `upto` (the end of one commit) or its end.
    async fn read(
        &self,
        id: ThreadId,
        upto: Option<i64>,
    ) -> Result<Vec<JournalEntry>, ServiceError> {
        let mut out = Vec::new();
        let mut cursor = self.cursor;
        if upto.is_some_and(|u| u <= cursor) {
            return Ok(out);
        }
        loop {
            let page = self.feed.journal_page(id, cursor, PAGE).await?;
            let full = page.len() == PAGE;
            for entry in page {
                if upto.is_some_and(|u| entry.seq() > u) {
                    return Ok(out);
                }
                cursor = entry.seq();
                out.push(entry);
            }
            if !full {
                return Ok(out);
            }
        }
    }

    /// A held settle, once the thread's lease is seen released with nothing journaled after the
    /// settle's commit: it ended its run. (A lease still held — the run going on, or a new run
    /// already — leaves it to the next commit.)
    async fn settle_if_released(&mut self, id: ThreadId) -> Result<Option<Value>, ServiceError> {
        let Some(t) = self.feed.thread(id).await? else {
            return Ok(self.release_held());
        };
        let leased = t.lease_owner.is_some() && t.lease_expires >= self.clock.now_ms();
        if leased || t.next_seq - 1 > self.cursor {
            return Ok(None);
        }
        Ok(self.release_held())
    }

    /// The held settle's `run_settled`: its run ended.
    fn release_held(&mut self) -> Option<Value> {
        let (run, settled) = self.held.take()?;
        self.last_run = Some(run);
        Some(settled)
    }

    /// Maps one commit's entries (or, after a resync, several commits'), the thread left in
    /// `status`.
    fn apply(&mut self, batch: &[JournalEntry], status: ThreadStatus) -> Vec<Value> {
        let running = matches!(status, ThreadStatus::Running | ThreadStatus::Waiting);
        let mut out = Vec::new();
        // A held settle: the run went on if this commit says so, else it ended there.
        if let Some((run, _)) = &self.held
            && !batch.is_empty()
        {
            if continues(batch) {
                self.run = Some(run.clone());
                self.held = None;
            } else {
                out.extend(self.release_held());
            }
        }
        for (i, entry) in batch.iter().enumerate() {
            self.cursor = entry.seq();
            let at = match entry {
                JournalEntry::Message(m) => m.created_at,
                JournalEntry::Record(r) => r.created_at,
            };
            if let Some(reason) = settles(entry) {
                let after = &batch[i + 1..];
                if self.run.is_some() && continues(after) {
                    // Not the run's end: it went on under its lease with what waited.
                    self.failure = None;
                    continue;
                }
                if let Some(run) = self.run.take() {
                    let data = settled_data(reason, self.failure.take());
                    let settled = event("run_settled", at, Some(&run), data);
                    if after.iter().any(|e| settles(e).is_some()) {
                        out.push(settled);
                        self.last_run = Some(run);
                    } else {
                        // Whether the run went on is in the next commit (or the lease).
                        self.last_run = Some(run.clone());
                        self.held = Some((run, settled));
                    }
                }
                self.start = None;
                self.failure = None;
                self.calls.clear();
                continue;
            }
            if let JournalEntry::Record(r) = entry
                && matches!(r.body, RecordBody::RunContinued { .. })
            {
                continue;
            }
            let start = *self.start.get_or_insert(entry.seq());
            // Entries written with a settle (after its record) open no run: a run is open
            // while the thread runs, or when its settle is already in this batch.
            if self.run.is_none()
                && (running || batch[i + 1..].iter().any(|e| settles(e).is_some()))
            {
                self.open_run(start, at, &mut out);
            }
            if let JournalEntry::Record(r) = entry
                && let RecordBody::StepError { error } = &r.body
            {
                self.failure = Some(error.clone());
            }
            self.entry_events(entry, at, &mut out);
        }
        if self.run.is_none()
            && running
            && let Some(start) = self.start
        {
            self.open_run(start, self.clock.now_ms(), &mut out);
        }
        if status == ThreadStatus::Terminated {
            out.extend(self.release_held());
            if let Some(run) = self.run.take() {
                let data = json!({"status": "aborted", "stopReason": "terminated"});
                out.push(event("run_settled", self.clock.now_ms(), Some(&run), data));
                self.last_run = Some(run);
            }
            self.start = None;
        }
        out
    }

    fn open_run(&mut self, start: i64, at: i64, out: &mut Vec<Value>) {
        // A new run: a settle still held ended the one before.
        out.extend(self.release_held());
        let run = run_id(start);
        out.push(event("run_started", at, Some(&run), json!({})));
        self.run = Some(run);
        self.queue = (0, 0);
        self.failure = None;
    }

    /// A message's events: an output's `message_*` and `tool_started`s, a tool result's
    /// `tool_finished`.
    fn entry_events(&mut self, entry: &JournalEntry, at: i64, out: &mut Vec<Value>) {
        let JournalEntry::Message(m) = entry else {
            return;
        };
        let Some(run) = self.run.clone().or_else(|| self.last_run.clone()) else {
            return;
        };
        let run = Some(run.as_str());
        let agent = self
            .thread
            .as_ref()
            .and_then(|(_, a)| self.project.agents.get(a));
        if is_output(m, agent.map(|a| &a.def)) {
            let side = m.side.map(duet_runtime::side_str);
            let started =
                json!({"entryId": m.seq.to_string(), "role": m.role.as_str(), "side": side});
            out.push(event("message_started", at, run, started));
            for (channel, text) in [("thinking", &m.thinking), ("text", &m.content)] {
                if let Some(delta) = text.as_ref().filter(|t| !t.is_empty()) {
                    let data = json!({"channel": channel, "delta": delta});
                    out.push(event("message_delta", at, run, data));
                }
            }
            let finished = json!({"entryId": m.seq.to_string()});
            out.push(event("message_finished", at, run, finished));
            for call in &m.tool_calls {
                self.calls.insert(call.id.clone());
                let data = json!({"id": call.id, "name": call.name, "args": call.arguments});
                out.push(event("tool_started", at, run, data));
            }
        } else if let Some(id) = &m.tool_call_id
            && self.calls.remove(id)
        {
            let data = json!({
                "id": id,
                "isError": m.tool_status == Some(duet_runtime::ToolStatus::Error),
                "content": m.content.clone().unwrap_or_default(),
            });
            out.push(event("tool_finished", at, run, data));
        }
    }

    /// `queue_changed` when what waits for the run changed since it was last reported.
    async fn queue_changed(&mut self, id: ThreadId) -> Result<Option<Value>, ServiceError> {
        let queue = self.feed.queue(id).await?;
        let follow_up = queue.iter().filter(|q| q.follow_up).count();
        // As the runtime's `state` counts them.
        let steering = queue.len() - follow_up;
        if (steering, follow_up) == self.queue {
            return Ok(None);
        }
        self.queue = (steering, follow_up);
        let data = json!({"steering": steering, "followUp": follow_up});
        Ok(Some(event(
            "queue_changed",
            self.clock.now_ms(),
            self.run.as_deref(),
            data,
        )))
    }
}

#[cfg(test)]
mod tests {
    use duet_runtime::{Message, Record, Role, SideId, StopReason, ToolCall};

    use super::*;

    fn watch() -> Watch {
        Watch {
            feed: Feed::memory(),
            project: Arc::new(Project::default()),
            caller: Caller::anonymous(),
            agent: "a".into(),
            stored: "k".into(),
            thread: None,
            others: HashSet::new(),
            cursor: 0,
            start: None,
            run: None,
            last_run: None,
            failure: None,
            calls: HashSet::new(),
            queue: (0, 0),
            held: None,
            clock: Arc::new(duet_runtime::ManualClock::new(0)),
        }
    }

    fn msg(seq: i64, role: Role, text: &str, model: bool) -> JournalEntry {
        let mut m = Message::text(seq, 1, role, Some(SideId::A), text.into(), seq);
        m.model = model.then(|| "m".to_owned());
        JournalEntry::Message(m)
    }

    fn rec(seq: i64, body: RecordBody) -> JournalEntry {
        JournalEntry::Record(Record::new(seq, body, seq))
    }

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().filter_map(|e| e["type"].as_str()).collect()
    }

    #[test]
    fn a_run_is_one_start_its_messages_and_one_settle() {
        let mut w = watch();
        let drain = [
            rec(1, RecordBody::SessionStarted { session: 1 }),
            msg(2, Role::User, "hi", false),
        ];
        let out = w.apply(&drain, ThreadStatus::Running);
        assert_eq!(types(&out), ["run_started"]);
        assert_eq!(out[0]["runId"], "run-1");
        let mut call = msg(3, Role::Assistant, "", true);
        if let JournalEntry::Message(m) = &mut call {
            m.tool_calls.push(ToolCall {
                id: "c1".into(),
                name: "note".into(),
                arguments: json!({}),
            });
        }
        let mut result = Message::text(4, 1, Role::Tool, Some(SideId::A), "ok".into(), 4);
        result.tool_call_id = Some("c1".into());
        let step = [call, JournalEntry::Message(result)];
        let out = w.apply(&step, ThreadStatus::Running);
        assert_eq!(
            types(&out),
            [
                "message_started",
                "message_finished",
                "tool_started",
                "tool_finished"
            ]
        );
        let stop = RecordBody::Stopped {
            stop_reason: StopReason::StopOnResponse,
            status: ThreadStatus::AwaitingHuman,
            trace: None,
            revision: None,
        };
        let last = [
            msg(5, Role::Assistant, "done", true),
            rec(6, stop),
            // Written with the settle: no run of its own.
            rec(7, RecordBody::Status { text: "x".into() }),
        ];
        let out = w.apply(&last, ThreadStatus::AwaitingHuman);
        assert_eq!(
            types(&out),
            ["message_started", "message_delta", "message_finished"]
        );
        assert_eq!(settles(&last[1]), Some(StopReason::StopOnResponse));
        assert!(w.run.is_none());
        // The settle is held until the next commit says whether the run went on: this one is
        // a new run's, so the settle is said first, then the new run starts at the first entry
        // after the settle (consistently with `state`).
        let out = w.apply(&[msg(8, Role::User, "again", false)], ThreadStatus::Running);
        assert_eq!(types(&out), ["run_settled", "run_started"]);
        assert_eq!(out[0]["data"]["status"], "completed");
        assert_eq!(out[0]["runId"], "run-1");
        assert_eq!(out[1]["runId"], "run-7");
    }

    fn stopped(seq: i64) -> JournalEntry {
        rec(
            seq,
            RecordBody::Stopped {
                stop_reason: StopReason::AwaitingHuman,
                status: ThreadStatus::AwaitingHuman,
                trace: None,
                revision: None,
            },
        )
    }

    #[test]
    fn a_run_that_went_on_from_its_settle_is_one_run() {
        let mut w = watch();
        let first = [msg(1, Role::User, "hi", false)];
        assert_eq!(
            types(&w.apply(&first, ThreadStatus::Running)),
            ["run_started"]
        );
        // The answer and its park: held, since a follow-up may have waited.
        let park = [msg(2, Role::Assistant, "one", true), stopped(3)];
        let out = w.apply(&park, ThreadStatus::AwaitingHuman);
        assert!(!types(&out).contains(&"run_settled"), "{out:?}");
        // The run went on with the follow-up: no settle, no new run; the last settle is its.
        let on = [
            rec(4, RecordBody::RunContinued { after: 3 }),
            msg(5, Role::User, "and then?", false),
        ];
        let out = w.apply(&on, ThreadStatus::Running);
        assert!(out.iter().all(|e| e["type"] != "run_started"), "{out:?}");
        let end = [msg(6, Role::Assistant, "two", true), stopped(7)];
        w.apply(&end, ThreadStatus::AwaitingHuman);
        let settled = w.release_held().expect("the run's one settle");
        assert_eq!(
            (&settled["type"], &settled["runId"]),
            (&json!("run_settled"), &json!("run-1"))
        );
        // Read in one batch (a resync), the same.
        let mut w = watch();
        let all: Vec<JournalEntry> = first.into_iter().chain(park).chain(on).chain(end).collect();
        let out = w.apply(&all, ThreadStatus::AwaitingHuman);
        assert_eq!(
            out.iter().filter(|e| e["type"] == "run_started").count(),
            1,
            "{out:?}"
        );
        assert!(out.iter().all(|e| e["type"] != "run_settled"), "{out:?}");
        assert_eq!(
            w.release_held().map(|e| e["runId"].clone()),
            Some(json!("run-1"))
        );
    }

    #[test]
    fn a_whole_run_in_one_batch_and_a_failure() {
        let mut w = watch();
        let batch = [
            msg(1, Role::User, "hi", false),
            rec(
                2,
                RecordBody::StepError {
                    error: "boom".into(),
                },
            ),
            rec(
                3,
                RecordBody::Stopped {
                    stop_reason: StopReason::StepError,
                    status: ThreadStatus::Idle,
                    trace: None,
                    revision: None,
                },
            ),
        ];
        let out = w.apply(&batch, ThreadStatus::Idle);
        assert_eq!(types(&out), ["run_started"]);
        // Said once the lease is seen released.
        let settled = w.release_held().expect("held");
        assert_eq!(settled["data"]["status"], "failed");
        assert_eq!(settled["data"]["error"]["message"], "boom");
    }
}
