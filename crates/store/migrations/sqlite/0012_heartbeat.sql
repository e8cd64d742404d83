-- Keep in step with ../postgres/0012_heartbeat.sql.
-- One row the server rewrites to learn whether the database takes writes (`/readyz`, and
-- `duet serve` before it starts). Nothing else reads or writes it.
CREATE TABLE heartbeat (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at BIGINT NOT NULL
);
