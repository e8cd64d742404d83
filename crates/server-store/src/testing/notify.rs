//! The notices, outbox, links, subscriptions and secrets of [`MemoryServerStore`], with the SQL
//! stores' semantics: a notice routed once, a stream's oldest pending delivery the only one
//! claimable, a link used once, the first secret kept. No journal here: a test puts notices in
//! with [`MemoryServerStore::push_notice`].

use std::collections::BTreeSet;

use async_trait::async_trait;

use duet_runtime::{StoreError, ThreadId};

use super::{MemoryServerStore, State};
use crate::{
    Delivery, DeliveryQuery, DeliveryStatus, Link, LinkUse, NewDelivery, Notice, NotifyStore,
    Subscription,
};

impl MemoryServerStore {
    /// Puts a notice in, as the SQL stores' triggers do when a fact is committed (this store
    /// has no journal to watch): its id.
    pub fn push_notice(
        &self,
        thread: ThreadId,
        seq: i64,
        session: Option<i64>,
        fact: &str,
        data: &str,
        created_at: i64,
    ) -> i64 {
        let mut state = self.state();
        state.notice_ids += 1;
        let id = state.notice_ids;
        let notice = Notice {
            id,
            thread,
            seq,
            session,
            fact: fact.to_owned(),
            data: data.to_owned(),
            created_at,
        };
        state.notices.insert(id, (notice, None));
        id
    }
}

impl State {
    /// Refuses `deliveries` when one's idempotency key is taken (by a stored row or another
    /// of them), as the SQL stores' unique key does: nothing may be written then.
    pub(super) fn check_deliveries(&self, deliveries: &[NewDelivery]) -> Result<(), StoreError> {
        let mut keys: BTreeSet<&str> = self
            .outbox
            .values()
            .map(|d| d.idempotency_key.as_str())
            .collect();
        for d in deliveries {
            if !keys.insert(d.idempotency_key.as_str()) {
                return Err(StoreError::Conflict(format!(
                    "idempotency key `{}` is taken",
                    d.idempotency_key
                )));
            }
        }
        Ok(())
    }

    /// Puts `d` in the outbox, pending, made at `created_at` (checked first): its id.
    pub(super) fn insert_delivery(&mut self, d: &NewDelivery, created_at: i64) -> i64 {
        self.outbox_ids += 1;
        let id = self.outbox_ids;
        let row = Delivery {
            id,
            channel: d.channel.clone(),
            stream: d.stream.clone(),
            target: d.target.clone(),
            notice: d.notice,
            thread: d.thread,
            event: d.event.clone(),
            subject: d.subject.clone(),
            subscription: d.subscription.clone(),
            recipient: d.recipient.clone(),
            body: d.body.clone(),
            meta: d.meta.clone(),
            idempotency_key: d.idempotency_key.clone(),
            attempts: 0,
            status: DeliveryStatus::Pending,
            next_at: d.due_at,
            last_error: None,
            response: None,
            created_at,
            finished_at: None,
        };
        self.outbox.insert(id, row);
        id
    }

    /// The pending delivery `id`.
    fn pending(&mut self, id: i64) -> Option<&mut Delivery> {
        self.outbox
            .get_mut(&id)
            .filter(|d| d.status == DeliveryStatus::Pending)
    }
}

/// Whether `d` is one `q` selects (its limit aside).
fn selected(q: &DeliveryQuery, d: &Delivery) -> bool {
    (q.status.is_empty() || q.status.contains(&d.status))
        && q.thread.is_none_or(|t| d.thread == Some(t))
        && q.notice.is_none_or(|n| d.notice == Some(n))
        && q.subject
            .as_ref()
            .is_none_or(|s| d.subject.as_ref() == Some(s))
        && q.channel.as_ref().is_none_or(|c| &d.channel == c)
        && q.recipient
            .as_ref()
            .is_none_or(|r| d.recipient.as_ref() == Some(r))
        && q.before.is_none_or(|b| d.id < b)
}

#[async_trait]
impl NotifyStore for MemoryServerStore {
    async fn notices(&self, limit: usize) -> Result<Vec<Notice>, StoreError> {
        Ok(self
            .state()
            .notices
            .values()
            .filter(|(_, routed)| routed.is_none())
            .take(limit)
            .map(|(n, _)| n.clone())
            .collect())
    }

    async fn route_notice(
        &self,
        id: i64,
        deliveries: &[NewDelivery],
        links: &[(Link, Option<usize>)],
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        if let Some((link, Some(at))) = links
            .iter()
            .find(|(_, at)| at.is_some_and(|at| at >= deliveries.len()))
        {
            return Err(StoreError::Conflict(format!(
                "link `{}` names delivery {at} of {} routed from notice {id}",
                link.id,
                deliveries.len()
            )));
        }
        if !matches!(state.notices.get(&id), Some((_, None))) {
            return Ok(false);
        }
        // Everything checked before anything is written: all or nothing, as a transaction.
        state.check_deliveries(deliveries)?;
        let mut ids = BTreeSet::new();
        for (link, _) in links {
            if state.links.contains_key(&link.id) || !ids.insert(link.id.as_str()) {
                return Err(StoreError::Conflict(format!(
                    "link id `{}` is taken",
                    link.id
                )));
            }
        }
        if deliveries.is_empty() {
            state.notices.remove(&id);
        } else if let Some((_, routed)) = state.notices.get_mut(&id) {
            *routed = Some(now);
        }
        let rows: Vec<i64> = deliveries
            .iter()
            .map(|d| state.insert_delivery(d, now))
            .collect();
        for (link, at) in links {
            let stored = Link {
                delivery: at.and_then(|at| rows.get(at).copied()),
                ..link.clone()
            };
            state.links.insert(link.id.clone(), stored);
        }
        Ok(true)
    }

    async fn enqueue(&self, deliveries: &[NewDelivery]) -> Result<Vec<i64>, StoreError> {
        let mut state = self.state();
        state.check_deliveries(deliveries)?;
        Ok(deliveries
            .iter()
            .map(|d| state.insert_delivery(d, d.due_at))
            .collect())
    }

    async fn claim_deliveries(
        &self,
        now: i64,
        lease_ms: i64,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let mut state = self.state();
        let mut claimed = Vec::new();
        let mut streams = BTreeSet::new();
        for d in state.outbox.values_mut() {
            if claimed.len() == limit {
                break;
            }
            if d.status != DeliveryStatus::Pending {
                continue;
            }
            // A stream's oldest pending delivery goes first, and alone.
            if !streams.insert(d.stream.clone()) {
                continue;
            }
            if d.next_at <= now {
                d.next_at = now.saturating_add(lease_ms);
                claimed.push(d.clone());
            }
        }
        Ok(claimed)
    }

    async fn delivered(&self, id: i64, response: Option<&str>, now: i64) -> Result<(), StoreError> {
        if let Some(d) = self.state().pending(id) {
            d.status = DeliveryStatus::Delivered;
            d.response = response.map(str::to_owned);
            d.meta = None;
            d.finished_at = Some(now);
            d.next_at = now;
        }
        Ok(())
    }

    async fn delivery_failed(
        &self,
        id: i64,
        next_at: Option<i64>,
        error: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        if let Some(d) = self.state().pending(id) {
            d.attempts += 1;
            d.last_error = Some(error.to_owned());
            match next_at {
                Some(at) => d.next_at = at,
                None => {
                    d.status = DeliveryStatus::Failed;
                    d.next_at = now;
                    d.finished_at = Some(now);
                }
            }
        }
        Ok(())
    }

    async fn retry_delivery(&self, id: i64, now: i64) -> Result<bool, StoreError> {
        let mut state = self.state();
        let Some(d) = state
            .outbox
            .get_mut(&id)
            .filter(|d| d.status == DeliveryStatus::Failed)
        else {
            return Ok(false);
        };
        d.status = DeliveryStatus::Pending;
        d.attempts = 0;
        d.next_at = now;
        d.finished_at = None;
        Ok(true)
    }

    async fn delivery(&self, id: i64) -> Result<Option<Delivery>, StoreError> {
        Ok(self.state().outbox.get(&id).cloned())
    }

    async fn deliveries(&self, query: &DeliveryQuery) -> Result<Vec<Delivery>, StoreError> {
        Ok(self
            .state()
            .outbox
            .values()
            .rev()
            .filter(|d| selected(query, d))
            .take(query.limit)
            .cloned()
            .collect())
    }

    async fn delivery_counts(&self) -> Result<Vec<(String, DeliveryStatus, i64)>, StoreError> {
        let mut counts = std::collections::BTreeMap::new();
        for d in self.state().outbox.values() {
            *counts
                .entry((d.channel.clone(), d.status.as_str()))
                .or_insert(0) += 1;
        }
        Ok(counts
            .into_iter()
            .filter_map(|((channel, status), n)| {
                DeliveryStatus::parse(status).map(|s| (channel, s, n))
            })
            .collect())
    }

    async fn link(&self, id: &str) -> Result<Option<Link>, StoreError> {
        Ok(self.state().links.get(id).cloned())
    }

    async fn use_link(&self, id: &str, by: &str, now: i64) -> Result<LinkUse, StoreError> {
        let mut state = self.state();
        let Some(link) = state.links.get_mut(id) else {
            return Ok(LinkUse::Unknown);
        };
        Ok(if link.used_at.is_some() {
            LinkUse::Used(link.clone())
        } else if link.revoked_at.is_some() {
            LinkUse::Revoked(link.clone())
        } else if link.expires_at <= now {
            LinkUse::Expired(link.clone())
        } else {
            link.used_at = Some(now);
            link.used_by = Some(by.to_owned());
            LinkUse::First(link.clone())
        })
    }

    async fn revoke_links(&self, approval: &str, now: i64) -> Result<u64, StoreError> {
        let mut revoked = 0;
        for link in self.state().links.values_mut() {
            if link.approval == approval && link.used_at.is_none() && link.revoked_at.is_none() {
                link.revoked_at = Some(now);
                revoked += 1;
            }
        }
        Ok(revoked)
    }

    async fn put_subscription(&self, subscription: &Subscription) -> Result<(), StoreError> {
        let mut state = self.state();
        if state.subscriptions.iter().any(|s| s.id == subscription.id) {
            return Err(StoreError::Conflict(format!(
                "subscription id `{}` is taken",
                subscription.id
            )));
        }
        state.subscriptions.push(subscription.clone());
        Ok(())
    }

    async fn subscriptions(
        &self,
        principal: Option<&str>,
    ) -> Result<Vec<Subscription>, StoreError> {
        let mut found: Vec<Subscription> = self
            .state()
            .subscriptions
            .iter()
            .filter(|s| principal.is_none_or(|p| s.principal == p))
            .cloned()
            .collect();
        found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(found)
    }

    async fn delete_subscription(
        &self,
        principal: Option<&str>,
        id: &str,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let before = state.subscriptions.len();
        state
            .subscriptions
            .retain(|s| !(s.id == id && principal.is_none_or(|p| s.principal == p)));
        Ok(state.subscriptions.len() != before)
    }

    async fn secret(&self, name: &str, fresh: &str) -> Result<String, StoreError> {
        Ok(self
            .state()
            .secrets
            .entry(name.to_owned())
            .or_insert_with(|| fresh.to_owned())
            .clone())
    }
}
