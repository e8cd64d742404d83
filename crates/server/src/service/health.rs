//! What the probes and the scrape read of the store: a ping (`/readyz`), and the threads by
//! status with the oldest question's wait (`/metrics`). Both span every principal: the routes
//! decide who may ask.

use duet_runtime::{StatusCounts, ThreadQuery};

use super::ServiceError;
use crate::state::AppState;

/// Whether the database answers: one row read.
pub(crate) async fn ping(state: &AppState) -> Result<(), ServiceError> {
    let probe = ThreadQuery {
        limit: 1,
        ..ThreadQuery::default()
    };
    state.runtime().store().list_threads(&probe).await?;
    Ok(())
}

/// Every thread counted by status, and since when the longest-waiting question waits.
pub(crate) async fn counts(state: &AppState) -> Result<StatusCounts, ServiceError> {
    Ok(state.runtime().store().status_counts().await?)
}
