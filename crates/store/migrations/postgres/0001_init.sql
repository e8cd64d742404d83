-- duet's schema, Postgres flavour. Keep in step with ../sqlite/0001_init.sql.
CREATE TABLE threads (
    num           BIGSERIAL PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    key           TEXT    NOT NULL UNIQUE,
    agent         TEXT    NOT NULL,
    origin        TEXT    NOT NULL,
    parent        TEXT,
    principal     TEXT,
    source        TEXT,
    status        TEXT    NOT NULL,
    status_text   TEXT,
    session       BIGINT  NOT NULL DEFAULT 0,
    session_open  BOOLEAN NOT NULL DEFAULT FALSE,
    stop_reason   TEXT,
    result        TEXT,
    turns_a       BIGINT  NOT NULL DEFAULT 0,
    turns_b       BIGINT  NOT NULL DEFAULT 0,
    steps_a       BIGINT  NOT NULL DEFAULT 0,
    steps_b       BIGINT  NOT NULL DEFAULT 0,
    steps_total   BIGINT  NOT NULL DEFAULT 0,
    acting        TEXT,
    watermark_a   BIGINT  NOT NULL DEFAULT 0,
    watermark_b   BIGINT  NOT NULL DEFAULT 0,
    next_seq      BIGINT  NOT NULL DEFAULT 1,
    lease_owner   TEXT,
    abort_requested BOOLEAN NOT NULL DEFAULT FALSE,
    lease_expires BIGINT  NOT NULL DEFAULT 0,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);
CREATE INDEX threads_status ON threads (status);

-- The journal: messages (kind 'message') and the other facts of a run (turn completed, stopped,
-- session ended, status, errors: kind names them, data holds their JSON), in one sequence.
CREATE TABLE journal (
    thread       BIGINT  NOT NULL REFERENCES threads (num),
    seq          BIGINT  NOT NULL,
    kind         TEXT    NOT NULL,
    session      BIGINT,
    role         TEXT,
    side         TEXT,
    content      TEXT,
    thinking     TEXT,
    tool_calls   TEXT,
    tool_call_id TEXT,
    tool_name    TEXT,
    tool_status  TEXT,
    silent       BOOLEAN NOT NULL DEFAULT FALSE,
    model        TEXT,
    data         TEXT,
    created_at   BIGINT  NOT NULL,
    PRIMARY KEY (thread, seq)
);

CREATE TABLE queue (
    id         BIGSERIAL PRIMARY KEY,
    thread     BIGINT  NOT NULL REFERENCES threads (num),
    role       TEXT    NOT NULL,
    side       TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    follow_up  BOOLEAN NOT NULL DEFAULT FALSE,
    human      BOOLEAN NOT NULL,
    silent     BOOLEAN NOT NULL,
    created_at BIGINT  NOT NULL
);
CREATE INDEX queue_thread ON queue (thread, id);

CREATE TABLE thread_values (
    thread BIGINT NOT NULL REFERENCES threads (num),
    key    TEXT   NOT NULL,
    value  TEXT   NOT NULL,
    PRIMARY KEY (thread, key)
);

-- The child registry: one row per subagent instance, keyed by the child thread, written by the
-- parent's run (spawn) and by the child's (status), so outside either thread's lease.
CREATE TABLE children (
    child        TEXT    PRIMARY KEY,
    parent       TEXT    NOT NULL,
    relationship TEXT    NOT NULL,
    owner        TEXT    NOT NULL,
    agent        TEXT    NOT NULL,
    name         TEXT,
    blocking     BOOLEAN NOT NULL,
    explicit     BOOLEAN NOT NULL,
    status       TEXT    NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX children_parent ON children (parent, created_at);
