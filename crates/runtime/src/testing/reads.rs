//! The thread and journal reads of [`MemoryStore`].

use async_trait::async_trait;

use super::MemoryStore;
use crate::record::Record;
use crate::store::{
    JournalEntry, JournalStore, Listed, MAX_PARENTS, NewThread, ParentFilter, StoreError,
    ThreadQuery, ThreadStore, TimerKind, TimerStatus,
};
use crate::types::{ChildStatus, Message, Thread, ThreadId, ThreadStatus};

#[async_trait]
impl ThreadStore for MemoryStore {
    async fn open_thread(&self, key: &str, new: NewThread<'_>) -> Result<Thread, StoreError> {
        let mut state = self.state();
        if let Some(&i) = state.by_key.get(key) {
            return Ok(state.threads[i].thread.clone());
        }
        let (thread, change) = state.insert_thread(key, new)?;
        self.hub.publish(change);
        Ok(thread)
    }

    async fn thread(&self, key: &str) -> Result<Option<Thread>, StoreError> {
        let state = self.state();
        Ok(state
            .by_key
            .get(key)
            .map(|&i| state.threads[i].thread.clone()))
    }

    async fn thread_by_id(&self, id: ThreadId) -> Result<Option<Thread>, StoreError> {
        Ok(self.state().row(id).map(|r| r.thread.clone()))
    }

    async fn threads(&self, status: Option<ThreadStatus>) -> Result<Vec<Thread>, StoreError> {
        Ok(self
            .state()
            .threads
            .iter()
            .filter(|r| status.is_none_or(|s| r.thread.status == s))
            .map(|r| r.thread.clone())
            .collect())
    }

    async fn status_counts(&self) -> Result<crate::store::StatusCounts, StoreError> {
        let state = self.state();
        let mut by: std::collections::BTreeMap<&'static str, (ThreadStatus, u64)> =
            std::collections::BTreeMap::new();
        let mut oldest: Option<i64> = None;
        for r in &state.threads {
            let t = &r.thread;
            by.entry(t.status.as_str()).or_insert((t.status, 0)).1 += 1;
            if t.status == ThreadStatus::AwaitingHuman {
                oldest = Some(oldest.map_or(t.updated_at, |o| o.min(t.updated_at)));
            }
        }
        Ok(crate::store::StatusCounts {
            by_status: by.into_values().collect(),
            oldest_awaiting: oldest,
        })
    }

    async fn list_threads(&self, q: &ThreadQuery<'_>) -> Result<Vec<Thread>, StoreError> {
        let state = self.state();
        let mut rows: Vec<&Thread> = state
            .threads
            .iter()
            .map(|r| &r.thread)
            .filter(|t| q.agent.is_none_or(|a| t.agent == a))
            .filter(|t| q.status.is_none_or(|s| t.status == s))
            .filter(|t| match q.parent {
                ParentFilter::Any => true,
                ParentFilter::TopLevel => t.parent.is_none(),
                ParentFilter::Of(p) => t.parent == Some(p),
            })
            .filter(|t| {
                q.principal
                    .is_none_or(|p| t.principal.as_deref() == Some(p))
            })
            .filter(|t| match q.after {
                None => true,
                Some(after) if q.newest_first => t.id.to_string() < after.to_string(),
                Some(after) => t.id.to_string() > after.to_string(),
            })
            .collect();
        rows.sort_by_key(|t| t.id.to_string());
        if q.newest_first {
            rows.reverse();
        }
        Ok(rows.into_iter().take(q.limit).cloned().collect())
    }

    async fn list_listed(
        &self,
        q: &ThreadQuery<'_>,
        only: Option<ThreadId>,
    ) -> Result<Vec<Listed>, StoreError> {
        let wide = ThreadQuery {
            limit: usize::MAX,
            ..*q
        };
        let page: Vec<Thread> = self
            .list_threads(if only.is_some() { &wide } else { q })
            .await?
            .into_iter()
            .filter(|t| only.is_none_or(|id| t.id == id))
            .take(q.limit)
            .collect();
        let mut out = Vec::with_capacity(page.len());
        for thread in page {
            let question = self.last_message(thread.id).await?.and_then(|m| m.content);
            let state = self.state();
            let mut parents = Vec::new();
            let mut up = thread.parent;
            while let Some(id) = up
                && parents.len() < MAX_PARENTS
            {
                let Some(p) = state.row(id).map(|r| r.thread.clone()) else {
                    break;
                };
                up = p.parent;
                parents.push(p);
            }
            let subject = crate::deadline::Subject::parked(&thread).map(|s| s.to_string());
            let deadline = subject.is_some_and(|subject| {
                state.timers.values().any(|t| {
                    t.thread == thread.id
                        && t.kind == TimerKind::Deadline
                        && t.status != TimerStatus::Cancelled
                        && t.subject.as_deref() == Some(subject.as_str())
                })
            });
            out.push(Listed {
                thread,
                question,
                parents,
                deadline,
            });
        }
        Ok(out)
    }

    async fn terminate(&self, id: ThreadId, now: i64) -> Result<(), StoreError> {
        let mut state = self.state();
        let row = state.existing(id)?;
        row.thread.status = ThreadStatus::Terminated;
        row.thread.lease_owner = None;
        row.thread.lease_expires = 0;
        row.thread.updated_at = now;
        row.abort_requested = false;
        row.queue.clear();
        let change = row.change();
        if let Some(child) = state.children.get_mut(&id) {
            child.status = ChildStatus::Terminated;
        }
        for t in state.timers.values_mut() {
            if t.thread == id && t.status == crate::store::TimerStatus::Pending {
                t.status = crate::store::TimerStatus::Cancelled;
                t.updated_at = now;
            }
        }
        self.hub.publish(change);
        Ok(())
    }
}

#[async_trait]
impl JournalStore for MemoryStore {
    async fn messages(&self, id: ThreadId) -> Result<Vec<Message>, StoreError> {
        let state = self.state();
        let journal = state.row(id).map(|r| r.journal.values());
        Ok(journal
            .into_iter()
            .flatten()
            .filter_map(|e| match e {
                JournalEntry::Message(m) => Some(m.clone()),
                JournalEntry::Record(_) => None,
            })
            .collect())
    }

    async fn records(&self, id: ThreadId) -> Result<Vec<Record>, StoreError> {
        let state = self.state();
        let journal = state.row(id).map(|r| r.journal.values());
        Ok(journal
            .into_iter()
            .flatten()
            .filter_map(|e| match e {
                JournalEntry::Record(r) => Some(r.clone()),
                JournalEntry::Message(_) => None,
            })
            .collect())
    }

    async fn journal_since(&self, id: ThreadId, seq: i64) -> Result<Vec<JournalEntry>, StoreError> {
        let state = self.state();
        Ok(state
            .row(id)
            .map(|r| {
                r.journal
                    .range(seq.saturating_add(1)..)
                    .map(|(_, e)| e.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn journal_page(
        &self,
        id: ThreadId,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let state = self.state();
        Ok(state
            .row(id)
            .map(|r| {
                r.journal
                    .range(seq.saturating_add(1)..)
                    .take(limit)
                    .map(|(_, e)| e.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn session_entries(
        &self,
        id: ThreadId,
        session: i64,
        below: i64,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let state = self.state();
        let Some(row) = state.row(id) else {
            return Ok(Vec::new());
        };
        let start = |n: i64| {
            row.journal.values().find_map(|e| match e {
                JournalEntry::Record(r)
                    if r.body == (crate::record::RecordBody::SessionStarted { session: n }) =>
                {
                    Some(r.seq)
                }
                _ => None,
            })
        };
        let Some(from) = start(session) else {
            return Ok(Vec::new());
        };
        let to = start(session.saturating_add(1)).map_or(below, |s| s.min(below));
        Ok(row
            .journal
            .range(from..to.max(from))
            .map(|(_, e)| e.clone())
            .collect())
    }

    async fn settles(
        &self,
        id: ThreadId,
        below: i64,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let state = self.state();
        Ok(state
            .row(id)
            .map(|r| {
                r.journal
                    .range(..below)
                    .rev()
                    .filter_map(|(_, e)| match e {
                        JournalEntry::Record(r)
                            if crate::store::SETTLE_KINDS.contains(&r.body.kind()) =>
                        {
                            Some(r.clone())
                        }
                        _ => None,
                    })
                    .take(limit)
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn last_message(&self, id: ThreadId) -> Result<Option<Message>, StoreError> {
        let state = self.state();
        Ok(state.row(id).and_then(|r| {
            r.journal.values().rev().find_map(|e| match e {
                JournalEntry::Message(m) if m.content.is_some() => Some(m.clone()),
                _ => None,
            })
        }))
    }
}
