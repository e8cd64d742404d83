//! Notifications on the server's own tables (`duet_server_store::NotifyStore`): the notices to
//! route, the outbox, links, principals' subscriptions and the shared secrets. What a caller may
//! see of them is decided here (a principal sees its own subscriptions and the deliveries sent
//! to it or about its threads; an admin sees all), and who may revoke an approval's links (who
//! may decide it).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use duet_runtime::deadline;
use duet_runtime::{Park, StoreError, Thread, ThreadId};
use duet_server_store::{
    Delivery, DeliveryQuery, DeliveryStatus, Link, LinkUse, NewDelivery, Notice, Subscription,
};

use super::ServiceError;
use super::approvers::{self, absent};
use crate::auth::Caller;
use crate::state::AppState;
use crate::views::ApprovalId;

/// Reads of the outbox one page of a caller's deliveries may take (what it may not see is
/// skipped; past this many, the page ends short with a cursor).
const READS: usize = 8;

/// The most ids one question is looked up under (a reminder moves a park: each is an id).
const MAX_IDS: i64 = 64;

/// The secret `name`, made with `fresh` by whoever needed it first.
pub(crate) async fn secret(
    state: &AppState,
    name: &str,
    fresh: &str,
) -> Result<String, ServiceError> {
    Ok(state.server_store().secret(name, fresh).await?)
}

/// Link `id`.
pub(crate) async fn link(state: &AppState, id: &str) -> Result<Option<Link>, ServiceError> {
    Ok(state.server_store().link(id).await?)
}

/// Marks link `id` used by `by`.
pub(crate) async fn use_link(
    state: &AppState,
    id: &str,
    by: &str,
    now: i64,
) -> Result<LinkUse, StoreError> {
    state.server_store().use_link(id, by, now).await
}

/// Revokes the live links to `approval`; how many.
pub(crate) async fn revoke_links(state: &AppState, approval: &str) -> Result<u64, ServiceError> {
    let now = state.runtime().now_ms();
    Ok(state.server_store().revoke_links(approval, now).await?)
}

/// Up to `limit` notices not routed yet.
pub(crate) async fn notices(state: &AppState, limit: usize) -> Result<Vec<Notice>, StoreError> {
    state.server_store().notices(limit).await
}

/// Routes notice `id` to `deliveries` and `links` (see `NotifyStore::route_notice`).
pub(crate) async fn route(
    state: &AppState,
    id: i64,
    deliveries: &[NewDelivery],
    links: &[(Link, Option<usize>)],
) -> Result<bool, StoreError> {
    let now = state.runtime().now_ms();
    state
        .server_store()
        .route_notice(id, deliveries, links, now)
        .await
}

/// Routes notices `ids` to nobody (see `NotifyStore::route_to_nobody`).
pub(crate) async fn route_to_nobody(state: &AppState, ids: &[i64]) -> Result<usize, StoreError> {
    let now = state.runtime().now_ms();
    state.server_store().route_to_nobody(ids, now).await
}

/// Holds off the database's copies of facts into notices for `ahead` from now (see
/// `NotifyStore::hold_notices`): whether the hold was set.
pub(crate) async fn hold_notices(state: &AppState, ahead: Duration) -> Result<bool, StoreError> {
    let (now, until) = from_now(state, ahead);
    state.server_store().hold_notices(until, now).await
}

/// Ends any hold of the copies of facts into notices, and keeps one off for `ahead` from now
/// (see `NotifyStore::need_notices`).
pub(crate) async fn need_notices(state: &AppState, ahead: Duration) -> Result<(), StoreError> {
    let (_, until) = from_now(state, ahead);
    state.server_store().need_notices(until).await
}

/// The runtime's time now and `ahead` of it (ms).
fn from_now(state: &AppState, ahead: Duration) -> (i64, i64) {
    let now = state.runtime().now_ms();
    let ahead = i64::try_from(ahead.as_millis()).unwrap_or(i64::MAX);
    (now, now.saturating_add(ahead))
}

/// Puts `deliveries` in the outbox.
pub(crate) async fn enqueue(
    state: &AppState,
    deliveries: &[NewDelivery],
) -> Result<Vec<i64>, StoreError> {
    state.server_store().enqueue(deliveries).await
}

/// Claims what is due (see `NotifyStore::claim_deliveries`).
pub(crate) async fn claim(
    state: &AppState,
    now: i64,
    lease_ms: i64,
    limit: usize,
) -> Result<Vec<Delivery>, StoreError> {
    state
        .server_store()
        .claim_deliveries(now, lease_ms, limit)
        .await
}

/// Delivery `id` was taken.
pub(crate) async fn delivered(
    state: &AppState,
    id: i64,
    response: Option<&str>,
) -> Result<(), StoreError> {
    let now = state.runtime().now_ms();
    state.server_store().delivered(id, response, now).await
}

/// Delivery `id` failed: due again at `next_at`, or given up on.
pub(crate) async fn failed(
    state: &AppState,
    id: i64,
    next_at: Option<i64>,
    error: &str,
) -> Result<(), StoreError> {
    let now = state.runtime().now_ms();
    state
        .server_store()
        .delivery_failed(id, next_at, error, now)
        .await
}

/// Delivery `id`, whoever's (for the sender).
pub(crate) async fn stored_delivery(
    state: &AppState,
    id: i64,
) -> Result<Option<Delivery>, StoreError> {
    state.server_store().delivery(id).await
}

/// Whether `caller` may see delivery `d` about `thread` (its thread, if it is still there): an
/// admin, its recipient, or the owner of its thread.
fn visible(caller: &Caller, d: &Delivery, thread: Option<&Thread>) -> bool {
    if caller.admin {
        return true;
    }
    let me = caller.principal.as_ref().map(|p| p.subject.as_str());
    if me.is_some() && d.recipient.as_deref() == me {
        return true;
    }
    thread.is_some_and(|t| caller.may_see(t))
}

/// Whether `caller` may see delivery `d`.
async fn may_see(state: &AppState, caller: &Caller, d: &Delivery) -> Result<bool, ServiceError> {
    if visible(caller, d, None) {
        return Ok(true);
    }
    match d.thread {
        Some(id) => {
            let t = state.runtime().store().thread_by_id(id).await?;
            Ok(visible(caller, d, t.as_ref()))
        }
        None => Ok(false),
    }
}

/// A delivery a caller may see, and its thread's key as the caller names it.
pub(crate) struct Seen {
    pub delivery: Delivery,
    pub thread: Option<String>,
}

/// A page of the deliveries `query` selects that `caller` may see, newest first, each with its
/// thread's key as the caller names it, and the `before` of the next page (`None`: the last).
/// What the caller may not see is skipped, so a page may come back short with a cursor.
pub(crate) async fn page(
    state: &AppState,
    caller: &Caller,
    query: &DeliveryQuery,
) -> Result<(Vec<Seen>, Option<i64>), ServiceError> {
    let engine = state.runtime().store();
    let mut threads: HashMap<ThreadId, Option<Thread>> = HashMap::new();
    let mut q = query.clone();
    let mut out = Vec::new();
    if q.limit == 0 {
        return Ok((out, None));
    }
    for _ in 0..READS {
        let batch = state.server_store().deliveries(&q).await?;
        let full = batch.len() == q.limit;
        for d in batch {
            q.before = Some(d.id);
            let t = match d.thread {
                Some(id) => match threads.entry(id) {
                    Entry::Occupied(e) => e.into_mut().as_ref(),
                    Entry::Vacant(e) => e.insert(engine.thread_by_id(id).await?).as_ref(),
                },
                None => None,
            };
            if visible(caller, &d, t) {
                let thread = t.map(|t| caller.visible_key(&t.key));
                out.push(Seen {
                    delivery: d,
                    thread,
                });
                if out.len() == query.limit {
                    return Ok((out, q.before));
                }
            }
        }
        if !full {
            return Ok((out, None));
        }
    }
    Ok((out, q.before))
}

/// Approval `id` (as every door takes it), its thread, and every id a notification about it
/// may carry: a tool call has one; a question one per place its park stood (a reminder or an
/// escalation moves it), from where it parked to where it stands or was answered. Who asks is
/// not checked.
async fn named(
    state: &AppState,
    id: &str,
) -> Result<(ApprovalId, Thread, Vec<duet_runtime::Record>, Vec<String>), ServiceError> {
    let (approval, t) = approvers::locate(state, id).await?;
    let records = approvers::session_records(state, &t, approval.park.session).await?;
    let ids = if approvers::asked(&records, approval.park.seq).is_some() {
        vec![approval.to_string()]
    } else {
        let span = deadline::park_span(&records, approval.park);
        let last = span.last.min(span.first.saturating_add(MAX_IDS - 1));
        (span.first..=last)
            .map(|seq| {
                ApprovalId {
                    thread: t.id,
                    park: Park {
                        session: span.session,
                        seq,
                    },
                }
                .to_string()
            })
            .collect()
    };
    Ok((approval, t, records, ids))
}

/// The deliveries about approval `id` (under any id it had) that `caller` may see, newest
/// first, at most `limit` — for the inbox's question page, whose own read checked the caller
/// may see the question.
pub(crate) async fn about(
    state: &AppState,
    caller: &Caller,
    id: &str,
    limit: usize,
) -> Result<Vec<Delivery>, ServiceError> {
    let (_, _, _, ids) = named(state, id).await?;
    about_ids(state, caller, &ids, limit).await
}

/// The deliveries about any of the approvals `ids` that `caller` may see, newest first, at
/// most `limit`.
pub(crate) async fn about_ids(
    state: &AppState,
    caller: &Caller,
    ids: &[String],
    limit: usize,
) -> Result<Vec<Delivery>, ServiceError> {
    let mut out = Vec::new();
    for subject in ids {
        let query = DeliveryQuery {
            subject: Some(subject.clone()),
            limit,
            ..DeliveryQuery::default()
        };
        out.extend(deliveries(state, caller, &query).await?);
    }
    out.sort_by_key(|d| std::cmp::Reverse(d.id));
    out.truncate(limit);
    Ok(out)
}

/// Revokes the live links to approval `id` (under any id it had), as `caller`: an admin, or
/// whoever may decide it — a tool call's approvers (its owner when it names none), a
/// question's owner and those its deadline escalated it to. How many were revoked; to anyone
/// else the approval is absent.
pub(crate) async fn revoke(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<u64, ServiceError> {
    let (approval, t, records, ids) = named(state, id).await?;
    let seq = approval.park.seq;
    let may = caller.admin
        || match approvers::asked(&records, seq) {
            Some((asked, _)) => approvers::may_decide(caller, &t, &records, seq, &asked.approvers),
            None => {
                caller.may_see(&t)
                    || caller.named_by(&deadline::escalated_at(&records, approval.park))
            }
        };
    if !may {
        return Err(absent(id));
    }
    let mut revoked = 0;
    for subject in &ids {
        revoked += revoke_links(state, subject).await?;
    }
    Ok(revoked)
}

/// The deliveries `query` selects that `caller` may see, newest first.
pub(crate) async fn deliveries(
    state: &AppState,
    caller: &Caller,
    query: &DeliveryQuery,
) -> Result<Vec<Delivery>, ServiceError> {
    let all = state.server_store().deliveries(query).await?;
    if caller.admin {
        return Ok(all);
    }
    let mut seen = Vec::with_capacity(all.len());
    for d in all {
        if may_see(state, caller, &d).await? {
            seen.push(d);
        }
    }
    Ok(seen)
}

/// Delivery `id`, if `caller` may see it.
pub(crate) async fn delivery(
    state: &AppState,
    caller: &Caller,
    id: i64,
) -> Result<Delivery, ServiceError> {
    let absent = || ServiceError::NotFound(format!("no notification delivery `{id}`"));
    let d = state
        .server_store()
        .delivery(id)
        .await?
        .ok_or_else(absent)?;
    if may_see(state, caller, &d).await? {
        Ok(d)
    } else {
        Err(absent())
    }
}

/// Delivery `id` with its thread's key as `caller` names it, if `caller` may see it.
pub(crate) async fn one(state: &AppState, caller: &Caller, id: i64) -> Result<Seen, ServiceError> {
    let d = delivery(state, caller, id).await?;
    let thread = match d.thread {
        Some(t) => state
            .runtime()
            .store()
            .thread_by_id(t)
            .await?
            .map(|t| caller.visible_key(&t.key)),
        None => None,
    };
    Ok(Seen {
        delivery: d,
        thread,
    })
}

/// Puts failed delivery `id` back in the outbox, due now (admins only: it sends again).
pub(crate) async fn retry(
    state: &AppState,
    caller: &Caller,
    id: i64,
) -> Result<Delivery, ServiceError> {
    let d = delivery(state, caller, id).await?;
    if !caller.admin {
        return Err(ServiceError::NotFound(format!(
            "no notification delivery `{id}`"
        )));
    }
    if d.status != DeliveryStatus::Failed {
        return Err(ServiceError::Conflict {
            code: "not_failed",
            detail: format!(
                "delivery `{id}` is {}, not failed: only a failed delivery is retried",
                d.status.as_str()
            ),
        });
    }
    let now = state.runtime().now_ms();
    state.server_store().retry_delivery(id, now).await?;
    state.notify_wake();
    delivery(state, caller, id).await
}

/// How many deliveries each channel has in each status.
pub(crate) async fn counts(
    state: &AppState,
) -> Result<Vec<(String, DeliveryStatus, i64)>, StoreError> {
    state.server_store().delivery_counts().await
}

/// `principal`'s subscriptions (every principal's: `None`).
pub(crate) async fn subscriptions(
    state: &AppState,
    principal: Option<&str>,
) -> Result<Vec<Subscription>, StoreError> {
    state.server_store().subscriptions(principal).await
}

/// Stores a new subscription.
pub(crate) async fn subscribe(state: &AppState, s: &Subscription) -> Result<(), ServiceError> {
    Ok(state.server_store().put_subscription(s).await?)
}

/// Deletes `principal`'s subscription `id`.
pub(crate) async fn unsubscribe(
    state: &AppState,
    principal: Option<&str>,
    id: &str,
) -> Result<bool, ServiceError> {
    Ok(state
        .server_store()
        .delete_subscription(principal, id)
        .await?)
}

/// The deliveries `query` selects, whoever may see them (for the router and the sender).
pub(crate) async fn all_deliveries(
    state: &AppState,
    query: &DeliveryQuery,
) -> Result<Vec<Delivery>, ServiceError> {
    Ok(state.server_store().deliveries(query).await?)
}

/// The API keys not revoked (whose roles route questions to their principals).
pub(crate) async fn live_keys(
    state: &AppState,
) -> Result<Vec<duet_server_store::ApiKey>, ServiceError> {
    let keys = state.server_store().keys().await?;
    Ok(keys
        .into_iter()
        .filter(|k| k.revoked_at.is_none())
        .collect())
}

/// Thread `id`, whoever's it is (the router reads the thread a notice is about).
pub(crate) async fn thread(
    state: &AppState,
    id: duet_runtime::ThreadId,
) -> Result<Option<duet_runtime::Thread>, ServiceError> {
    Ok(state.runtime().store().thread_by_id(id).await?)
}

/// Thread `id`'s records.
pub(crate) async fn records(
    state: &AppState,
    id: duet_runtime::ThreadId,
) -> Result<Vec<duet_runtime::Record>, ServiceError> {
    Ok(state.runtime().store().records(id).await?)
}

/// Thread `id`'s messages.
pub(crate) async fn messages(
    state: &AppState,
    id: duet_runtime::ThreadId,
) -> Result<Vec<duet_runtime::Message>, ServiceError> {
    Ok(state.runtime().store().messages(id).await?)
}

/// A pending call's deadline in words (`seq`: its `approval_requested` record, asked at `at`),
/// if it has one.
pub(crate) async fn call_deadline(
    state: &AppState,
    id: duet_runtime::ThreadId,
    records: &[duet_runtime::Record],
    seq: i64,
    at: i64,
) -> Option<String> {
    use duet_runtime::deadline::{self, Subject};
    let timers = state
        .runtime()
        .store()
        .timers(&deadline::timer_query(id, at))
        .await
        .ok()?;
    deadline::standing(&timers, records, Subject::Approval(seq))
        .map(|s| s.sentence(state.runtime().now_ms()))
}
