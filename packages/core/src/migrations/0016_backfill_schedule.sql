-- 0016: the scheduled backfill (BACKFILL_SCHEDULE; docs/operating.md, "Recovering missed
-- events"): one row per scheduled source. A worker runs a source's pass only after taking the
-- row's lease (a guarded UPDATE: one process at a time, fleet-wide; a crashed one's lease
-- expires), and records when the next pass is due, where a pass bounded by its API calls
-- stopped (`cursor`: the next pass goes on from there) and what the last one found.
create table :ONCEHOOK_SCHEMA.backfill_schedule (
  source text primary key,
  next_at timestamptz not null default now(),
  lease_token uuid,
  leased_until timestamptz,
  cursor text,
  last_started_at timestamptz,
  last_finished_at timestamptz,
  last_counts jsonb,
  last_error text
);
