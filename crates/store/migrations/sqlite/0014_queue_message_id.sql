-- Keep in step with ../postgres/0014_queue_message_id.sql.
-- The id a delivery's sender chose, kept with the queued message so the journal message it
-- becomes carries it (in `data`, as `messageId`): A2A shows a client its own message ids.
ALTER TABLE queue ADD COLUMN message_id TEXT;
