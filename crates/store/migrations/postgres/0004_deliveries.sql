-- Caller-chosen message ids (idempotency keys): one row per message id delivered to a thread,
-- written in the transaction that queues the message, so a second delivery with the same id
-- is refused by the key, not by a read-then-write. Keep in step with
-- ../sqlite/0004_deliveries.sql.
CREATE TABLE deliveries (
    thread     BIGINT  NOT NULL REFERENCES threads (num),
    message_id TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    PRIMARY KEY (thread, message_id)
);
