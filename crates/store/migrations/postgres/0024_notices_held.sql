-- Facts are copied to `notices` only while someone may be told of them (issue #35). Keep in
-- step with ../sqlite/0024_notices_held.sql, which says why and how.
CREATE TABLE notices_held (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    held_until   BIGINT  NOT NULL,
    needed_until BIGINT  NOT NULL
);
INSERT INTO notices_held (id, held_until, needed_until) VALUES (1, 0, 0);

-- `duet_journal_notice` and `duet_answer_notice` (0018), each returning early while held and
-- no subscription exists (as the fact's transaction sees the table).
CREATE OR REPLACE FUNCTION duet_journal_notice() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT held_until FROM notices_held WHERE id = 1) > NEW.created_at
       AND NOT EXISTS (SELECT 1 FROM subscriptions) THEN
        RETURN NULL;
    END IF;
    INSERT INTO notices (thread, seq, session, fact, data, created_at)
    SELECT t.id, NEW.seq,
           COALESCE(NEW.session, (SELECT j.session FROM journal j
                                   WHERE j.thread = NEW.thread AND j.kind = 'message'
                                     AND j.seq < NEW.seq
                                   ORDER BY j.seq DESC LIMIT 1)),
           NEW.kind, COALESCE(NEW.data, '{}'), NEW.created_at
      FROM threads t WHERE t.num = NEW.thread;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION duet_answer_notice() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT held_until FROM notices_held WHERE id = 1) > NEW.created_at
       AND NOT EXISTS (SELECT 1 FROM subscriptions) THEN
        RETURN NULL;
    END IF;
    INSERT INTO notices (thread, seq, session, fact, data, created_at)
    SELECT t.id, NEW.seq, NEW.session, 'answer',
           json_build_object('author', NEW.author, 'messageId', NEW.message_id,
                             'content', NEW.content)::text,
           NEW.created_at
      FROM threads t WHERE t.num = NEW.thread;
    RETURN NULL;
END
$$;
