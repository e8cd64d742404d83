-- Nothing for SQLite: ../postgres/0010_commit_function.sql adds the function a Postgres commit
-- calls; a SQLite commit is one batch of statements (crates/store/src/sqlite.rs). This file
-- keeps the two backends' migration numbers in step.
SELECT 1;
