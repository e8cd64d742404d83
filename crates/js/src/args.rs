//! [`ZodArgs`]: the runtime's [`CodeSchemas`] port on QuickJS. A `.ts` tool's call is checked
//! with the tool's own zod `args` (`safeParse`), so defaults, coercions and refinements behave as
//! the author wrote them, and zod's messages reach the model.
//!
//! One thread owns one engine (QuickJS is single-threaded) with the project's tool modules
//! loaded on first use; calls queue to it. A call past the deadline or the memory ceiling is
//! refused with that reason, and the engine is replaced.

use std::collections::BTreeMap;
use std::sync::mpsc;

use async_trait::async_trait;
use duet_runtime::CodeSchemas;
use duet_spec::{Project, SourceFile};
use tokio::sync::oneshot;

use crate::engine::Engines;
use crate::options::{EvalOptions, THREAD_STACK};

type Reply = Result<serde_json::Value, Vec<String>>;

struct Job {
    file: String,
    args: String,
    reply: oneshot::Sender<Reply>,
}

/// Checks `.ts` tools' arguments with their zod schemas, in an engine of its own.
pub struct ZodArgs {
    jobs: mpsc::Sender<Job>,
    /// Each zod-typed tool's definition file, by tool name.
    files: BTreeMap<String, String>,
}

impl ZodArgs {
    /// A checker for `project`'s tools whose `args` are zod schemas, their files read once,
    /// now, from the project's folder `options.root` (call it right after loading); `None` when
    /// the project has none.
    pub fn new(project: &Project, options: EvalOptions) -> Option<ZodArgs> {
        let files: BTreeMap<String, String> = project
            .tools
            .iter()
            .filter(|(_, t)| t.def.args_zod)
            .map(|(name, t)| (name.clone(), t.source.file.clone()))
            .collect();
        if files.is_empty() {
            return None;
        }
        // The project's files as they are now, read once: a tool file edited later (or an
        // engine replaced later) does not change what checks its calls.
        let snapshot = options
            .root
            .as_deref()
            .and_then(|root| duet_spec::fs::read_project(root).ok())
            .map(|listing| listing.files)
            .unwrap_or_default();
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("duet-js-args".into())
            .stack_size(THREAD_STACK)
            .spawn(move || serve(&options, snapshot, &queue))
            .ok()?;
        Some(ZodArgs { jobs, files })
    }
}

#[async_trait]
impl CodeSchemas for ZodArgs {
    async fn parse(&self, tool: &str, args: &serde_json::Value) -> Reply {
        let Some(file) = self.files.get(tool) else {
            return Err(vec![format!("tool `{tool}` has no zod schema")]);
        };
        let (reply, answer) = oneshot::channel();
        let job = Job {
            file: file.clone(),
            args: args.to_string(),
            reply,
        };
        let gone = || vec!["the JavaScript engine that checks arguments has stopped".to_owned()];
        self.jobs.send(job).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// The engine's thread: one job at a time until every [`ZodArgs`] is dropped.
fn serve(options: &EvalOptions, files: Vec<SourceFile>, queue: &mpsc::Receiver<Job>) {
    let mut engines = Engines::new(options, files);
    while let Ok(job) = queue.recv() {
        let outcome = engines.run(&job.file, |ctx, default| {
            let parse: rquickjs::Function = ctx.globals().get("__duetParse")?;
            parse.call::<_, String>((default, job.args.as_str()))
        });
        let reply = match outcome {
            Ok((text, _)) => read(&text),
            Err(error) => Err(vec![format!(
                "the tool's zod schema could not be run: {}",
                error.message
            )]),
        };
        // The caller may have gone (its step was cancelled): nothing to tell.
        let _ = job.reply.send(reply);
    }
}

fn read(text: &str) -> Reply {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| vec![format!("zod's answer could not be read: {e}")])?;
    if json.get("ok").and_then(serde_json::Value::as_bool) == Some(true) {
        return Ok(json.get("data").cloned().unwrap_or(serde_json::Value::Null));
    }
    Err(json
        .get("problems")
        .and_then(serde_json::Value::as_array)
        .map(|p| {
            p.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}
