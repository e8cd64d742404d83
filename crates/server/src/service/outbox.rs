//! The one outbox (issue #31, `duet_server_store::NotifyStore`) for deliveries no notice was
//! routed to: a Slack click's refusal told to the one who clicked.

use duet_runtime::StoreError;
use duet_server_store::NewDelivery;

use crate::state::AppState;

/// Puts `deliveries` in the outbox and wakes the sender; their ids.
pub(crate) async fn enqueue(
    state: &AppState,
    deliveries: &[NewDelivery],
) -> Result<Vec<i64>, StoreError> {
    let ids = state.server_store().enqueue(deliveries).await?;
    state.push_wake();
    Ok(ids)
}
