-- Keep in step with ../sqlite/0009_trace.sql.
-- The trace context a message was queued in (W3C Trace Context fields as JSON, saved only when
-- traces are exported): the run that drains the message continues that trace, in whichever
-- process it runs.
ALTER TABLE queue ADD COLUMN trace TEXT;
