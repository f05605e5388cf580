-- 0008: the size of each event's verified body as it arrived, set by every claim from this
-- version on. A row that has it passed the payload limits at the edge (payload-limits.ts:
-- numbers at most 64 characters written out, nesting, printed size), so it can always be read.
-- A row without it was stored before those limits: reads check it first (queries.ts,
-- UNREADABLE_PAYLOAD) and a payload no process could read safely is not returned.
alter table :ONCEHOOK_SCHEMA.events add column payload_bytes integer;
