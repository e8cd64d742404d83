-- What the approval inbox needs of the store. Keep in step with ../sqlite/0008_inbox.sql.
--
-- A browser's sign-in: its session cookie, found by the cookie secret's SHA-256 (never the
-- secret), stands for the API key it signed in with (that key's hash: revoking the key ends its
-- sign-ins too) until it expires or signs out.
CREATE TABLE sign_ins (
    hash       TEXT    PRIMARY KEY,
    key_hash   TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL
);
CREATE INDEX sign_ins_expires ON sign_ins (expires_at);

-- The inbox's history: answered parks, newest first.
CREATE INDEX answers_created ON answers (created_at);
