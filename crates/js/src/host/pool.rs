//! The engine threads and the queue they take calls from. `workers` threads are kept; when a
//! call is queued while every thread is busy and some are only waiting on the runtime (a call's
//! bridge request may itself need a call: a TS tool whose `invokeTool` runs another TS tool),
//! an extra thread is started, up to `max_workers`, and leaves once idle for [`EXTRA_IDLE`].
//! Without that, nested calls deeper than the pool would wait for a thread that waits for them.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use duet_runtime::{CodeError, CodeErrorKind};

use super::job::Job;
use super::options::HostOptions;
use super::worker::Worker;
use crate::options::THREAD_STACK;
use crate::resolve::Modules;

/// How long an extra thread waits for a call before it leaves.
const EXTRA_IDLE: Duration = Duration::from_secs(10);

/// The host's handle on its threads: dropping it lets them finish and leave.
pub(crate) struct Pool {
    crew: Arc<Crew>,
}

/// What the threads share.
pub(crate) struct Crew {
    state: Mutex<State>,
    ready: Condvar,
    /// The project as each new engine resolves it.
    project: Mutex<Modules>,
    load_deadline: Duration,
    max: usize,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting for a call.
    free: usize,
    /// Threads whose call waits on the bridge.
    waiting: usize,
    threads: usize,
    closed: bool,
}

impl Pool {
    /// `options.workers` threads, each resolving modules as `modules` says.
    pub(crate) fn new(options: &HostOptions, modules: Modules) -> io::Result<Pool> {
        let workers = options.workers.max(1);
        let crew = Arc::new(Crew {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            project: Mutex::new(modules),
            load_deadline: options.load_deadline,
            max: options.max_workers.max(workers),
        });
        let mut state = crew.lock();
        for _ in 0..workers {
            if let Err(e) = crew.spawn(&mut state, false) {
                // The threads started so far leave.
                state.closed = true;
                crew.ready.notify_all();
                return Err(e);
            }
        }
        drop(state);
        Ok(Pool { crew })
    }

    /// Queues `job` for the next free thread.
    pub(crate) fn submit(&self, job: Job) -> Result<(), CodeError> {
        let mut state = self.crew.lock();
        if state.closed {
            return Err(CodeError::new(
                CodeErrorKind::Crashed,
                "the JavaScript engines have stopped",
            ));
        }
        state.jobs.push_back(job);
        self.crew.ready.notify_one();
        self.crew.grow(&mut state);
        Ok(())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.crew.lock().closed = true;
        self.crew.ready.notify_all();
    }
}

impl Crew {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A thread's call starts (`true`) or stops (`false`) waiting on the bridge.
    pub(crate) fn waiting(self: &Arc<Crew>, starts: bool) {
        let mut state = self.lock();
        if starts {
            state.waiting += 1;
            self.grow(&mut state);
        } else {
            state.waiting = state.waiting.saturating_sub(1);
        }
    }

    /// An extra thread, when calls are queued, no thread is free, some only wait on the bridge
    /// and the cap allows.
    fn grow(self: &Arc<Crew>, state: &mut State) {
        let stuck = !state.jobs.is_empty() && state.free == 0 && state.waiting > 0;
        if stuck && state.threads < self.max {
            // A thread that cannot be started leaves the call queued for the next free one.
            let _ = self.spawn(state, true);
        }
    }

    fn spawn(self: &Arc<Crew>, state: &mut State, extra: bool) -> io::Result<()> {
        let modules = self
            .project
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .fresh();
        let crew = self.clone();
        let n = state.threads;
        std::thread::Builder::new()
            .name(format!("duet-js-host-{n}"))
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let waits = crew.clone();
                let on_wait: super::bridge::OnWait =
                    std::rc::Rc::new(move |starts| waits.waiting(starts));
                let worker = Worker::new(modules, crew.load_deadline, on_wait);
                serve(&crew, worker, extra);
            })?;
        state.threads += 1;
        state.free += 1;
        Ok(())
    }
}

/// One thread's loop: the next job, until the host is dropped (or, for an extra thread, until
/// none came for a while).
fn serve(crew: &Arc<Crew>, mut worker: Worker, extra: bool) {
    loop {
        let job = {
            let mut state = crew.lock();
            loop {
                if let Some(job) = state.jobs.pop_front() {
                    state.free -= 1;
                    break job;
                }
                if state.closed {
                    state.free -= 1;
                    state.threads -= 1;
                    return;
                }
                if extra {
                    let (next, waited) = crew
                        .ready
                        .wait_timeout(state, EXTRA_IDLE)
                        .unwrap_or_else(PoisonError::into_inner);
                    state = next;
                    if waited.timed_out() && state.jobs.is_empty() {
                        state.free -= 1;
                        state.threads -= 1;
                        return;
                    }
                } else {
                    state = crew
                        .ready
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        };
        worker.run(job);
        crew.lock().free += 1;
    }
}
