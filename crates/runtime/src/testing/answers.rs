//! The answered parks of [`MemoryStore`] (its `QueueStore::answered`): the inbox's history.

use super::State;
use crate::store::{Answered, AnsweredQuery, JournalEntry};

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
}
