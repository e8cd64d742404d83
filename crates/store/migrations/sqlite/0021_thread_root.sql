-- Keep in step with ../postgres/0021_thread_root.sql.
-- Each thread's tree (issue #35, docs/scale.md): `root` is the `num` of the thread's top-level
-- ancestor (a top-level thread's own `num`), so a parent, its children and theirs share one
-- value: the key a distributed Postgres (Citus) would place a whole tree on one shard by.
--
-- Set by a trigger once the row is inserted (the parent's `root`, else the row's own `num`),
-- not by the statements that insert threads: no insert names it, so every insert of this build
-- and of older builds on this schema (additive: `min_compatible` is left alone) gets it. SQLite
-- cannot change NEW in a BEFORE trigger, so this one updates the row it follows, in the same
-- statement (`changes()` after it still counts the insert alone). The column stays nullable
-- here (SQLite adds a NOT NULL column only by rebuilding the table); the trigger leaves none
-- NULL.
ALTER TABLE threads ADD COLUMN root INTEGER;

-- Today's threads: each top-level one (no parent, or a parent not in this database) is its own
-- root; a child takes its parent's.
WITH RECURSIVE tree (num, root) AS (
    SELECT t.num, t.num FROM threads t
     WHERE t.parent IS NULL OR NOT EXISTS (SELECT 1 FROM threads p WHERE p.id = t.parent)
    UNION ALL
    SELECT c.num, tree.root FROM tree
      JOIN threads p ON p.num = tree.num
      JOIN threads c ON c.parent = p.id
)
UPDATE threads SET root = (SELECT tree.root FROM tree WHERE tree.num = threads.num);

CREATE TRIGGER threads_root AFTER INSERT ON threads FOR EACH ROW WHEN NEW.root IS NULL
BEGIN
    UPDATE threads
       SET root = COALESCE((SELECT p.root FROM threads p WHERE p.id = NEW.parent), NEW.num)
     WHERE num = NEW.num;
END;

-- A tree's threads, in creation order.
CREATE INDEX threads_root ON threads (root, num);
