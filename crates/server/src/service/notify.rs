//! Notifications on the server's own tables (`duet_server_store::NotifyStore`): the notices to
//! route, the outbox, links, principals' subscriptions and the shared secrets. What a caller may
//! see of them is decided here (a principal sees its own subscriptions and the deliveries sent
//! to it or about its threads; an admin sees all).

use duet_runtime::StoreError;
use duet_server_store::{
    Delivery, DeliveryQuery, DeliveryStatus, Link, LinkUse, NewDelivery, Notice, Subscription,
};

use super::ServiceError;
use crate::auth::Caller;
use crate::state::AppState;

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

/// Whether `caller` may see delivery `d`: an admin, its recipient, or the owner of its thread.
async fn may_see(state: &AppState, caller: &Caller, d: &Delivery) -> Result<bool, ServiceError> {
    if caller.admin {
        return Ok(true);
    }
    let me = caller.principal.as_ref().map(|p| p.subject.as_str());
    if me.is_some() && d.recipient.as_deref() == me {
        return Ok(true);
    }
    match d.thread {
        Some(id) => Ok(state
            .runtime()
            .store()
            .thread_by_id(id)
            .await?
            .is_some_and(|t| caller.may_see(&t))),
        None => Ok(false),
    }
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
