//! fastagent's session control plane over HTTP + SSE, in its wire shape
//! (`src/channels/control.ts`): `GET /control/capabilities|commands|state|entries|events`,
//! `POST /control/dispatch` (always 200 with a `SessionResult`) and `POST /control/invoke` (the
//! Agent Handler invoke), for the default agent at the root and for each agent under
//! `/agents/{agent}`. A session is a thread key in the caller's key space; one the caller may
//! not see reads exactly as one that does not exist (reads are total, as fastagent's are: idle,
//! no entries, a quiet stream; `steer`, `follow_up` and `abort` on it are `no_active_run`, as
//! on any session with no run: an invoke starts one).

mod watch;
mod wire;

use std::convert::Infallible;

use axum::extract::State;

use crate::body::Path;
use axum::response::Response;
use axum::response::sse::Event;
use duet_runtime::{JournalEntry, Principal, Scope, Thread};
use futures::stream::{BoxStream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use self::watch::{Watch, active};
use self::wire::{
    AgentCommand, CAPABILITIES, Capabilities, Parsed, SessionEntries, SessionEntry, SessionState,
    codes, parse_command, rejected, run_id,
};
use crate::auth::Caller;
use crate::body::{AnyJson, Query};
use crate::input;
use crate::problem::Problem;
use crate::service::events::Feed;
use crate::service::{self, messages, threads};
use crate::state::AppState;

/// `?session=`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionQuery {
    /// The session: a thread key.
    session: Option<String>,
}

/// `?session=&since=`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct EntriesQuery {
    /// The session: a thread key.
    session: Option<String>,
    /// Only entries appended after this entry id (an unknown cursor gives them all).
    since: Option<String>,
}

/// `{session, command}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct DispatchBody {
    /// The session: a thread key.
    session: String,
    /// `{type: "steer"|"follow_up", prompt: {text, images?}}` or `{type: "abort"}`; `compact`,
    /// `set_model`, `set_thinking` and `navigate` are `unsupported_capability`.
    #[schema(value_type = Object)]
    command: Value,
}

/// The agent the root routes serve: 404 when the server has none.
fn default_agent(state: &AppState) -> Result<String, Problem> {
    state.options().default_agent.clone().ok_or_else(|| {
        Problem::not_found("no default agent: start the server with --default-agent AGENT")
    })
}

/// `agent`, if the project has it.
fn named(state: &AppState, agent: String) -> Result<String, Problem> {
    if state.runtime().project().agents.contains_key(&agent) {
        Ok(agent)
    } else {
        Err(Problem::not_found(crate::problem::no_agent(
            state.runtime().project(),
            &agent,
        )))
    }
}

/// The `session` parameter: required, and a valid key.
fn session(session: Option<String>) -> Result<String, Problem> {
    let session = session
        .ok_or_else(|| Problem::bad_request("missing_session", "give the session: ?session="))?;
    input::key("session", &session)?;
    Ok(session)
}

/// The session's thread, if the caller may see it on `agent`'s routes.
async fn find(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    session: &str,
) -> Result<Option<Thread>, Problem> {
    Ok(threads::find_on(state, caller, agent, session).await?)
}

/// The scope the runtime is asked in: as the thread's owner (the caller, unless an admin).
fn owner_scope(t: &Thread, caller: &Caller) -> Scope {
    let owner = t
        .principal
        .as_deref()
        .and_then(|p| serde_json::from_str::<Principal>(p).ok());
    Scope {
        session: t.key.clone(),
        principal: owner.or_else(|| caller.principal.clone()),
        source: Some("http".into()),
    }
}

/// The run the thread is in, as the events name it.
async fn current_run(state: &AppState, t: &Thread) -> Result<Option<String>, Problem> {
    if !active(t, state.runtime().now_ms()) {
        return Ok(None);
    }
    let start = Feed::of(state).run_start(t).await?;
    Ok(Some(run_id(start)))
}

async fn state_of(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    q: SessionQuery,
) -> Result<axum::Json<SessionState>, Problem> {
    let session = session(q.session)?;
    let Some(t) = find(state, caller, agent, &session).await? else {
        return Ok(axum::Json(SessionState {
            status: "idle",
            ..SessionState::default()
        }));
    };
    let observed = match state.runtime().state(&owner_scope(&t, caller)).await {
        Ok(s) => s,
        Err(duet_runtime::control::ControlError::Store(e)) => return Err(e.into()),
        // Gone or another's since the read: as if absent.
        Err(_) => {
            return Ok(axum::Json(SessionState {
                status: "idle",
                ..SessionState::default()
            }));
        }
    };
    let run = current_run(state, &t).await?;
    Ok(axum::Json(SessionState {
        status: if run.is_some() { "running" } else { "idle" },
        active_run_id: run,
        pending: wire::Pending {
            steering: observed.pending.steering,
            follow_up: observed.pending.follow_up,
        },
        leaf_entry_id: (t.next_seq > 1).then(|| (t.next_seq - 1).to_string()),
    }))
}

/// The most entries one `/control/entries` answer holds.
const ENTRIES_PAGE: usize = 1_000;

async fn entries_of(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    q: EntriesQuery,
) -> Result<axum::Json<SessionEntries>, Problem> {
    let session = session(q.session)?;
    let Some(t) = find(state, caller, agent, &session).await? else {
        return Ok(axum::Json(SessionEntries {
            entries: Vec::new(),
            leaf_entry_id: None,
        }));
    };
    // An append-order cursor; one this journal does not have gives the whole journal.
    let since = q
        .since
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|s| (1..t.next_seq).contains(s))
        .unwrap_or(0);
    // A page at a time: a client whose last entry is not `leafEntryId` asks again from it.
    let journal = messages::journal(state, &t, since, ENTRIES_PAGE).await?;
    let mut parent = since;
    let entries: Vec<SessionEntry> = journal
        .iter()
        .map(|e: &JournalEntry| {
            let entry = SessionEntry::of(e, Some(parent));
            parent = e.seq();
            entry
        })
        .collect();
    let leaf = parent.max(t.next_seq - 1);
    Ok(axum::Json(SessionEntries {
        entries,
        leaf_entry_id: (leaf > 0).then(|| leaf.to_string()),
    }))
}

async fn dispatch_of(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    body: Value,
) -> Result<axum::Json<Value>, Problem> {
    let Some(session) = body.get("session").and_then(Value::as_str) else {
        return Err(Problem::bad_request(
            "invalid_body",
            "expected {session: string, command: SessionCommand}",
        ));
    };
    input::key("session", session)?;
    let command = match body.get("command").and_then(parse_command) {
        None => {
            return Ok(axum::Json(rejected(
                codes::INVALID_COMMAND,
                "malformed command",
                false,
            )));
        }
        Some(Parsed::Unsupported(kind)) => {
            return Ok(axum::Json(rejected(
                codes::UNSUPPORTED_CAPABILITY,
                format!("duet does not support `{kind}` (see /control/capabilities)"),
                false,
            )));
        }
        Some(Parsed::Run(command)) => command,
    };
    // A prompt the database cannot hold is refused as a malformed command, naming its field.
    if let duet_runtime::control::Command::Steer { prompt }
    | duet_runtime::control::Command::FollowUp { prompt } = &command
        && let Err(fault) = input::text("command.prompt.text", &prompt.text)
            .and_then(|()| input::images("command.prompt.images", &prompt.images))
    {
        return Ok(axum::Json(rejected(
            codes::INVALID_COMMAND,
            fault.sentence(),
            false,
        )));
    }
    // fastagent answers a run command on a session with no run `no_active_run`, whether or not
    // the session exists (its `attach` then starts the run with an invoke).
    let Some(t) = find(state, caller, agent, session).await? else {
        return Ok(axum::Json(wire::no_run_yet(session)));
    };
    let before = current_run(state, &t).await?;
    let result = state
        .runtime()
        .dispatch(&owner_scope(&t, caller), command)
        .await;
    let run = match (&result, before) {
        (duet_runtime::control::SessionResult::Ok { .. }, None) => {
            match threads::reread(state, t.id).await? {
                Some(now) => current_run(state, &now).await?,
                None => None,
            }
        }
        (_, before) => before,
    };
    Ok(axum::Json(wire::result(result, run, session)))
}

async fn events_of(
    state: &AppState,
    caller: Caller,
    agent: String,
    q: SessionQuery,
) -> Result<Response, Problem> {
    let credential = caller.credential.clone();
    let session = session(q.session)?;
    let stored = caller.stored_key(&session);
    let rt = state.runtime();
    // Subscribed, and where the session stands read, before the response: a client that has
    // the headers gets everything committed from then on.
    let (mut watch, mut changes) = Watch::open(
        Feed::of(state),
        rt.project().clone(),
        caller,
        agent,
        stored,
        rt.clock(),
    )
    .await?;
    let epoch = state.epoch().to_owned();
    let events = async_stream::stream! {
        let mut seq: u64 = 0;
        while let Some(feed) = changes.next().await {
            let events = match watch.wake(feed).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(error = %e, "a control event stream lost the store");
                    vec![wire::event("serving_error", 0, None, json!({"message": e.to_string()}))]
                }
            };
            let failed = events.first().is_some_and(|e| e["type"] == "serving_error");
            for event in events {
                let wire = json!({"sessionId": session, "epoch": epoch, "seq": seq, "event": event});
                seq += 1;
                yield Ok::<Event, Infallible>(Event::default().data(wire.to_string()));
            }
            if failed {
                return;
            }
        }
    };
    let events: BoxStream<'static, Result<Event, Infallible>> = events
        .take_until(state.closing().clone().cancelled_owned())
        .boxed();
    Ok(state.sse(service::keys::while_admitted(state, credential, events)))
}

fn commands() -> axum::Json<Vec<AgentCommand>> {
    axum::Json(Vec::new())
}

// The routes: each twice, for the default agent and for a named one.

/// What the control plane can do (sessionless).
#[utoipa::path(get, path = "/control/capabilities", tag = "session control",
    responses((status = 200, body = Capabilities),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn capabilities(
    State(state): State<AppState>,
    _caller: Caller,
) -> Result<axum::Json<&'static Capabilities>, Problem> {
    default_agent(&state)?;
    Ok(axum::Json(&CAPABILITIES))
}

/// What the control plane of `agent` can do.
#[utoipa::path(get, path = "/agents/{agent}/control/capabilities", tag = "session control",
    params(("agent" = String, Path, description = "The agent")),
    responses((status = 200, body = Capabilities),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent_capabilities(
    State(state): State<AppState>,
    _caller: Caller,
    Path(agent): Path<String>,
) -> Result<axum::Json<&'static Capabilities>, Problem> {
    named(&state, agent)?;
    Ok(axum::Json(&CAPABILITIES))
}

/// The `/` names the agent defines: none (duet has no slash commands).
#[utoipa::path(get, path = "/control/commands", tag = "session control",
    responses((status = 200, body = Vec<AgentCommand>),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn list_commands(
    State(state): State<AppState>,
    _caller: Caller,
) -> Result<axum::Json<Vec<AgentCommand>>, Problem> {
    default_agent(&state)?;
    Ok(commands())
}

/// The `/` names `agent` defines: none.
#[utoipa::path(get, path = "/agents/{agent}/control/commands", tag = "session control",
    params(("agent" = String, Path, description = "The agent")),
    responses((status = 200, body = Vec<AgentCommand>),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent_commands(
    State(state): State<AppState>,
    _caller: Caller,
    Path(agent): Path<String>,
) -> Result<axum::Json<Vec<AgentCommand>>, Problem> {
    named(&state, agent)?;
    Ok(commands())
}

/// Whether the session is running, and what waits for its run.
#[utoipa::path(get, path = "/control/state", tag = "session control", params(SessionQuery),
    responses((status = 200, body = SessionState),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn state(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<SessionQuery>,
) -> Result<axum::Json<SessionState>, Problem> {
    let agent = default_agent(&state)?;
    state_of(&state, &caller, &agent, q).await
}

/// Whether the session of `agent` is running, and what waits for its run.
#[utoipa::path(get, path = "/agents/{agent}/control/state", tag = "session control",
    params(("agent" = String, Path, description = "The agent"), SessionQuery),
    responses((status = 200, body = SessionState),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent_state(
    State(state): State<AppState>,
    caller: Caller,
    Path(agent): Path<String>,
    Query(q): Query<SessionQuery>,
) -> Result<axum::Json<SessionState>, Problem> {
    let agent = named(&state, agent)?;
    state_of(&state, &caller, &agent, q).await
}

/// The session's journal after a cursor.
#[utoipa::path(get, path = "/control/entries", tag = "session control", params(EntriesQuery),
    responses((status = 200, body = SessionEntries),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn entries(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<EntriesQuery>,
) -> Result<axum::Json<SessionEntries>, Problem> {
    let agent = default_agent(&state)?;
    entries_of(&state, &caller, &agent, q).await
}

/// The journal of `agent`'s session after a cursor.
#[utoipa::path(get, path = "/agents/{agent}/control/entries", tag = "session control",
    params(("agent" = String, Path, description = "The agent"), EntriesQuery),
    responses((status = 200, body = SessionEntries),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent_entries(
    State(state): State<AppState>,
    caller: Caller,
    Path(agent): Path<String>,
    Query(q): Query<EntriesQuery>,
) -> Result<axum::Json<SessionEntries>, Problem> {
    let agent = named(&state, agent)?;
    entries_of(&state, &caller, &agent, q).await
}

/// Steers, queues a follow-up for, or aborts the session's run: always 200, with
/// `{ok: true, runId?}` or `{ok: false, error: {code, message, retryable}}`.
#[utoipa::path(post, path = "/control/dispatch", tag = "session control", request_body = DispatchBody,
    responses((status = 200, description = "A SessionResult", body = Object),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn dispatch(
    State(state): State<AppState>,
    caller: Caller,
    AnyJson(body): AnyJson<Value>,
) -> Result<axum::Json<Value>, Problem> {
    let agent = default_agent(&state)?;
    dispatch_of(&state, &caller, &agent, body).await
}

/// Steers, queues a follow-up for, or aborts the run of `agent`'s session.
#[utoipa::path(post, path = "/agents/{agent}/control/dispatch", tag = "session control",
    request_body = DispatchBody, params(("agent" = String, Path, description = "The agent")),
    responses((status = 200, description = "A SessionResult", body = Object),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent_dispatch(
    State(state): State<AppState>,
    caller: Caller,
    Path(agent): Path<String>,
    AnyJson(body): AnyJson<Value>,
) -> Result<axum::Json<Value>, Problem> {
    let agent = named(&state, agent)?;
    dispatch_of(&state, &caller, &agent, body).await
}

/// The session's events as they commit: SSE, each `data:` a `{sessionId, epoch, seq, event}`.
#[utoipa::path(get, path = "/control/events", tag = "session control", params(SessionQuery),
    responses((status = 200, description = "`data: {sessionId, epoch, seq, event: SessionEvent}`", content_type = "text/event-stream", body = String),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<SessionQuery>,
) -> Result<Response, Problem> {
    let agent = default_agent(&state)?;
    events_of(&state, caller, agent, q).await
}

/// The events of `agent`'s session as they commit.
#[utoipa::path(get, path = "/agents/{agent}/control/events", tag = "session control",
    params(("agent" = String, Path, description = "The agent"), SessionQuery),
    responses((status = 200, description = "`data: {sessionId, epoch, seq, event: SessionEvent}`", content_type = "text/event-stream", body = String),
        (status = 400, description = "No session given", body = crate::problem::ProblemBody),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent_events(
    State(state): State<AppState>,
    caller: Caller,
    Path(agent): Path<String>,
    Query(q): Query<SessionQuery>,
) -> Result<Response, Problem> {
    let agent = named(&state, agent)?;
    events_of(&state, caller, agent, q).await
}

/// `POST /invoke` behind the control plane (the same handler).
#[utoipa::path(post, path = "/control/invoke", tag = "session control",
    request_body = super::invoke::InvokeBody,
    responses((status = 200, description = "`data: <AgentEvent JSON>` lines ending in one `completed` or `failed`", content_type = "text/event-stream", body = String),
        (status = 400, description = "A malformed body", body = crate::problem::ProblemBody),
        (status = 404, description = "No default agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn invoke(
    State(state): State<AppState>,
    caller: Caller,
    AnyJson(body): AnyJson<Value>,
) -> Result<Response, Problem> {
    let agent = default_agent(&state)?;
    super::invoke::invoke(&state, &caller, &agent, body)
}

/// `POST /agents/{agent}/invoke` behind the control plane.
#[utoipa::path(post, path = "/agents/{agent}/control/invoke", tag = "session control",
    request_body = super::invoke::InvokeBody, params(("agent" = String, Path, description = "The agent")),
    responses((status = 200, description = "`data: <AgentEvent JSON>` lines ending in one `completed` or `failed`", content_type = "text/event-stream", body = String),
        (status = 400, description = "A malformed body", body = crate::problem::ProblemBody),
        (status = 404, description = "No such agent", body = crate::problem::ProblemBody)))]
pub(crate) async fn agent_invoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(agent): Path<String>,
    AnyJson(body): AnyJson<Value>,
) -> Result<Response, Problem> {
    super::invoke::invoke(&state, &caller, &agent, body)
}
