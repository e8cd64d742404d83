-- Keep in step with ../sqlite/0025_keyed_plans.sql (a comment only: SQLite has no functions).
-- The functions a commit and an answer run plan each statement once per connection
-- (`plan_cache_mode = force_generic_plan`, 0010, 0019, 0022), and that plan is kept for as long
-- as the connection lives. A generic plan made while a table is small, or before its first
-- ANALYZE (a new database, a burst of threads), estimates it at a page or ten: it then joins
-- the commits' arrays to `threads` and `queue` by hashing a sequential scan of the whole table,
-- and goes on doing so on every commit as the table grows to thousands or millions of rows
-- until autovacuum analyzes it (issue #35: about a third of Postgres's CPU in an answer,
-- measured in docs/benchmarks.md). Every statement in these functions reaches its rows by key (a
-- thread's `num` or `id`, a queue row's `id`, a journal's `(thread, seq)`): with sequential
-- scans, hash and merge joins priced out, each join is a nested loop over the arrays' few
-- elements probing an index, whatever the statistics said when the plan was made.
ALTER FUNCTION duet_commit(
    text[], text[], text[], text[], text[], bigint[], boolean[], text[], text[], bigint[],
    bigint[], bigint[], bigint[], bigint[], text[], bigint[], bigint[], bigint[], bigint[],
    boolean[], boolean[], text[], bigint[], bigint[], bigint[], bigint[], text[], bigint[],
    text[], text[], text[], text[], text[], text[], text[], text[], boolean[], text[], text[],
    bigint[], bigint[], text[], text[], text[], boolean[], boolean[], boolean[], bigint[],
    text[], text[], text[], text[], text[], bigint[], text[], text[]
) SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;

ALTER FUNCTION duet_commit_files(
    text[], text[], text[], text[], text[], bigint[], boolean[], text[], text[], bigint[],
    bigint[], bigint[], bigint[], bigint[], text[], bigint[], bigint[], bigint[], bigint[],
    boolean[], boolean[], text[], bigint[], bigint[], bigint[], bigint[], text[], bigint[],
    text[], text[], text[], text[], text[], text[], text[], text[], boolean[], text[], text[],
    bigint[], bigint[], text[], text[], text[], boolean[], boolean[], boolean[], bigint[],
    text[], text[], text[], text[], text[], text[], bigint[], text[], text[], bigint[], text[],
    text[], text[], text[], bigint[], text[], text[], text[], text[], bigint[], bigint[]
) SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;

ALTER FUNCTION duet_answer(
    text, bigint, bigint, text, bigint, bigint, text, text, text, text, text, boolean, boolean,
    boolean, text, text, text, text, text, text
) SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
