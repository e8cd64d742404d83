//! The engine threads: a fixed number, each taking the next call from one shared queue, until
//! the host is dropped.

use std::io;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};

use duet_runtime::{CodeCall, CodeError, CodeErrorKind};
use tokio::sync::mpsc::UnboundedSender;

use super::HostOptions;
use super::worker::Worker;
use crate::options::THREAD_STACK;
use crate::resolve::Modules;

/// One call for an engine thread, and where it reports.
pub(crate) struct Job {
    pub(crate) call: CodeCall,
    pub(crate) events: UnboundedSender<Event>,
}

/// What an engine thread tells the caller during a call.
pub(crate) enum Event {
    /// The code asks `method` of the bridge; the thread waits for the answer on `reply`.
    Bridge {
        method: String,
        params: serde_json::Value,
        reply: SyncSender<Result<serde_json::Value, String>>,
    },
    /// The call is over.
    Done(Result<serde_json::Value, CodeError>),
}

/// The queue the engine threads take calls from.
pub(crate) struct Pool {
    jobs: Sender<Job>,
}

impl Pool {
    /// `options.workers` threads, each resolving modules as `modules` says.
    pub(crate) fn new(options: &HostOptions, modules: Modules) -> io::Result<Pool> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for n in 0..options.workers.max(1) {
            let queue = queue.clone();
            let (modules, load_deadline) = (modules.fresh(), options.load_deadline);
            std::thread::Builder::new()
                .name(format!("duet-js-host-{n}"))
                .stack_size(THREAD_STACK)
                .spawn(move || serve(Worker::new(modules, load_deadline), &queue))?;
        }
        Ok(Pool { jobs })
    }

    /// Queues `job` for the next free thread.
    pub(crate) fn submit(&self, job: Job) -> Result<(), CodeError> {
        self.jobs.send(job).map_err(|_| {
            CodeError::new(
                CodeErrorKind::Crashed,
                "the JavaScript engines have stopped",
            )
        })
    }
}

/// One thread's loop: the next job, until the host is dropped.
fn serve(mut worker: Worker, queue: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held while waiting: the threads waiting behind it are idle too.
        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        match job {
            Ok(job) => worker.run(job),
            Err(_) => return,
        }
    }
}
