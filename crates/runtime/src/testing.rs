//! Test doubles for embedders and the conformance suite, behind the `test-util` feature:
//! [`MemoryStore`], the whole store port in memory; and the helpers of tests that run agents
//! ([`Scratch`] projects, [`send`], [`texts`], [`Slow`] and [`kill_mid_step`] for crashes).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use futures::stream::BoxStream;
use uuid::Uuid;

mod answers;
mod calls;
mod files;
mod kit;
mod reads;
mod timers;

pub use calls::DriverCalls;
pub use kit::{Scratch, Slow, kill_mid_step, must_load, repo, send, texts, write_pingpong};

use crate::record::RecordBody;
use crate::store::{
    AnswerOutcome, Change, ChangeFeed, ChangeHub, Commit, CommitOutcome, CommitStore, FeedEvent,
    FirstAnswer, JournalEntry, Lease, LeaseStore, NewThread, QueueStore, RegistryStore, Renewal,
    Store, StoreError,
};
use crate::types::{
    Child, ChildStatus, NewQueued, Park, Queued, StopReason, Thread, ThreadId, ThreadStatus,
};

/// The store port in memory, with the SQL stores' semantics (one conformance suite checks all
/// three): commits fenced by the lease and all-or-nothing, a settle that releases the lease only
/// with an empty queue, queue rows in arrival order (ids shared by all threads), and the change
/// feed, published under the store's lock so it is in commit order. Nothing survives the value;
/// clones of an `Arc<MemoryStore>` are the same database.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    hub: ChangeHub,
    wakes: crate::store::WakeHub,
}

#[derive(Debug, Default)]
struct State {
    /// Threads in creation order (a thread's index is its `num`).
    threads: Vec<Row>,
    by_key: HashMap<String, usize>,
    by_id: HashMap<ThreadId, usize>,
    /// The last queue id handed out.
    queue_ids: i64,
    children: HashMap<ThreadId, Child>,
    /// The answers parks got: (thread, park) → the answer.
    answers: HashMap<(ThreadId, Park), FirstAnswer>,
    /// The timer table, by id.
    timers: BTreeMap<Uuid, crate::store::Timer>,
    /// The thread filesystem: file rows and chunks.
    files: Files,
}

/// The file rows and chunks.
#[derive(Debug, Default)]
struct Files {
    /// By thread and path.
    rows: BTreeMap<(ThreadId, String), crate::files::FileRecord>,
    /// Chunk → (bytes, when stored).
    blobs: HashMap<String, (Vec<u8>, i64)>,
}

/// A thread and everything that belongs to it.
#[derive(Debug)]
struct Row {
    thread: Thread,
    abort_requested: bool,
    journal: BTreeMap<i64, JournalEntry>,
    queue: BTreeMap<i64, Queued>,
    values: BTreeMap<String, serde_json::Value>,
    /// The caller-chosen message ids delivered to it.
    delivered: std::collections::BTreeSet<String>,
}

impl Row {
    fn change(&self) -> Change {
        Change {
            thread: self.thread.id,
            seq: self.thread.next_seq - 1,
            status: self.thread.status,
        }
    }

    fn lease_free(&self, lease: &Lease) -> bool {
        match self.thread.lease_owner {
            None => true,
            Some(owner) => self.thread.lease_expires < lease.now || owner == lease.owner,
        }
    }

    fn take_lease(&mut self, lease: &Lease) {
        self.thread.lease_owner = Some(lease.owner);
        self.thread.lease_expires = lease.until;
        self.abort_requested = false;
    }
}

impl State {
    fn row(&self, id: ThreadId) -> Option<&Row> {
        self.by_id.get(&id).map(|&i| &self.threads[i])
    }

    fn row_mut(&mut self, id: ThreadId) -> Option<&mut Row> {
        self.by_id.get(&id).map(|&i| &mut self.threads[i])
    }

    fn existing(&mut self, id: ThreadId) -> Result<&mut Row, StoreError> {
        self.row_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }

    fn queued(&mut self, mut q: NewQueued, now: i64) -> Queued {
        // No NUL is stored, here as in the SQL stores.
        crate::nul::queued(&mut q);
        self.queue_ids += 1;
        Queued {
            id: self.queue_ids,
            role: q.role,
            side: q.side,
            content: q.content,
            human: q.human,
            silent: q.silent,
            follow_up: q.follow_up,
            tool: q.tool,
            decision: None,
            images: q.images,
            attachments: q.attachments,
            trace: q.trace,
            message_id: q.message_id,
            created_at: now,
        }
    }

    /// Queues `message` on thread `id` (which must exist).
    /// A new thread `key` (which must not exist yet).
    fn insert_thread(
        &mut self,
        key: &str,
        new: NewThread<'_>,
    ) -> Result<(Thread, Change), StoreError> {
        if self.by_id.contains_key(&new.id) {
            return Err(StoreError::Conflict(format!(
                "a thread with id {} exists",
                new.id
            )));
        }
        let mut thread = Thread::new(
            new.id,
            key.to_owned(),
            new.agent.to_owned(),
            new.parent,
            new.now,
        );
        thread.principal = new.principal.map(str::to_owned);
        thread.source = new.source.map(str::to_owned);
        let row = Row {
            thread: thread.clone(),
            abort_requested: false,
            journal: BTreeMap::new(),
            queue: BTreeMap::new(),
            values: BTreeMap::new(),
            delivered: Default::default(),
        };
        let change = row.change();
        let i = self.threads.len();
        self.threads.push(row);
        self.by_key.insert(key.to_owned(), i);
        self.by_id.insert(new.id, i);
        Ok((thread, change))
    }

    /// Queues `message` on thread `id` (which must exist); a message id delivered before is
    /// refused, writing nothing.
    fn push(&mut self, id: ThreadId, message: NewQueued, now: i64) -> Result<Change, StoreError> {
        let message_id = message.message_id.clone();
        let row = self.existing(id)?;
        if let Some(m) = &message_id
            && row.delivered.contains(m)
        {
            return Err(StoreError::Duplicate {
                thread: id,
                message_id: m.clone(),
            });
        }
        let queued = self.queued(message, now);
        let row = self.existing(id)?;
        row.delivered.extend(message_id);
        row.queue.insert(queued.id, queued);
        Ok(row.change())
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves consistent data: every method checks
        // before it writes.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl QueueStore for MemoryStore {
    async fn enqueue(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Option<Lease>,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let change = state.push(id, message, now)?;
        let row = state.existing(id)?;
        let mut claimed = false;
        if let Some(lease) = claim.filter(|l| row.lease_free(l)) {
            row.take_lease(&lease);
            claimed = true;
        }
        self.hub.publish(change);
        Ok(claimed)
    }

    async fn deliver_if_free(
        &self,
        id: ThreadId,
        message: NewQueued,
        lease: Lease,
        read_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let row = state.existing(id)?;
        if read_at.is_some_and(|n| row.thread.next_seq != n) || !row.lease_free(&lease) {
            return Ok(false);
        }
        let change = state.push(id, message, lease.now)?;
        state.existing(id)?.take_lease(&lease);
        self.hub.publish(change);
        Ok(true)
    }

    async fn create_with(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<Option<Thread>, StoreError> {
        // One lock for the whole of it: nobody sees the thread without its message.
        let mut state = self.state();
        if state.by_key.contains_key(key) {
            return Ok(None);
        }
        let (thread, _) = state.insert_thread(key, new)?;
        let change = state.push(thread.id, message, claim.now)?;
        let row = state.existing(thread.id)?;
        row.take_lease(&claim);
        let thread = row.thread.clone();
        drop(state);
        self.hub.publish(change);
        Ok(Some(thread))
    }

    async fn answer(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
    ) -> Result<AnswerOutcome, StoreError> {
        let mut state = self.state();
        let row = state.existing(id)?;
        if let Some(m) = message
            .message_id
            .as_ref()
            .filter(|m| row.delivered.contains(*m))
        {
            return Err(StoreError::Duplicate {
                thread: id,
                message_id: m.clone(),
            });
        }
        let queued = row
            .queue
            .values()
            .find(|q| q.human && !q.follow_up)
            .map(|q| FirstAnswer {
                content: q.content.clone(),
                at: q.created_at,
                author: None,
                message_id: None,
            });
        if row.thread.park() != Some(park) || queued.is_some() {
            let recorded = state.answers.get(&(id, park)).cloned();
            let row = state.existing(id)?;
            let first = recorded.or(queued).or_else(|| {
                row.journal.range(park.seq..).find_map(|(_, e)| match e {
                    JournalEntry::Message(m) => Some(FirstAnswer {
                        content: m.content.clone().unwrap_or_default(),
                        at: m.created_at,
                        author: None,
                        message_id: None,
                    }),
                    JournalEntry::Record(_) => None,
                })
            });
            return Ok(AnswerOutcome::Refused { first });
        }
        let answer = FirstAnswer {
            content: message.content.clone(),
            at: claim.now,
            author: message.author.clone(),
            message_id: message.message_id.clone(),
        };
        let change = state.push(id, message, claim.now)?;
        state.answers.insert((id, park), answer);
        let row = state.existing(id)?;
        let claimed = row.lease_free(&claim);
        if claimed {
            row.take_lease(&claim);
        }
        drop(state);
        self.hub.publish(change);
        Ok(AnswerOutcome::Accepted { claimed })
    }

    async fn decide(
        &self,
        id: ThreadId,
        decided: crate::approval::Decided,
        side: crate::types::SideId,
        claim: Lease,
    ) -> Result<crate::store::DecideOutcome, StoreError> {
        use crate::store::DecideOutcome;
        let mut state = self.state();
        let row = state.existing(id)?;
        let asked = matches!(
            row.journal.get(&decided.approval),
            Some(JournalEntry::Record(r)) if matches!(&r.body, RecordBody::ApprovalRequested(a) if a.call == decided.call)
        );
        if !asked {
            return Ok(DecideOutcome::NotPending);
        }
        if decided
            .message_id
            .as_ref()
            .is_some_and(|m| row.delivered.contains(m))
        {
            return Ok(DecideOutcome::Duplicate);
        }
        let queued = row.queue.values().find_map(|q| {
            q.decision
                .as_ref()
                .filter(|d| d.approval == decided.approval)
        });
        let written = row
            .journal
            .range(decided.approval..)
            .find_map(|(_, e)| match e {
                JournalEntry::Record(r) => match &r.body {
                    RecordBody::ApprovalDecided(d) if d.approval == decided.approval => Some(d),
                    _ => None,
                },
                JournalEntry::Message(_) => None,
            });
        if let Some(first) = queued.or(written) {
            return Ok(DecideOutcome::Refused {
                first: Box::new(first.clone()),
            });
        }
        let mut message = NewQueued::new(crate::types::Role::Tool, side, "");
        message.tool = Some(crate::types::ToolReply {
            call_id: decided.call.clone(),
            name: decided.tool.clone(),
            status: crate::types::ToolStatus::Success,
        });
        message.author = decided.author.clone();
        let mut queued = state.queued(message, claim.now);
        queued.decision = Some(decided.clone());
        let row = state.existing(id)?;
        row.delivered.extend(decided.message_id.clone());
        row.queue.insert(queued.id, queued);
        let change = row.change();
        let claimed = row.lease_free(&claim);
        if claimed {
            row.take_lease(&claim);
        }
        drop(state);
        self.hub.publish(change);
        Ok(DecideOutcome::Accepted { claimed })
    }

    async fn enqueue_if_running(
        &self,
        id: ThreadId,
        message: NewQueued,
        now: i64,
    ) -> Result<Option<Uuid>, StoreError> {
        let mut state = self.state();
        let row = state.existing(id)?;
        let Some(run) = row
            .thread
            .lease_owner
            .filter(|_| row.thread.lease_expires >= now)
        else {
            return Ok(None);
        };
        let change = state.push(id, message, now)?;
        self.hub.publish(change);
        Ok(Some(run))
    }

    async fn delivered(&self, id: ThreadId, message_id: &str) -> Result<bool, StoreError> {
        Ok(self
            .state()
            .row(id)
            .is_some_and(|r| r.delivered.contains(message_id)))
    }

    async fn queue(&self, id: ThreadId) -> Result<Vec<Queued>, StoreError> {
        let state = self.state();
        Ok(state
            .row(id)
            .map(|r| r.queue.values().cloned().collect())
            .unwrap_or_default())
    }

    async fn answered(
        &self,
        query: &crate::store::AnsweredQuery<'_>,
    ) -> Result<Vec<crate::store::Answered>, StoreError> {
        Ok(self.state().answered(query))
    }

    async fn decisions(
        &self,
        query: &crate::store::AnsweredQuery<'_>,
    ) -> Result<Vec<crate::store::DecisionEntry>, StoreError> {
        Ok(self.state().decisions(query))
    }
}

#[async_trait]
impl LeaseStore for MemoryStore {
    async fn claim(&self, id: ThreadId, lease: Lease) -> Result<bool, StoreError> {
        let mut state = self.state();
        Ok(match state.row_mut(id) {
            Some(row) if row.lease_free(&lease) => {
                row.take_lease(&lease);
                true
            }
            _ => false,
        })
    }

    async fn renew(&self, id: ThreadId, lease: Lease) -> Result<Renewal, StoreError> {
        let mut state = self.state();
        Ok(match state.row_mut(id) {
            Some(row) if row.thread.lease_owner == Some(lease.owner) => {
                row.thread.lease_expires = lease.until;
                Renewal::Held {
                    abort_requested: row.abort_requested,
                }
            }
            _ => Renewal::Lost,
        })
    }

    async fn request_abort(&self, id: ThreadId, now: i64) -> Result<Option<Uuid>, StoreError> {
        let mut state = self.state();
        let Some(row) = state.row_mut(id) else {
            return Ok(None);
        };
        let run = row
            .thread
            .lease_owner
            .filter(|_| row.thread.lease_expires >= now);
        if run.is_some() {
            row.abort_requested = true;
        }
        Ok(run)
    }

    async fn recoverable(&self, now: i64) -> Result<Vec<ThreadId>, StoreError> {
        Ok(self
            .state()
            .threads
            .iter()
            .filter(|r| r.thread.lease_owner.is_none() || r.thread.lease_expires < now)
            .filter(|r| {
                r.thread.status == ThreadStatus::Running
                    || r.queue
                        .values()
                        .any(|q| runnable(r.thread.status, r.thread.stop_reason, q))
            })
            .map(|r| r.thread.id)
            .collect())
    }

    async fn claim_runnable(
        &self,
        owners: &[Uuid],
        until: i64,
        now: i64,
    ) -> Result<Vec<(ThreadId, Uuid)>, StoreError> {
        let ids = self.recoverable(now).await?;
        let mut state = self.state();
        let mut claimed = Vec::new();
        let mut owners = owners.iter();
        for id in ids {
            let Some(row) = state.row_mut(id) else {
                continue;
            };
            // Read before the lock was taken again: another claimer may have leased it since
            // (as the SQL stores' `FOR UPDATE SKIP LOCKED` / single statement rule it out).
            if row.thread.lease_owner.is_some() && row.thread.lease_expires > now {
                continue;
            }
            let Some(owner) = owners.next() else {
                break;
            };
            row.take_lease(&Lease {
                owner: *owner,
                until,
                now,
            });
            claimed.push((id, *owner));
        }
        Ok(claimed)
    }

    async fn release(&self, id: ThreadId, owner: Uuid) -> Result<bool, StoreError> {
        let mut state = self.state();
        Ok(match state.row_mut(id) {
            Some(row) if row.thread.lease_owner == Some(owner) => {
                row.thread.lease_owner = None;
                row.thread.lease_expires = 0;
                true
            }
            _ => false,
        })
    }
}

#[async_trait]
impl RegistryStore for MemoryStore {
    async fn put_child(&self, child: &Child) -> Result<(), StoreError> {
        let mut state = self.state();
        match state.children.get_mut(&child.child) {
            // As the SQL stores do: a second put of the same child updates its status and wait
            // only.
            Some(existing) => {
                existing.status = child.status;
                existing.awaiting.clone_from(&child.awaiting);
            }
            None => {
                state.children.insert(child.child, child.clone());
            }
        }
        Ok(())
    }

    async fn set_child_status(
        &self,
        child: ThreadId,
        status: ChildStatus,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        Ok(state
            .children
            .get_mut(&child)
            .map(|c| c.status = status)
            .is_some())
    }

    async fn set_child_status_text(&self, child: ThreadId, text: &str) -> Result<bool, StoreError> {
        let mut state = self.state();
        Ok(state
            .children
            .get_mut(&child)
            .map(|c| c.status_text = Some(text.to_owned()))
            .is_some())
    }

    async fn set_awaiting(&self, child: ThreadId, call: Option<&str>) -> Result<bool, StoreError> {
        let mut state = self.state();
        Ok(state
            .children
            .get_mut(&child)
            .map(|c| c.awaiting = call.map(str::to_owned))
            .is_some())
    }

    async fn resolve_await(
        &self,
        child: ThreadId,
        call: &str,
        parent: ThreadId,
        reply: NewQueued,
        claim: Lease,
    ) -> Result<Option<bool>, StoreError> {
        let mut state = self.state();
        state.existing(parent)?;
        match state.children.get_mut(&child) {
            Some(c) if c.awaiting.as_deref() == Some(call) => c.awaiting = None,
            _ => return Ok(None),
        }
        let change = state.push(parent, reply, claim.now)?;
        let row = state.existing(parent)?;
        let claimed = row.lease_free(&claim);
        if claimed {
            row.take_lease(&claim);
        }
        drop(state);
        self.hub.publish(change);
        Ok(Some(claimed))
    }

    async fn child(&self, child: ThreadId) -> Result<Option<Child>, StoreError> {
        Ok(self.state().children.get(&child).cloned())
    }

    async fn children(&self, parent: ThreadId) -> Result<Vec<Child>, StoreError> {
        let mut out: Vec<Child> = self
            .state()
            .children
            .values()
            .filter(|c| c.parent == parent)
            .cloned()
            .collect();
        out.sort_by_key(|c| (c.created_at, c.child));
        Ok(out)
    }
}

#[async_trait]
impl CommitStore for MemoryStore {
    async fn commit(
        &self,
        t: &Thread,
        owner: Uuid,
        mut commit: Commit,
    ) -> Result<CommitOutcome, StoreError> {
        let mut state = self.state();
        // No NUL is stored, here as in the SQL stores.
        crate::nul::commit(&mut commit);
        let timers = state.timer_writes(&mut commit)?;
        let row = state.existing(t.id)?;
        if row.thread.lease_owner != Some(owner) {
            return Err(StoreError::LeaseLost(t.id));
        }
        // All or nothing: every check before the first write.
        let entries = commit
            .messages
            .into_iter()
            .map(JournalEntry::Message)
            .chain(commit.records.into_iter().map(JournalEntry::Record));
        let mut journal = BTreeMap::new();
        for entry in entries {
            let seq = entry.seq();
            if row.journal.contains_key(&seq) || journal.insert(seq, entry).is_some() {
                return Err(StoreError::Conflict(format!(
                    "thread {} already has journal seq {seq}",
                    t.id
                )));
            }
        }
        let settle = commit.settle && commit.enqueue.is_empty();
        let enqueued = !commit.enqueue.is_empty();
        let queued: Vec<Queued> = commit
            .enqueue
            .into_iter()
            .map(|q| state.queued(q, t.updated_at))
            .collect();
        let due = timers.apply(&mut state, t.id, t.updated_at);
        state.files.apply(t.id, std::mem::take(&mut commit.files));
        let row = state.existing(t.id)?;
        row.journal.append(&mut journal);
        for id in &commit.drained {
            row.queue.remove(id);
        }
        row.queue.extend(queued.into_iter().map(|q| (q.id, q)));
        for (key, value) in commit.values {
            match value {
                Some(v) => row.values.insert(key, v),
                None => row.values.remove(&key),
            };
        }
        let (lease_owner, lease_expires) = (row.thread.lease_owner, row.thread.lease_expires);
        row.thread = Thread {
            id: row.thread.id,
            key: std::mem::take(&mut row.thread.key),
            origin: std::mem::take(&mut row.thread.origin),
            parent: row.thread.parent,
            principal: row.thread.principal.take(),
            source: row.thread.source.take(),
            created_at: row.thread.created_at,
            lease_owner,
            lease_expires,
            ..t.clone()
        };
        crate::nul::replace_opt(&mut row.thread.status_text);
        crate::nul::replace_opt(&mut row.thread.result);
        let waiting = !row.queue.is_empty();
        let keeps = row
            .queue
            .values()
            .any(|q| runnable(row.thread.status, row.thread.stop_reason, q));
        let outcome = if settle && (commit.release || !keeps) {
            row.thread.lease_owner = None;
            row.thread.lease_expires = 0;
            CommitOutcome::Settled
        } else {
            CommitOutcome::Committed {
                queued: waiting || enqueued,
            }
        };
        self.hub.publish(row.change());
        for at in due {
            self.wakes.due(at);
        }
        Ok(outcome)
    }

    async fn value(
        &self,
        id: ThreadId,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self
            .state()
            .row(id)
            .and_then(|r| r.values.get(key).cloned()))
    }
}

impl ChangeFeed for MemoryStore {
    fn changes(&self) -> BoxStream<'static, FeedEvent> {
        self.hub.subscribe()
    }
}

#[async_trait]
impl Store for MemoryStore {
    /// An estimate (there is no file): a page, and a quarter of one per row of any table.
    async fn size_bytes(&self) -> Result<i64, StoreError> {
        let state = self.state();
        let rows: usize = state
            .threads
            .iter()
            .map(|r| 1 + r.journal.len() + r.queue.len() + r.values.len())
            .sum::<usize>()
            + state.children.len();
        Ok(4096 + 1024 * i64::try_from(rows).unwrap_or(i64::MAX / 2048))
    }
}

/// Whether queued row `q` keeps a lease or needs a runner for a thread with `status` and `stop`
/// (the SQL stores' `runnable!`): not after an abort, and while the thread waits for a blocking
/// child only a late tool result.
fn runnable(status: ThreadStatus, stop: Option<StopReason>, q: &Queued) -> bool {
    stop != Some(StopReason::Aborted) && (status != ThreadStatus::Waiting || q.tool.is_some())
}
