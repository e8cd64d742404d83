-- Images that come with an inbound message, queued with it (JSON: [{mimeType, data}]); once
-- drained they are kept in the journal row's `data`. Keep in step with ../sqlite/0006_images.sql.
ALTER TABLE queue ADD COLUMN images TEXT;
