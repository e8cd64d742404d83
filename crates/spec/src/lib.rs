//! Standard Agents 0.2.0 definitions for duet: types, loading and validation.
//!
//! A project keeps its definitions under `agents/` (`agents/agents/`, `agents/prompts/`,
//! `agents/tools/`, `agents/hooks/`, `agents/handlers/`, `agents/effects/`, `agents/models/`,
//! `agents/providers/`, and duet's `agents/mcp/`, `agents/remotes/` and
//! `agents/notifications/`), each file YAML or a TS-like `export default defineAgent({...})`
//! read statically. [`load`] reads a directory; [`Project::from_files`] does the same from files
//! handed in, with no IO. Either returns every well-formed definition and every [`Issue`] at
//! once; loading never panics, whatever the bytes.
//!
//! ```
//! use duet_spec::{Project, SourceFile};
//!
//! let file = |path: &str, text: &str| SourceFile { path: path.into(), bytes: text.into() };
//! let loaded = Project::from_files([
//!     file("agents/agents/assistant.yaml", "name: assistant\nsideA: { prompt: assistant }\nsideB: { humn: true }\n"),
//! ]);
//! let codes: Vec<&str> = loaded.issues.iter().map(|i| i.code.as_str()).collect();
//! assert_eq!(codes, ["unknown_prompt", "side_backing", "unknown_field"]);
//! assert_eq!(loaded.issues[2].hint.as_deref(), Some("did you mean `human`?"));
//! ```
//!
//! This crate is pure: no async runtime, and no IO but [`fs`], which reads a directory.

#![warn(missing_docs)]

mod agent;
mod approval;
mod cascade;
mod code;
mod compose;
mod deadline;
mod decision;
mod decode;
mod effect;
mod endpoint;
pub mod eval;
mod evaluated;
pub mod fs;
mod hook;
mod issue;
mod loading;
mod mcp;
mod model;
mod node;
mod notification;
mod project;
mod prompt;
mod provider;
mod relationship;
mod remote;
mod schema;
mod script;
pub mod secret;
mod tool;
mod ts;
mod ts_file;
mod validate;
mod yaml;

pub use agent::{
    AgentDef, HandlerSide, HookStage, HumanSide, Immediate, Packaging, ParentCommunication,
    ParentHookRequirement, PerSide, PromptSide, RESERVED_TOOL_NAMES, SessionToolBinding, Side,
    SideId, SubagentRelationship,
};
pub use approval::{Approval, ApprovalWhen, Approvers, Decision, RememberScope};
pub use cascade::order as order_issues;
pub use code::{CONFIG_FILES, CodeConfig, CodeRef, FetchConfig, HostKind, host_of};
pub use compose::Builtins;
pub use deadline::{
    Deadline, DeadlineDefault, Escalation, MAX_DURATION_MS, format_duration, parse_duration,
};
pub use decode::nearest;
pub use effect::EffectDef;
pub use endpoint::{EndpointDef, EndpointMatch};
pub use eval::{EvalError, EvalErrorKind, Evaluated, Evaluator, JsValue, ProviderValue};
pub use fs::LoadError;
pub use hook::{EXTENSION_HOOKS, HandlerDef, HookDef, NEVER_FIRED, THREAD_HOOKS, USER_HOOKS};
pub use issue::{Code, Issue, Severity, codes_markdown};
pub use mcp::{MAX_TOOL_NAME, McpServerDef, McpTransport, exposed_tool_name, split_reference};
pub use model::{Capabilities, ModelDef, PROVIDERS};
pub use node::Span;
pub use notification::{NotificationChannel, NotificationDef};
pub use project::{
    Defined, Kind, Listing, Loaded, MAX_FILE_BYTES, Project, SkipReason, Skipped, Source,
    SourceFile, Syntax,
};
pub use prompt::{
    PromptContent, PromptDef, PromptPart, PromptTool, Reasoning, ToolChoice, Variable, VariableKind,
};
pub use provider::{ProviderDef, ProviderType};
pub use remote::RemoteAgentDef;
pub use schema::property_names;
pub use script::{
    ANSWER_PLACEHOLDER, ScriptBranch, ScriptEntry, ScriptResult, ScriptToolCall, ScriptWhen,
};
pub use tool::{HttpCall, HttpMethod, ToolDef, ToolImpl, placeholders};
pub use ts::too_deep;

/// Loads and validates the project at `dir`: a project root (the folder holding `agents/`) or
/// that `agents/` folder itself.
pub fn load(dir: &std::path::Path) -> Result<Loaded, LoadError> {
    let root = fs::project_root(dir)?;
    Ok(Project::from_listing(fs::read_project(&root)?))
}
