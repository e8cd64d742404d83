//! `/healthz` (the process is up) and `/readyz` (the database answers a read and takes a write
//! within a second; its schema was migrated when the server started, before it listened).

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

/// The database answers a read and takes a write within a second (the outcome is reused for a
/// second), and the server is not shutting down.
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
    health::ready(&state)
        .await
        .map_err(|why| Problem::unavailable("database", why))?;
    Ok(Json(json!({"status": "ready"})))
}
