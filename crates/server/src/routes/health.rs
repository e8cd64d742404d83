//! `/healthz` (the process is up) and `/readyz` (the database answers; its schema was migrated
//! when the server started, before it listened).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::problem::Problem;
use crate::service::health;
use crate::state::AppState;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "health", security(()),
    responses((status = 200, description = "Up", body = Object)))]
pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The database answers and the server takes requests.
#[utoipa::path(get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, description = "Ready", body = Object),
        (status = 503, description = "Not ready", body = crate::problem::ProblemBody,
            content_type = "application/problem+json")))]
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, Problem> {
    if state.closing().is_cancelled() {
        return Err(Problem::unavailable(
            "shutting_down",
            "the server is shutting down",
        ));
    }
    health::ping(&state).await.map_err(|e| {
        Problem::unavailable("database", format!("the database does not answer: {e}"))
    })?;
    Ok(Json(json!({"status": "ready"})))
}
