//! The router: every route registered through utoipa's `OpenApiRouter`, so the OpenAPI
//! document is generated from the handlers and cannot miss one, plus the A2A agents, the inbox,
//! `/metrics`, `/openapi.json` and the problem fallbacks, over the shared [`AppState`].

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::problem::Problem;
use crate::routes;
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "duet",
        description = "A durable runtime for two-sided Standard Agents sessions: threads, \
            approvals, events, the Agent Handler protocol and its session control plane."
    ),
    components(schemas(crate::problem::ProblemBody)),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("duet API key")
                    .build(),
            ),
        );
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
    }
}

/// The whole API as a router, and its OpenAPI document.
pub fn router(state: AppState) -> Router {
    let limit = state.options().body_limit;
    let (router, api) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(routes::api())
        .split_for_parts();
    let api = Arc::new(api);
    let a2a = crate::a2a_agents::router(&state);
    router
        .merge(a2a)
        .merge(crate::inbox::router())
        // Slack's interactivity: authenticated by Slack's request signature, not an API key.
        .route(
            "/slack/interactions",
            axum::routing::post(routes::slack::interactions),
        )
        .route("/metrics", axum::routing::get(crate::metrics::scrape))
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let api = api.clone();
                async move { axum::Json(api.as_ref().clone()) }
            }),
        )
        .fallback(
            |axum::extract::State(state): axum::extract::State<AppState>,
             uri: axum::http::Uri| async move { no_route(&state, uri.path()) },
        )
        .method_not_allowed_fallback(|| async {
            Problem::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::loopback::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::http,
        ))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// The 404 for a path no route takes. One under `/threads/` with a segment too many is most
/// likely a key with a `/` in it (a subagent's, or another principal's as an admin names it)
/// typed raw: the answer says to encode it. (Raw `/` is not taken as part of a key: `/threads/
/// a/messages` would be both thread `a`'s messages and thread `a/messages`.)
fn no_route(state: &AppState, path: &str) -> Problem {
    if let Some(rest) = path.strip_prefix("/a2a/") {
        return no_a2a_agent(state, rest.split('/').next().unwrap_or_default());
    }
    let Some(rest) = path.strip_prefix("/threads/") else {
        return Problem::not_found("no such route");
    };
    let key = [
        "/messages",
        "/events",
        "/terminate",
        "/effects",
        "/api",
        "/files",
    ]
    .iter()
    .find_map(|tail| rest.strip_suffix(tail))
    .or_else(|| rest.split_once("/api/").map(|(key, _)| key))
    .or_else(|| rest.split_once("/files/").map(|(key, _)| key))
    .unwrap_or(rest);
    if !key.contains('/') {
        return Problem::not_found("no such route");
    }
    let encoded = key.replace('/', "%2F");
    Problem::not_found(format!(
        "no such route: a thread key containing `/` goes in the path percent-encoded, as \
         `/threads/{encoded}` for `{key}`"
    ))
    .with("encodedKey", encoded.into())
}

/// The 404 under `/a2a/{name}` for a name no A2A agent here has: the nearest served name, or
/// the served ones.
fn no_a2a_agent(state: &AppState, name: &str) -> Problem {
    if crate::a2a_agents::served(state, name) {
        return Problem::not_found("no such route");
    }
    let project = state.runtime().project();
    let served: Vec<&str> = project
        .agents
        .keys()
        .map(String::as_str)
        .filter(|a| crate::a2a_agents::served(state, a))
        .collect();
    // Only served names are offered (their cards are public); an agent that is not served
    // reads as absent here, as this answer needs no key.
    let why = match duet_spec::nearest(name, &served) {
        Some(near) => format!("did you mean `{near}`?"),
        None if served.is_empty() => "no agent is served over A2A here".to_owned(),
        None => format!("agents served over A2A: {}", served.join(", ")),
    };
    Problem::not_found(format!(
        "no A2A agent `{name}` (served: agents with `exposeAsTool: true`, and the default \
         agent): {why}"
    ))
}

/// The OpenAPI document alone (for `duet serve --openapi` and tests).
pub fn openapi() -> utoipa::openapi::OpenApi {
    OpenApiRouter::<AppState>::with_openapi(ApiDoc::openapi())
        .merge(routes::api())
        .into_openapi()
}
