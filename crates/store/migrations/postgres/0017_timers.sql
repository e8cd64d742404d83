-- Keep in step with ../sqlite/0017_timers.sql.
-- Durable time (issue #30): a timer is a thing to do at a time on a thread (an effect to run, a
-- question's deadline to act on), written in the same commit as the step that made it. A
-- process claims it when due (`processing`, `claimed_by` until `claimed_until`, one more
-- attempt), and finishes it (`completed`, `failed`, or `pending` again at a later `due_at`); a
-- claim that runs out is taken over. Ids are UUIDs as hyphenated lowercase text (what the
-- listing's `(due_at, id)` order compares, byte by byte: `COLLATE "C"`); `args` is JSON text.
CREATE TABLE timers (
    id            TEXT    COLLATE "C" PRIMARY KEY,
    thread        BIGINT  NOT NULL REFERENCES threads (num),
    kind          TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    args          TEXT    NOT NULL,
    subject       TEXT,
    due_at        BIGINT  NOT NULL,
    created_at    BIGINT  NOT NULL,
    status        TEXT    NOT NULL,
    attempts      BIGINT  NOT NULL DEFAULT 0,
    max_attempts  BIGINT  NOT NULL,
    last_error    TEXT,
    updated_at    BIGINT  NOT NULL,
    claimed_by    TEXT,
    claimed_until BIGINT
);
-- What `next_due` and `claim_due` read, each an index read however many timers wait: pending
-- ones by due time, and running ones by when their claim runs out (to be taken over).
CREATE INDEX timers_pending ON timers (due_at, id) WHERE status = 'pending';
CREATE INDEX timers_processing ON timers (claimed_until) WHERE status = 'processing';
-- Failed ones, counted for `/metrics` and listed, without reading every finished timer.
CREATE INDEX timers_failed ON timers (due_at, id) WHERE status = 'failed';
-- A thread's timers in listing order; and its pending ones by subject (what a commit that
-- settles a question cancels).
CREATE INDEX timers_thread ON timers (thread, due_at, id);
CREATE INDEX timers_subject ON timers (thread, subject) WHERE status = 'pending';
