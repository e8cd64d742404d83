//! [`JsEvaluator`]: duet-spec's [`Evaluator`] on QuickJS. A batch of definition files shares one
//! engine (zod loads once per project, as in Node), with a deadline per file and a memory
//! ceiling; a file that runs past either is stopped, reported, and the engine replaced.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use duet_spec::{EvalError, EvalErrorKind, Evaluated, Evaluator, SourceFile};
use rquickjs::{CatchResultExt, CaughtError, Context, Module, Object, Runtime, Value};

use crate::describe;
use crate::resolve::{Failure, Load, Modules, Resolve, Shared, TARGET};

/// How a project's definitions are evaluated.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// The project's folder: helpers outside the listing and `node_modules` are found from
    /// here. `None` evaluates only the files handed in (no packages).
    pub root: Option<PathBuf>,
    /// More folders searched for packages, as Node's `NODE_PATH`.
    pub node_path: Vec<PathBuf>,
    /// The most one file's evaluation may take, its imports included.
    pub deadline: Duration,
    /// The engine's memory ceiling, in bytes.
    pub memory_limit: usize,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            root: None,
            node_path: Vec::new(),
            deadline: Duration::from_secs(2),
            memory_limit: 64 << 20,
        }
    }
}

/// Evaluates `.ts`/`.js` definitions in an embedded QuickJS: no file system, network, process
/// or timers reach the code; imports are the project's own files, `@standardagents/*` and zod.
#[derive(Clone, Debug, Default)]
pub struct JsEvaluator {
    options: EvalOptions,
}

/// The evaluation thread's stack: QuickJS recurses on the native stack, and its own limit
/// ([`JS_STACK`]) must sit well inside it whatever thread called.
const THREAD_STACK: usize = 64 << 20;
const JS_STACK: usize = 8 << 20;

impl JsEvaluator {
    /// An evaluator with `options`.
    pub fn new(options: EvalOptions) -> Self {
        JsEvaluator { options }
    }
}

impl Evaluator for JsEvaluator {
    fn evaluate(
        &self,
        files: &[SourceFile],
        targets: &[&str],
    ) -> Vec<Result<Evaluated, EvalError>> {
        let failed = |message: String| {
            targets
                .iter()
                .map(|_| Err(error(EvalErrorKind::Thrown, message.clone())))
                .collect()
        };
        let outcome = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("duet-js-eval".into())
                .stack_size(THREAD_STACK)
                .spawn_scoped(scope, || self.evaluate_here(files, targets))
                .map(|h| h.join())
        });
        match outcome {
            Ok(Ok(results)) => results,
            Ok(Err(_)) => failed("the JavaScript engine failed while evaluating".into()),
            Err(e) => failed(format!("cannot start the JavaScript engine: {e}")),
        }
    }
}

impl JsEvaluator {
    fn evaluate_here(
        &self,
        files: &[SourceFile],
        targets: &[&str],
    ) -> Vec<Result<Evaluated, EvalError>> {
        let root = self
            .options
            .root
            .as_ref()
            .and_then(|r| std::fs::canonicalize(r).ok());
        let modules = Rc::new(RefCell::new(Modules {
            root,
            node_path: self.options.node_path.clone(),
            files: files
                .iter()
                .filter_map(|f| Some((f.path.clone(), String::from_utf8(f.bytes.clone()).ok()?)))
                .collect(),
            ..Modules::default()
        }));
        let mut engine: Option<Engine> = None;
        let mut out = Vec::with_capacity(targets.len());
        for target in targets {
            let e = match &engine {
                Some(e) => e,
                None => match Engine::new(&self.options, modules.clone()) {
                    Ok(e) => engine.insert(e),
                    Err(message) => {
                        out.push(Err(error(EvalErrorKind::Thrown, message)));
                        continue;
                    }
                },
            };
            let result = e.run(target, &modules);
            // A file stopped at a limit may leave the engine in any state: the next gets a new one.
            if matches!(&result, Err(err) if err.kind == EvalErrorKind::Limit) {
                engine = None;
            }
            out.push(result);
        }
        out
    }
}

struct Engine {
    runtime: Runtime,
    context: Context,
    deadline: Rc<Cell<Instant>>,
    options: EvalOptions,
}

impl Engine {
    fn new(options: &EvalOptions, modules: Shared) -> Result<Engine, String> {
        let start = |e: rquickjs::Error| format!("cannot start the JavaScript engine: {e}");
        let runtime = Runtime::new().map_err(start)?;
        runtime.set_memory_limit(options.memory_limit);
        runtime.set_max_stack_size(JS_STACK);
        let deadline = Rc::new(Cell::new(Instant::now() + options.deadline));
        let until = deadline.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || Instant::now() > until.get())));
        runtime.set_loader(Resolve(modules.clone()), Load(modules));
        let context = Context::full(&runtime).map_err(start)?;
        context
            .with(|ctx| ctx.eval::<(), _>(include_str!("modules/describe.js")))
            .map_err(start)?;
        Ok(Engine {
            runtime,
            context,
            deadline,
            options: options.clone(),
        })
    }

    fn run(&self, target: &str, modules: &Shared) -> Result<Evaluated, EvalError> {
        self.deadline.set(Instant::now() + self.options.deadline);
        modules.borrow_mut().failures.clear();
        let before: Vec<String> = modules.borrow().loaded.iter().cloned().collect();
        let described = self.context.with(|ctx| {
            let result = (|| {
                let promise = Module::import(&ctx, format!("{TARGET}{target}"))?;
                let namespace: Object = promise.finish()?;
                let default: Value = namespace.get("default")?;
                let describe: rquickjs::Function = ctx.globals().get("__duetDescribe")?;
                describe.call::<_, String>((default,))
            })()
            .catch(&ctx);
            result.map_err(|caught| Thrown::from(&caught))
        });
        // Decided outside `with`: the runtime is locked inside it (its memory usage is not).
        let described = described.map_err(|thrown| self.failure(target, &thrown, modules))?;
        let mut imports: Vec<String> = modules
            .borrow()
            .loaded
            .iter()
            .filter(|l| l.as_str() != target && !before.contains(l))
            .cloned()
            .collect();
        imports.sort();
        describe::read(&described, imports)
    }

    /// What went wrong, from what the engine threw.
    fn failure(&self, target: &str, thrown: &Thrown, modules: &Shared) -> EvalError {
        let m = modules.borrow();
        if let Some(f) = m.failures.first() {
            return import_failure(target, f, &m);
        }
        let past_deadline = Instant::now() > self.deadline.get();
        let usage = self.runtime.memory_usage();
        let Thrown {
            message,
            stack,
            allocation,
        } = thrown;
        let out_of_memory = message.contains("out of memory")
            || *allocation
            || usage.malloc_size
                >= i64::try_from(self.options.memory_limit).unwrap_or(i64::MAX) - (1 << 20);
        if past_deadline || message == "interrupted" {
            let mut e = error(
                EvalErrorKind::Limit,
                format!(
                    "evaluating the file took longer than {} ms and was stopped",
                    self.options.deadline.as_millis()
                ),
            );
            e.hint = Some(
                "a definition computes its value and returns: look for a loop that never ends"
                    .into(),
            );
            return e;
        }
        if out_of_memory {
            let mut e = error(
                EvalErrorKind::Limit,
                format!(
                    "evaluating the file needed more than {} MiB and was stopped",
                    self.options.memory_limit >> 20
                ),
            );
            e.hint = Some(
                "a definition is a small value: look for an allocation that grows without bound"
                    .into(),
            );
            return e;
        }
        let mut e = error(
            EvalErrorKind::Thrown,
            format!("evaluating the file threw: {message}"),
        );
        if let Some((file, line, column)) = first_project_frame(stack, &m) {
            e.at = Some((line, column));
            if file != target {
                e.file = Some(file);
            }
        }
        e
    }
}

/// What the engine threw, read while the context was held.
struct Thrown {
    message: String,
    stack: String,
    /// The engine could not allocate.
    allocation: bool,
}

impl Thrown {
    fn from(caught: &CaughtError<'_>) -> Thrown {
        let (message, stack) = match caught {
            CaughtError::Exception(e) => (
                e.message().unwrap_or_default(),
                e.stack().unwrap_or_default(),
            ),
            CaughtError::Value(v) => (thrown_value(v), String::new()),
            CaughtError::Error(e) => (e.to_string(), String::new()),
        };
        Thrown {
            message,
            stack,
            allocation: matches!(caught, CaughtError::Error(rquickjs::Error::Allocation)),
        }
    }
}

/// An import refused, reported at the line that wrote it.
fn import_failure(target: &str, f: &Failure, m: &Modules) -> EvalError {
    let mut e = error(f.kind, f.message.clone());
    e.hint = f.hint.clone();
    let from = f.from.strip_prefix(TARGET).unwrap_or(&f.from);
    if let Some(text) = m
        .files
        .get(from)
        .or_else(|| m.stripped.get(from).map(|s| &s.code))
    {
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

/// The first stack frame in a project file, its position mapped to the file as written.
fn first_project_frame(stack: &str, m: &Modules) -> Option<(String, u32, u32)> {
    stack.lines().find_map(|line| {
        let frame = line.trim().strip_prefix("at ")?;
        let place = match (frame.rfind('('), frame.ends_with(')')) {
            (Some(i), true) => &frame[i + 1..frame.len() - 1],
            _ => frame,
        };
        let mut parts = place.rsplitn(3, ':');
        let (column, line, file) = (parts.next()?, parts.next()?, parts.next()?);
        let (line, column) = (line.parse().ok()?, column.parse().ok()?);
        let stripped = m.stripped.get(file)?;
        let (line, column) = stripped.original(line, column);
        Some((file.to_owned(), line, column))
    })
}

fn thrown_value(v: &Value<'_>) -> String {
    if let Some(s) = v.as_string().and_then(|s| s.to_string().ok()) {
        return s;
    }
    v.ctx()
        .json_stringify(v.clone())
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| format!("a {}", v.type_name()))
}

pub(crate) fn error(kind: EvalErrorKind, message: String) -> EvalError {
    EvalError {
        kind,
        message,
        file: None,
        at: None,
        path: None,
        hint: None,
    }
}
