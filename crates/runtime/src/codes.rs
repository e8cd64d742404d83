//! The `failed.code` values duet emits. Each is documented where it is produced.
/// Another run holds the session; nothing was written. Retryable.
pub const SESSION_BUSY: &str = "session_busy";
/// The run was stopped on purpose (control-plane abort).
pub const ABORTED: &str = "aborted";
/// A step failed for good (a model error, an exhausted script, an unregistered handler).
pub const STEP_ERROR: &str = "step_error";
/// The session belongs to another principal.
pub const FORBIDDEN: &str = "forbidden";
/// The auth middleware refused the caller.
pub const UNAUTHORIZED: &str = "unauthorized";
/// The budget middleware stopped the run.
pub const BUDGET_EXCEEDED: &str = "budget_exceeded";
/// The agent is not in the project, or the thread belongs to another agent.
pub const UNKNOWN_AGENT: &str = "unknown_agent";
/// The thread was terminated.
pub const TERMINATED: &str = "terminated";
/// The prompt cannot be delivered (empty text).
pub const INVALID_PROMPT: &str = "invalid_prompt";
/// The store failed, or the run's lease was taken over. Retryable.
pub const INTERNAL: &str = "internal";
/// The delivery named a park the thread is no longer at: someone answered first. Nothing was
/// written; `details` says what answered and when.
pub const ALREADY_ANSWERED: &str = "already_answered";
/// The process is shutting down: the run stopped at its last commit and another process (or
/// this one, restarted) continues it. Retryable.
pub const SHUTTING_DOWN: &str = "shutting_down";
/// The thread needs what the project's definitions no longer have (its agent, the human side
/// its question waits for, its acting prompt). Nothing was written.
pub const STALE_DEFINITION: &str = "stale_definition";
/// A decision names no pending tool call of the thread (issue #29).
pub const UNKNOWN_APPROVAL: &str = "unknown_approval";
/// A decision that cannot be taken: not offered, incomplete, or an edit the tool's `args`
/// refuse (the field path named).
pub const INVALID_DECISION: &str = "invalid_decision";
