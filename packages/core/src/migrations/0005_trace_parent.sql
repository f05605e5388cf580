-- 0005: the W3C traceparent of the delivery that created the event (OpenTelemetry, off by
-- default: then always null). Written by the dispatch, read back by every later lease and by
-- the reconciler's recoveries, so a run resumed after a crash continues the same trace.
alter table :ONCEHOOK_SCHEMA.events add column trace_parent text;
