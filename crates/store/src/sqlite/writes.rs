//! SQLite's writes that deliver a message (`enqueue`, `create_with`, `answer`), each one job of
//! the committer's group ([`super::commit`]): its statements run in the group's transaction on
//! the write connection, in one crossing to the driver's thread with whatever else waits, and
//! their rows come back to the caller. No statement of theirs fails on a path a caller can
//! take (a message id delivered before is found by a read), so one write never rolls back the
//! others of its group.

use super::commit::{Job, WriteJob, WriteText, Written};
use super::*;
use crate::batch::Args;
use duet_runtime::Starting;
use sqlx::sqlite::SqliteRow;

impl SqliteStore {
    /// Writes `job` with whatever else waits: its rows.
    async fn rows_of(&self, job: WriteJob) -> Result<Vec<SqliteRow>, StoreError> {
        match self.committer.commit(Job::Write(job)).await? {
            Written::Rows(rows) => Ok(rows),
            Written::Commit(..) => Err(StoreError::Corrupt("a write told a commit's row".into())),
        }
    }

    /// `enqueue` as one job: the message id, the message and the lease taken if free, in one
    /// transaction (`BEGIN IMMEDIATE` serialises it, so the lease it judges is the lease as it
    /// stands). A message id delivered before is found by the first statement, and each write
    /// after it is made only if the one before wrote its row (`changes()`), so it writes nothing;
    /// a missing thread queues nothing. `read_start`: when the lease was taken, the run's first
    /// read too, in the same call.
    pub(super) async fn enqueue_one(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Option<Lease>,
        now: i64,
        read_start: bool,
    ) -> Result<Starting<bool>, StoreError> {
        macro_rules! writes {
            () => {
                "SELECT ($2 IS NOT NULL AND EXISTS (SELECT 1 FROM deliveries d JOIN threads t ON t.num = d.thread \
                   WHERE t.id = $1 AND d.message_id = $2)) AS seen;\n\
                 INSERT INTO deliveries (thread, message_id, created_at) SELECT num, $2, $3 FROM threads WHERE id = $1 AND $2 IS NOT NULL \
                   ON CONFLICT (thread, message_id) DO NOTHING;\n\
                 INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace, attachments, message_id) \
                   SELECT num, $4, $5, $6, $7, $8, $9, $3, $10, $11, $12, $13, $14, $15, $2 FROM threads WHERE id = $1 AND ($2 IS NULL OR changes() = 1) \
                   RETURNING (SELECT next_seq - 1 FROM threads WHERE num = queue.thread) AS seq, \
                     (SELECT status FROM threads WHERE num = queue.thread) AS status;\n\
                 UPDATE threads SET lease_owner = $16, lease_expires = $17, abort_requested = FALSE \
                   WHERE id = $1 AND $16 IS NOT NULL AND (lease_owner IS NULL OR lease_expires < $18 OR lease_owner = $16) AND changes() = 1;\n\
                 SELECT 1 AS claimed WHERE changes() = 1;\n"
            };
        }
        const SQL: WriteText = WriteText::of(writes!());
        const STARTING: WriteText = WriteText::of(concat!(
            writes!(),
            start_reads!(" AND lease_owner = $16", " AND t.lease_owner = $16")
        ));
        /// The queue insert's row: the message was queued (its `seq` and `status`).
        fn queued(rows: &[SqliteRow]) -> Option<&SqliteRow> {
            rows.iter()
                .find(|r| !has_part(r) && r.try_get::<i64, _>("seq").is_ok())
        }
        fn announce(id: ThreadId, rows: &[SqliteRow]) -> Option<Change> {
            queued(rows).and_then(|r| change_in(r, id).ok())
        }
        let sql = if read_start { STARTING } else { SQL };
        let args = crate::fragments::bind_enqueue!(Args::default(), id, &message, &claim, now);
        let rows = self
            .rows_of(WriteJob::new(sql, args.0, id, announce))
            .await?;
        let seen = rows.iter().find_map(|r| r.try_get::<bool, _>("seen").ok());
        if let Some(message_id) = &message.message_id
            && seen == Some(true)
        {
            return Err(StoreError::Duplicate {
                thread: id,
                message_id: message_id.clone(),
            });
        }
        if queued(&rows).is_none() {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let claimed = claimed(&rows);
        Ok(Starting {
            outcome: claimed,
            start: super::start_from(&rows)?.filter(|_| claimed),
        })
    }

    /// `create_with` as one job: the thread, unless its key is taken, read back from its
    /// insert, then its first message and message id, each written only if the statement before
    /// it wrote its row (`changes()`): a retry with the same id finds the key taken and writes
    /// nothing. `read_start`: the run's first read too (the new thread's queue: its one
    /// message), in the same call.
    pub(super) async fn create_with_one(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
        read_start: bool,
    ) -> Result<Starting<Option<Thread>>, StoreError> {
        macro_rules! writes {
            () => {
                concat!(
                    "INSERT INTO threads (id, key, agent, origin, parent, principal, source, status, created_at, updated_at, lease_owner, lease_expires) \
                       VALUES ($1, $2, $3, $3, $4, $5, $6, 'idle', $7, $7, $8, $9) ON CONFLICT (key) DO NOTHING RETURNING ",
                    crate::fragments::thread_cols!(),
                    ";\n\
                     INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace, attachments, message_id) \
                       SELECT num, $12, $13, $14, $15, $16, $17, $11, $18, $19, $20, $21, $22, $23, $10 FROM threads WHERE id = $1 AND changes() = 1;\n\
                     INSERT INTO deliveries (thread, message_id, created_at) \
                       SELECT num, $10, $11 FROM threads WHERE id = $1 AND $10 IS NOT NULL AND changes() = 1;\n"
                )
            };
        }
        const SQL: WriteText = WriteText::of(writes!());
        const STARTING: WriteText = WriteText::of(concat!(
            writes!(),
            start_reads!(" AND lease_owner = $8", " AND t.lease_owner = $8")
        ));
        /// The insert's row, if it wrote one (the start's rows have a `part`).
        fn created(rows: &[SqliteRow]) -> Option<&SqliteRow> {
            rows.iter().find(|r| !has_part(r))
        }
        fn announce(_: ThreadId, rows: &[SqliteRow]) -> Option<Change> {
            let thread = thread_from_row(created(rows)?).ok()?;
            Some(Change {
                thread: thread.id,
                seq: thread.next_seq - 1,
                status: thread.status,
            })
        }
        let sql = if read_start { STARTING } else { SQL };
        let new = OwnedNewThread::from(&new);
        let id = new.id;
        let args = crate::fragments::bind_new_thread!(Args::default(), key.to_owned(), new)
            .bind(claim.owner.to_string())
            .bind(claim.until)
            .bind(message.message_id.as_deref())
            .bind(claim.now);
        let args = crate::fragments::bind_message!(args, &message);
        let rows = self
            .rows_of(WriteJob::new(sql, args.0, id, announce))
            .await?;
        let Some(row) = created(&rows) else {
            return Ok(Starting::of(None));
        };
        Ok(Starting {
            outcome: Some(thread_from_row(row)?),
            start: super::start_from(&rows)?,
        })
    }

    /// `answer` as one job: what decides it is read first (the thread at the park or not, the
    /// message id seen, an answer queued, and the first answer to tell a refused caller), and
    /// each write after it is made only if the park is still open to this answer, as that read
    /// found it (`BEGIN IMMEDIATE`: nothing else writes in between). The writes keep the
    /// condition true until the last: the answer recorded, the lease taken if free, the message
    /// queued, and only then its message id (which the condition reads), if the queue insert
    /// just before wrote its row (`changes()`). `read_start`: when the answer took the lease,
    /// the run's first read too, in the same call.
    pub(super) async fn answer_one(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
        read_start: bool,
    ) -> Result<Starting<AnswerOutcome>, StoreError> {
        /// The park is open to this answer: the thread is at it, the message id is new, and no
        /// other answer is queued. `$1` thread id, `$2` message id, `$3` session, `$4` seq.
        macro_rules! open {
            () => {
                "t.status = 'awaiting_human' AND t.session = $3 AND t.next_seq = $4 \
                 AND NOT ($2 IS NOT NULL AND EXISTS (SELECT 1 FROM deliveries d WHERE d.thread = t.num AND d.message_id = $2)) \
                 AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.thread = t.num AND q.human = TRUE AND q.follow_up = FALSE)"
            };
        }
        macro_rules! writes {
            () => {
                concat!(
                    "SELECT t.next_seq - 1 AS seq, t.status, \
                       ($2 IS NOT NULL AND EXISTS (SELECT 1 FROM deliveries d WHERE d.thread = t.num AND d.message_id = $2)) AS seen, \
                       (t.status = 'awaiting_human' AND t.session = $3 AND t.next_seq = $4) AS at_park, \
                       a.content AS a_content, a.created_at AS a_at, a.author AS a_author, a.message_id AS a_message_id, \
                       (SELECT q.content FROM queue q WHERE q.thread = t.num AND q.human = TRUE AND q.follow_up = FALSE ORDER BY q.id LIMIT 1) AS q_content, \
                       (SELECT q.created_at FROM queue q WHERE q.thread = t.num AND q.human = TRUE AND q.follow_up = FALSE ORDER BY q.id LIMIT 1) AS q_at, \
                       (SELECT j.content FROM journal j WHERE j.thread = t.num AND j.kind = 'message' AND j.seq >= $4 ORDER BY j.seq LIMIT 1) AS j_content, \
                       (SELECT j.created_at FROM journal j WHERE j.thread = t.num AND j.kind = 'message' AND j.seq >= $4 ORDER BY j.seq LIMIT 1) AS j_at \
                     FROM threads t LEFT JOIN answers a ON a.thread = t.num AND a.session = $3 AND a.seq = $4 WHERE t.id = $1;\n\
                     INSERT INTO answers (thread, session, seq, author, message_id, content, created_at) \
                       SELECT t.num, $3, $4, $5, $2, $6, $7 FROM threads t WHERE t.id = $1 AND ",
                    open!(),
                    " ON CONFLICT (thread, session, seq) DO UPDATE SET author = excluded.author, message_id = excluded.message_id, \
                       content = excluded.content, created_at = excluded.created_at;\n\
                     UPDATE threads AS t SET lease_owner = $8, lease_expires = $9, abort_requested = FALSE \
                       WHERE t.id = $1 AND (t.lease_owner IS NULL OR t.lease_expires < $7 OR t.lease_owner = $8) AND ",
                    open!(),
                    ";\n\
                     SELECT 1 AS claimed WHERE changes() = 1;\n\
                     INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at, tool_call_id, tool_name, tool_status, images, trace, attachments, message_id) \
                       SELECT t.num, $10, $11, $12, $13, $14, $15, $7, $16, $17, $18, $19, $20, $21, $2 FROM threads t WHERE t.id = $1 AND ",
                    open!(),
                    ";\n\
                     INSERT INTO deliveries (thread, message_id, created_at) \
                       SELECT t.num, $2, $7 FROM threads t WHERE t.id = $1 AND $2 IS NOT NULL AND changes() = 1 \
                       ON CONFLICT (thread, message_id) DO NOTHING;\n"
                )
            };
        }
        const SQL: WriteText = WriteText::of(writes!());
        const STARTING: WriteText = WriteText::of(concat!(
            writes!(),
            start_reads!(" AND lease_owner = $8", " AND t.lease_owner = $8")
        ));
        /// The first statement's row (what decides the answer), if the thread exists.
        fn facts(rows: &[SqliteRow]) -> Option<&SqliteRow> {
            rows.iter()
                .find(|r| !has_part(r) && r.try_get::<i64, _>("seq").is_ok())
        }
        /// Whether the answer was taken: the thread was at the park, its message id new, and no
        /// other answer queued.
        fn accepted(facts: &SqliteRow) -> Result<bool, StoreError> {
            let seen: bool = facts.try_get("seen").map_err(db_error)?;
            let at_park: bool = facts.try_get("at_park").map_err(db_error)?;
            let queued: Option<i64> = facts.try_get("q_at").map_err(db_error)?;
            Ok(!seen && at_park && queued.is_none())
        }
        fn announce(id: ThreadId, rows: &[SqliteRow]) -> Option<Change> {
            let facts = facts(rows)?;
            accepted(facts).ok()?.then(|| change_in(facts, id).ok())?
        }
        let sql = if read_start { STARTING } else { SQL };
        let args = Args::default()
            .bind(id.to_string())
            .bind(message.message_id.as_deref())
            .bind(park.session)
            .bind(park.seq)
            .bind(message.author.as_deref())
            .bind(&message.content)
            .bind(claim.now)
            .bind(claim.owner.to_string())
            .bind(claim.until);
        let args = crate::fragments::bind_message!(args, &message);
        let rows = self
            .rows_of(WriteJob::new(sql, args.0, id, announce))
            .await?;
        let Some(facts) = facts(&rows) else {
            return Err(StoreError::NotFound(id.to_string()));
        };
        if let Some(message_id) = &message.message_id
            && facts.try_get::<bool, _>("seen").map_err(db_error)?
        {
            return Err(StoreError::Duplicate {
                thread: id,
                message_id: message_id.clone(),
            });
        }
        if !accepted(facts)? {
            return Ok(Starting::of(AnswerOutcome::Refused {
                first: first_answer(facts)?,
            }));
        }
        let claimed = claimed(&rows);
        Ok(Starting {
            outcome: AnswerOutcome::Accepted { claimed },
            start: super::start_from(&rows)?.filter(|_| claimed),
        })
    }

    pub(super) async fn enqueue_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Option<Lease>,
        now: i64,
    ) -> Result<bool, StoreError> {
        Ok(self
            .enqueue_one(id, message, claim, now, false)
            .await?
            .outcome)
    }

    pub(super) async fn enqueue_starting_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        claim: Lease,
        now: i64,
    ) -> Result<Starting<bool>, StoreError> {
        self.enqueue_one(id, message, Some(claim), now, true).await
    }

    pub(super) async fn create_with_impl(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<Option<Thread>, StoreError> {
        Ok(self
            .create_with_one(key, new, message, claim, false)
            .await?
            .outcome)
    }

    pub(super) async fn create_starting_impl(
        &self,
        key: &str,
        new: NewThread<'_>,
        message: NewQueued,
        claim: Lease,
    ) -> Result<Starting<Option<Thread>>, StoreError> {
        self.create_with_one(key, new, message, claim, true).await
    }

    pub(super) async fn answer_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
    ) -> Result<AnswerOutcome, StoreError> {
        Ok(self
            .answer_one(id, message, park, claim, false)
            .await?
            .outcome)
    }

    pub(super) async fn answer_starting_impl(
        &self,
        id: ThreadId,
        message: NewQueued,
        park: Park,
        claim: Lease,
    ) -> Result<Starting<AnswerOutcome>, StoreError> {
        self.answer_one(id, message, park, claim, true).await
    }
}

/// A [`NewThread`] that owns its strings, for a write handed to the committer.
struct OwnedNewThread {
    id: ThreadId,
    agent: String,
    parent: Option<ThreadId>,
    principal: Option<String>,
    source: Option<String>,
    now: i64,
}

impl OwnedNewThread {
    fn from(new: &NewThread<'_>) -> Self {
        OwnedNewThread {
            id: new.id,
            agent: new.agent.to_owned(),
            parent: new.parent,
            principal: new.principal.map(str::to_owned),
            source: new.source.map(str::to_owned),
            now: new.now,
        }
    }
}

/// Whether `row` is one of a run's start ([`super::start_from`]'s), not the write's own.
fn has_part(row: &SqliteRow) -> bool {
    row.try_get::<i64, _>("part").is_ok()
}

/// Whether the write's lease update changed its row (`claimed`, read right after it): it
/// took the lease.
fn claimed(rows: &[SqliteRow]) -> bool {
    rows.iter()
        .any(|r| !has_part(r) && r.try_get::<i64, _>("claimed").is_ok())
}

/// The change-feed notice a one-call write read back: its `seq` (the thread's last) and
/// `status` columns.
fn change_in(row: &SqliteRow, id: ThreadId) -> Result<Change, StoreError> {
    let status: String = row.try_get("status").map_err(db_error)?;
    Ok(Change {
        thread: id,
        seq: row.try_get("seq").map_err(db_error)?,
        status: ThreadStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?,
    })
}

/// What a refused answer is told, from `answer`'s first row: the answer recorded for the park
/// (it names its author), else the one queued, else the first message journaled at the park.
fn first_answer(facts: &SqliteRow) -> Result<Option<FirstAnswer>, StoreError> {
    let at = |column: &str| facts.try_get::<Option<i64>, _>(column).map_err(db_error);
    let answer = |content: String, at: i64| FirstAnswer {
        content,
        at,
        author: None,
        message_id: None,
    };
    Ok(if let Some(at) = at("a_at")? {
        Some(FirstAnswer {
            author: facts.try_get("a_author").map_err(db_error)?,
            message_id: facts.try_get("a_message_id").map_err(db_error)?,
            ..answer(facts.try_get("a_content").map_err(db_error)?, at)
        })
    } else if let Some(at) = at("q_at")? {
        Some(answer(facts.try_get("q_content").map_err(db_error)?, at))
    } else if let Some(at) = at("j_at")? {
        let content: Option<String> = facts.try_get("j_content").map_err(db_error)?;
        Some(answer(content.unwrap_or_default(), at))
    } else {
        None
    })
}
