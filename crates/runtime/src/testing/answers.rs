//! The answered parks of [`MemoryStore`] (its `QueueStore::answered`): the inbox's history.

use super::State;
use crate::record::RecordBody;
use crate::store::{Answered, AnsweredQuery, DecisionEntry, JournalEntry};

impl State {
    /// The answered parks `query` asks for, newest first (as the SQL stores order them: by time,
    /// then thread id, session and seq, all descending).
    pub(super) fn answered(&self, query: &AnsweredQuery<'_>) -> Vec<Answered> {
        let mut all: Vec<Answered> = self
            .answers
            .iter()
            .filter_map(|((id, park), answer)| {
                let row = self.row(*id)?;
                let t = &row.thread;
                let question = row
                    .journal
                    .range(..park.seq)
                    .rev()
                    .find_map(|(_, e)| match e {
                        JournalEntry::Message(m) => Some(m.content.clone()),
                        JournalEntry::Record(_) => None,
                    });
                Some(Answered {
                    thread: *id,
                    key: t.key.clone(),
                    agent: t.agent.clone(),
                    principal: t.principal.clone(),
                    park: *park,
                    question: question.flatten(),
                    answer: answer.clone(),
                })
            })
            .filter(|a| query.principal.is_none() || a.principal.as_deref() == query.principal)
            .filter(|a| query.agent.is_none_or(|agent| a.agent == agent))
            .filter(|a| query.thread.is_none_or(|id| a.thread == id))
            .filter(|a| {
                query.before.is_none_or(|(at, id, park)| {
                    (
                        a.answer.at,
                        a.thread.to_string(),
                        a.park.session,
                        a.park.seq,
                    ) < (at, id.to_string(), park.session, park.seq)
                })
            })
            .collect();
        all.sort_by_key(|a| {
            std::cmp::Reverse((
                a.answer.at,
                a.thread.to_string(),
                a.park.session,
                a.park.seq,
            ))
        });
        all.truncate(query.limit);
        all
    }

    /// The decisions `query` asks for, newest first (by when they were written, then thread
    /// id and the record's seq, all descending).
    pub(super) fn decisions(&self, query: &AnsweredQuery<'_>) -> Vec<DecisionEntry> {
        let mut all: Vec<DecisionEntry> = Vec::new();
        for row in &self.threads {
            let t = &row.thread;
            let id = t.id;
            for (seq, entry) in &row.journal {
                let JournalEntry::Record(r) = entry else {
                    continue;
                };
                let RecordBody::ApprovalDecided(decided) = &r.body else {
                    continue;
                };
                let session = row
                    .journal
                    .range(..*seq)
                    .rev()
                    .find_map(|(_, e)| match e {
                        JournalEntry::Message(m) => Some(m.session),
                        JournalEntry::Record(_) => None,
                    })
                    .unwrap_or(0);
                all.push(DecisionEntry {
                    thread: id,
                    key: t.key.clone(),
                    agent: t.agent.clone(),
                    principal: t.principal.clone(),
                    session,
                    seq: *seq,
                    written_at: r.created_at,
                    decided: decided.clone(),
                });
            }
        }
        let order = |d: &DecisionEntry| (d.written_at, d.thread.to_string(), d.seq);
        all.retain(|d| {
            (query.principal.is_none() || d.principal.as_deref() == query.principal)
                && query.agent.is_none_or(|agent| d.agent == agent)
                && query.thread.is_none_or(|id| d.thread == id)
                && query
                    .before
                    .is_none_or(|(at, id, park)| order(d) < (at, id.to_string(), park.seq))
        });
        all.sort_by_key(|d| std::cmp::Reverse(order(d)));
        all.truncate(query.limit);
        all
    }
}
