//! The duet session engine and the ports it needs.
//!
//! A [`Runtime`] runs the agents of one loaded [`duet_spec::Project`] on one [`Store`]:
//! [`Runtime::send`] delivers an inbound message to a thread (addressed by a caller-owned key)
//! and runs it until it settles — parked for a person, the session ended, or a run stop — while
//! holding the thread's lease. Every step commits before its [`AgentEvent`]s are sent.
//!
//! The embedding API is the Agent Handler protocol: [`Runtime::agent`] gives an [`Agent`] whose
//! [`Agent::invoke`]`(scope, prompt)` streams [`AgentEvent`]s and ends in exactly one `completed`
//! or `failed` ([`codes`] lists every `failed.code`); [`collect`] is the buffered form;
//! [`middleware`] layers (budget, tracing, auth) wrap any agent. A complete, runnable program:
//! `examples/embed.rs` (`cargo run -p duet --example embed`), on the facade crate `duet`, which
//! re-exports this one as `duet::runtime`.
//!
//! The engine knows no SQL, HTTP or provider wire format: persistence ([`Store`]), models
//! ([`Model`], [`Provider`]), builtin tools ([`Tool`]) and handlers ([`Handler`]) are ports that
//! other crates implement. Decisions (`decide`) are pure functions over a thread's state.

#![warn(missing_docs)]

mod agent;
pub mod approval;
mod children;
pub mod clock;
pub mod code;
pub mod codes;
mod context;
pub mod control;
pub mod deadline;
mod decide;
mod delivery;
mod effect;
mod endpoint;
mod engine;
mod error;
mod event;
mod fallback;
pub mod files;
mod handler;
pub mod hooks;
mod lifecycle;
pub mod middleware;
mod model;
mod model_files;
pub mod nul;
pub mod plan;
mod record;
mod schedule;
pub mod stale;
mod store;
pub mod telemetry;
#[cfg(feature = "test-util")]
pub mod testing;
mod thread_files;
mod tools;
pub mod transition;
mod types;

pub use agent::{
    Agent, AgentFailure, Collected, Principal, Prompt, PromptDecision, RuntimeAgent, Scope, collect,
};
pub use clock::{Clock, ManualClock, SystemClock};
// For `ThreadState::invoke_tool` of a `.ts` tool (a root path: `handler` names no `code`
// module, which names `handler`).
pub(crate) use code::run::call_tool as call_code_tool;
pub use code::{
    Bridge, CodeCall, CodeError, CodeErrorKind, CodeHost, CodeLimits, FetchRequest, FetchResponse,
    Fetcher,
};
pub use delivery::{Accepted, Addressed, Claim, Delivered, Delivery, Origin, Settled, WhenBusy};
/// The nearest of some names to a misspelt one (`duet validate`'s did-you-mean), for crates
/// that name no spec crate of their own (the store's URL schemes).
pub use duet_spec::nearest;
pub use effect::{Effect, EffectImpls};
pub use endpoint::{EndpointError, EndpointRequest, EndpointResponse};
pub use engine::{
    AcceptedDecision, DecisionInput, DecisionLanded, Runtime, RuntimeBuilder, retry_delay_ms,
};
pub use error::RunError;
pub use event::{AgentEvent, EventSink, USAGE_EVENT};
pub use files::{
    AttachmentRef, FileError, FileKind, FileLimits, FileQuery, FileRecord, FileStats, FileWrite,
};
/// A message code wrote; named here so `hooks` reaches it without importing `handler`.
pub(crate) use handler::Injected;
pub use handler::{Handler, HandlerError, Handlers, ThreadState};
pub use model::{
    ChatMessage, DocumentRef, Model, ModelChunk, ModelError, ModelRequest, Provider, Providers,
    ToolSpec, attachment_line,
};
pub use record::{Record, RecordBody};
pub use schedule::ScheduledEffect;
pub use store::{
    AnswerOutcome, Answered, AnsweredQuery, Change, ChangeFeed, ChangeHub, Commit, CommitOutcome,
    CommitStore, DecideOutcome, DecisionEntry, FeedEvent, FirstAnswer, JournalEntry, JournalStore,
    Lease, LeaseStore, Listed, MAX_PARENTS, NewThread, ParentFilter, QueueStore, ReadBack,
    RegistryStore, Renewal, RunStart, SETTLE_KINDS, Starting, StatusCounts, Store, StoreError,
    ThreadQuery, ThreadStore,
};
pub use store::{BlobStore, FileStore};
pub use store::{
    CancelOutcome, NewTimer, Timer, TimerCounts, TimerKind, TimerOutcome, TimerQuery, TimerStatus,
    TimerStore, TimerWake, WakeHub,
};
pub use thread_files::{GrepMatch, SWEEP_GRACE_MS, StreamError, ThreadFiles};
pub use tokio_util::sync::CancellationToken;
pub use tools::{
    CodeSchemas, HttpTools, Placeholder, Tool, ToolContext, ToolResult, ToolServer, Tools, render,
    render_with, schema_problems,
};
pub use types::{
    Child, ChildStatus, ImageRef, Message, NewQueued, Park, PerSide, Queued, Role, SideId,
    StopReason, Thread, ThreadId, ThreadStatus, ToolCall, ToolReply, ToolStatus, Usage, parse_side,
    side_str,
};
