-- Keep in step with ../sqlite/0013_push_ended.sql.
-- When a push config's task ended (its last update put in the outbox): the config is kept, for
-- the client to read as long as the task can be read, and the notifier no longer watches it.
ALTER TABLE push_configs ADD COLUMN ended_at BIGINT;
