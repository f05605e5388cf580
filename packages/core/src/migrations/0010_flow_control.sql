-- 0010: flow control (docs/flow-control.md). Every count lives in Postgres, beside the runs it
-- limits, so a limit holds across every worker process and host, through restarts, on both
-- queue backends:
-- - a run that waits says why (`waiting`: paused, concurrency, rate-limit) and since when; it
--   stays `received` (not an attempt). `waits` fences its wake-up jobs: each wait or wake-up
--   bumps it, and only the job carrying the current value may schedule the next one, so one
--   run never has two chains of polling jobs;
-- - `flow_key` is the run's concurrency key while it is in progress or waits for a slot; the
--   runs in progress of (handler, key) ARE the slots: a crashed worker's slot frees itself
--   when its lease expires;
-- - `pauses` holds what operators (or a circuit breaker) paused: a handler or a source;
-- - `rate_windows` counts the runs started in the current window of each (handler, key);
-- - `handler_health` counts a breaker handler's failed attempts in a row.
alter table :ONCEHOOK_SCHEMA.handler_runs
  add column waiting text check (waiting in ('paused', 'concurrency', 'rate-limit')),
  add column waiting_since timestamptz,
  add column waits integer not null default 0,
  add column flow_key text;
-- The slots in use: a count of one handler's (and key's) runs in progress.
create index handler_runs_in_flight on :ONCEHOOK_SCHEMA.handler_runs (handler, flow_key) where state = 'processing';
-- The waiting runs: a resume finds its paused runs, a finished run the next one waiting for its slot.
create index handler_runs_waiting on :ONCEHOOK_SCHEMA.handler_runs (handler, waiting, flow_key, waiting_since) where waiting is not null;

create table :ONCEHOOK_SCHEMA.pauses (
  scope     text not null check (scope in ('handler', 'source')),
  name      text not null,
  reason    text not null,
  actor     text not null,
  -- `pause --now`: runs in progress stop at their next step boundary (and wait) too.
  stop_now  boolean not null default false,
  paused_at timestamptz not null default now(),
  primary key (scope, name)
);

create table :ONCEHOOK_SCHEMA.rate_windows (
  handler      text not null,
  rate_key     text not null,
  window_start timestamptz not null,
  started      integer not null,
  primary key (handler, rate_key)
);

create table :ONCEHOOK_SCHEMA.handler_health (
  handler              text primary key,
  consecutive_failures integer not null,
  last_error           text,
  updated_at           timestamptz not null default now()
);

-- Pause and resume are operator actions too, about a handler or a source, not an event.
alter table :ONCEHOOK_SCHEMA.operator_actions
  alter column event_row_id drop not null,
  alter column from_state drop not null,
  alter column generation drop not null,
  add column target text,
  drop constraint operator_actions_mode_check,
  add constraint operator_actions_mode_check check (mode in ('redrive', 'replay', 'pause', 'resume'));
