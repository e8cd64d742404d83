//! The code-host port: a definition's own functions — a TS tool's `execute`, a hook's, a
//! handler's, an effect's body, a thread endpoint — run by a host that knows JavaScript. The
//! runtime knows none: a crate that does implements [`CodeHost`] (`duet-js`: an embedded engine,
//! or a `node` process) and the composition root registers it
//! ([`crate::RuntimeBuilder::code_host`]).
//!
//! A call names the project file whose default export holds the function and the path to it in
//! that export; its arguments besides `state` are JSON (`state` first, but for a thread
//! endpoint's `(req, state, params)`: [`CodeCall::state_at`]). The code's `state` (the spec's
//! ThreadState) is the host's: what it shows without asking is [`CodeCall::state`], and every
//! method the code calls on it (and `fetch`, and `console`) comes back to the runtime through the
//! [`Bridge`] the caller hands in, by the spec's member name (`getValue`, `setValue`,
//! `injectMessage`…) with its arguments as JSON. The bridge is what gives code its authority;
//! a host gives it nothing else.
//!
//! Failures are the call's ([`CodeError`]): a throw, the deadline, the memory ceiling, a host
//! that died. The caller makes each the tool's error result, the hook's failure, the delivery's
//! error or the endpoint's 500.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

mod fetch;
mod files;
pub(crate) mod hook;
mod read_only;
pub(crate) mod run;
mod shape;
pub(crate) mod state;

/// What one call of a definition's function needs.
#[derive(Clone, Debug)]
pub struct CodeCall {
    /// The project file whose default export holds the function (`agents/tools/lookup.ts`), as
    /// the project names it.
    pub file: String,
    /// The path to the function in the default export: `["execute"]` for a tool, hook or
    /// handler, `["handler"]` for an effect or a thread endpoint.
    pub entry: Vec<String>,
    /// The arguments besides `state`, as JSON. A thread endpoint's request is
    /// `{"$request": {method, url, headers: [[name, value]…], body}}` (body text, or base64 under
    /// `bodyBase64`), which the host makes a `Request`.
    pub args: Vec<serde_json::Value>,
    /// Where `state` goes among the arguments: the function is called with `args` and `state`
    /// inserted at this index. `0` (`fn(state, ...args)`) for a tool, hook, handler or effect;
    /// `1` for a thread endpoint, whose spec signature is `(req, state, params)`.
    pub state_at: usize,
    /// What `state` shows without asking: `threadId`, `agentId`, `arguments`, `execution`
    /// (`null` at rest)…, an object.
    pub state: serde_json::Value,
    /// The thread's key, for the host's logs.
    pub thread: String,
    /// This call's id, stable across a redone step (the tool call's id, the delivery's seq): the
    /// host's logs name it, and `fetch` derives its `Idempotency-Key` from it.
    pub call: String,
    /// The call's limits.
    pub limits: CodeLimits,
}

/// How long a call may run and how much memory it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeLimits {
    /// Wall time for the whole call, waits on the bridge included.
    pub deadline: Duration,
    /// The JavaScript heap's ceiling, in bytes (the embedded host; a `node` host has its own).
    pub memory: usize,
}

impl Default for CodeLimits {
    fn default() -> Self {
        CodeLimits {
            deadline: Duration::from_secs(30),
            memory: 64 << 20,
        }
    }
}

impl CodeLimits {
    /// These limits with a definition's overrides (`timeoutMs`, `memoryMb`), where it sets them.
    pub fn with(self, timeout_ms: Option<u64>, memory_mb: Option<u64>) -> CodeLimits {
        CodeLimits {
            deadline: timeout_ms.map_or(self.deadline, Duration::from_millis),
            memory: memory_mb
                .and_then(|mb| usize::try_from(mb.saturating_mul(1 << 20)).ok())
                .unwrap_or(self.memory),
        }
    }
}

/// Why a call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeErrorKind {
    /// The code threw, or its promise rejected.
    Thrown,
    /// It ran past its deadline and was stopped.
    Deadline,
    /// It needed more memory than its ceiling and was stopped.
    Memory,
    /// The host could not load the file or find the function (a definition the host sees
    /// differently from the runtime: not the code's fault).
    Load,
    /// The host died during the call (a `node` process that crashed or was killed): it is
    /// restarted, and the call may be retried.
    Crashed,
}

/// A call that failed: its kind and the message for the model, the journal or the response.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CodeError {
    /// What happened.
    pub kind: CodeErrorKind,
    /// In words, with the code's own error message where it threw one.
    pub message: String,
    /// The code's stack, mapped to the files as written, where the host has one.
    pub stack: Option<String>,
    /// What was thrown, when it was an object: its own enumerable properties as JSON (a
    /// `prefilter_llm_history` hook blocks with `{block: true}`).
    pub details: Option<Box<serde_json::Value>>,
}

impl CodeError {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: CodeErrorKind, message: impl Into<String>) -> Self {
        CodeError {
            kind,
            message: message.into(),
            stack: None,
            details: None,
        }
    }

    /// Whether the same call may succeed if made again (the host crashed under it).
    pub fn retryable(&self) -> bool {
        self.kind == CodeErrorKind::Crashed
    }
}

/// What code asks of the runtime during a call: one of `state`'s methods by its spec name, with
/// its arguments as JSON (`{"key": …}`), or `fetch`, or `console`. `Err` is thrown in the code
/// as an `Error` with that message.
#[async_trait]
pub trait Bridge: Send {
    /// Answers `method` with `params`.
    async fn call(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, String>;
}

/// Runs a project's functions.
#[async_trait]
pub trait CodeHost: Send + Sync + 'static {
    /// Runs `call`, answering what its code asks through `bridge`; the function's return value as
    /// JSON (`undefined` is `{"$undefined": true}`, told from `null`; a `Response` is
    /// `{"$response": {status, headers, body}}`).
    async fn call(
        &self,
        call: CodeCall,
        bridge: &mut dyn Bridge,
    ) -> Result<serde_json::Value, CodeError>;
}

/// An outbound HTTP request code made with `fetch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    /// `GET`, `POST`…, upper case.
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Headers in order, as given.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
    /// Sent as `Idempotency-Key` on a request that is not `GET`/`HEAD` unless the code set one:
    /// stable across a redone step.
    pub idempotency_key: String,
}

/// The answer to a [`FetchRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    /// The status code.
    pub status: u16,
    /// The headers, names lower case.
    pub headers: Vec<(String, String)>,
    /// The body, at most the fetcher's cap.
    pub body: Vec<u8>,
    /// The URL answered (after redirects).
    pub url: String,
}

/// Makes code's `fetch` requests: the runtime knows no HTTP, so a crate that does implements
/// this (`duet-tools`: the project's allowlist of hosts, the private-address guard, a timeout
/// and a size cap) and the composition root registers it ([`crate::RuntimeBuilder::fetcher`]).
#[async_trait]
pub trait Fetcher: Send + Sync + 'static {
    /// Sends `request`; `Err` is the reason it was refused or failed (code sees a `TypeError`
    /// with it, as `fetch` throws for a network error).
    async fn fetch(&self, request: FetchRequest) -> Result<FetchResponse, String>;
}

/// What the code host and the HTTP client of a runtime are, for the code it runs.
#[derive(Clone, Default)]
pub(crate) struct Hosting {
    pub(crate) host: Option<Arc<dyn CodeHost>>,
    pub(crate) fetcher: Option<Arc<dyn Fetcher>>,
}

impl Hosting {
    /// The host, or the error of a runtime that has none.
    // Once per call, never in a loop: the error's size costs nothing worth boxing it for.
    #[allow(clippy::result_large_err)]
    pub(crate) fn host(&self, what: &str) -> Result<&Arc<dyn CodeHost>, CodeError> {
        self.host.as_ref().ok_or_else(|| {
            CodeError::new(
                CodeErrorKind::Load,
                format!(
                    "{what} is a function in the project's code, and this runtime has no code host to run it: register one with `RuntimeBuilder::code_host` (`duet::compose` registers duet's)"
                ),
            )
        })
    }
}
