//! Every agent the project exposes (`exposeAsTool: true`), and the default agent, served over
//! A2A 1.0 at `/a2a/{agent}` (JSON-RPC there, HTTP+JSON under `/rest`, the card at
//! `/.well-known/agent-card.json` below it), the default agent's card also at the root. Each is
//! the A2A library's stack around a [`agent::DuetAgent`], behind the server's bearer auth (the
//! cards are public, for discovery).

mod agent;
mod asking;
mod decisions;
mod fetch;
mod files_in;
mod files_out;
mod follow;
mod list;
pub(crate) mod notify;
mod push;
mod remote;
mod tasks;

pub use remote::remote_agents;

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use duet_a2a::{A2aServer, AgentCard, AgentInterface, AgentSkill, HTTP_JSON, JSONRPC, WELL_KNOWN};
use duet_runtime::SideId;
use duet_spec::AgentDef;
use serde_json::json;
use tower::ServiceBuilder;

use crate::auth::Caller;
use crate::state::AppState;

/// Whether `name` is served over A2A here: exposed as a tool, or the default agent — and not a
/// remote one (that is served where it lives).
pub(crate) fn served(state: &AppState, name: &str) -> bool {
    let project = state.runtime().project();
    let is_default = state.options().default_agent.as_deref() == Some(name);
    project
        .agents
        .get(name)
        .is_some_and(|a| a.def.expose_as_tool || is_default)
        && !project.remotes.contains_key(name)
}

/// The A2A routes of every served agent.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    let project = state.runtime().project().clone();
    let default = state.options().default_agent.clone();
    let mut router = Router::new();
    for (name, agent) in &project.agents {
        let is_default = default.as_deref() == Some(name.as_str());
        if !served(state, name) {
            continue;
        }
        let service = ServiceBuilder::new()
            .layer(from_fn_with_state(state.clone(), authenticate))
            .service(server(state, &agent.def).agent(agent::DuetAgent {
                state: state.clone(),
                agent: name.clone(),
                client: client_side(&agent.def),
            }));
        if is_default {
            router = router.route_service(WELL_KNOWN, service.clone());
        }
        router = router.nest_service(&format!("/a2a/{name}"), service);
    }
    router
}

/// The A2A server for `def`: its card, this server's caps, and where clients reach it (the
/// public URL; whether forwarded headers are trusted; the listener's origin, `localhost` when it
/// listens on every address).
fn server(state: &AppState, def: &AgentDef) -> A2aServer {
    let options = state.options();
    let decides = asks_decisions(state.runtime().project(), def);
    let mut server = A2aServer::new(card(def, options.auth, decides))
        .body_limit(options.body_limit)
        .trust_forwarded(options.trust_forwarded);
    if let Some(url) = &options.public_url {
        server = server.public_url(url.clone());
    }
    if let Some(addr) = options.listener {
        let origin = if addr.ip().is_unspecified() {
            format!("http://localhost:{}", addr.port())
        } else {
            format!("http://{addr}")
        };
        server = server.listener(origin);
    }
    server
}

/// Whether a prompt of `def`'s offers a tool whose calls need a person's approval: its tasks
/// may then ask for decisions, listed in a data part and answered with one.
fn asks_decisions(project: &duet_spec::Project, def: &AgentDef) -> bool {
    [SideId::A, SideId::B]
        .into_iter()
        .any(|s| match def.side(s) {
            duet_spec::Side::Prompt(p) => project.prompts.get(&p.prompt).is_some_and(|p| {
                p.def.tools.iter().any(|e| {
                    project
                        .tools
                        .get(&e.name)
                        .is_some_and(|t| t.def.approval.is_some())
                })
            }),
            _ => false,
        })
}

/// An agent's card: its tool description, one skill, both bindings under `/a2a/{agent}`,
/// streaming and push notifications on, bearer auth when the server asks for keys; with
/// `decides` (its tools may wait for decisions), `application/json` among the input and output
/// modes (the pending calls are a data part, the decisions one).
pub(crate) fn card(def: &AgentDef, auth: bool, decides: bool) -> AgentCard {
    let description = def
        .tool_description
        .clone()
        .or_else(|| def.description.clone())
        .unwrap_or_else(|| format!("the duet agent `{}`", def.name));
    let mut card = AgentCard::new(
        def.title.clone().unwrap_or_else(|| def.name.clone()),
        &description,
    );
    card.supported_interfaces = vec![
        AgentInterface::new(format!("/a2a/{}", def.name), JSONRPC),
        AgentInterface::new(format!("/a2a/{}/rest", def.name), HTTP_JSON),
    ];
    if decides {
        card.default_input_modes.push("application/json".into());
        card.default_output_modes.push("application/json".into());
    }
    card.capabilities.streaming = true;
    card.capabilities.push_notifications = true;
    card.icon_url = def.icon.clone().filter(|i| i.starts_with("http"));
    card.skills = vec![AgentSkill {
        id: def.name.clone(),
        name: def.title.clone().unwrap_or_else(|| def.name.clone()),
        description,
        tags: vec!["duet".into()],
        examples: vec![],
        input_modes: vec![],
        output_modes: vec![],
    }];
    if auth { card.with_bearer_auth() } else { card }
}

/// The side an A2A client plays: the side inbound messages are written as (the human side, B
/// first; else B).
pub(crate) fn client_side(def: &AgentDef) -> SideId {
    def.human_side().unwrap_or(SideId::B)
}

/// The server's API-key auth in front of an A2A agent: the caller is recorded for the handler;
/// the card needs no key.
async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.uri().path() == WELL_KNOWN {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => {
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(problem) => {
            let status = problem.status;
            let body = json!({"error": {"code": status.as_u16(),
                "status": if status == StatusCode::UNAUTHORIZED { "UNAUTHENTICATED" } else { "INTERNAL" },
                "message": problem.detail}});
            let mut response = (
                status,
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}
