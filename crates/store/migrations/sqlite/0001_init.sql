-- duet's schema, SQLite flavour. Keep in step with ../postgres/0001_init.sql.
CREATE TABLE threads (
    num           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    key           TEXT    NOT NULL UNIQUE,
    agent         TEXT    NOT NULL,
    origin        TEXT    NOT NULL,
    parent        TEXT,
    principal     TEXT,
    source        TEXT,
    status        TEXT    NOT NULL,
    status_text   TEXT,
    session       INTEGER NOT NULL DEFAULT 0,
    session_open  INTEGER NOT NULL DEFAULT 0,
    stop_reason   TEXT,
    result        TEXT,
    turns_a       INTEGER NOT NULL DEFAULT 0,
    turns_b       INTEGER NOT NULL DEFAULT 0,
    steps_a       INTEGER NOT NULL DEFAULT 0,
    steps_b       INTEGER NOT NULL DEFAULT 0,
    steps_total   INTEGER NOT NULL DEFAULT 0,
    acting        TEXT,
    watermark_a   INTEGER NOT NULL DEFAULT 0,
    watermark_b   INTEGER NOT NULL DEFAULT 0,
    next_seq      INTEGER NOT NULL DEFAULT 1,
    lease_owner   TEXT,
    abort_requested INTEGER NOT NULL DEFAULT 0,
    lease_expires INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX threads_status ON threads (status);

-- The journal: messages (kind 'message') and the other facts of a run (turn completed, stopped,
-- session ended, status, errors: kind names them, data holds their JSON), in one sequence.
CREATE TABLE journal (
    thread       INTEGER NOT NULL REFERENCES threads (num),
    seq          INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    session      INTEGER,
    role         TEXT,
    side         TEXT,
    content      TEXT,
    thinking     TEXT,
    tool_calls   TEXT,
    tool_call_id TEXT,
    tool_name    TEXT,
    tool_status  TEXT,
    silent       INTEGER NOT NULL DEFAULT 0,
    model        TEXT,
    data         TEXT,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (thread, seq)
) WITHOUT ROWID;

CREATE TABLE queue (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    thread     INTEGER NOT NULL REFERENCES threads (num),
    role       TEXT    NOT NULL,
    side       TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    follow_up  INTEGER NOT NULL DEFAULT 0,
    human      INTEGER NOT NULL,
    silent     INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX queue_thread ON queue (thread, id);

CREATE TABLE thread_values (
    thread INTEGER NOT NULL REFERENCES threads (num),
    key    TEXT    NOT NULL,
    value  TEXT    NOT NULL,
    PRIMARY KEY (thread, key)
) WITHOUT ROWID;

-- The child registry: one row per subagent instance, keyed by the child thread, written by the
-- parent's run (spawn) and by the child's (status), so outside either thread's lease.
CREATE TABLE children (
    child        TEXT    PRIMARY KEY,
    parent       TEXT    NOT NULL,
    relationship TEXT    NOT NULL,
    owner        TEXT    NOT NULL,
    agent        TEXT    NOT NULL,
    name         TEXT,
    blocking     INTEGER NOT NULL,
    explicit     INTEGER NOT NULL,
    status       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX children_parent ON children (parent, created_at);
