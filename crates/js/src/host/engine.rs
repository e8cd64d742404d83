//! One engine of the code host: a runtime and a warm context with the glue installed and the
//! project's modules loaded as calls need them. [`HostEngine::call`] runs one call under its
//! deadline and memory ceiling and says whether the engine is still fit for the next.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use duet_runtime::{CodeCall, CodeError};
use rquickjs::context::EvalOptions;
use rquickjs::{CatchResultExt, Context, Ctx, Function, Module, Object, Persistent};
use tokio::sync::mpsc::UnboundedSender;

use super::bridge::{self, Current, Link, OnWait};
use super::job::Event;
use super::outcome::{self, Facts, Ran, Raw};
use super::rejections::Rejections;
use crate::resolve::{Modules, Shared, TARGET};
use crate::sandbox::{self, Watch};
use crate::thrown::Thrown;

/// The glue, in the order it is evaluated.
const WEB: [(&str, &str); 3] = [
    ("duet:host/text.js", include_str!("../modules/text.js")),
    ("duet:host/url.js", include_str!("../modules/url.js")),
    ("duet:host/fetch.js", include_str!("../modules/fetch.js")),
];
const HOST: (&str, &str) = ("duet:host/host.js", include_str!("../modules/host.js"));
/// The most the glue may take to install, and the heap it may use.
const GLUE_DEADLINE: Duration = Duration::from_secs(5);
const GLUE_MEMORY: usize = 64 << 20;
/// How often (in calls) an engine's heap is measured when no module was loaded.
const CHECK_EVERY: u32 = 64;

pub(crate) struct HostEngine {
    // Held values go before the context: they must be released while it lives (see `Drop`).
    run: Option<Persistent<Function<'static>>>,
    rejections: Rc<Rejections>,
    current: Current,
    modules: Shared,
    watch: Rc<Watch>,
    context: Context,
    /// The heap after the last call that loaded modules: what the engine holds for the project.
    resident: usize,
    load_deadline: Duration,
    calls: u32,
}

impl HostEngine {
    /// A new engine resolving modules as `modules` says, loading a file within `load_deadline`.
    pub(crate) fn new(
        modules: Modules,
        load_deadline: Duration,
        on_wait: &OnWait,
    ) -> Result<HostEngine, String> {
        let modules = Rc::new(RefCell::new(modules));
        let (context, watch) = sandbox::start(GLUE_MEMORY, modules.clone())?;
        watch.arm(Instant::now() + GLUE_DEADLINE, None);
        let rejections = Rc::new(Rejections::default());
        let tracker = rejections.clone();
        context
            .runtime()
            .set_host_promise_rejection_tracker(Some(Box::new(
                move |ctx, promise, reason, handled| tracker.track(&ctx, promise, reason, handled),
            )));
        let current = Current::default();
        let run = context.with(|ctx| {
            install(&ctx, &current, &watch, on_wait)
                .catch(&ctx)
                .map(|run| Persistent::save(&ctx, run))
                .map_err(|e| format!("cannot start the JavaScript engine: {e}"))
        })?;
        let resident = heap(&context);
        Ok(HostEngine {
            run: Some(run),
            rejections,
            current,
            modules,
            watch,
            context,
            resident,
            load_deadline,
            calls: 0,
        })
    }

    /// Runs `call`, its requests to the bridge sent on `events`: the outcome, and whether this
    /// engine may run another call (it may not after a failure that can leave it unsound, or
    /// when calls have left it holding more than half a call's memory besides the project's
    /// modules).
    ///
    /// The call may allocate `limits.memory` beyond what the engine held after it last loaded
    /// modules. Measuring the heap walks it (~90 µs with zod loaded, forty times a warm call),
    /// so it is measured after a call that loaded modules and every [`CHECK_EVERY`] calls.
    pub(crate) fn call(
        &mut self,
        call: &CodeCall,
        events: &UnboundedSender<Event>,
    ) -> (Result<serde_json::Value, CodeError>, bool) {
        self.calls += 1;
        let token = f64::from(self.calls);
        *self.current.borrow_mut() = Some(Link::new(token, events.clone(), call));
        let gone = events.clone();
        let loading = self.load_deadline.max(call.limits.deadline);
        self.watch.arm(
            Instant::now() + loading,
            Some(Box::new(move || gone.is_closed())),
        );
        let ceiling = self.resident.saturating_add(call.limits.memory);
        self.context.runtime().set_memory_limit(ceiling);
        self.modules.borrow_mut().failures.clear();
        let modules_before = self.modules.borrow().stripped.len();

        let raw = self.context.with(|ctx| self.enter(&ctx, token, call));
        let unhandled = self.context.with(|ctx| self.rejections.take(&ctx));
        let waited_for = self
            .current
            .borrow_mut()
            .take()
            .and_then(|link| link.waited_for);
        let out_of_memory = raw.failure().is_some_and(|(message, allocation)| {
            sandbox::out_of_memory(&self.context, message, allocation, ceiling)
        });
        let stop = self.watch.stopped();
        self.watch.arm(Instant::now(), None);
        let facts = Facts {
            file: &call.file,
            limits: call.limits,
            load_deadline: loading,
            stop,
            waited_for,
            out_of_memory,
            unhandled,
        };
        // A file that did not load, or a glue that could not start the call, leaves the engine
        // in no state to trust (a module record that failed to link cannot be imported again).
        let loaded = matches!(raw, Raw::Ran(Ran { load: None, .. }));
        let outcome = outcome::settle(raw, facts, &self.modules.borrow());
        let sound = loaded && stop.is_none() && !out_of_memory && self.fits(call, modules_before);
        (outcome, sound)
    }

    /// After a sound call: whether the engine's heap is still what the project's modules need,
    /// give or take half a call's memory (a module that keeps what each call makes grows it).
    fn fits(&mut self, call: &CodeCall, modules_before: usize) -> bool {
        if self.modules.borrow().stripped.len() != modules_before {
            self.resident = heap(&self.context);
            return true;
        }
        if !self.calls.is_multiple_of(CHECK_EVERY) {
            return true;
        }
        heap(&self.context).saturating_sub(self.resident) <= call.limits.memory / 2
    }

    /// Imports the call's file, starts its function and runs the engine's jobs until it has
    /// settled and what it left queued has run.
    fn enter<'js>(&self, ctx: &Ctx<'js>, token: f64, call: &CodeCall) -> Raw {
        let namespace = Module::import(ctx, format!("{TARGET}{}", call.file))
            .and_then(|p| p.finish::<Object>())
            .catch(ctx);
        let namespace = match namespace {
            Ok(n) => n,
            Err(e) => return Raw::Import(Thrown::from(&e)),
        };
        // What loading the module rejected is the module's, not this call's; its deadline starts
        // now.
        self.rejections.clear(ctx);
        self.watch.extend(Instant::now() + call.limits.deadline);
        let started = self.start(ctx, token, call, namespace).catch(ctx);
        let progress = match started {
            Ok(b) => b,
            Err(e) => return Raw::Broke(Thrown::from(&e)),
        };
        let settled = |b: &Object<'js>| b.get::<_, bool>("done").unwrap_or(true);
        while !settled(&progress) && self.watch.stopped().is_none() && ctx.execute_pending_job() {}
        while self.watch.stopped().is_none() && ctx.execute_pending_job() {}
        Raw::Ran(read(&progress))
    }

    /// Calls the glue's `run` for `call`: the box its outcome will be put on.
    fn start<'js>(
        &self,
        ctx: &Ctx<'js>,
        token: f64,
        call: &CodeCall,
        namespace: Object<'js>,
    ) -> rquickjs::Result<Object<'js>> {
        let run = match &self.run {
            Some(run) => run.clone().restore(ctx)?,
            None => return Err(rquickjs::Error::Unknown),
        };
        run.call((
            token,
            namespace,
            call.file.as_str(),
            json(&call.entry),
            json(&call.args),
            json(&call.state),
            // At most the arguments' length: `state` goes there among them.
            call.state_at.min(call.args.len()) as f64,
        ))
    }
}

impl Drop for HostEngine {
    fn drop(&mut self) {
        // A held value released after its runtime is gone would be freed into freed memory.
        let run = self.run.take();
        self.context.with(|ctx| {
            if let Some(run) = run {
                let _ = run.restore(&ctx);
            }
            self.rejections.clear(&ctx);
        });
    }
}

/// Evaluates the glue into `ctx`: the `run` function it returns.
fn install<'js>(
    ctx: &Ctx<'js>,
    current: &Current,
    watch: &Rc<Watch>,
    on_wait: &OnWait,
) -> rquickjs::Result<Function<'js>> {
    let eval = |(name, source): (&str, &str)| {
        let mut options = EvalOptions::default();
        options.filename = Some(name.to_owned());
        options.strict = true;
        ctx.eval_with_options::<Function, _>(source, options)
    };
    let web = Object::new(ctx.clone())?;
    for script in WEB {
        eval(script)?.call::<_, ()>((web.clone(),))?;
    }
    let (bridge, log) = bridge::functions(ctx, current, watch, on_wait)?;
    eval(HOST)?.call((web, bridge, log))
}

/// What the box held.
fn read(progress: &Object<'_>) -> Ran {
    let thrown = progress
        .get::<_, Option<Object>>("thrown")
        .ok()
        .flatten()
        .map(|t| {
            let text = |k: &str| {
                t.get::<_, Option<String>>(k)
                    .ok()
                    .flatten()
                    .unwrap_or_default()
            };
            (text("message"), text("stack"))
        });
    let details = progress
        .get::<_, Option<Object>>("thrown")
        .ok()
        .flatten()
        .and_then(|t| t.get::<_, Option<String>>("details").ok().flatten());
    Ran {
        ok: progress.get("ok").ok().flatten(),
        thrown,
        details,
        load: progress.get("load").ok().flatten(),
    }
}

/// The engine's heap, in bytes.
fn heap(context: &Context) -> usize {
    usize::try_from(context.runtime().memory_usage().malloc_size).unwrap_or(0)
}

/// `value` as JSON text for the glue (what serde_json cannot write is null).
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}
