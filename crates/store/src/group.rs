//! Group commit: one committer task takes every commit waiting (on SQLite, every write that
//! delivers a message too) and hands them to the backend's [`Writer`] as one group, written in
//! one transaction by one call, so a crossing to the driver and a log flush are shared by all of
//! them. Each caller still learns its own outcome: a commit
//! whose lease check fails writes nothing and fails only its own run, and should one commit's
//! statement fail the whole transaction, each commit is written again alone so that only it
//! fails.
//!
//! A commit handed to the committer is written whatever becomes of its caller: a run dropped
//! meanwhile never leaves a connection inside a transaction.

use std::future::Future;
use std::sync::Arc;

use duet_runtime::{Commit, CommitOutcome, StoreError, Thread};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// The most commits written together.
const MAX_GROUP: usize = 64;

/// The most bind arguments in one group (SQLite allows 32,766).
const MAX_ARGS: usize = 30_000;

/// What a commit's thread update reported: its lease owner after the write (`None`: released)
/// and how many messages wait; `None` when the lease was lost and nothing was written.
pub(crate) type Returned = Option<(Option<String>, i64)>;

/// What a commit of `t` did, from what its thread update reported.
pub(crate) fn outcome(
    returned: Returned,
    t: &Thread,
    commit: &Commit,
) -> Result<CommitOutcome, StoreError> {
    let Some((owner, waiting)) = returned else {
        return Err(StoreError::LeaseLost(t.id));
    };
    Ok(if owner.is_none() {
        CommitOutcome::Settled
    } else {
        CommitOutcome::Committed {
            queued: waiting > 0 || !commit.enqueue.is_empty(),
        }
    })
}

/// A backend's way of writing a group of commits.
pub(crate) trait Writer: Send + Sync + 'static {
    /// One job (a commit; on SQLite also a delivery), as the backend writes it.
    type Job: Send + Sync + 'static;

    /// What writing one job tells its caller.
    type Output: Send + 'static;

    /// How many bind arguments `job` takes.
    fn size(job: &Self::Job) -> usize;

    /// Writes `jobs` in one transaction, all or nothing; what each one told, in order (for a
    /// commit, what its thread update reported). A written job is announced on the change feed
    /// before this returns.
    fn write(
        &self,
        jobs: &[&Self::Job],
    ) -> impl Future<Output = Result<Vec<Self::Output>, Failure>> + Send;
}

/// Why a group was not written.
pub(crate) struct Failure {
    pub(crate) error: StoreError,
    /// The database refused a statement and the transaction rolled back: nothing was written,
    /// and each commit may go again alone. Otherwise (the connection failed) whether the group
    /// committed is unknown, and no commit of it is tried again.
    pub(crate) rejected: bool,
}

impl Failure {
    /// A sqlx error, refused by the database or not.
    pub(crate) fn of(e: sqlx::Error) -> Self {
        Failure {
            rejected: e.as_database_error().is_some(),
            error: crate::db_error(e),
        }
    }

    /// A failure of the store's own (a row it cannot read back): nothing to try again.
    pub(crate) fn store(error: StoreError) -> Self {
        Failure {
            error,
            rejected: false,
        }
    }
}

struct Queued<J, O> {
    job: J,
    done: oneshot::Sender<Result<O, StoreError>>,
}

/// The committer's mailbox, for jobs `J` that tell `O`. It stops when every clone is gone.
pub(crate) struct Committer<J, O>(mpsc::UnboundedSender<Queued<J, O>>);

impl<J, O> Clone for Committer<J, O> {
    fn clone(&self) -> Self {
        Committer(self.0.clone())
    }
}

impl<J, O> std::fmt::Debug for Committer<J, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Committer")
    }
}

impl<J: Send + Sync + 'static, O: Send + 'static> Committer<J, O> {
    /// Starts the committer on `writer`, with at most `in_flight` groups being written at once
    /// (while they all are, the commits that come meanwhile wait and form the next group).
    pub(crate) fn start<W: Writer<Job = J, Output = O>>(writer: W, in_flight: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx, Arc::new(writer), in_flight.max(1)));
        Committer(tx)
    }

    /// Writes `job` with whatever else is waiting; what it told.
    pub(crate) async fn commit(&self, job: J) -> Result<O, StoreError> {
        let (done, outcome) = oneshot::channel();
        let gone = || StoreError::Conflict("the store's committer has stopped".into());
        self.0.send(Queued { job, done }).map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }
}

async fn run<W: Writer>(
    mut rx: mpsc::UnboundedReceiver<Queued<W::Job, W::Output>>,
    writer: Arc<W>,
    in_flight: usize,
) {
    let slots = Arc::new(Semaphore::new(in_flight));
    let mut held: Option<Queued<W::Job, W::Output>> = None;
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match held.take() {
            Some(q) => q,
            None => match rx.recv().await {
                Some(q) => q,
                None => return,
            },
        };
        let mut args = W::size(&first.job);
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            let Ok(next) = rx.try_recv() else { break };
            let size = W::size(&next.job);
            if args + size > MAX_ARGS {
                held = Some(next);
                break;
            }
            args += size;
            group.push(next);
        }
        if in_flight == 1 {
            write(&*writer, group).await;
            drop(slot);
        } else {
            let writer = writer.clone();
            tokio::spawn(async move {
                write(&*writer, group).await;
                drop(slot);
            });
        }
    }
}

/// Writes `group` and tells each caller its outcome.
async fn write<W: Writer>(writer: &W, group: Vec<Queued<W::Job, W::Output>>) {
    if group.len() > 1 {
        let jobs: Vec<&W::Job> = group.iter().map(|q| &q.job).collect();
        match writer.write(&jobs).await {
            Ok(returned) => {
                for (q, r) in group.into_iter().zip(returned) {
                    let _ = q.done.send(Ok(r));
                }
                return;
            }
            // One commit failed them all (rolled back): each alone, so only it fails.
            Err(Failure { rejected: true, .. }) => {}
            // Whether the group committed is unknown: each caller is told so, none writes again
            // (a commit written twice would fail on its own journal rows, or read as a lost
            // lease).
            Err(Failure { error, .. }) => {
                let message = format!("a group commit's outcome is unknown: {error}");
                for q in group {
                    let _ = q.done.send(Err(StoreError::backend(std::io::Error::other(
                        message.clone(),
                    ))));
                }
                return;
            }
        }
    }
    for q in group {
        let written = writer
            .write(&[&q.job])
            .await
            .map_err(|f| f.error)
            .and_then(|mut r| {
                r.pop().ok_or_else(|| {
                    StoreError::backend(std::io::Error::other("a write told nothing of its job"))
                })
            });
        let _ = q.done.send(written);
    }
}
