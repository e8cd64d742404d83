//! Deliveries: an inbound message queued durably and, when this caller takes the lease, the run
//! that follows; recovery of threads whose runner died; and the runs that go on in the
//! background (non-blocking children, parents woken by a child's result).

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::Runtime;
use crate::decide;
use crate::delivery::{Accepted, Claim, Delivered, Delivery, Origin, Settled, WhenBusy};
use crate::error::RunError;
use crate::event::EventSink;
use crate::record::RecordBody;
use crate::store::{AnswerOutcome, JournalEntry, NewThread, StoreError};
use crate::types::{NewQueued, Park, Role, SideId, Thread, ThreadId, ThreadStatus};

/// How many threads `recover` continues at once.
const RECOVER_AT_ONCE: usize = 8;

impl Runtime {
    /// Delivers `text` to the thread `key` (created for `agent` if new) and runs it until it
    /// settles: parked for a person, waiting for a blocking child, or the session ended, or a
    /// run stop.
    ///
    /// The message is written by the agent's human side (or, for an agent without one, as a
    /// `user` message so side A acts first). If another runner holds the thread, the message is
    /// queued for it and `Delivered::Queued` comes back at once.
    pub async fn send(
        &self,
        key: &str,
        agent: Option<&str>,
        text: &str,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Delivered, RunError> {
        self.deliver(
            key,
            agent,
            text,
            Origin::default(),
            WhenBusy::Queue,
            events,
            cancel,
        )
        .await
    }

    /// [`Runtime::send`] with an origin and a busy policy: the delivery under `invoke` and the
    /// control plane.
    #[allow(clippy::too_many_arguments)]
    pub async fn deliver(
        &self,
        key: &str,
        agent: Option<&str>,
        text: &str,
        origin: Origin<'_>,
        when_busy: WhenBusy,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Delivered, RunError> {
        let delivery = Delivery {
            agent,
            origin,
            when_busy,
            ..Delivery::new(key, text)
        };
        self.deliver_message(delivery, events, cancel).await
    }

    /// Delivers one inbound message as `delivery` says — answering a park only while the
    /// thread is still at it, idempotent by message id — and, when this caller takes the lease,
    /// runs the thread until it settles: [`Runtime::accept`] then [`Runtime::run_claimed`].
    pub async fn deliver_message(
        &self,
        delivery: Delivery<'_>,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Delivered, RunError> {
        match self.accept(delivery).await? {
            Accepted::Claimed(claim) => self
                .run_claimed(claim, events, cancel)
                .await
                .map(Delivered::Settled),
            Accepted::Queued { thread } => Ok(Delivered::Queued { thread }),
            Accepted::Duplicate(settled) => Ok(Delivered::Duplicate(settled)),
        }
    }

    /// Runs the thread a delivery claimed until it settles (see [`Runtime::accept`]).
    pub async fn run_claimed(
        &self,
        claim: Claim,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Settled, RunError> {
        let start = claim.start.map(|start| *start);
        self.drive_from(
            claim.thread,
            claim.run,
            start,
            claim.report,
            events,
            cancel,
            claim.inline,
        )
        .await
    }

    /// Writes one inbound message as `delivery` says — durably, before this returns — without
    /// running anything: a caller that answers at once (HTTP's `202 Accepted`) runs the
    /// [`Claim`] it may get with [`Runtime::run_claimed`], in the background. A claim that is
    /// dropped unrun leaves its thread to recovery when the lease runs out.
    pub async fn accept(&self, delivery: Delivery<'_>) -> Result<Accepted, RunError> {
        self.accept_read(delivery, None).await
    }

    /// [`Runtime::accept`] with the thread under `delivery.key` as the caller read it a moment
    /// ago (`None`: there was none), which is not read again: a server's door reads it first to
    /// check who may write there. Taken only where the write checks what the read would: an
    /// answer (its write requires the thread parked at that question, and a moved park is
    /// looked up again) and a new thread (one created meanwhile under the key is read and
    /// delivered to). Any other message is checked against a fresh read — queueing it does not
    /// check the thread's state (a thread terminated since would take it) — as is a thread
    /// under another key.
    pub async fn accept_to(
        &self,
        known: Option<&Thread>,
        delivery: Delivery<'_>,
    ) -> Result<Accepted, RunError> {
        let known = match known {
            Some(t) if t.key == delivery.key && delivery.answers.is_some() => Some(Some(t.clone())),
            Some(_) => None,
            None => Some(None),
        };
        self.accept_read(delivery, known).await
    }

    /// [`Runtime::accept`], with the thread already read (`Some`) or read here (`None`).
    async fn accept_read(
        &self,
        delivery: Delivery<'_>,
        known: Option<Option<Thread>>,
    ) -> Result<Accepted, RunError> {
        let Delivery {
            key,
            agent,
            text,
            images,
            attachments,
            origin,
            when_busy,
            answers,
            message_id,
            trace,
        } = delivery;
        let trace = trace.map(str::to_owned).or_else(|| self.trace_here());
        if self.inner.detached.is_cancelled() {
            return Err(RunError::ShuttingDown);
        }
        let run = Uuid::now_v7();
        let claim = |thread, start: Option<crate::store::RunStart>| {
            Accepted::Claimed(Claim {
                thread,
                run,
                inline: origin.inline,
                start: start.map(Box::new),
                report: false,
            })
        };
        let store = &self.inner.store;
        if let Some(name) = agent
            && !self.inner.project.agents.contains_key(name)
        {
            return Err(RunError::UnknownAgent(name.to_owned()));
        }
        // One read: an existing thread is checked and delivered to; a new one is created with
        // its first message in one transaction, so a process that dies in between leaves
        // neither.
        let mut existing = match known {
            Some(read) => read,
            None => store.thread(key).await?,
        };
        if existing.is_none()
            && let Some(name) = agent
            && answers.is_none()
        {
            // A thread made by this delivery has no files for it to name.
            if let Some(path) = attachments.first() {
                return Err(RunError::Attachment {
                    key: key.to_owned(),
                    path: path.clone(),
                    why: "the thread has no files yet (upload first, with `agent` to open it)"
                        .to_owned(),
                });
            }
            let def = self.agent_def(name)?;
            let message = inbound(def, &origin, text, message_id, images, trace.clone());
            let new = NewThread {
                id: Uuid::now_v7(),
                agent: name,
                parent: origin.parent,
                principal: origin.principal,
                source: origin.source,
                now: self.now(),
            };
            let made = store
                .create_starting(key, new, message, self.lease(run))
                .await?;
            match made.outcome {
                Some(created) => return Ok(claim(created.id, made.start)),
                // Created meanwhile by another delivery: deliver to it as to any thread.
                None => existing = store.thread(key).await?,
            }
        }
        let thread = match existing {
            Some(t) => self.check(t, key, agent, &origin)?,
            None => return Err(RunError::UnknownThread(key.to_owned())),
        };
        if let Some(why) = crate::stale::missing(&self.inner.project, &thread) {
            return Err(RunError::Stale {
                key: key.to_owned(),
                why,
            });
        }
        let agent = self.agent_def(&thread.agent)?;
        let mut message = inbound(agent, &origin, text, message_id, images, trace);
        message.attachments = self.attachments(&thread, key, attachments).await?;
        let now = self.now();
        let queued = match answers {
            Some(park) => self.answer_park(&thread, key, message, park, run).await?,
            None => match when_busy {
                WhenBusy::Queue => store
                    .enqueue_starting(thread.id, message, self.lease(run), now)
                    .await
                    .map(|s| (s.outcome, s.start)),
                WhenBusy::Reject | WhenBusy::RejectIfMoved(_) => match store
                    .deliver_if_free(thread.id, message, self.lease(run), when_busy.read_at())
                    .await
                {
                    Ok(false) => return Err(RunError::Busy(key.to_owned())),
                    other => other.map(|claimed| (claimed, None)),
                },
            },
        };
        match queued {
            Ok((true, start)) => Ok(claim(thread.id, start)),
            Ok((false, _)) => Ok(Accepted::Queued { thread: thread.id }),
            Err(StoreError::Duplicate { .. }) => {
                // Delivered before: nothing new is written; the thread as it stands is the
                // outcome.
                let now = store
                    .thread_by_id(thread.id)
                    .await?
                    .ok_or_else(|| RunError::UnknownThread(key.to_owned()))?;
                Ok(Accepted::Duplicate(Settled::of(&now)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The files `paths` name in thread `t` (addressed as `key`), as a message carries them:
    /// each must be a file of the thread.
    async fn attachments(
        &self,
        t: &Thread,
        key: &str,
        paths: &[String],
    ) -> Result<Vec<crate::files::AttachmentRef>, RunError> {
        let mut out = Vec::with_capacity(paths.len());
        for p in paths {
            match self.files().file(t.id, p).await {
                Ok(record) => out.push(record.attachment()),
                Err(crate::files::FileError::Store(e)) => return Err(e.into()),
                Err(e) => {
                    return Err(RunError::Attachment {
                        key: key.to_owned(),
                        path: p.chars().take(200).collect(),
                        why: e.to_string(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Queues `message` as the answer to `park` of `t` (addressed as `key`), the lease tried for
    /// `run`. A deadline's reminder or escalation, written while the thread is parked, moves the
    /// park's seq: an answer naming the park as it was before is an answer to it still — also
    /// when such a record lands between reading where the park is and answering it (the store
    /// refuses, naming no first answer: the park is looked up again, a few times at most).
    async fn answer_park(
        &self,
        t: &Thread,
        key: &str,
        message: NewQueued,
        park: Park,
        run: Uuid,
    ) -> Result<Result<(bool, Option<crate::store::RunStart>), StoreError>, RunError> {
        /// How many times a park moved by a deadline's record is looked up again.
        const MOVED_TRIES: usize = 8;
        let store = &self.inner.store;
        let mut at = self.park_now(t, park).await?;
        for _ in 0..MOVED_TRIES {
            match store
                .answer_starting(t.id, message.clone(), at, self.lease(run))
                .await
                .map(|s| (s.outcome, s.start))
            {
                Ok((AnswerOutcome::Accepted { claimed }, start)) => {
                    return Ok(Ok((claimed, start)));
                }
                Ok((AnswerOutcome::Refused { first: None }, _)) => {
                    let now = store.thread_by_id(t.id).await?;
                    let moved = match &now {
                        Some(now) if now.status == ThreadStatus::AwaitingHuman => {
                            Some(self.park_now(now, park).await?).filter(|p| *p != at)
                        }
                        _ => None,
                    };
                    match moved {
                        Some(moved) => at = moved,
                        None => break,
                    }
                }
                Ok((AnswerOutcome::Refused { first }, _)) => {
                    return Err(RunError::AlreadyAnswered {
                        key: key.to_owned(),
                        park: at,
                        first,
                    });
                }
                Err(e) => return Ok(Err(e)),
            }
        }
        Err(RunError::AlreadyAnswered {
            key: key.to_owned(),
            park: at,
            first: None,
        })
    }

    /// The park `park` names on `t`, past a deadline's records (`question_reminded`,
    /// `question_escalated`) written at it while the thread was parked: they move the park's
    /// seq, and an answer naming the park as it was before answers it still (or, when it was
    /// answered, is refused naming that answer).
    async fn park_now(&self, t: &Thread, park: Park) -> Result<Park, RunError> {
        if t.park() == Some(park) || park.session != t.session || park.seq < 1 {
            return Ok(park);
        }
        let since = self.inner.store.journal_since(t.id, park.seq - 1).await?;
        let mut seq = park.seq;
        for e in &since {
            match e {
                JournalEntry::Record(r)
                    if r.seq == seq
                        && matches!(
                            r.body,
                            RecordBody::QuestionReminded { .. }
                                | RecordBody::QuestionEscalated { .. }
                                | RecordBody::EffectRan { .. }
                                | RecordBody::EffectFailed { .. }
                        ) =>
                {
                    seq += 1;
                }
                _ => break,
            }
        }
        Ok(Park {
            session: park.session,
            seq,
        })
    }

    /// Thread `t` (addressed as `key`) if a delivery for `agent` by `origin` may reach it:
    /// refused when it is another agent's (a thread handed off is still addressed by its first
    /// agent), another principal's, or terminated.
    pub(super) fn check(
        &self,
        t: Thread,
        key: &str,
        agent: Option<&str>,
        origin: &Origin<'_>,
    ) -> Result<Thread, RunError> {
        if let Some(name) = agent
            && t.agent != name
            && t.origin != name
        {
            return Err(StoreError::AgentMismatch {
                key: key.to_owned(),
                agent: t.agent,
            }
            .into());
        }
        // A thread is its owner's alone — and one with no owner is no principal's.
        if t.principal.as_deref() != origin.principal {
            return Err(RunError::Forbidden(key.to_owned()));
        }
        if t.status == ThreadStatus::Terminated {
            return Err(RunError::Terminated(key.to_owned()));
        }
        Ok(t)
    }

    /// Runs every thread that needs a runner (a dead runner's, or one with runnable queued
    /// messages and no runner). Returns how many were run. Safe to call from any number of
    /// processes.
    pub async fn recover(&self, cancel: &CancellationToken) -> Result<usize, RunError> {
        use futures::StreamExt;
        let mut ran = 0;
        let mut seen = std::collections::HashSet::new();
        // Claimed a batch at a time (on Postgres with SKIP LOCKED: processes recovering at once
        // split the work), each claim a run of its own; a run mostly waits on the database or a
        // model, so a few go at once.
        loop {
            if cancel.is_cancelled() || self.inner.detached.is_cancelled() {
                return Ok(ran);
            }
            let owners: Vec<Uuid> = (0..RECOVER_AT_ONCE).map(|_| Uuid::now_v7()).collect();
            let lease = self.lease(Uuid::nil());
            let claimed = self
                .inner
                .store
                .claim_runnable(&owners, lease.until, lease.now)
                .await?;
            if claimed.is_empty() {
                return Ok(ran);
            }
            // A thread run once in this pass and runnable again is left to the next pass (a
            // thread that cannot make progress must not spin here).
            let (fresh, again): (Vec<_>, Vec<_>) =
                claimed.into_iter().partition(|(id, _)| seen.insert(*id));
            for (id, run) in again {
                self.inner.store.release(id, run).await?;
            }
            if fresh.is_empty() {
                return Ok(ran);
            }
            let outcomes: Vec<Result<(), RunError>> = futures::stream::iter(fresh)
                .map(|(id, run)| async move {
                    match self
                        .drive(id, run, &EventSink::discard(), cancel, false)
                        .await
                    {
                        Ok(_)
                        | Err(RunError::Store(StoreError::LeaseLost(_)))
                        | Err(RunError::ShuttingDown) => Ok(()),
                        Err(e) => Err(e),
                    }
                })
                .buffer_unordered(RECOVER_AT_ONCE)
                .collect()
                .await;
            // A thread that fails is logged and left to a later pass; the others go on.
            for outcome in outcomes {
                match outcome {
                    Ok(()) => ran += 1,
                    Err(e) => tracing::warn!(error = %e, "recovering a thread failed"),
                }
            }
        }
    }

    /// Runs thread `id`, whose lease `run` holds, in the background.
    pub(super) fn drive_in_background(&self, id: ThreadId, run: Uuid) {
        let rt = self.clone();
        self.spawn_background(async move {
            let (sink, cancel) = (EventSink::discard(), CancellationToken::new());
            if let Err(e) = rt.drive(id, run, &sink, &cancel, false).await {
                tracing::warn!(thread = %id, error = %e, "a background run failed");
            }
        });
    }

    /// Queues `message` on `t` and tries its lease: the run id when this caller must run it.
    pub(super) async fn queue_claiming(
        &self,
        t: &Thread,
        message: NewQueued,
    ) -> Result<Option<Uuid>, RunError> {
        let run = Uuid::now_v7();
        let claimed = self
            .inner
            .store
            .enqueue(t.id, message, Some(self.lease(run)), self.now())
            .await?;
        Ok(claimed.then_some(run))
    }

    /// Queues a ready-made message on `t` and, if no run holds it, runs it (a child's result
    /// for its parent).
    pub(super) async fn deliver_queued(
        &self,
        t: &Thread,
        message: NewQueued,
    ) -> Result<Option<Settled>, RunError> {
        let Some(run) = self.queue_claiming(t, message).await? else {
            return Ok(None);
        };
        let (sink, cancel) = (EventSink::discard(), CancellationToken::new());
        self.drive(t.id, run, &sink, &cancel, false).await.map(Some)
    }

    /// Runs `work` in the background, counted so that [`Runtime::quiesce`] can wait for it.
    pub(super) fn spawn_background(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        self.inner.background.started();
        let rt = self.clone();
        let work = Box::pin(async move {
            work.await;
            rt.inner.background.ended();
        });
        if let Some(work) = self.inner.background.hold(work) {
            tokio::spawn(work);
        }
    }

    /// Waits until no background run of this runtime is in flight (subagents started without
    /// blocking, and the parent runs their results trigger): for tests and graceful shutdown.
    pub async fn quiesce(&self) {
        /// Holds background work back again when the wait ends, or is dropped.
        struct Open<'a>(&'a super::runs::Background);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                self.0.close();
            }
        }
        let background = &self.inner.background;
        let held = background.open();
        let _open = Open(background);
        for work in held {
            tokio::spawn(work);
        }
        loop {
            // Registered before the check, so a run finishing in between still wakes us.
            let notified = self.inner.background.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.background.idle() {
                return;
            }
            notified.await;
        }
    }
}

/// The queued message for `text` delivered to a thread of `agent` by `origin`: a parent's to
/// its child is always `user` (the child's side A acts on it); anyone else's is the agent's
/// human side's (see `decide::inbound`).
fn inbound(
    agent: &duet_spec::AgentDef,
    origin: &Origin<'_>,
    text: &str,
    message_id: Option<&str>,
    images: &[crate::types::ImageRef],
    trace: Option<String>,
) -> NewQueued {
    let mut message = if origin.parent.is_some() {
        NewQueued::new(Role::User, SideId::B, text)
    } else {
        decide::inbound(agent, text)
    };
    message.message_id = message_id.map(str::to_owned);
    message.author = origin.author.or(origin.principal).map(str::to_owned);
    message.images = images.to_vec();
    message.trace = trace;
    message
}
