//! One QuickJS engine: a runtime with a memory ceiling and a deadline (an interrupt handler),
//! a context with no ambient authority, and the project's module loader. What it throws becomes
//! an [`EvalError`] at the line the author wrote.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use duet_spec::{EvalError, EvalErrorKind, SourceFile};
use rquickjs::{CatchResultExt, Context, Ctx, Module, Object, Value};

use crate::failure::error;
use crate::options::EvalOptions;
use crate::resolve::{Failure, Modules, Shared, TARGET};
use crate::sandbox::{self, Watch};
use crate::thrown::{Thrown, first_project_frame};

/// At most this many jobs a failed file left queued are run (and stopped) before the next file.
const MAX_LEFTOVER_JOBS: usize = 10_000;

struct Engine {
    context: Context,
    watch: Rc<Watch>,
    options: EvalOptions,
}

impl Engine {
    fn new(options: &EvalOptions, modules: Shared) -> Result<Engine, String> {
        let (context, watch) = sandbox::start(options.memory_limit, modules)?;
        watch.arm(Instant::now() + options.deadline, None);
        context
            .with(|ctx| {
                ctx.eval::<(), _>(include_str!("modules/describe.js"))?;
                ctx.eval::<(), _>(include_str!("modules/parse.js"))
            })
            .map_err(|e| format!("cannot start the JavaScript engine: {e}"))?;
        Ok(Engine {
            context,
            watch,
            options: options.clone(),
        })
    }

    /// Imports the project module `target` and gives `f` its default export, within the
    /// deadline; what `f` returned and the project files the import loaded besides `target`.
    fn with_default<R>(
        &self,
        target: &str,
        modules: &Shared,
        f: impl for<'js> FnOnce(&Ctx<'js>, Value<'js>) -> rquickjs::Result<R>,
    ) -> Result<(R, Vec<String>), EvalError> {
        // Jobs a failed file left queued are dropped: with the deadline already past, each is
        // stopped at its first step.
        self.watch.arm(Instant::now(), None);
        self.context.with(|ctx| {
            for _ in 0..MAX_LEFTOVER_JOBS {
                if !ctx.execute_pending_job() {
                    break;
                }
            }
        });
        self.watch.arm(Instant::now() + self.options.deadline, None);
        modules.borrow_mut().failures.clear();
        let before: Vec<String> = modules.borrow().loaded.iter().cloned().collect();
        let out = self.context.with(|ctx| {
            let result = (|| {
                let promise = Module::import(&ctx, format!("{TARGET}{target}"))?;
                let namespace: Object = promise.finish()?;
                let default: Value = namespace.get("default")?;
                let out = f(&ctx, default)?;
                // What the file left queued runs now, under its own deadline, not the next's.
                while Instant::now() <= self.watch.deadline() && ctx.execute_pending_job() {}
                Ok(out)
            })()
            .catch(&ctx);
            result.map_err(|caught| Thrown::from(&caught))
        });
        // Decided outside `with`: the runtime is in use inside it, and its memory usage tells
        // an allocation that failed (which may surface as a promise that never settles).
        let out = out.map_err(|thrown| self.failure(target, &thrown, modules))?;
        if Instant::now() > self.watch.deadline() {
            let mut e = error(
                EvalErrorKind::Limit,
                format!(
                    "the file's promises were still running after {} ms and were stopped",
                    self.options.deadline.as_millis()
                ),
            );
            e.hint = Some("a definition's promises must settle: look for a loop in a `.then` or an `async` function".into());
            return Err(e);
        }
        let imports: Vec<String> = modules
            .borrow()
            .loaded
            .iter()
            .filter(|l| l.as_str() != target && !before.contains(l))
            .cloned()
            .collect();
        Ok((out, imports))
    }

    /// What went wrong, from what the engine threw.
    fn failure(&self, target: &str, thrown: &Thrown, modules: &Shared) -> EvalError {
        let m = modules.borrow();
        let past_deadline = Instant::now() > self.watch.deadline();
        let Thrown {
            message,
            stack,
            allocation,
        } = thrown;
        let out_of_memory = sandbox::out_of_memory(
            &self.context,
            message,
            *allocation,
            self.options.memory_limit,
        );
        let stopped = if past_deadline || message == "interrupted" {
            Some((
                EvalErrorKind::Limit,
                format!(
                    "evaluating the file took longer than {} ms and was stopped",
                    self.options.deadline.as_millis()
                ),
                "a definition computes its value and returns: look for a loop that never ends",
            ))
        } else if out_of_memory {
            Some((
                EvalErrorKind::Limit,
                format!(
                    "evaluating the file needed more than {} MiB and was stopped",
                    self.options.memory_limit >> 20
                ),
                "a definition is a small value: look for an allocation that grows without bound",
            ))
        } else if message.contains("dead lock") {
            // QuickJS's words for a top-level `await` of a promise nothing settles.
            Some((
                EvalErrorKind::Thrown,
                "the file awaits a promise that never settles".to_owned(),
                "a definition's top-level `await` must finish: nothing runs later (no timers, no I/O)",
            ))
        } else {
            None
        };
        // An import refused is the failure only when it is what was thrown (code may have
        // caught one and failed otherwise later).
        let refused = m.failures.iter().find(|f| {
            message.contains("Error loading module")
                || (message.contains("Error resolving module")
                    && message.contains(&format!("'{}'", f.specifier)))
        });
        if let (None, Some(f)) = (&stopped, refused) {
            return import_failure(target, f, &m);
        }
        if let Some((kind, message, hint)) = stopped {
            let mut e = error(kind, message);
            e.hint = Some(hint.to_owned());
            // Where it was stopped, when the engine says (the loop's line, not the export's).
            locate(&mut e, target, stack, &m);
            return e;
        }
        let mut e = error(
            EvalErrorKind::Thrown,
            format!("evaluating the file threw: {message}"),
        );
        if let Some(name) = message
            .strip_suffix(" is not defined")
            .filter(|n| n.starts_with("define"))
        {
            e.hint = Some(format!(
                "import it: `import {{ {name} }} from '@standardagents/spec'`"
            ));
        }
        locate(&mut e, target, stack, &m);
        e
    }
}

/// The engine a batch of files (or the zod checks) runs in, made on first use and replaced after
/// any run that failed: a file stopped mid-way, or a module record that failed to link (which
/// QuickJS must not be asked to import again), leaves an engine in no state to reuse. Failures
/// are rare; a new engine costs a zod reload.
pub(crate) struct Engines {
    options: EvalOptions,
    modules: Shared,
    current: Option<Engine>,
}

impl Engines {
    /// Engines for `options`, reading the project's modules from `files` first (those that are
    /// text).
    pub(crate) fn new(
        options: &EvalOptions,
        files: impl IntoIterator<Item = SourceFile>,
    ) -> Engines {
        let files = files
            .into_iter()
            .filter_map(|f| Some((f.path, String::from_utf8(f.bytes).ok()?)))
            .collect();
        let modules = Rc::new(RefCell::new(Modules {
            root: options
                .root
                .as_ref()
                .and_then(|r| std::fs::canonicalize(r).ok()),
            node_path: options.node_path.clone(),
            files,
            stub_packages: options.stub_packages,
            ..Modules::default()
        }));
        Engines {
            options: options.clone(),
            modules,
            current: None,
        }
    }

    /// [`Engine::with_default`] in the current engine; a panic inside it is this run's error.
    pub(crate) fn run<R>(
        &mut self,
        target: &str,
        f: impl for<'js> FnOnce(&Ctx<'js>, Value<'js>) -> rquickjs::Result<R>,
    ) -> Result<(R, Vec<String>), EvalError> {
        let engine = match self.current.take() {
            Some(e) => e,
            None => Engine::new(&self.options, self.modules.clone())
                .map_err(|message| error(EvalErrorKind::Thrown, message))?,
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.with_default(target, &self.modules, f)
        }));
        match outcome {
            Ok(Ok(done)) => {
                self.current = Some(engine);
                Ok(done)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                let mut e = error(
                    EvalErrorKind::Thrown,
                    "the JavaScript engine failed while evaluating the file".into(),
                );
                e.hint = Some("this is a fault of duet's: please report it with the file".into());
                Err(e)
            }
        }
    }
}

/// An import refused, reported at the line that wrote it.
pub(crate) fn import_failure(target: &str, f: &Failure, m: &Modules) -> EvalError {
    let mut e = error(f.kind, f.message.clone());
    e.hint = f.hint.clone();
    let from = f.from.strip_prefix(TARGET).unwrap_or(&f.from);
    e.at = f.at;
    if let (None, false, Some(text)) = (
        e.at,
        f.specifier.is_empty(),
        m.files
            .get(from)
            .or_else(|| m.stripped.get(from).map(|s| &s.code)),
    ) {
        let found = ['"', '\'', '`']
            .iter()
            .find_map(|q| text.find(&format!("{q}{}{q}", f.specifier)));
        e.at = found.map(|offset| crate::strip::position(text, offset));
    }
    if from != target && !std::path::Path::new(from).is_absolute() && !from.starts_with('@') {
        e.file = Some(from.to_owned());
    }
    e
}

/// Places `e` at the first project frame of `stack`, in a helper's file when it is not `target`.
fn locate(e: &mut EvalError, target: &str, stack: &str, m: &Modules) {
    if let Some((file, line, column)) = first_project_frame(stack, m) {
        e.at = Some((line, column));
        if file != target {
            e.file = Some(file);
        }
    }
}
