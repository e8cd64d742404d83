-- Keep in step with ../postgres/0016_key_roles.sql.
-- The roles an API key holds (issue #29): a tool's `approval.approvers.roles` names the keys
-- that may decide its calls. A JSON array of role names (each 1–64 of `A-Z a-z 0-9 . _ -`);
-- a key made before this migration, or by an older build, holds none.
ALTER TABLE api_keys ADD COLUMN roles TEXT NOT NULL DEFAULT '[]';
