//! A definition's code called with a [`ThreadState`]: [`CodeHandler`] (a TS handler takes a
//! side's turns exactly as a Rust one: the same [`Handler`] port), [`CodeEffect`] (an effect's
//! body, the [`Effect`] port), [`call_tool`] (a TS tool's `execute`) and [`call_endpoint`] (a
//! thread endpoint's handler). What the code wrote is in the state's buffered writes; its
//! failure is the delivery's error, the effect attempt's, the tool's error result or the
//! endpoint's 500.

use async_trait::async_trait;
use duet_spec::{CodeConfig, CodeRef};
use serde_json::Value;

use super::fetch::Fetches;
use super::read_only::ReadOnly;
use super::shape;
use super::state::StateBridge;
use crate::code::{CodeCall, CodeError, CodeLimits, Hosting};
use crate::effect::Effect;
use crate::handler::{Handler, HandlerError, ThreadState};
use crate::tools::ToolResult;
use crate::types::Message;

/// The limits a definition's code runs under: the project's, with the definition's own.
pub(crate) fn limits(config: &CodeConfig, code: &CodeRef) -> CodeLimits {
    let project = CodeLimits {
        deadline: std::time::Duration::from_millis(config.timeout_ms),
        memory: usize::try_from(config.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
    };
    project.with(code.timeout_ms, code.memory_mb)
}

/// `call` run by `hosting` with `state` as its ThreadState.
async fn run_with_state(
    hosting: &Hosting,
    what: &str,
    call: CodeCall,
    state: &mut ThreadState<'_>,
    can_stop: bool,
) -> Result<Value, CodeError> {
    let host = hosting.host(what)?.clone();
    let before = state.writes.clone();
    let mut bridge = StateBridge {
        fetches: Fetches::new(hosting.fetcher.clone(), &call.thread, &call.call),
        state: &mut *state,
        can_stop,
    };
    let first = host.call(call.clone(), &mut bridge).await;
    let outcome = match first {
        // The host died under the call (a `node` process killed): it is restarted, and the
        // call made once more, from what was written before it.
        Err(e) if e.retryable() => {
            tracing::warn!(thread = %call.thread, call = %call.call, error = %e.message, "the code host died during a call; it is made again");
            state.writes = before;
            let mut bridge = StateBridge {
                fetches: Fetches::new(hosting.fetcher.clone(), &call.thread, &call.call),
                state,
                can_stop,
            };
            host.call(call, &mut bridge).await
        }
        other => other,
    };
    outcome.map(shape::settled)
}

/// The call of `file`'s function at `code` with `args`, for `state`'s thread.
fn call_of(
    state: &ThreadState<'_>,
    file: &str,
    code: &CodeRef,
    args: Vec<Value>,
    call: String,
    running: bool,
) -> CodeCall {
    let execution = running.then(|| shape::execution(state.thread, state.side));
    CodeCall {
        file: file.to_owned(),
        entry: code.entry.clone(),
        args,
        state_at: 0,
        state: shape::state(state.thread, state.arguments, execution),
        thread: state.thread.key.clone(),
        call,
        limits: limits(&state.project.code, code),
    }
}

/// A failure in words, for a journal or a model: the message, and the stack when the host has
/// one.
pub(crate) fn described(e: &CodeError) -> String {
    match &e.stack {
        Some(stack) if !stack.trim().is_empty() => format!("{}\n{}", e.message, stack.trim()),
        _ => e.message.clone(),
    }
}

/// A TS handler (`defineHandler({ execute })`): `execute(state, message)` per delivery.
pub(crate) struct CodeHandler {
    pub(crate) hosting: Hosting,
    pub(crate) file: String,
    pub(crate) code: CodeRef,
}

#[async_trait]
impl Handler for CodeHandler {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let call = call_of(
            state,
            &self.file,
            &self.code,
            vec![shape::message(message)],
            format!("handler:{}", message.seq),
            true,
        );
        run_with_state(&self.hosting, "this handler", call, state, true)
            .await
            .map(|_| ())
            .map_err(|e| HandlerError::new(described(&e)))
    }
}

/// A TS effect's body (`defineEffect(description, args, handler)`): `handler(state, args)`.
pub(crate) struct CodeEffect {
    pub(crate) hosting: Hosting,
    pub(crate) file: String,
    pub(crate) code: CodeRef,
    /// The timer that fired it: every attempt of one scheduled run is one call id (so a retry's
    /// `fetch`es carry the same idempotency keys).
    pub(crate) timer: String,
}

#[async_trait]
impl Effect for CodeEffect {
    async fn run(&self, state: &mut ThreadState<'_>, args: &Value) -> Result<(), HandlerError> {
        let call = call_of(
            state,
            &self.file,
            &self.code,
            vec![args.clone()],
            format!("effect:{}", self.timer),
            false,
        );
        run_with_state(&self.hosting, "this effect", call, state, false)
            .await
            .map(|_| ())
            .map_err(|e| HandlerError::new(described(&e)))
    }
}

/// Runs TS tool `name`'s `execute(state, args)` (its file `file`) for call `call_id`: its
/// result as the spec's shapes allow (a string, `{status, result}`, `{status: 'error', error}`),
/// a failure as an error result the model sees.
pub(crate) async fn call_tool(
    hosting: &Hosting,
    state: &mut ThreadState<'_>,
    (name, file, code): (&str, &str, &CodeRef),
    args: &Value,
    call_id: &str,
) -> ToolResult {
    let call = call_of(
        state,
        file,
        code,
        vec![args.clone()],
        format!("tool:{call_id}"),
        true,
    );
    match run_with_state(hosting, &format!("tool `{name}`"), call, state, false).await {
        Ok(value) => {
            let result = shape::tool_result_of(&value);
            state
                .returned_files(result, shape::returned_files(&value))
                .await
        }
        Err(e) => ToolResult::error(format!("Failed to execute tool `{name}`: {}", e.message)),
    }
}

/// Runs thread endpoint `file`'s `handler(req, state, params)` (`state` second, as the spec
/// has it) for `request` (its `$request`) with the route's `params`, as call `call_id`: what
/// it returned (a `$response`, or any JSON), and whether the code tried a write `read_only`
/// refused. The state is at rest (`execution` is `null`), and `stopSession` is refused: an
/// endpoint runs outside any turn. With `read_only` (why the thread may not be written), every
/// `state` member that writes throws that instead.
pub(crate) async fn call_endpoint(
    hosting: &Hosting,
    state: &mut ThreadState<'_>,
    (file, code): (&str, &CodeRef),
    (request, params): (Value, Value),
    (call_id, read_only): (String, Option<&str>),
) -> (Result<Value, CodeError>, bool) {
    let mut call = call_of(state, file, code, vec![request, params], call_id, false);
    call.state_at = 1;
    let host = match hosting.host("this thread endpoint") {
        Ok(host) => host.clone(),
        Err(e) => return (Err(e), false),
    };
    let mut bridge = StateBridge {
        fetches: Fetches::new(hosting.fetcher.clone(), &call.thread, &call.call),
        state,
        can_stop: false,
    };
    match read_only {
        None => (
            host.call(call, &mut bridge).await.map(shape::settled),
            false,
        ),
        Some(why) => {
            let mut reads = ReadOnly::new(&mut bridge, why);
            let result = host.call(call, &mut reads).await.map(shape::settled);
            (result, reads.refused)
        }
    }
}
