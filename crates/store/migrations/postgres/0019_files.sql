-- Keep in step with ../sqlite/0019_files.sql.
-- The thread filesystem (issue #34). `files`: a thread's entries by normalised path (`/a/b.txt`),
-- keyed like `timers` by the thread's row number; `parent` is the path's directory (`/` at the
-- top), what a directory listing seeks. `chunks` is a JSON array of the content's SHA-256s (hex,
-- in order), `meta` JSON, both as text. Paths compare byte by byte (`COLLATE "C"`), the order
-- listings page in, as on SQLite. Threads are never deleted (as for timers), so nothing
-- cascades.
CREATE TABLE files (
    thread        BIGINT  NOT NULL REFERENCES threads (num),
    path          TEXT    COLLATE "C" NOT NULL,
    parent        TEXT    COLLATE "C" NOT NULL,
    kind          TEXT    NOT NULL,
    size          BIGINT  NOT NULL,
    mime_type     TEXT,
    declared_type TEXT,
    chunks        TEXT    NOT NULL,
    meta          TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL,
    PRIMARY KEY (thread, path)
);
-- A directory's entries, by path (readdir, a page at a time).
CREATE INDEX files_parent ON files (thread, parent, path);
-- Chunks by content hash, shared by every thread (a copy writes rows, not bytes). `created_at`
-- gives a sweep its grace: a chunk stored for a write still under way is not yet named.
CREATE TABLE blobs (
    hash       TEXT    PRIMARY KEY,
    size       BIGINT  NOT NULL,
    data       BYTEA   NOT NULL,
    created_at BIGINT  NOT NULL
);
CREATE INDEX blobs_created ON blobs (created_at);
-- Attachments that come with a queued message (JSON: [AttachmentRef]), as `images` does.
ALTER TABLE queue ADD COLUMN attachments TEXT;

-- `duet_commit` (0010) with what a commit of this build may carry besides: its queued messages'
-- attachments (`q_attachments`, one per queued row, NULL for none) and its file writes (`f_*`,
-- one row per path a commit writes, each naming its commit by index: `put` creates or replaces,
-- `mkdir` inserts if absent, `remove` deletes; the client folds a commit's writes of one path
-- into one, so they apply in any order). A new function beside the old, so older builds on this
-- schema keep calling theirs. Without attachments or files it is `duet_commit` itself; with them,
-- it locks the threads whose lease is held as `duet_commit` does (in id order: the second lock,
-- inside `duet_commit`, is had already), writes the queued messages and the files of those
-- commits only, and lets `duet_commit` write the rest (it sees those messages: each of its
-- statements takes a new snapshot).
CREATE OR REPLACE FUNCTION duet_commit_files(
    t_id TEXT[], t_owner TEXT[], t_agent TEXT[], t_status TEXT[], t_status_text TEXT[],
    t_session BIGINT[], t_session_open BOOLEAN[], t_stop_reason TEXT[], t_result TEXT[],
    t_turns_a BIGINT[], t_turns_b BIGINT[], t_steps_a BIGINT[], t_steps_b BIGINT[],
    t_steps_total BIGINT[], t_acting TEXT[], t_watermark_a BIGINT[], t_watermark_b BIGINT[],
    t_next_seq BIGINT[], t_updated_at BIGINT[], t_settle BOOLEAN[], t_release BOOLEAN[],
    t_change TEXT[],
    d_at BIGINT[], d_id BIGINT[],
    j_at BIGINT[], j_seq BIGINT[], j_kind TEXT[], j_session BIGINT[], j_role TEXT[],
    j_side TEXT[], j_content TEXT[], j_thinking TEXT[], j_tool_calls TEXT[],
    j_tool_call_id TEXT[], j_tool_name TEXT[], j_tool_status TEXT[], j_silent BOOLEAN[],
    j_model TEXT[], j_data TEXT[], j_created_at BIGINT[],
    q_at BIGINT[], q_role TEXT[], q_side TEXT[], q_content TEXT[], q_human BOOLEAN[],
    q_silent BOOLEAN[], q_follow_up BOOLEAN[], q_created_at BIGINT[], q_tool_call_id TEXT[],
    q_tool_name TEXT[], q_tool_status TEXT[], q_images TEXT[], q_trace TEXT[],
    q_attachments TEXT[],
    v_at BIGINT[], v_key TEXT[], v_value TEXT[],
    f_at BIGINT[], f_op TEXT[], f_path TEXT[], f_parent TEXT[], f_kind TEXT[], f_size BIGINT[],
    f_mime_type TEXT[], f_declared_type TEXT[], f_chunks TEXT[], f_meta TEXT[],
    f_created_at BIGINT[], f_updated_at BIGINT[]
) RETURNS TABLE (r_at BIGINT, r_owner TEXT, r_waiting BIGINT)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    nums BIGINT[];
BEGIN
    IF cardinality(f_at) = 0 AND cardinality(array_remove(q_attachments, NULL)) = 0 THEN
        RETURN QUERY SELECT * FROM duet_commit(
            t_id, t_owner, t_agent, t_status, t_status_text, t_session, t_session_open,
            t_stop_reason, t_result, t_turns_a, t_turns_b, t_steps_a, t_steps_b, t_steps_total,
            t_acting, t_watermark_a, t_watermark_b, t_next_seq, t_updated_at, t_settle,
            t_release, t_change, d_at, d_id, j_at, j_seq, j_kind, j_session, j_role, j_side,
            j_content, j_thinking, j_tool_calls, j_tool_call_id, j_tool_name, j_tool_status,
            j_silent, j_model, j_data, j_created_at, q_at, q_role, q_side, q_content, q_human,
            q_silent, q_follow_up, q_created_at, q_tool_call_id, q_tool_name, q_tool_status,
            q_images, q_trace, v_at, v_key, v_value);
        RETURN;
    END IF;

    SELECT array_agg(l.num ORDER BY u.i) INTO nums
      FROM (SELECT * FROM unnest(t_id, t_owner) WITH ORDINALITY AS x (id, owner, i)
             ORDER BY x.id) u
      LEFT JOIN LATERAL (SELECT th.num FROM threads th
                          WHERE th.id = u.id AND th.lease_owner = u.owner
                            FOR UPDATE) l ON TRUE;

    INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at,
                       tool_call_id, tool_name, tool_status, images, trace, attachments)
    SELECT nums[q.at], q.role, q.side, q.content, q.human, q.silent, q.follow_up,
           q.created_at, q.tool_call_id, q.tool_name, q.tool_status, q.images, q.trace,
           q.attachments
      FROM unnest(q_at, q_role, q_side, q_content, q_human, q_silent, q_follow_up,
                  q_created_at, q_tool_call_id, q_tool_name, q_tool_status, q_images,
                  q_trace, q_attachments) WITH ORDINALITY
           AS q (at, role, side, content, human, silent, follow_up, created_at,
                 tool_call_id, tool_name, tool_status, images, trace, attachments, i)
     WHERE nums[q.at] IS NOT NULL
     ORDER BY q.i;

    DELETE FROM files fl
     USING unnest(f_at, f_op, f_path) AS f (at, op, path)
     WHERE f.op = 'remove' AND fl.thread = nums[f.at] AND fl.path = f.path;

    INSERT INTO files (thread, path, parent, kind, size, mime_type, declared_type, chunks, meta,
                       created_at, updated_at)
    SELECT nums[f.at], f.path, f.parent, f.kind, f.size, f.mime_type, f.declared_type,
           f.chunks, f.meta, f.created_at, f.updated_at
      FROM unnest(f_at, f_op, f_path, f_parent, f_kind, f_size, f_mime_type, f_declared_type,
                  f_chunks, f_meta, f_created_at, f_updated_at)
           AS f (at, op, path, parent, kind, size, mime_type, declared_type, chunks, meta,
                 created_at, updated_at)
     WHERE f.op = 'put' AND nums[f.at] IS NOT NULL
    ON CONFLICT (thread, path) DO UPDATE SET
        parent = excluded.parent, kind = excluded.kind, size = excluded.size,
        mime_type = excluded.mime_type, declared_type = excluded.declared_type,
        chunks = excluded.chunks, meta = excluded.meta, created_at = excluded.created_at,
        updated_at = excluded.updated_at;

    INSERT INTO files (thread, path, parent, kind, size, mime_type, declared_type, chunks, meta,
                       created_at, updated_at)
    SELECT nums[f.at], f.path, f.parent, f.kind, f.size, f.mime_type, f.declared_type,
           f.chunks, f.meta, f.created_at, f.updated_at
      FROM unnest(f_at, f_op, f_path, f_parent, f_kind, f_size, f_mime_type, f_declared_type,
                  f_chunks, f_meta, f_created_at, f_updated_at)
           AS f (at, op, path, parent, kind, size, mime_type, declared_type, chunks, meta,
                 created_at, updated_at)
     WHERE f.op = 'mkdir' AND nums[f.at] IS NOT NULL
    ON CONFLICT (thread, path) DO NOTHING;

    RETURN QUERY SELECT * FROM duet_commit(
        t_id, t_owner, t_agent, t_status, t_status_text, t_session, t_session_open,
        t_stop_reason, t_result, t_turns_a, t_turns_b, t_steps_a, t_steps_b, t_steps_total,
        t_acting, t_watermark_a, t_watermark_b, t_next_seq, t_updated_at, t_settle,
        t_release, t_change, d_at, d_id, j_at, j_seq, j_kind, j_session, j_role, j_side,
        j_content, j_thinking, j_tool_calls, j_tool_call_id, j_tool_name, j_tool_status,
        j_silent, j_model, j_data, j_created_at, '{}'::BIGINT[], '{}'::TEXT[], '{}'::TEXT[],
        '{}'::TEXT[], '{}'::BOOLEAN[], '{}'::BOOLEAN[], '{}'::BOOLEAN[], '{}'::BIGINT[],
        '{}'::TEXT[], '{}'::TEXT[], '{}'::TEXT[], '{}'::TEXT[], '{}'::TEXT[], v_at, v_key,
        v_value);
END
$$;
