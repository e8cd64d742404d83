//! The Agent Handler protocol over HTTP, in its reference implementation's wire shape:
//! `POST /agents/{agent}/invoke` (and `POST /invoke` for the default agent) with
//! `{"session", "text"}` (or `{"scope", "prompt"}`), answered with SSE `data: <AgentEvent>`
//! lines and `: ping` heartbeats, ending in exactly one terminal event — or in none when the
//! client disconnects, which aborts the run.

use std::convert::Infallible;

use axum::extract::State;

use crate::body::Path;
use axum::response::Response;
use axum::response::sse::Event;
use duet_runtime::{Agent, AgentEvent, ImageRef, Prompt, Scope};
use futures::stream::{BoxStream, StreamExt};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::body::{AnyJson, parse};
use crate::input::{self, Kind};
use crate::problem::Problem;
use crate::state::AppState;

/// The flat body: `{"session": "dev", "text": "hello"}`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct InvokeBody {
    /// The session: the thread's key.
    pub session: String,
    /// The prompt's text (empty when the prompt carries `decisions`).
    #[serde(default)]
    pub text: String,
    /// The prompt's images.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub images: Vec<ImageRef>,
    /// Paths of the thread's files that come with the text (`/attachments/…`, uploaded to
    /// `/threads/{key}/files` first): each must be a file of the thread.
    #[serde(default)]
    pub attachments: Vec<String>,
    /// The session lineage extension: read only when a session is created; duet keeps a
    /// thread's lineage itself, so it is accepted and not used.
    #[serde(default)]
    #[allow(dead_code)]
    pub parent_session: Option<String>,
    /// The lineage extension's hints (accepted, not used).
    #[serde(default)]
    #[allow(dead_code)]
    pub branch_hints: Option<Vec<String>>,
    /// The park this answers (`SESSION:SEQ`).
    #[serde(default)]
    pub answers: Option<String>,
    /// A caller-chosen message id.
    #[serde(default)]
    pub message_id: Option<String>,
    /// Decisions on the session's pending tool calls, in place of a message:
    /// `[{id: "SESSION:SEQ", decision, args | reason | text, remember}]` (ids from a run's
    /// `completed.data.approvals`).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub decisions: Vec<duet_runtime::PromptDecision>,
}

/// The nested body: `{"scope": {"session": …}, "prompt": {"text": …, "images": […]}}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NestedBody {
    scope: ScopeBody,
    prompt: Prompt,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScopeBody {
    session: String,
    #[serde(default)]
    #[allow(dead_code)]
    parent_session: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    branch_hints: Option<Vec<String>>,
}

/// Reads either body shape.
fn read(value: serde_json::Value) -> Result<(String, Prompt), Problem> {
    let nested = value.get("scope").is_some() || value.get("prompt").is_some();
    // A prompt is a message or decisions: one with neither lacks its `text`, refused as a body
    // missing a field is (`text` may be left out only beside `decisions`).
    let prompt = if nested {
        value.get("prompt")
    } else {
        Some(&value)
    };
    if let Some(serde_json::Value::Object(p)) = prompt
        && !p.contains_key("text")
        && !p.contains_key("decisions")
    {
        let path = if nested { "prompt" } else { "." };
        return Err(Problem::bad_request(
            "invalid_body",
            "the body is invalid: missing field `text` (a prompt carries `text` or `decisions`)",
        )
        .with("path", path.into()));
    }
    let raw = value.to_string();
    let (session, prompt) = if nested {
        let b: NestedBody = parse(raw.as_bytes())?;
        (b.scope.session, b.prompt)
    } else {
        let b: InvokeBody = parse(raw.as_bytes())?;
        (
            b.session,
            Prompt {
                text: b.text,
                images: b.images,
                attachments: b.attachments,
                answers: b.answers,
                message_id: b.message_id,
                decisions: b.decisions,
            },
        )
    };
    check_prompt(&session, &prompt)?;
    Ok((session, prompt))
}

/// What [`crate::input`] asks of an invoke's session and prompt, as the REST routes ask it of
/// theirs (the fields named as the flat body names them).
fn check_prompt(session: &str, prompt: &Prompt) -> Result<(), Problem> {
    input::key("session", session)?;
    // An empty prompt is the protocol's own `failed` (`invalid_prompt`), not a refusal here.
    input::text("text", &prompt.text)?;
    input::images("images", &prompt.images)?;
    input::attachments("attachments", &prompt.attachments)?;
    if let Some(id) = &prompt.message_id {
        input::id(Kind::MessageId, "messageId", id)?;
    }
    for (i, d) in prompt.decisions.iter().enumerate() {
        for (field, text) in [("reason", &d.reason), ("text", &d.text)] {
            if let Some(text) = text {
                input::text(&format!("decisions[{i}].{field}"), text)?;
            }
        }
    }
    Ok(())
}

type Events = Response;

/// Runs one turn of `agent` and streams it.
pub(crate) fn invoke(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    body: serde_json::Value,
) -> Result<Events, Problem> {
    let agent = state.runtime().agent(agent).ok_or_else(|| {
        Problem::not_found(crate::problem::no_agent(state.runtime().project(), agent))
    })?;
    let (session, prompt) = read(body)?;
    let scope = Scope {
        session: caller.stored_key(&session),
        principal: caller.principal.clone(),
        source: Some("http".into()),
    };
    let caller = caller.clone();
    let events: BoxStream<'static, Result<Event, Infallible>> = agent
        .invoke(scope, prompt)
        .map(move |event| {
            let event = as_named(&caller, event);
            Ok(Event::default()
                .json_data(&event)
                .unwrap_or_else(|_| Event::default().data("{}")))
        })
        .boxed();
    // Dropping the response body (a disconnect) drops the invoke stream, which aborts the run.
    Ok(state.sse(events))
}

/// `event` as the caller names things: `completed.data.thread` is the key the caller gave, not
/// the principal-scoped key it is stored under (`alice/inv-1`), so it works in the caller's
/// REST paths.
fn as_named(caller: &Caller, mut event: AgentEvent) -> AgentEvent {
    if let AgentEvent::Completed { data: Some(data) } = &mut event
        && let Some(stored) = data.get("thread").and_then(serde_json::Value::as_str)
    {
        data["thread"] = serde_json::Value::from(caller.visible_key(stored));
    }
    event
}

/// Runs one turn of the default agent (`duet serve --default-agent`).
#[utoipa::path(post, path = "/invoke", tag = "agent handler", request_body = InvokeBody,
    responses((status = 200, description = "`data: <AgentEvent JSON>` lines ending in one `completed` or `failed`", content_type = "text/event-stream", body = String),
        (status = 400, description = "A malformed body", body = crate::problem::ProblemBody),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn default_agent(
    State(state): State<AppState>,
    caller: Caller,
    AnyJson(body): AnyJson<serde_json::Value>,
) -> Result<Events, Problem> {
    let agent = state.options().default_agent.clone().ok_or_else(|| {
        Problem::not_found("no default agent: start the server with --default-agent AGENT")
    })?;
    invoke(&state, &caller, &agent, body)
}

/// Runs one turn of `agent`.
#[utoipa::path(post, path = "/agents/{agent}/invoke", tag = "agent handler", request_body = InvokeBody,
    params(("agent" = String, Path, description = "The agent")),
    responses((status = 200, description = "`data: <AgentEvent JSON>` lines ending in one `completed` or `failed`", content_type = "text/event-stream", body = String),
        (status = 400, description = "A malformed body", body = crate::problem::ProblemBody),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent(
    State(state): State<AppState>,
    caller: Caller,
    Path(agent): Path<String>,
    AnyJson(body): AnyJson<serde_json::Value>,
) -> Result<Events, Problem> {
    invoke(&state, &caller, &agent, body)
}
