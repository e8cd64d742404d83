//! `GET /agents`: the project's agents.

use axum::Json;
use axum::extract::State;

use crate::auth::Caller;
use crate::state::AppState;
use crate::views::AgentView;

/// The project's agents: their sides' backings and whether each is exposed.
#[utoipa::path(get, path = "/agents", tag = "agents",
    responses((status = 200, description = "The agents", body = Vec<AgentView>)))]
pub(crate) async fn list(State(state): State<AppState>, _caller: Caller) -> Json<Vec<AgentView>> {
    Json(
        state
            .runtime()
            .project()
            .agents
            .values()
            .map(|a| AgentView::from(&a.def))
            .collect(),
    )
}
