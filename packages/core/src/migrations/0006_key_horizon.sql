-- 0006: two retention horizons. At RETENTION_DAYS a done event's payload, its handler runs
-- (steps, attempts, operator actions with them) and its delivery log are deleted, and the row
-- is kept narrow: the dedupe key, the body hash where used, type, final state and timestamps
-- (`pruned_at` says when). At KEY_RETENTION_DAYS the row itself goes. A late redelivery
-- between the two is a duplicate, as it should be.
alter table :ONCEHOOK_SCHEMA.events alter column payload drop not null;
alter table :ONCEHOOK_SCHEMA.events add column pruned_at timestamptz;
-- The pruning scan: one source's oldest done events whose payload is still there.
create index events_prune_idx on :ONCEHOOK_SCHEMA.events (provider, received_at) where state = 'done' and pruned_at is null;
