//! What every QuickJS engine of this crate is made with: a runtime with a memory ceiling, a
//! stack limit, the project's module loader and a [`Watch`] its interrupt handler reads (the
//! deadline, and whether the caller is still there).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use rquickjs::{Context, Runtime};

use crate::options::JS_STACK;
use crate::resolve::{Load, Resolve, Shared};

/// Why the interrupt handler stopped the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The deadline passed.
    Deadline,
    /// The one waiting for the result went away.
    Cancelled,
}

/// What the interrupt handler reads, and what it found.
pub(crate) struct Watch {
    deadline: Cell<Instant>,
    stop: Cell<Option<Stop>>,
    cancelled: RefCell<Option<Box<dyn Fn() -> bool>>>,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            deadline: Cell::new(Instant::now()),
            stop: Cell::new(None),
            cancelled: RefCell::new(None),
        }
    }

    /// Code runs until `deadline` unless `cancelled` says the caller went away.
    pub(crate) fn arm(&self, deadline: Instant, cancelled: Option<Box<dyn Fn() -> bool>>) {
        self.deadline.set(deadline);
        self.stop.set(None);
        *self.cancelled.borrow_mut() = cancelled;
    }

    /// Moves the deadline to `deadline`, keeping what else is armed.
    pub(crate) fn extend(&self, deadline: Instant) {
        self.deadline.set(deadline);
    }

    /// The deadline armed last.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline.get()
    }

    /// Why the code was stopped, if it was.
    pub(crate) fn stopped(&self) -> Option<Stop> {
        self.stop.get()
    }

    /// Stops the code at its next check, for `why` (a wait outside the engine found it).
    pub(crate) fn stop(&self, why: Stop) {
        if self.stop.get().is_none() {
            self.stop.set(Some(why));
        }
    }

    /// The interrupt handler's question: stop now? Once stopped, always.
    fn check(&self) -> bool {
        if self.stop.get().is_some() {
            return true;
        }
        if Instant::now() > self.deadline.get() {
            self.stop.set(Some(Stop::Deadline));
        } else if self.cancelled.borrow().as_ref().is_some_and(|c| c()) {
            self.stop.set(Some(Stop::Cancelled));
        }
        self.stop.get().is_some()
    }
}

/// A runtime with its limits and the project's loader, one context with every intrinsic, and
/// the [`Watch`] its interrupt handler reads (past its deadline until armed: arm it before
/// running anything).
pub(crate) fn start(memory_limit: usize, modules: Shared) -> Result<(Context, Rc<Watch>), String> {
    let start = |e: rquickjs::Error| format!("cannot start the JavaScript engine: {e}");
    let runtime = Runtime::new().map_err(start)?;
    runtime.set_memory_limit(memory_limit);
    runtime.set_max_stack_size(JS_STACK);
    let watch = Rc::new(Watch::new());
    let w = watch.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || w.check())));
    runtime.set_loader(Resolve(modules.clone()), Load(modules));
    let context = Context::full(&runtime).map_err(start)?;
    Ok((context, watch))
}

/// Whether an engine whose code failed with `message` ran out of memory: QuickJS says so, an
/// allocation failed, or the heap is within a MiB of its `ceiling` (an allocation that failed
/// can surface as anything, even a promise that never settles).
pub(crate) fn out_of_memory(
    context: &Context,
    message: &str,
    allocation: bool,
    ceiling: usize,
) -> bool {
    let used = context.runtime().memory_usage().malloc_size;
    let ceiling = i64::try_from(ceiling).unwrap_or(i64::MAX);
    message.contains("out of memory") || allocation || used >= ceiling.saturating_sub(1 << 20)
}
