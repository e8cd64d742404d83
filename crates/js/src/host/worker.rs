//! One engine thread's state: its engine, made when a call needs one and replaced after a call
//! that left it unfit, and how a job becomes the caller's outcome.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use duet_runtime::{CodeCall, CodeError, CodeErrorKind};
use tokio::sync::mpsc::UnboundedSender;

use super::bridge::OnWait;
use super::engine::HostEngine;
use super::job::{Event, Job};
use crate::resolve::Modules;

pub(crate) struct Worker {
    /// The project, as each new engine resolves it.
    project: Modules,
    load_deadline: Duration,
    /// Told when a call starts and stops waiting on the bridge.
    on_wait: OnWait,
    engine: Option<HostEngine>,
}

impl Worker {
    pub(crate) fn new(project: Modules, load_deadline: Duration, on_wait: OnWait) -> Worker {
        Worker {
            project,
            load_deadline,
            on_wait,
            engine: None,
        }
    }

    /// Runs `job` and tells its caller the outcome.
    pub(crate) fn run(&mut self, job: Job) {
        let Job { call, events } = job;
        // Its caller went away while it waited in the queue: nothing to run it for.
        if events.is_closed() {
            return;
        }
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| self.call(&call, &events)));
        let outcome = outcome.unwrap_or_else(|_| {
            self.engine = None;
            Err(CodeError::new(
                CodeErrorKind::Crashed,
                "the JavaScript engine failed during the call (a fault of duet's: please report it)",
            ))
        });
        // The caller may have gone since: nobody to tell.
        let _ = events.send(Event::Done(outcome));
    }

    fn call(
        &mut self,
        call: &CodeCall,
        events: &UnboundedSender<Event>,
    ) -> Result<serde_json::Value, CodeError> {
        let mut engine = match self.engine.take() {
            Some(engine) => engine,
            None => HostEngine::new(self.project.fresh(), self.load_deadline, &self.on_wait)
                .map_err(|message| CodeError::new(CodeErrorKind::Crashed, message))?,
        };
        let (outcome, sound) = engine.call(call, events);
        if sound {
            self.engine = Some(engine);
        }
        outcome
    }
}
