-- 0015: where an event came from (docs/operating.md, "Recovering missed events"): `delivery`, a
-- webhook delivery whose signature verified (every event before this migration), or
-- `backfill`, fetched from the provider's own API with the account's key by `oncehook backfill`
-- (the provider never managed to deliver it). `origin_detail` says which backfill fetched it
-- (the command line or the schedule, who, when). A constant default: no table rewrite.
alter table :ONCEHOOK_SCHEMA.events add column origin text not null default 'delivery';
alter table :ONCEHOOK_SCHEMA.events add column origin_detail text;

-- Every backfill run is an operator action (mode `backfill`, target the source, detail its
-- counts): who recovered what, and when, beside the re-drives and pauses.
alter table :ONCEHOOK_SCHEMA.operator_actions drop constraint operator_actions_mode_check;
alter table :ONCEHOOK_SCHEMA.operator_actions add constraint operator_actions_mode_check
  check (mode in ('redrive', 'replay', 'pause', 'resume', 'backfill'));
