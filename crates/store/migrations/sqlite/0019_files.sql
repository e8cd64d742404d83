-- Keep in step with ../postgres/0019_files.sql.
-- The thread filesystem (issue #34). `files`: a thread's entries by normalised path (`/a/b.txt`),
-- keyed like `timers` by the thread's row number; `parent` is the path's directory (`/` at the
-- top), what a directory listing seeks. `chunks` is a JSON array of the content's SHA-256s (hex,
-- in order), `meta` JSON. Paths compare byte by byte (SQLite's BINARY collation), the order
-- listings page in. Threads are never deleted (as for timers), so nothing cascades.
CREATE TABLE files (
    thread        INTEGER NOT NULL REFERENCES threads (num),
    path          TEXT    NOT NULL,
    parent        TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    size          INTEGER NOT NULL,
    mime_type     TEXT,
    declared_type TEXT,
    chunks        TEXT    NOT NULL,
    meta          TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (thread, path)
);
-- A directory's entries, by path (readdir, a page at a time).
CREATE INDEX files_parent ON files (thread, parent, path);
-- Chunks by content hash, shared by every thread (a copy writes rows, not bytes). `created_at`
-- gives a sweep its grace: a chunk stored for a write still under way is not yet named.
CREATE TABLE blobs (
    hash       TEXT    PRIMARY KEY,
    size       INTEGER NOT NULL,
    data       BLOB    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX blobs_created ON blobs (created_at);
-- Attachments that come with a queued message (JSON: [AttachmentRef]), as `images` does.
ALTER TABLE queue ADD COLUMN attachments TEXT;
