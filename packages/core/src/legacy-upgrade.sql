-- Upgrades a database from before the `:ONCEHOOK_SCHEMA` schema existed: Oncehook's tables in
-- `public` (webhook_events, webhook_event_steps, webhook_event_replays, tracked in
-- public.oncehook_migrations, versions 1-5 of db/legacy/). Runs inside the migration
-- transaction, right after 0001_schema.sql created the new tables, so it either all happens or
-- none of it does. Stop every old worker and ingest before migrating.
--
-- Outbound keys of events in flight do not change: each event that had started (any attempt,
-- or finished) gets ONE handler run with key_scheme 1 (keys derived without a handler name,
-- exactly as before) and handler '' (bound to the event type's handler the next time it runs),
-- carrying its state, attempts, generation, lease and steps. An event never attempted stays
-- `received` with no run: a worker dispatches it like any new event.
--
-- The example domain's tables (ledger_*, example_*) stay where they are: they belong to the
-- example, whose own migration set adopts them (CREATE TABLE IF NOT EXISTS).

insert into :ONCEHOOK_SCHEMA.events
  (id, provider, kind, event_id, type, payload, signed_at, meta, state, runs_pending, runs_failed, note, received_at, updated_at, finished_at)
overriding system value
select id, provider, kind, event_id, type, payload, signed_at, meta,
       case when state in ('done', 'failed') then state
            when state = 'received' and attempts = 0 then 'received'
            else 'processing' end,
       case when state in ('received', 'processing') and not (state = 'received' and attempts = 0) then 1 else 0 end,
       case when state = 'failed' then 1 else 0 end,
       case when state = 'done' then note end,
       received_at, updated_at, finished_at
  from public.webhook_events;

select setval(pg_get_serial_sequence(':ONCEHOOK_SCHEMA.events', 'id'), coalesce((select max(id) from :ONCEHOOK_SCHEMA.events), 0) + 1, false);

insert into :ONCEHOOK_SCHEMA.handler_runs
  (event_row_id, handler, state, attempts, generation, key_scheme, lease_token, lease_until, last_error, note, created_at, updated_at, finished_at)
select id, '', state, attempts, generation, 1, lease_token, lease_until, last_error, note, received_at, updated_at, finished_at
  from public.webhook_events
 where not (state = 'received' and attempts = 0);

insert into :ONCEHOOK_SCHEMA.steps (run_id, generation, name, kind, result, completed_at)
select r.id, s.generation, s.name, null, s.result, s.completed_at
  from public.webhook_event_steps s
  join :ONCEHOOK_SCHEMA.handler_runs r on r.event_row_id = s.event_row_id;

insert into :ONCEHOOK_SCHEMA.operator_actions (event_row_id, run_id, mode, from_state, generation, actor, reason, created_at)
select a.event_row_id, r.id, a.mode, a.from_state, a.generation, a.actor, a.reason, a.created_at
  from public.webhook_event_replays a
  left join :ONCEHOOK_SCHEMA.handler_runs r on r.event_row_id = a.event_row_id;

drop table public.webhook_event_replays;
drop table public.webhook_event_steps;
drop table public.webhook_events;
drop table public.oncehook_migrations;
