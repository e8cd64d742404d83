-- Facts are copied to `notices` only while someone may be told of them (issue #35). Keep in
-- step with ../postgres/0024_notices_held.sql.
--
-- A router that finds nobody to tell (no subscription, no notification definition) holds the
-- copies off until `held_until` (a time in ms, renewed once a period while it still finds
-- nobody); a fact written at or after that time is copied again, so copies start again by
-- themselves when no router renews the hold. A router with someone to tell ends any hold and
-- says so until `needed_until` (renewed once a period), and no hold is set before that time:
-- routers of one database with different definitions never silence each other. A fact is
-- copied whatever the hold while a subscription exists (as its transaction sees the table).
-- Writing and deleting a notice nobody reads was a tenth of the server benchmark's
-- instructions (docs/decisions.md).
CREATE TABLE notices_held (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    held_until   INTEGER NOT NULL,
    needed_until INTEGER NOT NULL
);
INSERT INTO notices_held (id, held_until, needed_until) VALUES (1, 0, 0);

-- `journal_notices` (0023), also held.
DROP TRIGGER IF EXISTS journal_notices;
CREATE TRIGGER journal_notices AFTER INSERT ON journal
WHEN (NEW.kind = 'approval_requested' OR NEW.kind = 'approval_decided'
      OR NEW.kind = 'question_reminded' OR NEW.kind = 'question_escalated'
      OR NEW.kind = 'session_ended' OR NEW.kind = 'step_error'
      OR (NEW.kind = 'stopped' AND json_extract(NEW.data, '$.status') = 'awaiting_human'))
  AND (IFNULL((SELECT held_until FROM notices_held WHERE id = 1), 0) <= NEW.created_at
       OR EXISTS (SELECT 1 FROM subscriptions))
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

-- `answers_notices` (0018), also held.
DROP TRIGGER IF EXISTS answers_notices;
CREATE TRIGGER answers_notices AFTER INSERT ON answers
WHEN IFNULL((SELECT held_until FROM notices_held WHERE id = 1), 0) <= NEW.created_at
  OR EXISTS (SELECT 1 FROM subscriptions)
BEGIN
    INSERT INTO notices (thread, seq, session, fact, data, created_at)
    SELECT t.id, NEW.seq, NEW.session, 'answer',
           json_object('author', NEW.author, 'messageId', NEW.message_id, 'content', NEW.content),
           NEW.created_at
      FROM threads t WHERE t.num = NEW.thread;
END;
