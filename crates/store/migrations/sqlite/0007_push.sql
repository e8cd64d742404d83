-- A2A push notifications. Keep in step with ../postgres/0007_push.sql.
--
-- Where to send a task's updates: one row per config of a task (a thread's session). The
-- notifier enqueues every update past `watermark` (a journal seq) and moves it on, in one
-- transaction, so a restart neither loses nor repeats an update.
CREATE TABLE push_configs (
    thread      TEXT    NOT NULL,
    session     INTEGER NOT NULL,
    id          TEXT    NOT NULL,
    url         TEXT    NOT NULL,
    token       TEXT,
    auth_scheme TEXT,
    auth_credentials TEXT,
    principal   TEXT,
    watermark   INTEGER NOT NULL DEFAULT 0,
    last_state  TEXT,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (thread, session, id)
);

-- The outbox: each notification to send, until its endpoint takes it (2xx); `next_at` is when
-- it is next due (a claim pushes it on, so two processes do not send it at once).
CREATE TABLE push_outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    thread      TEXT    NOT NULL,
    config      TEXT    NOT NULL,
    url         TEXT    NOT NULL,
    token       TEXT,
    auth_scheme TEXT,
    auth_credentials TEXT,
    body        TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,
    last_error  TEXT,
    gave_up_at  INTEGER,
    created_at  INTEGER NOT NULL
);
CREATE INDEX push_outbox_due ON push_outbox (next_at) WHERE gave_up_at IS NULL;
