//! [`JsEvaluator`]: duet-spec's [`Evaluator`] on QuickJS. A batch of definition files shares one
//! engine (zod loads once per project, as in Node), with a deadline per file and a memory
//! ceiling; a file that runs past either is stopped and reported, and after any file that
//! failed the engine is replaced.

use duet_spec::{EvalError, EvalErrorKind, Evaluated, Evaluator, SourceFile};

use crate::engine::Engines;
use crate::failure::error;
use crate::options::{EvalOptions, THREAD_STACK};

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
        let mut engines = Engines::new(&self.options, files.iter().cloned());
        let mut out = Vec::with_capacity(targets.len());
        for target in targets {
            let result = engines
                .run(target, |ctx, default| {
                    let describe: rquickjs::Function = ctx.globals().get("__duetDescribe")?;
                    describe.call::<_, String>((default,))
                })
                .and_then(|(described, imports)| crate::describe::read(&described, imports));
            out.push(result);
        }
        out
    }
}
