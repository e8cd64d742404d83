-- The two conditions SQLite evaluates for every journal row inserted, spelled as comparisons
-- joined by OR rather than as `kind IN (…)`: the same rows, at a fraction of the cost. SQLite
-- evaluates a list of more than two constants through a temporary b-tree it builds where the
-- list is read, and both places read it anew for each row: every journal row built and dropped
-- one or two (~3 µs a row on the write connection, and a tenth of the engine benchmark's
-- instructions; docs/decisions.md). Keep in step with ../postgres/0023_journal_conditions.sql.
--
-- Older builds name neither the trigger nor the index (their read of a run's settles went by
-- the journal's key: without statistics SQLite's planner preferred it; this build's names the
-- index), so the replacements leave them working as they did.

-- `journal_notices` (0018).
DROP TRIGGER IF EXISTS journal_notices;
CREATE TRIGGER journal_notices AFTER INSERT ON journal
WHEN NEW.kind = 'approval_requested' OR NEW.kind = 'approval_decided'
  OR NEW.kind = 'question_reminded' OR NEW.kind = 'question_escalated'
  OR NEW.kind = 'session_ended' OR NEW.kind = 'step_error'
  OR (NEW.kind = 'stopped' AND json_extract(NEW.data, '$.status') = 'awaiting_human')
BEGIN
    INSERT INTO notices (thread, seq, session, fact, data, created_at)
    SELECT t.id, NEW.seq,
           COALESCE(NEW.session, (SELECT j.session FROM journal j
                                   WHERE j.thread = NEW.thread AND j.kind = 'message'
                                     AND j.seq < NEW.seq
                                   ORDER BY j.seq DESC LIMIT 1)),
           NEW.kind, COALESCE(NEW.data, '{}'), NEW.created_at
      FROM threads t WHERE t.num = NEW.thread;
END;

-- `journal_settles` (0020): SQLite's settles read (`reads_sql::settles_sql!`, `sqlite.rs`'s
-- `SETTLES`) names the index and spells this condition.
DROP INDEX IF EXISTS journal_settles;
CREATE INDEX journal_settles ON journal (thread, seq)
    WHERE kind = 'stopped' OR kind = 'session_ended' OR kind = 'run_continued';
