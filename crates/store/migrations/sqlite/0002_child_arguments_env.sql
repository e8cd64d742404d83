-- A child's spawn arguments (interpolated into its prompts for its whole life) and the env
-- values its relationship scoped into it (`scopedEnv`), both JSON objects.
ALTER TABLE children ADD COLUMN arguments TEXT NOT NULL DEFAULT '{}';
ALTER TABLE children ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
