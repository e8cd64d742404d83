-- Keep in step with ../postgres/0015_approvals.sql.
-- Tool calls that wait for a person's decision (issue #29). A decision is queued on its thread
-- like a late tool result (`tool_call_id` names the call, so it wakes a `waiting` thread the
-- same way), with the decision itself as JSON in `decision`; the run that drains it writes it
-- as an `approval_decided` journal record. One decision per pending call: the first queued
-- wins (the store checks it in one transaction on the thread row; this index is the backstop).
ALTER TABLE queue ADD COLUMN decision TEXT;
CREATE UNIQUE INDEX queue_decision ON queue (thread, tool_call_id) WHERE decision IS NOT NULL;
