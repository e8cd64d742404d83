//! The routes, one module per resource; [`api`] registers them all.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

mod agents;
pub(crate) mod approvals;
mod control;
pub(crate) mod deliver;
mod effects;
pub(crate) mod endpoints;
mod events;
pub(crate) mod files;
mod health;
mod invoke;
mod messages;
mod notifications;
pub(crate) mod slack;
mod subscriptions;
mod threads;

/// Every route of the API.
pub(crate) fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(agents::list))
        .routes(routes!(threads::create, threads::list))
        .routes(routes!(threads::get))
        .routes(routes!(threads::terminate))
        .routes(routes!(effects::list))
        .routes(routes!(effects::cancel))
        .merge(endpoint_routes())
        .merge(file_routes())
        .routes(routes!(messages::list, messages::post))
        .routes(routes!(events::follow))
        .routes(routes!(approvals::list))
        .routes(routes!(approvals::get, approvals::answer))
        .routes(routes!(notifications::revoke_links))
        .routes(routes!(notifications::list))
        .routes(routes!(notifications::get))
        .routes(routes!(notifications::retry))
        .routes(routes!(subscriptions::create, subscriptions::list))
        .routes(routes!(subscriptions::delete))
        .routes(routes!(invoke::default_agent))
        .routes(routes!(invoke::agent))
        .routes(routes!(control::capabilities))
        .routes(routes!(control::agent_capabilities))
        .routes(routes!(control::list_commands))
        .routes(routes!(control::agent_commands))
        .routes(routes!(control::state))
        .routes(routes!(control::agent_state))
        .routes(routes!(control::entries))
        .routes(routes!(control::agent_entries))
        .routes(routes!(control::dispatch))
        .routes(routes!(control::agent_dispatch))
        .routes(routes!(control::events))
        .routes(routes!(control::agent_events))
        .routes(routes!(control::invoke))
        .routes(routes!(control::agent_invoke))
}

/// A thread's endpoints, for every method (the project's files say which answer): registered
/// by hand, since a wildcard is no OpenAPI path; their document is `endpoints::Doc`.
fn endpoint_routes() -> OpenApiRouter<AppState> {
    use axum::routing::any;
    use utoipa::OpenApi as _;
    OpenApiRouter::with_openapi(endpoints::Doc::openapi())
        .route("/threads/{key}/api", any(endpoints::root))
        .route("/threads/{key}/api/", any(endpoints::root))
        .route("/threads/{key}/api/{*path}", any(endpoints::nested))
}

/// A thread's files: registered by hand, since a wildcard is no OpenAPI path; their document is
/// `files::Doc`. An upload is limited by the file limits as it streams, not by the body limit.
fn file_routes() -> OpenApiRouter<AppState> {
    use axum::extract::DefaultBodyLimit;
    use axum::routing::get;
    use utoipa::OpenApi as _;
    OpenApiRouter::with_openapi(files::Doc::openapi())
        .route(
            "/threads/{key}/files",
            get(files::list)
                .post(files::upload)
                .layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/threads/{key}/files/{*path}",
            get(files::download).delete(files::remove),
        )
}
