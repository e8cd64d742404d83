-- What a server needs of the store. Keep in step with ../sqlite/0005_server.sql.
--
-- Listing threads a page at a time, in id order (UUID v7 as hyphenated text: creation order),
-- by status, by principal (with or without a status) and by parent (NULL: top-level threads).
-- `threads_status` is subsumed by `threads_status_id`.
DROP INDEX threads_status;
CREATE INDEX threads_status_id ON threads (status, id);
CREATE INDEX threads_principal ON threads (principal, id);
CREATE INDEX threads_principal_status ON threads (principal, status, id);
CREATE INDEX threads_parent ON threads (parent, id);

-- API keys, found by a hash of the secret (never the secret); a revoked key admits nobody.
CREATE TABLE api_keys (
    id         TEXT    PRIMARY KEY,
    hash       TEXT    NOT NULL UNIQUE,
    principal  TEXT    NOT NULL,
    admin      BOOLEAN NOT NULL DEFAULT FALSE,
    label      TEXT,
    created_at BIGINT  NOT NULL,
    revoked_at BIGINT
);

-- The answer each park got (the park is the thread's session and next seq while it waited),
-- written in the transaction that accepts it, so a refused answer can name the one that won:
-- its author (a principal, canonical JSON) and message id.
CREATE TABLE answers (
    thread     BIGINT  NOT NULL REFERENCES threads (num),
    session    BIGINT  NOT NULL,
    seq        BIGINT  NOT NULL,
    author     TEXT,
    message_id TEXT,
    content    TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    PRIMARY KEY (thread, session, seq)
);
