-- 0003: what an operator's timeline of an event shows besides its steps and actions: every
-- delivery it received (duplicates included), and every attempt of each handler run with its
-- verdict and error. Both are written by statements that already run (the claim; the lease and
-- the verdict of a run), never by extra round trips, and go with their event (cascade).

-- One row per delivery that reached the claim: the first (`duplicate` false) and every repeat.
-- `same_body`: a duplicate found by its body under another id (docs/providers.md, body dedupe).
create table :ONCEHOOK_SCHEMA.deliveries (
  event_row_id bigint not null references :ONCEHOOK_SCHEMA.events (id) on delete cascade,
  received_at  timestamptz not null default now(),
  duplicate    boolean not null,
  same_body    boolean not null default false
);
create index deliveries_event_idx on :ONCEHOOK_SCHEMA.deliveries (event_row_id, received_at);

-- One row per lease taken on a handler run (an attempt), keyed by its lease token; ended by the
-- verdict of that lease (done, failed, retry with its error). An attempt left open was cut short:
-- its worker died or lost its lease, and a later attempt took over.
create table :ONCEHOOK_SCHEMA.run_attempts (
  run_id      bigint not null references :ONCEHOOK_SCHEMA.handler_runs (id) on delete cascade,
  lease_token uuid not null,
  generation  int not null,
  attempt     int not null,
  started_at  timestamptz not null default now(),
  ended_at    timestamptz,
  outcome     text check (outcome in ('done', 'failed', 'retry')),
  error       text,
  primary key (run_id, lease_token)
);
