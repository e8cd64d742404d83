-- A child's lifecycle state apart from its free text, and the parent's tool call that waits for
-- it (a blocking spawn, answered when the child's session ends). Keep in step with
-- ../sqlite/0003_durable_awaits.sql.
ALTER TABLE children ADD COLUMN status_text TEXT;
ALTER TABLE children ADD COLUMN awaiting TEXT;
UPDATE children SET status_text = status, status = 'running'
 WHERE status NOT IN ('running', 'idle', 'failed', 'awaiting_human', 'waiting', 'terminated');

-- A late tool result queued for the parent: the call it answers, that call's tool and status.
ALTER TABLE queue ADD COLUMN tool_call_id TEXT;
ALTER TABLE queue ADD COLUMN tool_name TEXT;
ALTER TABLE queue ADD COLUMN tool_status TEXT;
