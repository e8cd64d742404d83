-- Which builds may run on this schema: a build whose newest migration is older than
-- `min_compatible` stops at start. An additive migration (a new table, index, or a column an
-- older build need not write) leaves it alone; one that older builds cannot run on sets it to
-- its own version. See docs/decisions.md, "Rolling upgrades".
CREATE TABLE duet_schema (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    min_compatible BIGINT NOT NULL
);
INSERT INTO duet_schema (id, min_compatible) VALUES (1, 1);
