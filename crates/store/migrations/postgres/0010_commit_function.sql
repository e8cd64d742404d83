-- A group of commits in one call (one round trip, one transaction, one WAL flush). SQLite has
-- no functions: its commits are one batch of statements (../sqlite/0010_commit_function.sql is
-- empty, to keep the numbers in step).
--
-- Every argument is an array. The `t_` arrays hold one element per commit (the thread's new
-- state, the run that commits, whether it settles, its change-feed payload); the others hold
-- rows, each naming its commit by index (`*_at`, from 1): drained queue rows, journal rows,
-- queued messages, and durable values (a NULL value deletes; a commit names a key once).
--
-- A commit writes only if its run holds the thread's lease: the threads whose lease is held are
-- locked first, in id order (so groups never deadlock one another; a thread whose lease is gone
-- is neither locked nor written), and every later statement takes a new snapshot
-- (a VOLATILE function in READ COMMITTED), so the check whether runnable messages wait sees
-- every message queued before the lock was had. A commit whose lease is gone writes nothing and
-- returns no row; the others are written. A statement that fails fails the whole group (the
-- caller then commits each alone). Returns, per written commit: its index, the lease owner
-- after it (NULL: released) and how many queue rows wait.
--
-- "Runnable" below is `runnable!` in crates/store/src/sql.rs: keep the two in step.
CREATE FUNCTION duet_commit(
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
    v_at BIGINT[], v_key TEXT[], v_value TEXT[]
) RETURNS TABLE (r_at BIGINT, r_owner TEXT, r_waiting BIGINT)
LANGUAGE plpgsql VOLATILE
-- Its statements are planned once per connection, not per call: their custom plans (the
-- arrays are parameters) cost more to make than to run.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    -- The thread row of each commit whose run holds the lease; NULL for the others.
    nums BIGINT[];
BEGIN
    SELECT array_agg(l.num ORDER BY u.i) INTO nums
      FROM (SELECT * FROM unnest(t_id, t_owner) WITH ORDINALITY AS x (id, owner, i)
             ORDER BY x.id) u
      LEFT JOIN LATERAL (SELECT th.num FROM threads th
                          WHERE th.id = u.id AND th.lease_owner = u.owner
                            FOR UPDATE) l ON TRUE;

    IF cardinality(q_at) > 0 THEN
        INSERT INTO queue (thread, role, side, content, human, silent, follow_up, created_at,
                           tool_call_id, tool_name, tool_status, images, trace)
        SELECT nums[q.at], q.role, q.side, q.content, q.human, q.silent, q.follow_up,
               q.created_at, q.tool_call_id, q.tool_name, q.tool_status, q.images, q.trace
          FROM unnest(q_at, q_role, q_side, q_content, q_human, q_silent, q_follow_up,
                      q_created_at, q_tool_call_id, q_tool_name, q_tool_status, q_images,
                      q_trace) WITH ORDINALITY
               AS q (at, role, side, content, human, silent, follow_up, created_at,
                     tool_call_id, tool_name, tool_status, images, trace, i)
         WHERE nums[q.at] IS NOT NULL
         -- In the order given: the queue's ids keep the messages' order.
         ORDER BY q.i;
    END IF;

    IF cardinality(v_at) > 0 THEN
        INSERT INTO thread_values (thread, key, value)
        SELECT nums[v.at], v.key, v.value
          FROM unnest(v_at, v_key, v_value) AS v (at, key, value)
         WHERE nums[v.at] IS NOT NULL AND v.value IS NOT NULL
        ON CONFLICT (thread, key) DO UPDATE SET value = excluded.value;
        DELETE FROM thread_values tv
         USING unnest(v_at, v_key, v_value) AS v (at, key, value)
         WHERE tv.thread = nums[v.at] AND tv.key = v.key AND v.value IS NULL;
    END IF;

    -- One statement for the rest, so its parts share one snapshot: the drained rows it deletes
    -- are still in it, and are left out by id where the queue is looked at.
    RETURN QUERY
    WITH d AS (
        SELECT d.at, d.id FROM unnest(d_at, d_id) AS d (at, id) WHERE nums[d.at] IS NOT NULL
    ), del AS (
        DELETE FROM queue q USING d WHERE q.id = d.id AND q.thread = nums[d.at]
    ), ins AS (
        INSERT INTO journal (thread, seq, kind, session, role, side, content, thinking,
                             tool_calls, tool_call_id, tool_name, tool_status, silent, model,
                             data, created_at)
        SELECT nums[j.at], j.seq, j.kind, j.session, j.role, j.side, j.content, j.thinking,
               j.tool_calls, j.tool_call_id, j.tool_name, j.tool_status, j.silent, j.model,
               j.data, j.created_at
          FROM unnest(j_at, j_seq, j_kind, j_session, j_role, j_side, j_content, j_thinking,
                      j_tool_calls, j_tool_call_id, j_tool_name, j_tool_status, j_silent,
                      j_model, j_data, j_created_at)
               AS j (at, seq, kind, session, role, side, content, thinking, tool_calls,
                     tool_call_id, tool_name, tool_status, silent, model, data, created_at)
         WHERE nums[j.at] IS NOT NULL
    ), u AS (
        SELECT n.*, nums[n.i] AS num,
               n.settle AND (n.rel OR NOT EXISTS (
                   SELECT 1 FROM queue q
                    WHERE q.thread = nums[n.i]
                      AND q.id NOT IN (SELECT d.id FROM d WHERE d.at = n.i)
                      AND (n.stop_reason IS NULL OR n.stop_reason <> 'aborted')
                      AND (n.status <> 'waiting' OR q.tool_call_id IS NOT NULL))) AS free
          FROM unnest(t_agent, t_status, t_status_text, t_session, t_session_open,
                      t_stop_reason, t_result, t_turns_a, t_turns_b, t_steps_a, t_steps_b,
                      t_steps_total, t_acting, t_watermark_a, t_watermark_b, t_next_seq,
                      t_updated_at, t_settle, t_release, t_change)
               WITH ORDINALITY
               AS n (agent, status, status_text, session, session_open, stop_reason, result,
                     turns_a, turns_b, steps_a, steps_b, steps_total, acting, watermark_a,
                     watermark_b, next_seq, updated_at, settle, rel, change, i)
         WHERE nums[n.i] IS NOT NULL
    ), upd AS (
        UPDATE threads t
           SET agent = u.agent, status = u.status, status_text = u.status_text,
               session = u.session, session_open = u.session_open,
               stop_reason = u.stop_reason, result = u.result, turns_a = u.turns_a,
               turns_b = u.turns_b, steps_a = u.steps_a, steps_b = u.steps_b,
               steps_total = u.steps_total, acting = u.acting, watermark_a = u.watermark_a,
               watermark_b = u.watermark_b, next_seq = u.next_seq, updated_at = u.updated_at,
               lease_owner = CASE WHEN u.free THEN NULL ELSE t.lease_owner END,
               lease_expires = CASE WHEN u.free THEN 0 ELSE t.lease_expires END
          FROM u
         WHERE t.num = u.num
        RETURNING u.i, u.change, t.lease_owner, t.num
    )
    SELECT upd.i, upd.lease_owner,
           (SELECT count(*) FROM queue q
             WHERE q.thread = upd.num AND q.id NOT IN (SELECT d.id FROM d WHERE d.at = upd.i))
      FROM upd
           -- The change feed's notice, delivered only if this transaction commits.
           CROSS JOIN LATERAL (SELECT pg_notify('duet_changes', upd.change)) notice
     ORDER BY upd.i;
END
$$;
