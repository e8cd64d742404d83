//! Who may see and decide a tool call that waits for approval (issue #29): an approval by its
//! id whoever's thread it is on ([`locate`]; the callers check access), the call's
//! `approval_requested` record ([`asked`]), whether a waiting thread has a call the caller may
//! decide ([`decidable`]), and whether a listing must look past the caller's own threads
//! ([`named_anywhere`], [`escalated_anywhere`]). The rule itself is [`Caller::may_decide`],
//! widened by a deadline's escalation ([`may_decide`]; for a parked question, [`escalated_to`]).

use duet_runtime::approval::{Approvers, Asked};
use duet_runtime::deadline::{self, Subject};
use duet_runtime::{Park, Record, RecordBody, Thread};
use duet_spec::Project;

use super::ServiceError;
use crate::auth::Caller;
use crate::state::AppState;
use crate::views::ApprovalId;

/// What every caller is told of an approval it may not see: the words of an absent one.
pub(crate) fn absent(id: &str) -> ServiceError {
    ServiceError::NotFound(format!("no approval `{id}`"))
}

/// Approval `id` and its thread, if the thread ever reached that park or record — without
/// checking who asks: [`super::approvals::find`] (the owner's view) and the tool-call paths
/// (owner or approver) check that.
pub(crate) async fn locate(
    state: &AppState,
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
        Some(t) if (approval.park.session, approval.park.seq) <= (t.session, t.next_seq) => {
            Ok((approval, t))
        }
        _ => Err(absent(id)),
    }
}

/// The pending call that `records`' `approval_requested` record at `seq` asked, with when.
pub(crate) fn asked(records: &[Record], seq: i64) -> Option<(Asked, i64)> {
    records.iter().find_map(|r| match &r.body {
        RecordBody::ApprovalRequested(a) if r.seq == seq => Some((a.clone(), r.created_at)),
        _ => None,
    })
}

/// Whether `caller` may decide the call asked at `seq` of `t` (whose journal's records are
/// `records`): the approvers it named ([`Caller::may_decide`]), or those its deadline escalated
/// it to since (`question_escalated`).
pub(crate) fn may_decide(
    caller: &Caller,
    t: &Thread,
    records: &[Record],
    seq: i64,
    approvers: &Approvers,
) -> bool {
    caller.may_decide(t, approvers)
        || caller.named_by(&deadline::escalated(records, Subject::Approval(seq)))
}

/// Whether a deadline's escalation lets `caller` answer the question park id `park` of `t`
/// names (any of its ids: a reminder moves the park), though `caller` does not own `t`.
pub(crate) async fn escalated_to(
    state: &AppState,
    caller: &Caller,
    t: &Thread,
    park: Park,
) -> Result<bool, ServiceError> {
    let records = session_records(state, t, park.session).await?;
    Ok(caller.named_by(&deadline::escalated_at(&records, park)))
}

/// The records of `t`'s session `session` — where a question's park or a tool call's
/// `approval_requested` is, with the deadline's records written while it waited — read alone
/// (O(the session's records), not the thread's whole journal); every record of `t` when its
/// journal has no `session_started` for that session (none is written before one opens).
pub(crate) async fn session_records(
    state: &AppState,
    t: &Thread,
    session: i64,
) -> Result<Vec<Record>, ServiceError> {
    let store = state.runtime().store();
    let records = store.session_records(t.id, session, t.next_seq).await?;
    if records.is_empty() {
        return Ok(store.records(t.id).await?);
    }
    Ok(records)
}

/// Whether `t` (a `waiting` thread) has a tool call waiting for a decision that `caller` may
/// take, by the approvers its `approval_requested` record names.
pub(crate) async fn decidable(
    state: &AppState,
    caller: &Caller,
    t: &Thread,
) -> Result<bool, ServiceError> {
    let store = state.runtime().store();
    let (records, messages) = tokio::try_join!(store.records(t.id), store.messages(t.id))?;
    Ok(duet_runtime::approval::pending(&records, &messages)
        .iter()
        .any(|p| may_decide(caller, t, &records, p.seq, &p.approvers)))
}

/// Whether a tool of `project` names `caller` among its approvers (a role its key holds, or
/// its principal): only such a caller's listing reads other principals' waiting threads. An
/// approval asked under older definitions that named the caller, when the current ones do not,
/// is still decided by id ([`Caller::may_decide`] reads the recorded approvers), not listed.
pub(crate) fn named_anywhere(project: &Project, caller: &Caller) -> bool {
    project
        .tools
        .values()
        .filter_map(|d| d.def.approval.as_ref())
        .any(|a| {
            caller.named_by(&a.approvers)
                || a.deadline
                    .as_ref()
                    .and_then(|d| d.escalate.as_ref())
                    .is_some_and(|e| caller.named_by(&e.to))
        })
}

/// Whether an agent of `project` escalates its questions to `caller` (its human side's
/// deadline names a role its key holds, or its principal): only such a caller's listing reads
/// other principals' parked threads. A question whose own deadline (set by code) escalated to
/// the caller is answered by id, not listed.
pub(crate) fn escalated_anywhere(project: &Project, caller: &Caller) -> bool {
    project.agents.values().any(|a| {
        let def = &a.def;
        let side = def.human_side().map(|s| def.side(s));
        matches!(side, Some(duet_spec::Side::Human(h))
            if h.deadline
                .as_ref()
                .and_then(|d| d.escalate.as_ref())
                .is_some_and(|e| caller.named_by(&e.to)))
    })
}

/// `approvers` in words, for a refusal: `roles refunds, principals bob`.
pub(crate) fn describe(approvers: &Approvers) -> String {
    let mut parts = Vec::new();
    if !approvers.roles.is_empty() {
        parts.push(format!("roles {}", approvers.roles.join(", ")));
    }
    if !approvers.principals.is_empty() {
        parts.push(format!("principals {}", approvers.principals.join(", ")));
    }
    parts.join("; ")
}
