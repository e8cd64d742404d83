//! Why a delivery or a run could not proceed.

use crate::store::{FirstAnswer, StoreError};
use crate::types::Park;

/// Why a delivery or run could not proceed. Problems *inside* a run (a model error, a bad tool
/// call, a failing handler) are not errors: they are journaled and end in a stop reason.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The store refused or failed (a lost lease, a thread of another agent, a database error).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The project defines no agent of that name.
    #[error("no agent named `{0}` in the project")]
    UnknownAgent(String),
    /// No such thread (named by its key or its id).
    #[error("no thread `{0}`")]
    UnknownThread(String),
    /// The thread was terminated: nothing more runs on it.
    #[error("thread `{0}` is terminated")]
    Terminated(String),
    /// The thread belongs to another principal.
    #[error("thread `{0}` belongs to another principal")]
    Forbidden(String),
    /// Another runner holds the thread and the delivery refuses to queue (`invoke`).
    #[error("session busy: a run is already in flight for `{0}`")]
    Busy(String),
    /// The runtime is shutting down ([`crate::Runtime::shutdown`]): nothing new is accepted,
    /// and a run stops at its next commit, its lease given back for another process to continue.
    #[error("the runtime is shutting down")]
    ShuttingDown,
    /// The thread needs what the project's definitions no longer have (its agent, the human
    /// side its question waits for, its acting prompt): nothing was written, and the thread
    /// stays where it is until the definitions fit it again.
    #[error(
        "thread `{key}` cannot go on: {why} (the definitions changed under it; `duet threads --stale` lists such threads)"
    )]
    Stale {
        /// The thread's key.
        key: String,
        /// What it needs that is gone.
        why: String,
    },
    /// The delivery answers a park the thread has moved on from (someone answered first):
    /// nothing was written.
    #[error("{}", already_answered(key, park, first.as_ref()))]
    AlreadyAnswered {
        /// The thread's key.
        key: String,
        /// The park the delivery named.
        park: Park,
        /// The answer that won, when the store still has it.
        first: Option<FirstAnswer>,
    },
    /// No pending tool call of the thread has that approval id.
    #[error("thread `{key}` has no pending tool call with approval id {approval}")]
    UnknownApproval {
        /// The thread's key.
        key: String,
        /// The approval id named (the seq of an `approval_requested` record).
        approval: i64,
    },
    /// A decision that cannot be taken (not offered, an edit the tool's schema refuses, the
    /// definitions changed under it): nothing was written.
    #[error("decision on approval {approval} of thread `{key}` refused: {why}")]
    DecisionRefused {
        /// The thread's key.
        key: String,
        /// The approval id.
        approval: i64,
        /// Why.
        why: crate::approval::Refusal,
    },
    /// Someone decided first: nothing was written.
    #[error(
        "approval {approval} of thread `{key}` was already decided: {} by {} at {}",
        first.decision.as_str(),
        first.author.as_deref().unwrap_or("an unnamed caller"),
        first.at
    )]
    DecisionTaken {
        /// The thread's key.
        key: String,
        /// The approval id.
        approval: i64,
        /// The decision that won.
        first: Box<crate::approval::Decided>,
    },
    /// A delivery names an attachment that is not a file of the thread (or not a path at
    /// all): nothing was written.
    #[error("attachment `{path}` of thread `{key}`: {why}")]
    Attachment {
        /// The thread's key.
        key: String,
        /// The path as the delivery gave it.
        path: String,
        /// Why it is refused (the file API's words).
        why: String,
    },
}

impl RunError {
    /// A short, stable name of what went wrong (a span's `error.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Store(StoreError::LeaseLost(_)) => "lease_lost",
            RunError::Store(_) => "store",
            RunError::UnknownAgent(_) => "unknown_agent",
            RunError::UnknownThread(_) => "unknown_thread",
            RunError::Terminated(_) => "terminated",
            RunError::Forbidden(_) => "forbidden",
            RunError::Busy(_) => "busy",
            RunError::ShuttingDown => "shutting_down",
            RunError::AlreadyAnswered { .. } => "already_answered",
            RunError::Stale { .. } => "stale_definition",
            RunError::UnknownApproval { .. } => crate::codes::UNKNOWN_APPROVAL,
            RunError::DecisionRefused {
                why: crate::approval::Refusal::Stale(_),
                ..
            } => "stale_definition",
            RunError::DecisionRefused { .. } => crate::codes::INVALID_DECISION,
            RunError::DecisionTaken { .. } => "already_answered",
            RunError::Attachment { .. } => "invalid_attachment",
        }
    }
}

fn already_answered(key: &str, park: &Park, first: Option<&FirstAnswer>) -> String {
    match first {
        Some(f) => format!(
            "`{key}` was already answered at park {park}: {:?} (at {} ms)",
            f.content, f.at
        ),
        None => format!("`{key}` is no longer at park {park}: it was answered or moved on"),
    }
}
