-- 0007: ctx.ordered's `previous` read under the upsert's own row lock. The version a row held
-- before its latest upsert, written BY that upsert, so the one statement can return it
-- (RETURNING shows only the new row). Reading it with the statement's snapshot instead (a CTE
-- before the upsert) was wrong under contention: an upsert that waited for another step's
-- commit reported the version from before that commit (issue 23, race C).
alter table :ONCEHOOK_SCHEMA.object_versions add column previous_version numeric;
