-- Notifications (issue #31). Keep in step with ../postgres/0018_notifications.sql.
--
-- Older builds cannot run on this schema: `push_outbox`, which they write A2A push
-- notifications to, moves into the generic `outbox` and is dropped.
UPDATE duet_schema SET min_compatible = 18 WHERE id = 1;

-- What someone may need to hear of: a copy of each journal fact of these kinds (and of each
-- accepted answer), written by the triggers below in the transaction that writes the fact, so
-- it exists exactly when the fact does. `thread` is the thread's id (not its `num`); the router
-- reads the unrouted ones in id order, marks each routed (`routed_at`) or deletes it.
CREATE TABLE notices (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    thread     TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    session    INTEGER,
    fact       TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    routed_at  INTEGER
);
CREATE INDEX notices_unrouted ON notices (id) WHERE routed_at IS NULL;

-- A park (a `stopped` record that left the thread `awaiting_human`), a pending tool call, a
-- decision, a reminder, an escalation, a session's end, a failed step. The WHEN clause keeps every other
-- journal row (messages, turns) to one comparison of its kind.
-- A record's journal row has no session: the notice takes the session of the thread's last
-- message before it (as the inbox's listing of decisions does), read back from its seq.
CREATE TRIGGER journal_notices AFTER INSERT ON journal
WHEN NEW.kind IN ('approval_requested', 'approval_decided', 'question_reminded',
                  'question_escalated', 'session_ended', 'step_error')
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

-- A park's accepted answer: its seq is the park's.
CREATE TRIGGER answers_notices AFTER INSERT ON answers
BEGIN
    INSERT INTO notices (thread, seq, session, fact, data, created_at)
    SELECT t.id, NEW.seq, NEW.session, 'answer',
           json_object('author', NEW.author, 'messageId', NEW.message_id, 'content', NEW.content),
           NEW.created_at
      FROM threads t WHERE t.num = NEW.thread;
END;

-- The one outbox every outbound notification goes through (A2A push, webhooks, Slack, email):
-- a row per send to one target, `pending` until its target takes it (`delivered`) or it is
-- given up on (`failed`), and kept afterwards for listing. A stream's rows are sent in id
-- order: only its oldest pending row is claimed (a claim pushes `next_at` on by its lease).
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    channel         TEXT    NOT NULL,
    stream          TEXT    NOT NULL,
    target          TEXT    NOT NULL,
    notice          INTEGER,
    thread          TEXT,
    event           TEXT    NOT NULL,
    subject         TEXT,
    subscription    TEXT,
    recipient       TEXT,
    body            TEXT    NOT NULL,
    meta            TEXT,
    idempotency_key TEXT    NOT NULL UNIQUE,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_at         INTEGER NOT NULL,
    last_error      TEXT,
    response        TEXT,
    status          TEXT    NOT NULL DEFAULT 'pending',
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER
);
CREATE INDEX outbox_due ON outbox (next_at) WHERE status = 'pending';
CREATE INDEX outbox_stream ON outbox (stream, id) WHERE status = 'pending';
CREATE INDEX outbox_subject ON outbox (subject, id);
CREATE INDEX outbox_thread ON outbox (thread, id);
CREATE INDEX outbox_notice ON outbox (notice);
CREATE INDEX outbox_status ON outbox (status, channel);

-- `push_outbox`'s rows move in with their ids (the outbox's sequence goes on after them), one
-- stream per push config, the config's delivery settings in `meta` (absent ones left out).
INSERT INTO outbox (id, channel, stream, target, thread, event, body, meta, idempotency_key,
                    attempts, next_at, last_error, status, created_at, finished_at)
SELECT id, 'a2a_push', 'a2a_push:' || thread || ':' || config, url, thread, 'task.update', body,
       json_patch('{}', json_object('token', token, 'authScheme', auth_scheme,
                                    'authCredentials', auth_credentials, 'config', config)),
       'a2a_push:' || id, attempts, next_at, last_error,
       CASE WHEN gave_up_at IS NULL THEN 'pending' ELSE 'failed' END, created_at, gave_up_at
  FROM push_outbox ORDER BY id;
DROP TABLE push_outbox;

-- A principal's own subscriptions, made over the API (`events`, `agents`: JSON arrays).
CREATE TABLE subscriptions (
    id         TEXT    PRIMARY KEY,
    principal  TEXT    NOT NULL,
    channel    TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    events     TEXT    NOT NULL,
    agents     TEXT    NOT NULL,
    secret     TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX subscriptions_principal ON subscriptions (principal, created_at, id);

-- One-time answers to an approval, sent in a notification (`roles`: a JSON array); used,
-- revoked or past `expires_at`, a link no longer works.
CREATE TABLE links (
    id         TEXT    PRIMARY KEY,
    approval   TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    approver   TEXT    NOT NULL,
    roles      TEXT    NOT NULL,
    delivery   INTEGER,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    used_by    TEXT,
    revoked_at INTEGER,
    created_at INTEGER NOT NULL
);
CREATE INDEX links_approval ON links (approval);

-- Secrets every process on this database shares (the links' signing key): the first writer's.
CREATE TABLE secrets (
    name       TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
