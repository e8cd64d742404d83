-- Reads bounded by what they return (issue #35). Keep in step with ../sqlite/0020_journal_ranges.sql.
--
-- Two partial indexes on the journal, kept by the database in the transaction of every commit
-- (older builds' too: nothing new is written, so this is additive). Each touches only the rows
-- of its kinds, so the ping-pong write path (messages, turns) pays one comparison per row.
--
-- A session's range of the journal is [its `session_started` seq, the next session's): the
-- session's number is its record's `data.session`, so the index is on that expression (a
-- reader must spell it exactly so, `(data::jsonb ->> 'session')::bigint`, for the planner to use
-- it).
CREATE INDEX journal_sessions ON journal (thread, ((data::jsonb ->> 'session')::bigint))
    WHERE kind = 'session_started';

-- A run's settles (and what says a run went on past one), read newest first a few at a time.
CREATE INDEX journal_settles ON journal (thread, seq)
    WHERE kind IN ('stopped', 'session_ended', 'run_continued');
