//! [`JsEvaluator`]: duet-spec's [`Evaluator`] on QuickJS. A batch of definition files shares one
//! engine (zod loads once per project, as in Node), with a deadline per file and a memory
//! ceiling; a file that runs past either is stopped and reported, and after any file that
//! failed the engine is replaced.

use std::cell::RefCell;
use std::rc::Rc;

use duet_spec::{EvalError, EvalErrorKind, Evaluated, Evaluator, SourceFile};

use crate::engine::Engine;
use crate::failure::error;
use crate::options::{EvalOptions, THREAD_STACK};
use crate::resolve::Modules;

/// Evaluates `.ts`/`.js` definitions in an embedded QuickJS: no file system, network, process
/// or timers reach the code; imports are the project's own files, `@standardagents/*` and zod.
#[derive(Clone, Debug, Default)]
pub struct JsEvaluator {
    options: EvalOptions,
}

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
            let mut faulted = false;
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
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                e.with_default(target, &modules, |ctx, default| {
                    let describe: rquickjs::Function = ctx.globals().get("__duetDescribe")?;
                    describe.call::<_, String>((default,))
                })
            }))
            .unwrap_or_else(|_| {
                faulted = true;
                let mut e = error(
                    EvalErrorKind::Thrown,
                    "the JavaScript engine failed while evaluating the file".into(),
                );
                e.hint = Some("this is a fault of duet's: please report it with the file".into());
                Err(e)
            })
            .and_then(|(described, imports)| crate::describe::read(&described, imports));
            // A file that failed may leave the engine in any state (stopped mid-way, a module
            // record that failed to link, which QuickJS must not be asked to import again): the
            // next file gets a new engine. Failures are rare; a new engine costs a zod reload.
            if faulted || result.is_err() {
                engine = None;
            }
            out.push(result);
        }
        out
    }
}
