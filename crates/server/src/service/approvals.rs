//! Approvals: a parked question by its id (`{thread}:{session}:{seq}`), and its answer. The
//! inbox's answer form and `POST /approvals/{id}` both call [`answer`], so a question answered
//! through either is refused through the other with the same [`ServiceError::AlreadyAnswered`].

use duet_runtime::{ImageRef, Thread};

use super::ServiceError;
use super::deliveries::{self, Delivered, Inbound};
use crate::auth::Caller;
use crate::state::AppState;
use crate::views::ApprovalId;

/// The approval `id` and its thread, if `caller` may see it and the thread ever reached that
/// park (answered or not).
pub(crate) async fn find(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<(ApprovalId, Thread), ServiceError> {
    let approval: ApprovalId = id
        .parse()
        .map_err(|e: String| ServiceError::NotFound(format!("no approval `{id}`: {e}")))?;
    match state
        .runtime()
        .store()
        .thread_by_id(approval.thread)
        .await?
    {
        // A park the thread never reached is not a question anyone could have answered.
        Some(t)
            if caller.may_see(&t)
                && (approval.park.session, approval.park.seq) <= (t.session, t.next_seq) =>
        {
            Ok((approval, t))
        }
        _ => Err(ServiceError::NotFound(format!("no approval `{id}`"))),
    }
}

/// An answer to one question.
pub(crate) struct Answer<'a> {
    pub text: &'a str,
    pub images: &'a [ImageRef],
    /// Its message id: a retried answer writes nothing.
    pub message_id: Option<&'a str>,
    /// Follow the resumed run until the thread settles.
    pub wait: bool,
}

/// Answers approval `id` for `caller`: the first answer wins, a later one is
/// [`ServiceError::AlreadyAnswered`] naming it.
pub(crate) async fn answer(
    state: &AppState,
    caller: &Caller,
    id: &str,
    answer: Answer<'_>,
) -> Result<Delivered, ServiceError> {
    let (approval, t) = find(state, caller, id).await?;
    let inbound = Inbound {
        key: &t.key,
        agent: None,
        thread: Some(&t),
        text: answer.text,
        images: answer.images,
        answers: Some(approval.park),
        message_id: answer.message_id,
        wait: answer.wait,
    };
    deliveries::deliver(state, caller, inbound).await
}
