//! The server's services: what a request does, apart from how it came (REST, the inbox, A2A,
//! the control plane). Each returns a typed result or a typed [`ServiceError`] — never an HTTP
//! response — and checks the caller's visibility where it reads; the route modules and pages
//! are adapters that turn requests into calls and results into responses.
//!
//! - `deliveries`: one inbound message to a thread — accepted, queued or a duplicate, the run
//!   started as a tracked task, and (when asked) waited for until the thread settles.
//! - `approvals`: a parked question by its id, what waits for the caller, the chain of parents,
//!   the question with its conversation, the answers parks got, and the answer — the one
//!   function the inbox and `POST /approvals/{id}` both call.
//! - `approvers`: who may see and decide a tool call waiting for approval, on whoever's thread.
//! - `threads`: a thread by its key as the caller sees it (the one visibility check), listings,
//!   a thread with its parent, termination.
//! - `messages`: a thread's journal a page at a time; whether a message id was delivered.
//! - `endpoints`: a request to a thread's endpoint (`agents/api/`), served by the runtime.
//! - `files`: a thread's files — the thread an upload goes to, uploads streamed and written
//!   once whole, listings, a file and its bytes, removal — through `Runtime::files()`.
//! - `events`: what a follower (an SSE stream, A2A's, the inbox's) reads as it wakes.
//! - `tasks`: a thread's sessions as A2A tasks read them.
//! - `timers`: a thread's timers (its scheduled effects, its deadlines), cancelling one, and
//!   the counts `/metrics` shows.
//! - `health`: the readiness probe's ping and the metrics' counts.
//! - `keys`, `push`: the server's own tables (`duet_server_store`) — API keys and sign-ins, A2A
//!   push configs and their outbox.

pub(crate) mod approvals;
pub(crate) mod approvers;
pub(crate) mod deliveries;
pub(crate) mod endpoints;
pub(crate) mod events;
pub(crate) mod files;
pub(crate) mod health;
pub(crate) mod keys;
pub(crate) mod messages;
pub(crate) mod notify;
pub(crate) mod push;
pub(crate) mod steps;
pub(crate) mod tasks;
pub(crate) mod threads;
pub(crate) mod timers;
pub(crate) mod waiting;

use duet_runtime::files::FileError;
use duet_runtime::{FirstAnswer, Park, RunError, StoreError};

use crate::problem::Problem;

/// Why a service refused.
#[derive(Debug)]
pub(crate) enum ServiceError {
    /// A value the caller gave is not one (a thread key that is empty, ...): refused before
    /// anything was read or written.
    Invalid(crate::input::Fault),
    /// Nothing by that name that the caller may see (what it may not see is not there).
    NotFound(String),
    /// The delivery named a park that another answer settled first; nothing was written.
    AlreadyAnswered {
        /// The thread's key as the caller names it.
        key: String,
        /// The park the delivery named.
        park: Park,
        /// The answer that won, when the store still has it.
        first: Option<FirstAnswer>,
    },
    /// The caller sees the thread but may not decide this tool call: its `approval.approvers`
    /// name others (`approvers`: as recorded); nothing was written.
    NotAnApprover { id: String, approvers: String },
    /// What the runtime refused for the thread the caller names `key`.
    Run { error: RunError, key: String },
    /// The thing named is not in a state that allows this (`code`: the problem's, e.g.
    /// `not_failed`); nothing was written.
    Conflict { code: &'static str, detail: String },
    /// The thread filesystem refused (a bad path, nothing there, the wrong kind, a limit);
    /// nothing was written.
    File(FileError),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        ServiceError::Store(e)
    }
}

impl From<FileError> for ServiceError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Store(e) => ServiceError::Store(e),
            e => ServiceError::File(e),
        }
    }
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceError::Invalid(fault) => f.write_str(&fault.sentence()),
            ServiceError::NotFound(what) => f.write_str(what),
            ServiceError::AlreadyAnswered { key, park, .. } => {
                write!(f, "`{key}` is no longer waiting at {park}")
            }
            ServiceError::NotAnApprover { id, approvers } => write!(
                f,
                "approval `{id}` is decided by {approvers}, and this key is none of them; nothing was written"
            ),
            ServiceError::Run { error, .. } => error.fmt(f),
            ServiceError::Conflict { detail, .. } => f.write_str(detail),
            ServiceError::File(e) => e.fmt(f),
            ServiceError::Store(e) => e.fmt(f),
        }
    }
}

impl ServiceError {
    /// A runtime refusal about the thread the caller names `key`.
    pub(crate) fn run(error: RunError, key: &str) -> ServiceError {
        match error {
            RunError::AlreadyAnswered { park, first, .. } => ServiceError::AlreadyAnswered {
                key: key.to_owned(),
                park,
                first,
            },
            // The first decision's author by name (`bob`), as every view of a decision shows it.
            RunError::DecisionTaken {
                key: k,
                approval,
                mut first,
            } => {
                first.author = first
                    .author
                    .as_deref()
                    .map(crate::auth::Caller::author_name);
                ServiceError::Run {
                    error: RunError::DecisionTaken {
                        key: k,
                        approval,
                        first,
                    },
                    key: key.to_owned(),
                }
            }
            error => ServiceError::Run {
                error,
                key: key.to_owned(),
            },
        }
    }
}

impl From<ServiceError> for Problem {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Invalid(fault) => fault.into(),
            ServiceError::NotFound(what) => Problem::not_found(what),
            ServiceError::AlreadyAnswered { key, park, first } => {
                let mut problem = Problem::new(
                    axum::http::StatusCode::CONFLICT,
                    "already_answered",
                    format!("`{key}` is no longer waiting at {park}: another answer came first"),
                );
                if let Some(first) = &first {
                    problem = problem.with("answer", crate::views::first_answer(first));
                }
                problem
            }
            e @ ServiceError::NotAnApprover { .. } => Problem::new(
                axum::http::StatusCode::FORBIDDEN,
                "not_an_approver",
                e.to_string(),
            ),
            ServiceError::Run { error, key } => crate::problem::run_error(error, &key),
            ServiceError::Conflict { code, detail } => {
                Problem::new(axum::http::StatusCode::CONFLICT, code, detail)
            }
            ServiceError::File(e) => crate::problem::file_error(e),
            ServiceError::Store(e) => e.into(),
        }
    }
}
