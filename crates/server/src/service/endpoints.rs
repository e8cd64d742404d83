//! A thread's endpoints (`/threads/{key}/api/…`): the request served by the runtime for a
//! thread the caller was found to see ([`super::threads::find`]), its writes committed by the
//! runtime's one write path, its failures the endpoint's own.

use duet_runtime::{EndpointError, EndpointRequest, EndpointResponse, Thread};

use crate::state::AppState;

/// Serves `request` with thread `t`'s endpoint.
pub(crate) async fn call(
    state: &AppState,
    t: &Thread,
    request: EndpointRequest,
) -> Result<EndpointResponse, EndpointError> {
    state.runtime().call_endpoint(&t.key, request).await
}
