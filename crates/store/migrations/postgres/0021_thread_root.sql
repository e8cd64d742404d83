-- Keep in step with ../sqlite/0021_thread_root.sql.
-- Each thread's tree (issue #35, docs/scale.md): `root` is the `num` of the thread's top-level
-- ancestor (a top-level thread's own `num`), so a parent, its children and theirs share one
-- value: the key a distributed Postgres (Citus) would place a whole tree on one shard by.
--
-- Set by a trigger as the row is inserted (the parent's `root`, else the row's own `num`), not
-- by the statements that insert threads: no insert names it, so every insert of this build and
-- of older builds on this schema (additive: `min_compatible` is left alone) gets it, and the
-- parent's row is read where it is (a child is made by its parent's run: the parent is there).
ALTER TABLE threads ADD COLUMN root BIGINT;

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
UPDATE threads t SET root = tree.root FROM tree WHERE t.num = tree.num;

CREATE FUNCTION duet_thread_root() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.root IS NULL THEN
        NEW.root := COALESCE((SELECT p.root FROM threads p WHERE p.id = NEW.parent), NEW.num);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER threads_root BEFORE INSERT ON threads FOR EACH ROW
EXECUTE FUNCTION duet_thread_root();

-- Nullable, as on SQLite: the trigger leaves no row without one, and `SET NOT NULL` would not be
-- additive (an older build's schema check refuses it).
-- A tree's threads, in creation order.
CREATE INDEX threads_root ON threads (root, num);
