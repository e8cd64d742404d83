//! What waits for a person, as the approvals queue lists it: a page of parked and `waiting`
//! threads the caller may answer or decide, each read with its question, its parents and
//! whether its question has a deadline in one store read per page ([`ThreadStore::list_listed`]);
//! the approvals of each ([`views`]); and one thread of that queue again by id ([`one`]), for a
//! live queue that re-reads only what changed.
//!
//! [`ThreadStore::list_listed`]: duet_runtime::ThreadStore::list_listed

use duet_runtime::{Listed, Thread, ThreadId, ThreadQuery, ThreadStatus};

use super::ServiceError;
use super::approvals;
use super::approvers;
use crate::auth::Caller;
use crate::state::AppState;
use crate::views::ApprovalView;

/// Which of the questions waiting for the caller to list.
#[derive(Default)]
pub(crate) struct Waiting<'a> {
    /// Only this agent's.
    pub agent: Option<&'a str>,
    /// The last thread of the previous page.
    pub after: Option<ThreadId>,
    pub newest_first: bool,
    pub limit: usize,
    /// Also `waiting` threads (tool calls waiting for a decision).
    pub tool_calls: bool,
    /// Also threads parked for their end user's next message (an agent whose human side is not
    /// declared `approver`): a chat, not an approval.
    pub all: bool,
}

/// Whether `t`, a parked thread `caller` may see, asks a question the listing shows: one of an
/// agent whose human side is an approver (any, with `all`). An agent no longer defined is no
/// approver: its thread is a chat nobody can resume.
fn approval(state: &AppState, w: &Waiting<'_>, t: &Thread) -> bool {
    w.all
        || state
            .runtime()
            .project()
            .agents
            .get(&t.agent)
            .is_some_and(|d| d.def.approver())
}

/// Whether the listing shows `t`, a thread its query read: parked, one `caller` sees asking
/// for an approval ([`approval`]), or another's whose question escalated to `caller` (one
/// read of its records); `waiting`, with a call `caller` may decide (reads its journal).
async fn admits(
    state: &AppState,
    caller: &Caller,
    w: &Waiting<'_>,
    t: &Thread,
) -> Result<bool, ServiceError> {
    match t.status {
        ThreadStatus::AwaitingHuman if caller.may_see(t) => Ok(approval(state, w, t)),
        ThreadStatus::AwaitingHuman => match t.park() {
            Some(park) => approvers::escalated_to(state, caller, t, park).await,
            None => Ok(false),
        },
        ThreadStatus::Waiting => approvers::decidable(state, caller, t).await,
        _ => Ok(false),
    }
}

/// The principal whose parked threads a listing reads: every principal's when an agent's
/// deadline escalates to the caller (another's only once its question escalated).
fn parked_principal<'c>(state: &AppState, caller: &'c Caller) -> Option<&'c str> {
    match approvers::escalated_anywhere(state.runtime().project(), caller) {
        true => None,
        false => caller.owner_filter(),
    }
}

/// The principal whose `waiting` threads a listing reads: every principal's when a tool's
/// approvers name the caller.
fn waiting_principal<'c>(state: &AppState, caller: &'c Caller) -> Option<&'c str> {
    match approvers::named_anywhere(state.runtime().project(), caller) {
        true => None,
        false => caller.owner_filter(),
    }
}

/// The threads waiting for a person that `caller` may answer, a page at a time: parked ones
/// it may see (a question — of an agent whose human side is an approver, unless `all`) and
/// `waiting` ones with a tool call it may decide ([`Caller::may_decide`]: on another
/// principal's thread too, when a tool's approvers name the caller), merged in the listing's
/// order so one cursor pages both. The caller's own parked questions cost one store read per
/// page; another's escalated question, and a `waiting` thread's calls, a read of its own.
pub(crate) async fn waiting(
    state: &AppState,
    caller: &Caller,
    w: &Waiting<'_>,
) -> Result<Vec<Listed>, ServiceError> {
    let mut threads = statused(state, caller, w, ThreadStatus::AwaitingHuman).await?;
    // Past the last parked thread taken, a `waiting` one may come before the next parked one.
    if w.tool_calls {
        threads.extend(statused(state, caller, w, ThreadStatus::Waiting).await?);
    }
    threads.sort_by_key(|l| l.thread.id);
    if w.newest_first {
        threads.reverse();
    }
    threads.truncate(w.limit);
    Ok(threads)
}

/// [`waiting`]'s threads of one status: a page at a time until `limit` of them are listed (or
/// none are left), so a page of chats does not end the listing early.
async fn statused(
    state: &AppState,
    caller: &Caller,
    w: &Waiting<'_>,
    status: ThreadStatus,
) -> Result<Vec<Listed>, ServiceError> {
    let principal = match status {
        ThreadStatus::Waiting => waiting_principal(state, caller),
        _ => parked_principal(state, caller),
    };
    let store = state.runtime().store();
    let mut threads = Vec::new();
    let mut after = w.after;
    loop {
        let query = ThreadQuery {
            agent: w.agent,
            status: Some(status),
            principal,
            after,
            newest_first: w.newest_first,
            limit: w.limit,
            ..ThreadQuery::default()
        };
        let page = store.list_listed(&query, None).await?;
        let full = page.len() == w.limit;
        after = page.last().map(|l| l.thread.id);
        for l in page {
            if admits(state, caller, w, &l.thread).await? {
                threads.push(l);
            }
        }
        if !full || threads.len() >= w.limit {
            break;
        }
    }
    threads.truncate(w.limit);
    Ok(threads)
}

/// Thread `id` as [`waiting`] would list it under `w` (its agent filter, `all`, `tool_calls`;
/// not its cursor), or `None` when it would not: one read, and those [`admits`] makes.
pub(crate) async fn one(
    state: &AppState,
    caller: &Caller,
    w: &Waiting<'_>,
    id: ThreadId,
) -> Result<Option<Listed>, ServiceError> {
    let query = ThreadQuery {
        agent: w.agent,
        limit: 1,
        ..ThreadQuery::default()
    };
    let Some(l) = state
        .runtime()
        .store()
        .list_listed(&query, Some(id))
        .await?
        .pop()
    else {
        return Ok(None);
    };
    let principal = match l.thread.status {
        ThreadStatus::AwaitingHuman => parked_principal(state, caller),
        ThreadStatus::Waiting if w.tool_calls => waiting_principal(state, caller),
        _ => return Ok(None),
    };
    let read = principal.is_none_or(|p| l.thread.principal.as_deref() == Some(p));
    Ok(match read && admits(state, caller, w, &l.thread).await? {
        true => Some(l),
        false => None,
    })
}

/// What of `l` waits for a person: its question while parked, else each tool call of it that
/// waits for a decision.
pub(crate) async fn views(
    state: &AppState,
    caller: &Caller,
    l: &Listed,
) -> Result<Vec<ApprovalView>, ServiceError> {
    if l.thread.park().is_some() {
        return Ok(approvals::question_view(state, caller, l)
            .await?
            .into_iter()
            .collect());
    }
    approvals::listed_calls(state, caller, l).await
}
