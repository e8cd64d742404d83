-- Keep in step with ../sqlite/0022_answer_function.sql (a comment only: SQLite's `answer` is one
-- batch of statements, crates/store/src/sqlite/writes.rs).
-- A park's answer in one call (one round trip), what `answer` did in a transaction of up to nine
-- (crates/store/src/postgres.rs). Statement by statement, as that transaction was: the thread row
-- is locked first, and every later statement takes a new snapshot (a VOLATILE function in READ
-- COMMITTED), so it sees every answer and message committed before the lock was had. One
-- statement with CTEs would read the other tables on its own start snapshot and could accept two
-- answers to one question.
--
-- `p_*` name the park (session and seq), `l_*` the lease to take if free (owner, until, and now:
-- also the time the answer is queued and recorded at), `m_*` the answer (`queue`'s columns, its
-- message id and author). Returns one row: `r_outcome` is `not_found` (no such thread),
-- `duplicate` (its message id was delivered before, whatever the thread's state now), `refused`
-- (the thread is not at the park, or an answer is queued for it already: nothing is written; the
-- `r_*` columns are the answer that came first, if one is known: the one recorded for the park,
-- else the one queued, else the first message journaled at or after the park), or `accepted`
-- (the answer queued with the change feed's notice, then recorded, and the lease taken if free:
-- `r_claimed`).
CREATE OR REPLACE FUNCTION duet_answer(
    a_id TEXT, p_session BIGINT, p_seq BIGINT, l_owner TEXT, l_until BIGINT, l_now BIGINT,
    m_message_id TEXT, m_author TEXT, m_role TEXT, m_side TEXT, m_content TEXT, m_human BOOLEAN,
    m_silent BOOLEAN, m_follow_up BOOLEAN, m_tool_call_id TEXT, m_tool_name TEXT,
    m_tool_status TEXT, m_images TEXT, m_trace TEXT, m_attachments TEXT
) RETURNS TABLE (r_outcome TEXT, r_claimed BOOLEAN, r_content TEXT, r_at BIGINT,
                 r_author TEXT, r_message_id TEXT)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    t_num BIGINT;
    t_id TEXT;
    t_status TEXT;
    t_session BIGINT;
    t_next_seq BIGINT;
    t_owner TEXT;
    t_expires BIGINT;
    queued BOOLEAN;
    q_content TEXT;
    q_at BIGINT;
    f_content TEXT;
    f_at BIGINT;
    f_author TEXT;
    f_message_id TEXT;
    free BOOLEAN;
BEGIN
    SELECT t.num, t.id, t.status, t.session, t.next_seq, t.lease_owner, t.lease_expires
      INTO t_num, t_id, t_status, t_session, t_next_seq, t_owner, t_expires
      FROM threads t WHERE t.id = a_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::TEXT, FALSE, NULL::TEXT, NULL::BIGINT, NULL::TEXT,
                            NULL::TEXT;
        RETURN;
    END IF;

    IF m_message_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM deliveries d WHERE d.thread = t_num AND d.message_id = m_message_id
    ) THEN
        RETURN QUERY SELECT 'duplicate'::TEXT, FALSE, NULL::TEXT, NULL::BIGINT, NULL::TEXT,
                            NULL::TEXT;
        RETURN;
    END IF;

    -- An answer already queued (not yet drained) has taken the park too.
    SELECT q.content, q.created_at INTO q_content, q_at FROM queue q
     WHERE q.thread = t_num AND q.human = TRUE AND q.follow_up = FALSE
     ORDER BY q.id LIMIT 1;
    queued := FOUND;

    IF queued OR t_status <> 'awaiting_human' OR t_session <> p_session
       OR t_next_seq <> p_seq THEN
        -- The answer recorded for this park first (it names its author), then the one queued,
        -- then the first message journaled at the park.
        SELECT a.content, a.created_at, a.author, a.message_id
          INTO f_content, f_at, f_author, f_message_id
          FROM answers a WHERE a.thread = t_num AND a.session = p_session AND a.seq = p_seq;
        IF NOT FOUND AND queued THEN
            f_content := q_content;
            f_at := q_at;
        ELSIF NOT FOUND THEN
            SELECT coalesce(j.content, ''), j.created_at INTO f_content, f_at FROM journal j
             WHERE j.thread = t_num AND j.kind = 'message' AND j.seq >= p_seq
             ORDER BY j.seq LIMIT 1;
        END IF;
        RETURN QUERY SELECT 'refused'::TEXT, FALSE, f_content, f_at, f_author, f_message_id;
        RETURN;
    END IF;

    IF m_message_id IS NOT NULL THEN
        INSERT INTO deliveries (thread, message_id, created_at)
        VALUES (t_num, m_message_id, l_now);
    END IF;
    INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at,
                       tool_call_id, tool_name, tool_status, images, trace, message_id,
                       attachments)
    VALUES (t_num, m_role, m_side, m_content, m_human, m_silent, m_follow_up, l_now,
            m_tool_call_id, m_tool_name, m_tool_status, m_images, m_trace, m_message_id,
            m_attachments);
    -- The change feed's notice (`notify!` in crates/store/src/postgres.rs), delivered only if
    -- this transaction commits.
    PERFORM pg_notify('duet_changes', t_id || ' ' || (t_next_seq - 1) || ' ' || t_status);
    -- The park's answer, by whom: what a later, refused answer is told.
    INSERT INTO answers (thread, session, seq, author, message_id, content, created_at)
    VALUES (t_num, p_session, p_seq, m_author, m_message_id, m_content, l_now)
    ON CONFLICT (thread, session, seq) DO UPDATE SET
        author = excluded.author, message_id = excluded.message_id,
        content = excluded.content, created_at = excluded.created_at;

    free := t_owner IS NULL OR t_expires < l_now OR t_owner = l_owner;
    IF free THEN
        UPDATE threads SET lease_owner = l_owner, lease_expires = l_until,
                           abort_requested = FALSE
         WHERE num = t_num;
    END IF;
    RETURN QUERY SELECT 'accepted'::TEXT, free, NULL::TEXT, NULL::BIGINT, NULL::TEXT,
                        NULL::TEXT;
END
$$;
